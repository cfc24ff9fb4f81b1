#!/usr/bin/env bash
# Labelled accuracy on Fashion-MNIST (Debian's dataset-fashion-mnist): trains the small
# MobileNetV2-style model if models/fashion-mnist/model.onnx is missing, then measures
#   1. a distributed run on 3 boards over a sample of test images (bit-exact vs int8), and
#   2. float and int8 accuracy on all 10,000 test images (calibration on training images),
# and ends with the JSON of `tinysplit eval --dataset fashion-mnist --json`.
#
#   bash scripts/fashion_mnist.sh            # as root the first time (installs packages)
#
# Environment: TS_BUILD_DIR (default build), TS_FM_EPOCHS (default 4), TS_FM_SAMPLE (boards'
# sample, default 200), TS_FM_RETRAIN=1 (train again even if the model exists).
# Exits non-zero if float accuracy < 0.90 or int8 accuracy is more than 0.005 below or above it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TS_BUILD_DIR:-build}"
TS="$BUILD_DIR/tinysplit"
MODEL="models/fashion-mnist/model.onnx"
EPOCHS="${TS_FM_EPOCHS:-4}"
SAMPLE="${TS_FM_SAMPLE:-200}"
LOG="$BUILD_DIR/fashion-mnist"
mkdir -p "$LOG"

need=()
for p in python3-torch python3-numpy dataset-fashion-mnist; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
  [[ $EUID -eq 0 ]] || { echo "fashion_mnist: run as root to install: ${need[*]}" >&2; exit 1; }
  echo "fashion_mnist: installing ${need[*]} (log: $LOG/apt.log)" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; } >"$LOG/apt.log" 2>&1 ||
    { tail -n 30 "$LOG/apt.log" >&2; exit 1; }
fi

if [[ ! -x "$TS" ]]; then
  echo "fashion_mnist: building tinysplit in $BUILD_DIR (log: $LOG/build.log)" >&2
  { cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD_DIR" -j2 --target tinysplit; } \
    >"$LOG/build.log" 2>&1 || { tail -n 30 "$LOG/build.log" >&2; exit 1; }
fi

if [[ ! -f "$MODEL" || "${TS_FM_RETRAIN:-0}" == 1 ]]; then
  echo "fashion_mnist: training $MODEL ($EPOCHS epochs, 2 threads; log: $LOG/train.log)" >&2
  start=$SECONDS
  /usr/bin/python3 scripts/train_fashion_mnist.py --epochs "$EPOCHS" --out "$MODEL" 2>&1 | tee "$LOG/train.log" >&2
  echo "fashion_mnist: trained in $((SECONDS - start)) s" >&2
fi

echo "fashion_mnist: distributed run on 3 boards, first $SAMPLE test images" >&2
"$TS" run --dataset fashion-mnist --limit "$SAMPLE" --workers 3 >"$LOG/run.txt"
head -n 2 "$LOG/run.txt" >&2

"$TS" eval --dataset fashion-mnist --json >"$LOG/eval.json"
status=0
/usr/bin/python3 - "$LOG/eval.json" <<'PY' >&2 || status=1
import json, sys
j = json.load(open(sys.argv[1]))
f, q = j["float_accuracy"], j["int8_accuracy"]
ok = f >= 0.90 and abs(q - f) <= 0.005
print(f"fashion_mnist: float {f:.4f}, int8 {q:.4f} on {j['images']} test images: "
      + ("ok (float >= 0.90, |int8 - float| <= 0.005)" if ok else "NOT OK"))
sys.exit(0 if ok else 1)
PY
cat "$LOG/eval.json"
exit $status
