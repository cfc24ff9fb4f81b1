#!/usr/bin/env bash
# Latency of the execution modes side by side, on host boards:
#   relay  (--strategy neuron --route relay, the paper's mode)
#   neuron+direct, spatial+direct, auto+direct (boards sending to boards),
#   whole+direct (one board computes everything); a third part names the
#   planner's cost model (auto-direct-host: the measured prices of board
#   processes on this machine, data/costs/host.json; -teensy or none: run's
#   default, the Teensy prices). --size: default the CLI's (the model's own).
# Each round runs every mode once (`tinysplit run --repeat N --json`: median
# latency over N inferences and median of N warm single-process runs in the
# same process), alternating the modes so that a busy machine slows them
# alike; the table gives, per mode, the median over the rounds of the
# latency, of the reference and of their ratio.
#
# The load average before and after is printed with the table (the machine
# may be shared: compare ratios, not absolute times).
#
#   bash scripts/route_bench.sh [--rounds R] [--repeat N] [--workers W] [--size S]
#                               [--modes "neuron-relay auto-direct ..."]
#   TINYSPLIT=/path/to/other/tinysplit bash scripts/route_bench.sh   (another build)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TS="${TINYSPLIT:-$ROOT/build/tinysplit}"
ROUNDS=5 REPEAT=20 WORKERS=3 SIZE=
MODES_ARG="neuron-relay neuron-direct spatial-direct auto-direct"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --modes) MODES_ARG="$2"; shift 2 ;;
    *) echo "route_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$TS" ]] || { echo "route_bench.sh: $TS not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
read -r -a MODES <<< "$MODES_ARG"
for m in "${MODES[@]}"; do
  [[ "$m" =~ ^(neuron|spatial|channel|whole|auto)-(relay|direct)(-(teensy|host))?$ ]] ||
    { echo "route_bench.sh: bad mode $m (STRATEGY-ROUTE[-COSTMODEL])" >&2; exit 2; }
done
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODES[@]}"; do
    IFS=- read -r st rt cm <<< "$m"
    "$TS" run --json --repeat "$REPEAT" --workers "$WORKERS" ${SIZE:+--size "$SIZE"} --strategy "$st" --route "$rt" \
      --cost-model "${cm:-teensy}" > "$OUT/$m-$r.json"
  done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" "$ROUNDS" "${MODES[@]}" <<'EOF'
import json, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'mode':<18} {'latency s':>10} {'reference s':>12} {'ratio':>6} {'ratios (rounds)':<30} {'bit-exact':>9} {'result frames':>13} {'peak RAM (max)':>14}")
for mode in modes:
    runs = [json.load(open(f"{out}/{mode}-{r}.json")) for r in range(1, rounds + 1)]
    lat = statistics.median(j["latency_s"]["total"] for j in runs)
    ref = statistics.median(j["reference_s"] for j in runs)
    ratio = statistics.median(j["latency_s"]["total"] / j["reference_s"] for j in runs)
    exact = all(j["match_reference"] for j in runs)
    ram = max(w["peak_ram_bytes"] for j in runs for w in j["per_worker"])
    each = " ".join(f"{j['latency_s']['total'] / j['reference_s']:.2f}" for j in runs)
    print(f"{mode:<18} {lat:>10.4f} {ref:>12.4f} {ratio:>6.2f} {each:<30} {str(exact):>9} {runs[0]['result_frames']:>13} {ram:>14}")
EOF
echo "load average before: $LOAD_BEFORE, after: $LOAD_AFTER; $ROUNDS rounds x --repeat $REPEAT, $WORKERS boards, size ${SIZE:-as the model declares}"
