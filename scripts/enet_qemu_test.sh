#!/usr/bin/env bash
# The Teensy 4.1 firmware's ENET driver core (firmware/boards/teensy41/
# enet_core.c) against QEMU's i.MX ENET model on the mcimx6ul-evk machine:
# builds firmware/tests/enet_qemu/harness.c for the Cortex-A7 and runs it
# with QEMU user networking restricted to QEMU itself (restrict=on: no
# traffic leaves the emulator). Needs scripts/build_firmware.sh's packages
# (arm-none-eabi-gcc, qemu-system-arm). Exit code 0 when every step passes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FW="$ROOT/firmware"
OUT="$FW/build/enet_qemu"
mkdir -p "$OUT"
arm-none-eabi-gcc -mcpu=cortex-a7 -marm -mfloat-abi=soft -mno-unaligned-access -O2 -g -ffreestanding \
  -fno-builtin -nostdlib -Wall -Wextra -Werror -I"$FW/boards/teensy41" -T "$FW/tests/enet_qemu/harness.ld" \
  -o "$OUT/enet-harness.elf" "$FW/tests/enet_qemu/harness.c" "$FW/boards/teensy41/enet_core.c" -lgcc
out="$(timeout 120 qemu-system-arm -M mcimx6ul-evk -nographic -monitor none -serial null -semihosting \
        -nic user,model=imx.enet,restrict=on -kernel "$OUT/enet-harness.elf" 2>&1 | grep -v 'has no peer')" \
  && rc=0 || rc=$?
echo "$out"
[[ $rc -eq 0 ]] && grep -q '^enet-qemu: ok' <<<"$out"
