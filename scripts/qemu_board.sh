#!/usr/bin/env bash
# Starts one tinysplit board: the Cortex-M7 firmware under QEMU (mps2-an500),
# reachable on a host TCP port through QEMU's user-mode networking.
#
#   scripts/qemu_board.sh [--port 7001] [--id 0] [--ram 524288] [--clock-mhz 600]
#                         [--window 8] [--no-icount] [--once] [--firmware ELF]
#
# The board prints its log (semihosting) on stdout; its first line of interest
# is "board N listening on 10.0.2.15:7000", after which a coordinator can
# connect to 127.0.0.1:PORT, e.g. with a testbed entry "address":
# "127.0.0.1:7001". By default QEMU runs with -icount shift=0 (one instruction
# per virtual nanosecond), so the per-layer instruction counts it logs are
# exact and repeatable; --no-icount runs faster but times are host times.
# The QEMU process is exec'd: its pid is this script's, and its exit code is
# the firmware's (semihosting exit).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT=7001
ELF="${TS_FIRMWARE:-$ROOT/firmware/build/tinysplit-board.elf}"
ICOUNT=1
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) PORT="$2"; shift 2 ;;
    --firmware) ELF="$2"; shift 2 ;;
    --no-icount) ICOUNT=0; shift ;;
    --id|--ram|--clock-mhz|--window|--advertise-ram) ARGS+=("$1" "$2"); shift 2 ;;
    --once) ARGS+=("$1"); shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "qemu_board.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -f "$ELF" ]] || { echo "qemu_board.sh: no firmware at $ELF (run scripts/build_firmware.sh)" >&2; exit 1; }
[[ "$PORT" =~ ^[0-9]+$ ]] || { echo "qemu_board.sh: bad --port '$PORT'" >&2; exit 2; }
QEMU_ICOUNT=()
if [[ $ICOUNT == 1 ]]; then QEMU_ICOUNT=(-icount shift=0); ARGS+=(--icount); fi
exec qemu-system-arm -M mps2-an500 -nographic -monitor none -serial null -semihosting "${QEMU_ICOUNT[@]}" \
  -nic "user,model=lan9118,hostfwd=tcp:127.0.0.1:$PORT-10.0.2.15:7000" \
  -kernel "$ELF" -append "serve ${ARGS[*]}"
