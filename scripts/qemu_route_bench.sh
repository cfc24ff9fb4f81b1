#!/usr/bin/env bash
# The relay and the direct route side by side on three Cortex-M7 firmware
# boards under QEMU (docs/firmware.md, "Board to board under QEMU").
#
#   bash scripts/qemu_route_bench.sh [--rounds R] [--repeat N] [--workers K] [--size S]
#   bash scripts/qemu_route_bench.sh --instructions [--workers K] [--size S]
#   bash scripts/qemu_route_bench.sh --frame-cost [--workers K] [--size S]
#   bash scripts/qemu_route_bench.sh --code-cost [--workers K] [--size S]
#
# Per round, in turn: neuron+relay (the paper's mode), spatial+relay,
# spatial+direct, auto+direct, fused+direct, fused-rows+direct, each `tinysplit run --size S --workers qemu:K
# --repeat N --json` (fresh boards every run; S = 112 by default, the paper's size, where 3 boards
# hold the paper's mode). Prints per mode the median over the
# rounds of latency_s.total (itself the median of the N inferences), the
# coordinator's wire bytes, the board-to-board payload bytes, result frames,
# whether every run was bit-exact with every layer verified, and how many
# frames QEMU dropped at the boards' NICs ("Slirp: Failed to send packet").
# Wall times are the emulator's speed on a shared machine, not the boards'.
#
# --instructions: what the boards execute per inference instead, which does
# not depend on the machine's load (QEMU -icount shift=0: 1 instruction per
# virtual ns): per mode one run with --repeat 3; each board logs its busy
# instructions (everything but WFI sleep) and its kernels' instructions at
# the end of its last layer of every inference ("inference done: ..."); the
# difference between the first and the third, halved, summed over the boards.
# Also the part of the protocol spent copying frames word by word through
# the LAN9118's FIFOs (a DMA Ethernet such as a Teensy 4.1's does not), and
# the protocol frames the boards received and sent.
#
# --frame-cost: the boards' CPU per protocol frame, the NIC's FIFO copies
# left out: spatial on the direct route at window 32 and at window 1 (every
# frame acknowledged: more frames, the same bytes), the difference in
# protocol instructions over the difference in frames.
#
# --code-cost: the boards' CPU per value coded (plan/coding.h, the cost
# files' mask_cycles_per_value and rice_cycles_per_value): the default plan
# (auto, direct) at --code off and at --code mask and rice (every layer's
# activations board to board coded), the difference in protocol
# instructions (the NIC's FIFO copies left out, as for --frame-cost) over
# the values coded; coding also saves the per-byte work of the bytes it
# removes, so this is the net cost.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROUNDS=3 REPEAT=5 WORKERS=3 SIZE=112 INSTR=0 FRAME=0 CODE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --instructions) INSTR=1; shift ;;
    --frame-cost) FRAME=1; shift ;;
    --code-cost) CODE=1; shift ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--repeat N] [--workers K] [--size S]" >&2; exit 2 ;;
  esac
done
BIN="$ROOT/build/tinysplit"
[[ -x "$BIN" ]] || { echo "qemu_route_bench: build tinysplit first (cmake --build build --target tinysplit)" >&2; exit 2; }
export TS_FIRMWARE="${TS_FIRMWARE:-$ROOT/firmware/build/tinysplit-board.elf}"
[[ -f "$TS_FIRMWARE" ]] || { echo "qemu_route_bench: no firmware at $TS_FIRMWARE (bash scripts/build_firmware.sh)" >&2; exit 2; }
OUT="$(mktemp -d /tmp/ts_qemu_route.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
MODES=("relay neuron" "relay spatial" "direct spatial" "direct auto" "direct fused" "direct fused-rows")
# One run with --repeat 3 in mode "$1 $2" (route, strategy) at window $3
# (--code $4, default off): prints "busy kernels pio frames" per inference,
# summed over the boards.
instructions() {
  rm -rf "$OUT/store"
  "$BIN" run --size "$SIZE" --workers "qemu:$WORKERS" --route "$1" --strategy "$2" --window "$3" --code "${4:-off}" \
    --repeat 3 --json --timeout 60 --store "$OUT/store" > "$OUT/i.json" 2> "$OUT/i.err" ||
    { echo "qemu_route_bench: $1 $2 failed: $(tail -1 "$OUT/i.err")" >&2; exit 1; }
  /usr/bin/python3 - "$OUT/store" <<'EOF'
import glob, re, sys
busy = comp = pio = frames = 0
NS_PER_TICK = 40  # board_ticks() at 25 MHz under -icount shift=0: 40 instructions a tick
for log in sorted(glob.glob(sys.argv[1] + "/board-*/qemu.log")):
    rows = [tuple(int(v) for v in m) for m in re.findall(
        r"inference done: busy instructions (\d+), compute (\d+) \(since boot\), nic pio ticks (\d+), frames (\d+)",
        open(log).read())]
    if len(rows) != 3:
        sys.exit(f"qemu_route_bench: {log} has {len(rows)} 'inference done' lines, expected 3")
    busy += (rows[2][0] - rows[0][0]) / 2
    comp += (rows[2][1] - rows[0][1]) / 2
    pio += ((rows[2][2] - rows[0][2]) % 2**32) * NS_PER_TICK / 2
    frames += (rows[2][3] - rows[0][3]) / 2
print(busy, comp, pio, frames)
EOF
}
if [[ $INSTR == 1 ]]; then
  echo "| mode | busy instructions per inference (all boards) | of which kernels | of which protocol + network | of that, the NIC's FIFO copies | protocol frames in + out |"
  echo "|---|---|---|---|---|---|"
  for m in "${MODES[@]}"; do
    set -- $m
    read -r busy comp pio frames < <(instructions "$1" "$2" 32) && [[ -n "$frames" ]] || exit 1
    /usr/bin/python3 -c "b, c, p, f = map(float, '$busy $comp $pio $frames'.split())
