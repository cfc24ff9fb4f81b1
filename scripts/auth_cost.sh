#!/usr/bin/env bash
# What authenticated links cost: the same distributed inference with and
# without a key, side by side. Runs `tinysplit run --json` alternately
# without and with --key-file (a fresh key in a temporary folder), ROUNDS
# times each, every run doing REPEAT inferences, and prints the medians.
#
#   bash scripts/auth_cost.sh [--workers N|qemu:N] [--rounds R] [--repeat K] [--json] [-- extra run options]
#
# Defaults: --workers 3 --rounds 5 --repeat 10. Latency is the run's
# latency_s.total (median over its inferences); the figure per round pairs
# two neighbouring runs, so drifting machine load hits both alike. Also
# prints the bytes on the coordinator's links per inference (the 16-byte
# tags). The cost of one tag alone is bench/auth_bench.cpp.
# Needs the build (build/tinysplit, or $TS_BIN) and scripts/setup.sh's model.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${TS_BIN:-$ROOT/build/tinysplit}"
WORKERS=3
ROUNDS=5
REPEAT=10
JSON=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --rounds) ROUNDS="${2:-}"; shift 2 ;;
    --repeat) REPEAT="${2:-}"; shift 2 ;;
    --json) JSON=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "auth_cost.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$REPEAT" =~ ^[1-9][0-9]*$ ]] || { echo "auth_cost.sh: --rounds and --repeat take positive integers" >&2; exit 2; }
[[ -x "$BIN" ]] || { echo "auth_cost.sh: $BIN not found (build first)" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT INT TERM
"$BIN" keygen -o "$TMP/key" >/dev/null
for ((i = 0; i < ROUNDS; i++)); do
  for mode in plain keyed; do
    args=(run --json --workers "$WORKERS" --repeat "$REPEAT" "${EXTRA[@]}")
    [[ $mode == keyed ]] && args+=(--key-file "$TMP/key")
    if ! "$BIN" "${args[@]}" >"$TMP/$mode-$i.json" 2>"$TMP/$mode-$i.err"; then
      echo "auth_cost.sh: run failed ($mode, round $i): $(tail -n 1 "$TMP/$mode-$i.err")" >&2
      exit 1
    fi
  done
done
/usr/bin/python3 - "$TMP" "$ROUNDS" "$REPEAT" "$WORKERS" "$JSON" <<'PY'
import json, statistics, sys
tmp, rounds, repeat, workers, as_json = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
def load(mode, i):
    return json.load(open(f"{tmp}/{mode}-{i}.json"))
rows = []
for i in range(rounds):
    p, k = load("plain", i), load("keyed", i)
    assert p["match_reference"] and k["match_reference"], "a run was not bit-exact"
    assert k["authenticated"] and not p["authenticated"]
    rows.append({
        "plain_s": p["latency_s"]["total"], "keyed_s": k["latency_s"]["total"],
        "plain_wire": p["wire_bytes"]["total"], "keyed_wire": k["wire_bytes"]["total"],
        "plain_comm_s": p["latency_s"]["communication"], "keyed_comm_s": k["latency_s"]["communication"],
    })
med = lambda key: statistics.median(r[key] for r in rows)
ratios = [r["keyed_s"] / r["plain_s"] for r in rows]
out = {
    "workers": workers, "rounds": rounds, "repeat": repeat, "bit_exact": True,
    "latency_s": {"plain": med("plain_s"), "keyed": med("keyed_s")},
    "communication_s": {"plain": med("plain_comm_s"), "keyed": med("keyed_comm_s")},
    "keyed_over_plain": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
    "wire_bytes_per_inference": {"plain": med("plain_wire"), "keyed": med("keyed_wire")},
}
if as_json:
    print(json.dumps(out, indent=2))
else:
    print(f"auth cost: {workers} boards, {rounds} rounds x {repeat} inferences each way, all bit-exact")
    print(f"  latency (median)   plain {out['latency_s']['plain']*1e3:8.2f} ms   keyed {out['latency_s']['keyed']*1e3:8.2f} ms")
    print(f"  communication      plain {out['communication_s']['plain']*1e3:8.2f} ms   keyed {out['communication_s']['keyed']*1e3:8.2f} ms")
    r = out["keyed_over_plain"]
    print(f"  keyed / plain      median {r['median']:.3f}  (rounds: {r['min']:.3f} .. {r['max']:.3f})")
    w = out["wire_bytes_per_inference"]
    print(f"  wire bytes         plain {w['plain']:,}   keyed {w['keyed']:,}  (+{(w['keyed'] / w['plain'] - 1) * 100:.2f} %)")
PY
