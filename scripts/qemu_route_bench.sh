#!/usr/bin/env bash
# The relay and the direct route side by side on three Cortex-M7 firmware
# boards under QEMU (docs/firmware.md, "Board to board under QEMU").
#
#   bash scripts/qemu_route_bench.sh [--rounds R] [--repeat N] [--workers K]
#   bash scripts/qemu_route_bench.sh --instructions [--workers K]
#
# Per round, in turn: neuron+relay (the paper's mode), spatial+relay,
# spatial+direct, auto+direct, each `tinysplit run --workers qemu:K --repeat N
# --json` (fresh boards every run). Prints per mode the median over the
# rounds of latency_s.total (itself the median of the N inferences), the
# coordinator's wire bytes, the board-to-board payload bytes, result frames,
# whether every run was bit-exact with every layer verified, and how many
# frames QEMU dropped at the boards' NICs ("Slirp: Failed to send packet").
# Wall times are the emulator's speed on a shared machine, not the boards'.
#
# --instructions: what the boards execute per inference instead, which does
# not depend on the machine's load (QEMU -icount shift=0: 1 instruction per
# virtual ns): per mode one run with --repeat 1 and one with --repeat 3; the
# difference of each board's busy instructions (its log line "connection 1
# busy instructions", everything but WFI sleep over the coordinator's
# session), halved, summed over the boards, and the kernels' share of it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROUNDS=3 REPEAT=5 WORKERS=3 INSTR=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --instructions) INSTR=1; shift ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--repeat N] [--workers K]" >&2; exit 2 ;;
  esac
done
BIN="$ROOT/build/tinysplit"
[[ -x "$BIN" ]] || { echo "qemu_route_bench: build tinysplit first (cmake --build build --target tinysplit)" >&2; exit 2; }
export TS_FIRMWARE="${TS_FIRMWARE:-$ROOT/firmware/build/tinysplit-board.elf}"
[[ -f "$TS_FIRMWARE" ]] || { echo "qemu_route_bench: no firmware at $TS_FIRMWARE (bash scripts/build_firmware.sh)" >&2; exit 2; }
OUT="$(mktemp -d /tmp/ts_qemu_route.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
MODES=("relay neuron" "relay spatial" "direct spatial" "direct auto")
if [[ $INSTR == 1 ]]; then
  echo "| mode | busy instructions per inference (all boards) | of which kernels | of which protocol + network |"
  echo "|---|---|---|---|"
  for m in "${MODES[@]}"; do
    set -- $m
    declare -A busy=() comp=()
    for n in 1 3; do
      rm -rf "$OUT/store"
      "$BIN" run --workers "qemu:$WORKERS" --route "$1" --strategy "$2" --repeat $n --json --timeout 60 \
        --store "$OUT/store" > "$OUT/i.json" 2> "$OUT/i.err" || { echo "qemu_route_bench: $m failed: $(tail -1 "$OUT/i.err")" >&2; exit 1; }
      read -r b c < <(cat "$OUT"/store/board-*/qemu.log | sed -n 's/^connection 1 busy instructions \([0-9]*\): compute \([0-9]*\),.*/\1 \2/p' |
                      awk '{b += $1; c += $2} END {print b, c}')
      busy[$n]=$b comp[$n]=$c
    done
    /usr/bin/python3 -c "
b = (${busy[3]} - ${busy[1]}) / 2; c = (${comp[3]} - ${comp[1]}) / 2
print(f'| $2, $1 | {b/1e6:.1f} M | {c/1e6:.1f} M | {(b-c)/1e6:.1f} M |')"
  done
  exit 0
fi
for ((r = 1; r <= ROUNDS; ++r)); do
  for m in "${MODES[@]}"; do
    set -- $m
    tag="$1_$2_$r"
    rm -rf "$OUT/store"
    if ! "$BIN" run --workers "qemu:$WORKERS" --route "$1" --strategy "$2" --repeat "$REPEAT" --json --timeout 60 \
        --store "$OUT/store" > "$OUT/$tag.json" 2> "$OUT/$tag.err"; then
      echo "qemu_route_bench: $m failed: $(tail -1 "$OUT/$tag.err")" >&2
      exit 1
    fi
    cat "$OUT"/store/board-*/qemu.log | grep -c "Failed to send packet" > "$OUT/$tag.drops" || true
    echo "round $r: $m done" >&2
  done
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| mode | latency s (median) | each round | coordinator wire bytes | board-to-board payload | result frames | bit-exact, all layers verified | NIC drops |")
print("|---|---|---|---|---|---|---|---|")
for route, strat in [("relay", "neuron"), ("relay", "spatial"), ("direct", "spatial"), ("direct", "auto")]:
    lat, ok, drops = [], True, 0
    for r in range(1, rounds + 1):
        tag = f"{out}/{route}_{strat}_{r}"
        d = json.load(open(tag + ".json"))
        lat.append(d["latency_s"]["total"])
        ok = ok and d["match_reference"] and d["verified_layers"] == d["layers"]
        drops += int(open(tag + ".drops").read().strip() or 0)
    w = d["wire_bytes"]
    print(f"| {strat}, {route} | {statistics.median(lat):.3f} | {' '.join(f'{x:.2f}' for x in lat)} | "
          f"{w['total']:,} | {w.get('board_to_board_payload', 0):,} | {d.get('result_frames')} | {'yes' if ok else 'NO'} | {drops} |")
EOF
