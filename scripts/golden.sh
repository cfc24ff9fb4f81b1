#!/usr/bin/env bash
# Records what a refactoring must leave unchanged, so that two trees can be
# compared with diff -r:
#   bash scripts/golden.sh OUT [BUILD_DIR] [--quick]
# For the defaults and for the paper's mode (--strategy neuron --route relay)
# at 1, 3, 8 and 16 boards (MobileNetV2 at the CLI's default size, 224, where
# 1 board and the channel split are refused for RAM; the defaults at 112, the
# paper's size, on 3 and 8 boards; the ONNX test models on 3 boards): plan --json's total_wire_bytes and the sha256 of every
# fragment; the simulator's JSON; and, unless --quick, the int8 output of a
# real distributed run (run --save-int8-output) with its match_reference.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
BUILD="${2:-build}"
QUICK=0
[[ "${3:-}" == --quick ]] && QUICK=1
cd "$ROOT"
TS="$ROOT/$BUILD/tinysplit"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2]))' "$1" "$2"; }
plan_one() {  # name, args...
  local name="$1"; shift
  rm -rf "$TMP/frag"; mkdir -p "$TMP/frag"
  if "$TS" plan --json -o "$TMP/frag" "$@" > "$TMP/plan.json" 2> "$TMP/err"; then
    { echo "args: $*"; echo "total_wire_bytes: $(json_field "$TMP/plan.json" total_wire_bytes)";
      (cd "$TMP/frag" && sha256sum ./* | sort -k2); } > "$OUT/plan-$name.txt"
  else
    { echo "args: $*"; echo "refused: $(head -c 300 "$TMP/err")"; } > "$OUT/plan-$name.txt"
  fi
}
run_one() {  # name, args...
  local name="$1"; shift
  if "$TS" run --json --save-int8-output "$TMP/y.npy" "$@" > "$TMP/run.json" 2> "$TMP/err"; then
    { echo "args: $*"; echo "match_reference: $(json_field "$TMP/run.json" match_reference)";
      echo "wire_bytes: $(json_field "$TMP/run.json" wire_bytes)";
      echo "planned_wire_payload_bytes: $(json_field "$TMP/run.json" planned_wire_payload_bytes)";
      echo "verified_layers: $(json_field "$TMP/run.json" verified_layers)";
      sha256sum < "$TMP/y.npy"; } > "$OUT/run-$name.txt"
  else
    { echo "args: $*"; echo "failed: $(head -c 300 "$TMP/err")"; } > "$OUT/run-$name.txt"
  fi
}
for n in 1 3 8 16; do
  plan_one "default-$n" --workers "$n"
  plan_one "paper-$n" --workers "$n" --strategy neuron --route relay
  plan_one "spatial-$n" --workers "$n" --strategy spatial
  plan_one "channel-$n" --workers "$n" --strategy channel
  plan_one "teensy-$n" --workers "$n" --cost-model teensy
done
plan_one default-224-3 --workers 3 --size 224
for n in 3 8; do
  plan_one "default-112-$n" --workers "$n" --size 112
  plan_one "fused-112-$n" --workers "$n" --size 112 --strategy fused
done
plan_one paper-224-5 --workers 5 --ram 1M --size 224 --strategy neuron --route relay
for m in tests/data/onnx/*.onnx; do
  b="$(basename "$m" .onnx)"
  plan_one "onnx-$b-3" --workers 3 --model "$m"
done
# The simulator's JSON without the host's own timings (host_seconds).
sim_one() {  # name, args...
  local name="$1"; shift
  "$TS" simulate --json "$@" 2>&1 | python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict): return {k: strip(x) for k, x in v.items() if k != "host_seconds"}
    if isinstance(v, list): return [strip(x) for x in v]
    return v
t = sys.stdin.read()
try: print(json.dumps(strip(json.loads(t)), indent=1, sort_keys=True))
except ValueError: print(t)' > "$OUT/simulate-$name.json"
}
sim_one sweep --sweep 1,3,8,16
sim_one paper --sweep 1,3,8,16 --strategy neuron --route relay
sim_one spatial --sweep 3,8 --strategy spatial
sim_one window1 --sweep 3 --window 1 --strategy neuron --route relay
if [[ $QUICK == 0 ]]; then
  for n in 1 3 8 16; do
    run_one "default-$n" --workers "$n"
    run_one "paper-$n" --workers "$n" --strategy neuron --route relay
  done
  run_one "teensy-3" --workers 3 --cost-model teensy
  run_one "spatial-3" --workers 3 --strategy spatial
fi
echo "golden: wrote $(ls "$OUT" | wc -l) files to $OUT"
