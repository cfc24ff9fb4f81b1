#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: set up (idempotent:
# packages, model, photos, build), build the Cortex-M7 firmware (cross
# toolchain, QEMU and lwIP's source from Debian) for QEMU and for a real
# Teensy 4.1 (checked by scripts/check_teensy_image.py), then every test with CTest,
# then the test programs of the parsers, the kernels, the board worker, the
# coordinator, authentication, failover, board-to-board routing, pipelining
# and partial sums again under ASan + UBSan (scripts/sanitize.sh --programs,
# its own build folder build-asan; the whole suite sanitized is `bash
# scripts/sanitize.sh`; TS_SKIP_SANITIZE=1 leaves it out).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build_firmware.sh
bash scripts/build_firmware.sh --board teensy41
export TS_FIRMWARE="$ROOT/firmware/build/tinysplit-board.elf"
BUILD_DIR="${TS_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${TS_TEST_JOBS:-2}" "$@"
if [[ "${TS_SKIP_SANITIZE:-0}" != 1 ]]; then
  bash scripts/sanitize.sh --programs "wire_test digest_test fragment_test worker_test link_test secure_test output_safety_test cli_errors_test direct_test failover_test arm_dsp_kernels_test x86_kernels_test qmath_test pipeline_test reduce_test host_cost_test sim_host_test"
fi
