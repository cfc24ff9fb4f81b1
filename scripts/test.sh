#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine:
#   1. set up (idempotent: packages, model, photos; of the normal Release
#      build, the tool and the kernels' test programs alone);
#   2. build the Cortex-M7 firmware (cross toolchain, QEMU and lwIP's source
#      from Debian) for QEMU and for a real Teensy 4.1;
#   3. every test under ASan + UBSan (scripts/sanitize.sh: its own build
#      folder build-asan; the CLI tests, the host boards and the coordinator
#      of the QEMU tests are that build's tinysplit); any sanitizer report
#      fails the run;
#   4. in the normal build: the tests the sanitized build leaves out (they run
#      no program of a build folder: the Teensy image checks, the Teensy
#      driver under QEMU, fuzz.sh's own clang ASan + UBSan build), and the
#      kernels' test programs, whose portable and SIMD kernels the Release
#      build compiles at -O3 (the sanitized build at -O1).
# TS_SKIP_SANITIZE=1 runs every test in the normal build instead of step 3
# (quicker on a slow machine; CI does not set it). Extra arguments go to the
# ctest call of every test (step 3, or the normal build's with
# TS_SKIP_SANITIZE=1), e.g. -R RunTest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
T0=$SECONDS
BUILD_DIR="${TS_BUILD_DIR:-build}"
# The normal build runs the whole suite only with TS_SKIP_SANITIZE=1; else it
# runs the tool (for the model caches below) and the kernels' test programs,
# so that is all it builds (every test program at -O2 is about 7 minutes on
# 2 cores that the sanitized suite does not need).
KERNEL_PROGRAMS=(x86_kernels_test arm_dsp_kernels_test qmath_test)
if [[ "${TS_SKIP_SANITIZE:-0}" == 1 ]]; then
  bash scripts/setup.sh
else
  TS_BUILD_TARGETS="tinysplit ${KERNEL_PROGRAMS[*]}" bash scripts/setup.sh
fi
bash scripts/build_firmware.sh
bash scripts/build_firmware.sh --board teensy41
export TS_FIRMWARE="$ROOT/firmware/build/tinysplit-board.elf"
JOBS="${TS_TEST_JOBS:-2}"
T1=$SECONDS
if [[ "${TS_SKIP_SANITIZE:-0}" == 1 ]]; then
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
  echo "[test] set-up and firmware $((T1 - T0)) s, every test (normal build) $((SECONDS - T1)) s"
  exit 0
fi
# The quantised models the tests load are cached in models/.cache (keyed by
# model, size and calibration set): make them with the normal build, so that
# the sanitized tool (several times slower) does not calibrate MobileNetV2 at
# 112 and 224 and the ONNX test models inside tests that have a time limit.
# A model that cannot be planned here still leaves its cache entry (the tests
# judge the model); only the cache is wanted.
for s in 112 224; do "$BUILD_DIR/tinysplit" plan --workers 1 --ram 64M --size "$s" > /dev/null; done
for m in tests/data/onnx/*.onnx; do "$BUILD_DIR/tinysplit" plan --workers 1 --ram 64M --model "$m" > /dev/null 2>&1 || true; done
# Many tests wait on board processes and links: one more test than cores
# keeps both cores busy.
TS_SANITIZE_JOBS="${TS_SANITIZE_JOBS:-3}" bash scripts/sanitize.sh "$@"
T2=$SECONDS
# Tests that run no program of a build folder are labelled normal_only
# (CMakeLists.txt): the sanitized build leaves them out.
mapfile -t only_normal < <(ctest --test-dir "$BUILD_DIR" -N -L '^normal_only$' | sed -n 's/^ *Test *#[0-9]*: //p')
((${#only_normal[@]})) || { echo "test.sh: expected tests that only the normal build has (Teensy image, fuzz smoke)" >&2; exit 1; }
echo "[test] normal build: ${#only_normal[@]} tests the sanitized build leaves out: ${only_normal[*]}"
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j "$JOBS" -L '^normal_only$'
echo "[test] normal build: the kernels' test programs at -O3"
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j "$JOBS" -L "^($(IFS='|'; echo "${KERNEL_PROGRAMS[*]}"))\$"
echo "[test] set-up and firmware $((T1 - T0)) s, sanitized build and suite $((T2 - T1)) s, normal-build tests $((SECONDS - T2)) s"
