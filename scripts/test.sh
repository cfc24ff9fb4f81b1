#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: set up (idempotent:
# packages, model, photos, build), build the Cortex-M7 firmware (cross
# toolchain, QEMU and lwIP's source from Debian), then every test with CTest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build_firmware.sh
export TS_FIRMWARE="$ROOT/firmware/build/tinysplit-board.elf"
BUILD_DIR="${TS_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${TS_TEST_JOBS:-2}" "$@"
