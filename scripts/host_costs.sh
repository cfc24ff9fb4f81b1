#!/usr/bin/env bash
# Calibrates the planner's cost model for host testbeds (boards run as
# processes on this machine; plan/cost.h, docs/planner.md "Cost model") and
# writes data/costs/host.json (or --out FILE):
#
# 1. seconds per MAC of this machine's int8 kernels per kernel kind (conv,
#    pointwise, depthwise, linear, Add, ...; "default" = the whole model's
#    figure): build/int8_bench's per-op thread CPU time (MobileNetV2, one
#    process), the minimum of --rounds rounds, over the MACs of that kind
#    (`tinysplit inspect --json`).
# 2. the cost of one exchange (a transfer step where boards wait for each
#    other) and of one byte moved: `tinysplit run --repeat N --json` on 3
#    host boards for fixed strategies (whole, channel, spatial, neuron; direct
#    route), each latency scaled by (modelled single-process compute / the
#    run's own reference_s) so that the machine's load cancels, then the
#    least-squares fit (both figures >= 0) of
#        latency = compute + steps x exchange_s + bytes x seconds_per_byte
#    where compute, steps and bytes are the cost model's own parts of each
#    plan (`tinysplit plan --cost-model host --json`, est_parts).
#
#   bash scripts/host_costs.sh [--rounds R] [--repeat N] [--size S] [--out FILE]
# Needs tinysplit and int8_bench built in build/. About 2-4 minutes at the defaults.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TS="${TINYSPLIT:-$ROOT/build/tinysplit}"
BENCH="${INT8_BENCH:-$ROOT/build/int8_bench}"
ROUNDS=3 REPEAT=20 SIZE=224 OUTF="$ROOT/data/costs/host.json"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --out) OUTF="$2"; shift 2 ;;
    *) echo "host_costs.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$TS" && -x "$BENCH" ]] || { echo "host_costs.sh: build tinysplit and int8_bench first" >&2; exit 1; }
D="$(mktemp -d)"
trap 'rm -rf "$D"' EXIT
MODES=(whole channel spatial neuron)
"$TS" inspect --size "$SIZE" --json > "$D/inspect.json"
for ((r = 1; r <= ROUNDS; r++)); do
  "$BENCH" --benchmark_filter="BM_Int8ByOp/$SIZE\$" --benchmark_repetitions=1 --benchmark_min_time=1 2>/dev/null |
    grep -o '[A-Za-z0-9]*_ms=[0-9.]*' | tr '\n' ' ' > "$D/ops-$r.txt"
done
# Step 1: the per-MAC table (exchange figures 0 until step 2).
/usr/bin/python3 - "$D" "$ROUNDS" "$SIZE" <<'EOF'
import collections, json, sys
d, rounds, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
inspect = json.load(open(f"{d}/inspect.json"))
macs = collections.Counter()
for l in inspect["layers"]:  # the kinds of bench/int8_bench.cpp's kind()
    op = l["op"].split("+")[0]
    if op == "Conv":
        per = l["macs"] // (l["output_shape"][0] * l["output_shape"][1] * l["output_shape"][2])
        op = "Conv1x1" if per == l["input_shape"][0] else "Conv3x3"
    elif op == "DWConv":
        op = "ConvDW3x3"
    macs[op] += l["macs"]
best = {}
for r in range(1, rounds + 1):
    for kv in open(f"{d}/ops-{r}.txt").read().split():
        k, x = kv.split("=")
        k = k[:-3]
        best[k] = min(best.get(k, 1e9), float(x))
names = {"Conv1x1": "pointwise", "ConvDW3x3": "depthwise", "Conv3x3": "conv", "Gemm": "linear"}
spm = {}
for k, ms in best.items():
    if macs.get(k, 0) > 0 and ms > 0:
        spm[names.get(k, k)] = ms * 1e-3 / macs[k]
total_ms = sum(best.values())
spm["default"] = total_ms * 1e-3 / sum(macs.values())
json.dump({"target": "host", "seconds_per_mac": spm, "exchange_s": 0, "seconds_per_byte": 0,
           "single_process_ms": total_ms, "macs": sum(macs.values())}, open(f"{d}/step1.json", "w"), indent=2)
