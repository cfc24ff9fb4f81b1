#!/usr/bin/env bash
# Latency of the three execution modes side by side, on host boards:
#   relay  (--strategy neuron --route relay, the paper's mode)
#   neuron+direct, spatial+direct (boards sending to boards)
# Each round runs every mode once (`tinysplit run --repeat N --json`: median
# latency over N inferences and median of N warm single-process runs in the
# same process), alternating the modes so that a busy machine slows them
# alike; the table gives, per mode, the median over the rounds of the
# latency, of the reference and of their ratio.
#
#   bash scripts/route_bench.sh [--rounds R] [--repeat N] [--workers W] [--size S]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TS="${TINYSPLIT:-$ROOT/build/tinysplit}"
ROUNDS=5 REPEAT=20 WORKERS=3 SIZE=112
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    *) echo "route_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$TS" ]] || { echo "route_bench.sh: $TS not built" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
MODES=("neuron relay" "neuron direct" "spatial direct")
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODES[@]}"; do
    set -- $m
    "$TS" run --json --repeat "$REPEAT" --workers "$WORKERS" --size "$SIZE" --strategy "$1" --route "$2" \
      > "$OUT/$1-$2-$r.json"
  done
done
python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'mode':<16} {'latency s':>10} {'reference s':>12} {'ratio':>6} {'bit-exact':>9} {'result frames':>13} {'peak RAM (max)':>14}")
for mode in ("neuron-relay", "neuron-direct", "spatial-direct"):
    runs = [json.load(open(f"{out}/{mode}-{r}.json")) for r in range(1, rounds + 1)]
    lat = statistics.median(j["latency_s"]["total"] for j in runs)
    ref = statistics.median(j["reference_s"] for j in runs)
    ratio = statistics.median(j["latency_s"]["total"] / j["reference_s"] for j in runs)
    exact = all(j["match_reference"] for j in runs)
    ram = max(w["peak_ram_bytes"] for j in runs for w in j["per_worker"])
    print(f"{mode:<16} {lat:>10.4f} {ref:>12.4f} {ratio:>6.2f} {str(exact):>9} {runs[0]['result_frames']:>13} {ram:>14}")
EOF
