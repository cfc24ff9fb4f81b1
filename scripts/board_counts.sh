#!/usr/bin/env bash
# What host boards spend per inference, independent of how loaded the machine
# is: starts 3 standalone boards (`tinysplit worker`), runs
# `tinysplit run --testbed ... --repeat 20` then `--repeat 120`, and prints per
# inference (the difference of the two runs over 120; deploy is cached in the
# second) the boards' CPU time and context switches summed over the 3 boards,
# with the second run's latency, reference and result frames.
#
#   bash scripts/board_counts.sh [STRATEGY [ROUTE [COSTMODEL]]]   (default: auto direct auto;
#                                 COSTMODEL teensy = the plan auto made before the host cost model)
#   TINYSPLIT=/path/to/other/tinysplit bash scripts/board_counts.sh spatial direct
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TS="${TINYSPLIT:-$ROOT/build/tinysplit}"
ST="${1:-auto}" RT="${2:-direct}" CM="${3:-auto}"
[[ -x "$TS" ]] || { echo "board_counts.sh: $TS not built" >&2; exit 1; }
D="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
for i in 0 1 2; do "$TS" worker --id "$i" --listen 127.0.0.1:0 > "$D/w$i.log" 2>&1 & pids+=($!); done
ports=()
for i in 0 1 2; do
  for _ in $(seq 50); do grep -q listening "$D/w$i.log" && break; sleep 0.1; done
  ports+=("$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$D/w$i.log")")
done
printf '{"boards":[{"id":0,"address":"127.0.0.1:%s"},{"id":1,"address":"127.0.0.1:%s"},{"id":2,"address":"127.0.0.1:%s"}]}\n' \
  "${ports[@]}" > "$D/tb.json"
snap() {  # CPU ticks and context switches of the boards, all threads
  local cpu=0 cs=0 p f
  for p in "${pids[@]}"; do
    read -r u s < <(cut -d' ' -f14,15 "/proc/$p/stat")
    cpu=$((cpu + u + s))
    for f in /proc/"$p"/task/*/status; do cs=$((cs + $(awk '/ctxt_switches/ {n += $2} END {print n}' "$f"))); done
  done
  echo "$cpu $cs"
}
"$TS" run --testbed "$D/tb.json" --repeat 20 --strategy "$ST" --route "$RT" --cost-model "$CM" --json > "$D/a.json"
read -r cpu0 cs0 < <(snap)
"$TS" run --testbed "$D/tb.json" --repeat 120 --strategy "$ST" --route "$RT" --cost-model "$CM" --json > "$D/b.json"
read -r cpu1 cs1 < <(snap)
python3 - "$D/b.json" "$ST-$RT-$CM" "$((cpu1 - cpu0))" "$((cs1 - cs0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); mode = sys.argv[2]
ticks, cs, hz = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"{mode}: board CPU {ticks * 1000.0 / hz / 120:.2f} ms/inference, context switches {cs / 120:.0f}/inference "
      f"(3 boards); latency {j['latency_s']['total']:.4f} s, reference {j['reference_s']:.4f} s, "
      f"bit-exact {j['match_reference']}, result frames {j['result_frames']}")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
