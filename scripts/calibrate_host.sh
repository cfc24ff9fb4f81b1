#!/usr/bin/env bash
# Measures what the simulator's host model (docs/simulator.md, "Host boards")
# needs to predict `tinysplit run` on this machine, and prints it as one JSON
# document for `tinysplit simulate --host-calibration FILE`:
#
#   nproc            cores the board processes share (`nproc`)
#   timer_slack_us   this process's timer slack (/proc/self/timerslack_ns)
#   host_ns_per_mac  real kernel time per MAC: `tinysplit run --workers 1 --repeat 5`'s
#                    reference_s (median of warm single-process inferences) over the model's MACs
#   wake_us          the distribution of a wake-up's delay: BOARDS processes at once each
#                    sleep SLEEP_MS, SAMPLES times, and time how much later than asked they
#                    run again (timer slack + waiting for a core); per round the 50 quantiles
#                    at 1 %, 3 %, ..., 99 % of all overshoots; the file has the median of
#                    each quantile over ROUNDS rounds
#   wake_us_rounds   each round's 50 quantiles (to merge measurements: scripts/merge_calibrations.py)
#   load_before / load_after   /proc/loadavg around the measurement (the figures depend on it)
#
# Usage: scripts/calibrate_host.sh [tinysplit binary] > calib.json
# Environment: BOARDS=3 SLEEP_MS=5 SAMPLES=60 ROUNDS=5 MODEL=mobilenetv2 SIZE=224
#              NS_PER_MAC=x (skip the run and use this figure)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-${TINYSPLIT:-$here/build/tinysplit}}
BOARDS=${BOARDS:-3}
SLEEP_MS=${SLEEP_MS:-5}
SAMPLES=${SAMPLES:-60}
ROUNDS=${ROUNDS:-5}
MODEL=${MODEL:-mobilenetv2}
SIZE=${SIZE:-224}
[ -x "$bin" ] || { echo "calibrate_host: no tinysplit binary at $bin (pass it as the first argument)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "calibrate_host: python3 is needed" >&2; exit 1; }
for v in BOARDS SAMPLES ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "calibrate_host: $v must be a positive whole number (got '${!v}')" >&2; exit 1; }
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -z "${NS_PER_MAC:-}" ]; then
  ref=$("$bin" run --json --workers 1 --ram 64M --repeat 5 --model "$MODEL" --size "$SIZE" | python3 -c 'import json,sys; print(json.load(sys.stdin)["reference_s"])')
  macs=$("$bin" simulate --json --workers 1 --ram 64M --model "$MODEL" --size "$SIZE" --per-board | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["per_board"][0]["macs"])')
  NS_PER_MAC=$(python3 -c "print($ref * 1e9 / $macs)")
fi
python3 - "$BOARDS" "$SLEEP_MS" "$SAMPLES" "$ROUNDS" "$NS_PER_MAC" "$load_before" "$*" <<'PY'
import sys, time, json, statistics, multiprocessing as mp, os
boards, sleep_ms, samples, rounds = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ns_per_mac, load_before = float(sys.argv[5]), sys.argv[6]
if not (0 < sleep_ms <= 1000): sys.exit("calibrate_host: SLEEP_MS must be in (0, 1000]")
d = sleep_ms / 1000.0
Q = 50
def worker(q, start):
    while time.time() < start: time.sleep(0.0005)
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        time.sleep(d)
        out.append(max(0.0, time.perf_counter() - t0 - d))
    q.put(out)
def quantiles(xs):
    xs = sorted(xs)
    return [xs[min(len(xs) - 1, int((i + 0.5) / Q * len(xs)))] for i in range(Q)]
tables = []
for _ in range(rounds):
    q = mp.Queue()
    start = time.time() + 0.05
    ps = [mp.Process(target=worker, args=(q, start)) for _ in range(boards)]
    for p in ps: p.start()
    xs = []
    for _ in ps: xs += q.get()
    for p in ps: p.join()
    tables.append(quantiles(xs))
wake = [statistics.median(t[i] for t in tables) * 1e6 for i in range(Q)]
try:
    slack = int(open("/proc/self/timerslack_ns").read()) / 1000.0
except OSError:
    slack = 50.0
print(json.dumps({
    "command": "scripts/calibrate_host.sh",
    "environment": {"BOARDS": boards, "SLEEP_MS": sleep_ms, "SAMPLES": samples, "ROUNDS": rounds},
    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "load_before": load_before,
    "load_after": " ".join(open("/proc/loadavg").read().split()[:3]),
    "nproc": len(os.sched_getaffinity(0)),
    "timer_slack_us": slack,
    "host_ns_per_mac": round(ns_per_mac, 5),
    "wake_mean_us": round(sum(wake) / Q, 1),
    "wake_us": [round(w, 1) for w in wake],
    "wake_us_rounds": [[round(x * 1e6, 1) for x in t] for t in tables],
}))
PY
