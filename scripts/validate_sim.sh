#!/usr/bin/env bash
# Validates the simulator against emulated runs on this machine
# (docs/simulator.md, "Emulated runs" and "(1) Validation against tinysplit run").
#
# For each mode (strategy/route, optionally /size) it
#   1. runs `tinysplit run --workers N --emulate --repeat R --json`: N local boards (real
#      processes, real TCP on loopback) that take the Teensy 4.1's time: each layer at its op's
#      measured cycles per MAC (data/costs/cortex-m7.json), every link paced at the type's
#      bandwidth and per-frame latency (94 Mbit/s, 0.65 ms round trip), the coordinator's link
#      too; latency_s is the median of the R inferences;
#   2. simulates the same plan (`tinysplit simulate --workers N` with the same options: the
#      same planner, the Teensy 4.1 type's timing, the same figures from the same place);
#   3. compares them: error = (simulated - measured) / measured, and the payload (direct) or
#      wire bytes (relay) of the run against the simulated ones.
# Nothing is fitted: both sides read the board type's figures (sim/scenario.cpp, plan/testbed.h,
# data/costs/); the run's own simulator estimate (board_type_estimate) is printed beside.
#
# Output: one JSON line per mode
#   {"mode","workers","simulated_s","measured_s","error_pct","estimate_s","measured_compute_s",
#    "simulated_compute_s","payload_equal"|"wire_bytes_equal","match_reference","load","within_bound"}
# then {"largest_abs_error_pct","bound_pct","pass","load"}. Exit status 1 when a mode is outside
# the bound or a run is not bit-exact (2 on bad usage). The load average is in every line: on
# this shared 2-core machine other people's jobs delay the boards' wake-ups.
#
# Usage: scripts/validate_sim.sh [--bound PCT] [tinysplit binary]
# Environment: N=3 REPEAT=5 MODES="auto/direct neuron/relay/112 spatial/direct fused/direct fused-rows/direct" (strategy/route
#              [/size]: the paper's mode at its 112, as 3 boards hold no neuron split at 224)
#              EXTRA="" (more options for both) KEEP=dir (keep the JSON files there)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
BOUND=10
while [ $# -gt 0 ]; do
  case "$1" in
    --bound) [ $# -ge 2 ] || { echo "validate_sim: --bound needs a percentage" >&2; exit 2; }; BOUND=$2; shift 2 ;;
    --bound=*) BOUND=${1#--bound=}; shift ;;
    -h|--help) sed -n 2,27p "$0"; exit 0 ;;
    -*) echo "validate_sim: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
python3 -c "import sys; v=float(sys.argv[1]); sys.exit(0 if 0 < v < 1000 else 1)" "$BOUND" 2>/dev/null ||
  { echo "validate_sim: --bound must be a percentage between 0 and 1000 (got '$BOUND')" >&2; exit 2; }
bin=${1:-${TINYSPLIT:-$here/build/tinysplit}}
N=${N:-3}
REPEAT=${REPEAT:-5}
MODES=${MODES:-"auto/direct neuron/relay/112 spatial/direct fused/direct fused-rows/direct"}
EXTRA=${EXTRA:-}
[ -x "$bin" ] || { echo "validate_sim: no tinysplit binary at $bin (pass it as the last argument)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "validate_sim: python3 is needed to read JSON" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${KEEP:-$tmp}
mkdir -p "$out"
: > "$out/errors"

fail=0
for mode in $MODES; do
  IFS=/ read -r strategy route size <<< "$mode"
  opts="--workers $N --strategy $strategy --route $route $EXTRA"
  [ -z "$size" ] || opts="$opts --size $size"
  tag="${strategy}_${route}${size:+_$size}"
  # Teensy prices for the run's plan (its default; named so the plan splits
  # as `simulate`'s, which always prices the Teensy 4.1).
  "$bin" run $opts --cost-model teensy --emulate --repeat "$REPEAT" --json > "$out/run_$tag.json"
  "$bin" simulate $opts --json > "$out/sim_$tag.json"
  set +e
  python3 - "$out" "$tag" "$mode" "$N" "$BOUND" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
out, tag, mode, n, bound, load = sys.argv[1:7]
bound = float(bound)
r = json.load(open(f"{out}/run_{tag}.json"))
s = json.load(open(f"{out}/sim_{tag}.json"))["runs"][0]
meas, simu = r["latency_s"]["total"], s["latency_s"]["total"]
err = 100.0 * (simu - meas) / meas
direct = mode.split("/")[1] == "direct"
key = "payload_equal" if direct else "wire_bytes_equal"
equal = r["wire_bytes"]["payload"] == s["payload_bytes"] if direct else r["wire_bytes"]["total"] == s["wire_bytes"]
ok = abs(err) <= bound and r["match_reference"]
print(json.dumps({"mode": mode, "workers": int(n), "simulated_s": round(simu, 4), "measured_s": round(meas, 4),
                  "error_pct": round(err, 1), "estimate_s": round(r["board_type_estimate"]["total_s"], 4),
                  "measured_compute_s": round(r["latency_s"]["compute"], 4),
                  "simulated_compute_s": round(s["latency_s"]["compute"], 4), key: equal,
                  "match_reference": r["match_reference"], "load": load, "within_bound": ok}))
open(f"{out}/errors", "a").write(f"{abs(err)}\n")
sys.exit(0 if ok else 1)
PY
  rc=$?
  set -e
  [ "$rc" -le 1 ] || exit "$rc"
  [ "$rc" -eq 0 ] || fail=1
done
[ "$fail" -eq 0 ] && pass=true || pass=false
worst=$(python3 -c 'import sys; print(round(max([float(x) for x in open(sys.argv[1])] or [0]), 1))' "$out/errors")
echo "{\"largest_abs_error_pct\": $worst, \"bound_pct\": $BOUND, \"pass\": $pass, \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
exit "$fail"
