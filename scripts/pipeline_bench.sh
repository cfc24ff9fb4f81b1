#!/usr/bin/env bash
# Images per second of `run --objective throughput` inside one deployment,
# pipelined (--in-flight 2 and 3: a board starts the next image while the
# others finish the last) against one image after another (--in-flight 1),
# side by side on the same boards' configuration. Each round runs every
# window once, in rotating order, so that a busy machine slows them alike;
# the table gives per window the median over the rounds of images_per_s and
# of the median latency, and the ratio to --in-flight 1 (median of the
# per-round ratios). Every run must be bit-exact with every layer verified,
# or the script stops. Then the simulator's figure for the same
# configuration (`simulate --objective throughput`: images back to back,
# and 1 / latency of one image).
#
#   bash scripts/pipeline_bench.sh [--rounds R] [--repeat N] [--workers W] [--ram 200K]
#                                  [--windows "1 2 3"] [-- extra run flags, e.g. --cycles-per-mac 2]
# The load average before and after is printed (compare ratios, not times).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TS="${TINYSPLIT:-$ROOT/build/tinysplit}"
ROUNDS=3 REPEAT=20 WORKERS=3 RAM=200K WINDOWS="1 2 3"
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --ram) RAM="$2"; shift 2 ;;
    --windows) WINDOWS="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "pipeline_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
read -r -a WIN <<< "$WINDOWS"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run --workers $WORKERS --ram $RAM --objective throughput --repeat $REPEAT ${EXTRA[*]:-}, $ROUNDS rounds"
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#WIN[@]}; i++)); do
    w="${WIN[$(((i + r) % ${#WIN[@]}))]}"
    "$TS" run --json --workers "$WORKERS" --ram "$RAM" --objective throughput --repeat "$REPEAT" \
      --in-flight "$w" "${EXTRA[@]}" > "$OUT/r$r-w$w.json"
  done
done
python3 - "$OUT" "$ROUNDS" "${WIN[@]}" <<'PY'
import json, statistics, sys
out, rounds, wins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {w: [json.load(open(f"{out}/r{r}-w{w}.json")) for r in range(rounds)] for w in wins}
for w, js in runs.items():
    for j in js:
        if not (j["match_reference"] and j["bit_exact_inferences"] == j["inferences"] and j["verified_layers"] == j["layers"]):
            sys.exit(f"in-flight {w}: a run was not bit-exact / not every layer verified")
base = wins[0]
print(f"{'in_flight':>9} {'pipelined':>9} {'images/s (median)':>18} {'per round':>30} {'latency s':>10} {'x in_flight ' + base:>16}")
for w, js in runs.items():
    ips = [j["images_per_s"] for j in js]
    ratio = [a["images_per_s"] / b["images_per_s"] for a, b in zip(js, runs[base])]
    print(f"{w:>9} {str(js[0]['pipelined']):>9} {statistics.median(ips):18.2f} {' '.join(f'{v:.1f}' for v in ips):>30} "
          f"{statistics.median(j['latency_s']['total'] for j in js):10.4f} {statistics.median(ratio):16.2f}")
print(f"plan: {runs[base][0]['mode']}, {runs[base][0]['groups']} group(s) of {runs[base][0]['group_boards']} boards; "
      f"single process {runs[base][0]['reference_images_per_s']:.1f} images/s")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# The simulator for the same configuration: Teensy 4.1 timing by default;
# with --cycles-per-mac C in the extra flags, the host's emulated clock
# (600 MHz, C cycles/MAC, loopback links as scripts/validate_sim.sh models them).
SIM=(--workers "$WORKERS" --ram "$RAM")
for ((i = 0; i < ${#EXTRA[@]}; i++)); do
  if [[ "${EXTRA[$i]}" == --cycles-per-mac ]]; then
    SIM+=(--cycles-per-mac "${EXTRA[$((i + 1))]}" --clock-mhz 600 --bandwidth-kbps 1e9 --coord-bandwidth-kbps 0)
  fi
done
"$TS" simulate --json "${SIM[@]}" --objective throughput --images "$REPEAT" > "$OUT/sim.json"
python3 - "$OUT/sim.json" "${SIM[*]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
lat = r["latency_s"]["total"]
t = r["throughput"]
print(f"simulate {sys.argv[2]}: --objective throughput ({t['mode']}, {t['groups']} x {t['group_boards']}, pipelined) "
      f"{r['images_per_s']:.2f} images/s; one image at a time on the latency plan {1 / lat:.2f} images/s "
      f"(latency {lat:.4f} s); ratio {r['images_per_s'] * lat:.2f}")
PY
