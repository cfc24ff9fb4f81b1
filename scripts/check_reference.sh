#!/usr/bin/env bash
# Checks the C++ int8 reference (run_int8) against the independent Python reference
# (scripts/int8_reference.py, written from docs/int8.md), every layer, bit for bit.
#
#   bash scripts/check_reference.sh [--model M] [--size S] [--image IMG] [--keep DIR]
#
#   --model M    mobilenetv2 (default), a TF.js model.json, an ONNX file or a .tsqm
#   --size S     input size (default: the model's own, as tinysplit's; 224 for MobileNetV2)
#   --image IMG  photo to run (default: the first of data/eval)
#   --keep DIR   write the C++ dump into DIR and keep it (default: a temporary folder)
#   --dump DIR   compare an existing dump folder (from `tinysplit dump` or --keep); no C++ step
#
# Quantises the model (or reuses tinysplit's cached quantised model), dumps every layer of
# run_int8 with `tinysplit dump`, recomputes every layer in Python from the same .tsqm and the
# same quantised input, and compares. The last line printed is one JSON object with `layers`
# (compared) and `differ` (layers with any differing element) and, on a difference, `first`.
# Exit status: 0 identical, 1 a layer differs, 2 the check could not run.
#
# Environment: TS_BIN (tinysplit binary, default build/tinysplit), TS_PYTHON (default
# /usr/bin/python3, which must have numpy: Debian's python3-numpy).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${TS_BIN:-$ROOT/build/tinysplit}"
PY="${TS_PYTHON:-/usr/bin/python3}"
MODEL=mobilenetv2
SIZE=
IMAGE=
KEEP=
DUMP=

die() { echo "check_reference: error: $*" >&2; exit 2; }
usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --model|-m) [ $# -ge 2 ] || die "$1 needs a value"; MODEL="$2"; shift 2 ;;
    --size|-s) [ $# -ge 2 ] || die "$1 needs a value"; SIZE="$2"; shift 2 ;;
    --image|-i) [ $# -ge 2 ] || die "$1 needs a value"; IMAGE="$2"; shift 2 ;;
    --keep) [ $# -ge 2 ] || die "$1 needs a value"; KEEP="$2"; shift 2 ;;
    --dump) [ $# -ge 2 ] || die "$1 needs a value"; DUMP="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy (install Debian's python3-numpy)"
if [ -n "$DUMP" ]; then
  [ -f "$DUMP/index.json" ] || die "'$DUMP' is not a dump folder (no index.json)"
  exec "$PY" "$ROOT/scripts/int8_reference.py" compare "$DUMP"
fi
[ -x "$BIN" ] || die "tinysplit binary not found at '$BIN' (build it, or set TS_BIN)"

if [ -n "$KEEP" ]; then
  DIR="$KEEP"
else
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/check_reference.XXXXXX")" || die "cannot create a temporary folder"
  trap 'rm -rf "$DIR"' EXIT
fi

args=(dump --model "$MODEL" --out "$DIR")
[ -n "$SIZE" ] && args+=(--size "$SIZE")
[ -n "$IMAGE" ] && args+=(--image "$IMAGE")
t0=$SECONDS
"$BIN" "${args[@]}" || die "tinysplit dump failed (model '$MODEL', size ${SIZE:-as the model declares})"
echo "check_reference: quantise (or cached model) + C++ dump took $((SECONDS - t0)) s" >&2
# The Python side prints one line per differing layer, then the JSON summary (last line).
"$PY" "$ROOT/scripts/int8_reference.py" compare "$DIR"
