#!/usr/bin/env bash
# The tool and a fast subset of the tests under AddressSanitizer +
# UndefinedBehaviorSanitizer (gcc's, from Debian's g++): a separate build
# folder configured with -DTINYSPLIT_SANITIZE=ON (CMakeLists.txt). Any report
# aborts the process, so it fails its test. CI runs this from scripts/test.sh.
#
#   bash scripts/sanitize.sh            # build build-asan, run the subset
#   TS_SANITIZE_BUILD_DIR=DIR TS_SANITIZE_JOBS=N bash scripts/sanitize.sh
#
# The subset (SUBSET below) is what parses bytes from a board or runs the
# board worker: the wire format and the output digest, the worker state
# machine frame by frame, fragments (truncated, bit-flipped, hostile and
# random), the coordinator against scripted misbehaving boards, and real
# `tinysplit run`s (relay and direct routes, bands of rows, dying, stalling
# and garbling boards, an injected wrong value) whose coordinator and board
# processes are all sanitized. The long sweeps of run_test (1-16 boards,
# every allocation, 224) stay in the normal build; so do the other test
# files (a sanitized build of all of them takes too long for CI on 2 cores).
# Needs the model and test data (scripts/setup.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TS_SANITIZE_BUILD_DIR:-build-asan}"
JOBS="${TS_SANITIZE_JOBS:-2}"
SUBSET=(run_test link_test wire_test digest_test worker_test fragment_test)
# run_test: the long sweeps are left to the normal build.
EXCLUDE='RunTest\.(ExactForOneToSixteenBoards|ExactForEveryAllocationAndWindow|ExactAt224WithMoreRam|ExactForEveryStrategyAndRoute|ExactOnAHeterogeneousTestbed)|RunOnnx\.|RunProbe\.'
T0=$SECONDS
echo "[sanitize] configure $BUILD_DIR (-DTINYSPLIT_SANITIZE=ON)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTINYSPLIT_SANITIZE=ON -DTINYSPLIT_BENCH=OFF >/dev/null
echo "[sanitize] build tinysplit and ${#SUBSET[@]} test programs (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target tinysplit "${SUBSET[@]}"
T1=$SECONDS
labels="^($(IFS='|'; echo "${SUBSET[*]}"))\$"
# Leaks are errors too; a report stops the process with a non-zero status.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "[sanitize] ctest -L '$labels' (long run_test sweeps excluded)"
ctest --test-dir "$BUILD_DIR" -L "$labels" -E "$EXCLUDE" --output-on-failure -j "$JOBS"
echo "[sanitize] no sanitizer report: build $((T1 - T0)) s, tests $((SECONDS - T1)) s"
