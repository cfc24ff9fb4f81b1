#!/usr/bin/env bash
# Per-op cost of the int8 kernels on this machine, for each kernel variant
# (docs/kernels.md, "x86 kernels"): CPU ms per inference and ns per MAC, per
# op kind, MobileNetV2 single process, one thread. Variants run alternately,
# each --rounds times; the minimum per op kind is kept (a shared machine
# only ever adds time).
#
#   bash scripts/kernel_ops.sh [--size 112|224] [--rounds N] [--build-dir DIR] [variants...]
#
# Variants: portable avx2 vnni (default: all three; one the CPU lacks falls
# back with a warning). Needs int8_bench and tinysplit built in DIR (default build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"; SIZE=224; ROUNDS=3; VARIANTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) SIZE="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --build-dir) BUILD="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) VARIANTS+=("$1"); shift ;;
  esac
done
[[ ${#VARIANTS[@]} -gt 0 ]] || VARIANTS=(portable avx2 vnni)
[[ -x "$BUILD/int8_bench" && -x "$BUILD/tinysplit" ]] || { echo "kernel_ops: build int8_bench and tinysplit in $BUILD first" >&2; exit 1; }
TMP="$(mktemp)"; trap 'rm -f "$TMP"' EXIT
for r in $(seq "$ROUNDS"); do
  for v in "${VARIANTS[@]}"; do
    echo "$v $(TS_KERNELS=$v "$BUILD/int8_bench" --benchmark_filter="BM_Int8ByOp/$SIZE\$" --benchmark_repetitions=1 \
      --benchmark_min_time=1 2>/dev/null | grep -o '[A-Za-z0-9]*_ms=[0-9.]*' | tr '\n' ' ')" >>"$TMP"
  done
done
"$BUILD/tinysplit" inspect --size "$SIZE" --json | /usr/bin/python3 -c '
import json, sys, collections
inspect = json.load(sys.stdin)
macs = collections.Counter()
for l in inspect["layers"]:  # the kinds of bench/int8_bench.cpp
    op = l["op"].split("+")[0]
    if op == "Conv":
        per = l["macs"] // (l["output_shape"][0] * l["output_shape"][1] * l["output_shape"][2])
        op = "Conv1x1" if per == l["input_shape"][0] else "Conv%dx%d" % (3, 3) if per == 9 * l["input_shape"][0] else "Conv"
    elif op == "DWConv":
        op = "ConvDW3x3"
    macs[op] += l["macs"]
best = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    parts = line.split()
    for kv in parts[1:]:
        k, x = kv.split("=")
        k = k[:-3]
        best[parts[0]][k] = min(best[parts[0]].get(k, 1e9), float(x))
kinds = sorted({k for d in best.values() for k in d})
print("size %s, min of %s rounds; ms per inference (ns per MAC)" % (sys.argv[2], sys.argv[3]))
print("%-10s" % "variant" + "".join("%22s" % k for k in kinds) + "%10s" % "total")
for v, d in best.items():
    cells = []
    for k in kinds:
        ms = d.get(k, 0.0)
        cells.append("%22s" % ("%.3f (%.3f)" % (ms, 1e6 * ms / macs[k]) if macs[k] else "%.3f" % ms))
    print("%-10s" % v + "".join(cells) + "%10.2f" % sum(d.values()))
' "$TMP" "$SIZE" "$ROUNDS"