print(f'| $2, $1 | {b/1e6:.1f} M | {c/1e6:.1f} M | {(b-c)/1e6:.1f} M | {p/1e6:.1f} M | {f:.0f} |')"
  done
  exit 0
fi
if [[ $CODE == 1 ]]; then
  read -r b0 c0 p0 f0 < <(instructions direct auto 32 off) && [[ -n "$f0" ]] || exit 1
  for code in mask rice; do
    read -r b1 c1 p1 f1 < <(instructions direct auto 32 $code) && [[ -n "$f1" ]] || exit 1
    read -r values bytes < <(/usr/bin/python3 -c "import json; d = json.load(open('$OUT/i.json')); assert d['match_reference'] and d['verified_layers'] == d['layers']; print(d['wire_bytes']['board_to_board_payload'], d['result_bytes'])")
    /usr/bin/python3 -c "b0, c0, p0, f0, b1, c1, p1, f1, v, n = map(float, '$b0 $c0 $p0 $f0 $b1 $c1 $p1 $f1 $values $bytes'.split())
d = ((b1 - c1 - p1) - (b0 - c0 - p0)) / v
print(f'$code: auto, direct, {int(v)} values board to board coded, results {int(n)} B on the wire: protocol '
      f'{(b0 - c0 - p0) / 1e6:.2f} M -> {(b1 - c1 - p1) / 1e6:.2f} M instructions (FIFO copies left out), {d:.1f} per '
      f'value coded; FIFO copies {p0 / 1e6:.2f} M -> {p1 / 1e6:.2f} M; frames {int(f0)} -> {int(f1)}; bit-exact')"
  done
  exit 0
fi
if [[ $FRAME == 1 ]]; then
  # The same plan with every frame acknowledged (window 1) against window
  # 32: the extra frames are small ACKs, so the extra protocol instructions
  # (the NIC's FIFO copies left out) over the extra frames are the board's
  # CPU per frame sent or received, apart from its bytes.
  read -r b32 c32 p32 f32 < <(instructions direct spatial 32) && [[ -n "$f32" ]] || exit 1
  read -r b1 c1 p1 f1 < <(instructions direct spatial 1) && [[ -n "$f1" ]] || exit 1
  /usr/bin/python3 -c "b32, c32, p32, f32, b1, c1, p1, f1 = map(float, '$b32 $c32 $p32 $f32 $b1 $c1 $p1 $f1'.split())
d = ((b1 - c1 - p1) - (b32 - c32 - p32)) / (f1 - f32)
print(f'spatial, direct, {int(f32)} -> {int(f1)} frames (window 32 -> 1): {d:.0f} instructions per frame sent or received, '
      f'{d / 600:.1f} us at 600 MHz, one instruction a cycle')"
  exit 0
fi
for ((r = 1; r <= ROUNDS; ++r)); do
  for m in "${MODES[@]}"; do
    set -- $m
    tag="$1_$2_$r"
    rm -rf "$OUT/store"
    if ! "$BIN" run --size "$SIZE" --workers "qemu:$WORKERS" --route "$1" --strategy "$2" --repeat "$REPEAT" --json --timeout 60 \
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