print(f"kernels: {total_ms:.2f} ms per inference (thread CPU, min of {rounds} rounds), "
      + ", ".join(f"{k} {v * 1e12:.1f} ps/MAC" for k, v in sorted(spm.items())))
EOF
# Step 2: runs on 3 host boards and the model's parts of the same plans.
for m in "${MODES[@]}"; do
  "$TS" plan --workers 3 --size "$SIZE" --allocation rating --strategy "$m" --route direct --cost-model host \
    --host-costs "$D/step1.json" --json > "$D/plan-$m.json"
done
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODES[@]}"; do
    "$TS" run --json --repeat "$REPEAT" --workers 3 --size "$SIZE" --strategy "$m" --route direct \
      --cost-model host > "$D/run-$m-$r.json"
  done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$D" "$ROUNDS" "$OUTF" "$REPEAT" "$LOAD_BEFORE / $LOAD_AFTER" "${MODES[@]}" <<'EOF'
import json, statistics, sys
d, rounds, outf, repeat, load, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
base = json.load(open(f"{d}/step1.json"))
model_ref = base["single_process_ms"] * 1e-3
rows = []
for m in modes:
    p = json.load(open(f"{d}/plan-{m}.json"))["est_parts"]
    runs = [json.load(open(f"{d}/run-{m}-{r}.json")) for r in range(1, rounds + 1)]
    if not all(j["match_reference"] for j in runs):
        sys.exit(f"host_costs.sh: the {m} run was not bit-exact")
    # Each round's latency in the units of the modelled single process.
    lat = statistics.median(j["latency_s"]["total"] * model_ref / j["reference_s"] for j in runs)
    ratio = statistics.median(j["latency_s"]["total"] / j["reference_s"] for j in runs)
    rows.append({"strategy": m, "scaled_latency_s": lat, "ratio": ratio, "compute_s": p["compute_s"],
                 "steps": p["steps"], "bytes": p["bytes"]})
# Least squares of (latency - compute) = steps x e + bytes x b, e, b >= 0.
def fit(use_b):
    see = sum(r["steps"] ** 2 for r in rows)
    sbb = sum(r["bytes"] ** 2 for r in rows)
    seb = sum(r["steps"] * r["bytes"] for r in rows)
    ye = sum(r["steps"] * (r["scaled_latency_s"] - r["compute_s"]) for r in rows)
    yb = sum(r["bytes"] * (r["scaled_latency_s"] - r["compute_s"]) for r in rows)
    if use_b:
        det = see * sbb - seb * seb
        if det > 0:
            return (ye * sbb - yb * seb) / det, (see * yb - seb * ye) / det
    return (ye / see if see > 0 else 0.0), 0.0
e, b = fit(True)
if b < 0:
    e, b = fit(False)
if e < 0:
    e = 0.0
    sbb = sum(r["bytes"] ** 2 for r in rows)
    b = max(0.0, sum(r["bytes"] * (r["scaled_latency_s"] - r["compute_s"]) for r in rows) / sbb) if sbb else 0.0
for r in rows:
    r["model_s"] = r["compute_s"] + r["steps"] * e + r["bytes"] * b
out = {
    "target": "host",
    "source": f"bash scripts/host_costs.sh --rounds {rounds} --repeat {repeat} (int8_bench per-op CPU time; "
              f"tinysplit run on 3 host boards per strategy, fitted; load average {load})",
    "seconds_per_mac": base["seconds_per_mac"],
    "exchange_s": e,
    "seconds_per_byte": b,
    "single_process_ms": base["single_process_ms"],
    "fit": rows,
}
with open(outf, "w") as f:
    json.dump(out, f, indent=2)
    f.write("\n")
print(f"exchange {e * 1e6:.1f} us, {b * 1e9:.3f} ns per byte; load average {load}")
print(f"{'strategy':<9} {'ratio':>6} {'scaled s':>9} {'model s':>9} {'compute s':>10} {'steps':>6} {'bytes':>9}")
for r in rows:
    print(f"{r['strategy']:<9} {r['ratio']:>6.2f} {r['scaled_latency_s']:>9.4f} {r['model_s']:>9.4f} "
          f"{r['compute_s']:>10.4f} {r['steps']:>6.0f} {r['bytes']:>9.0f}")
print(f"wrote {outf}")
EOF
