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
# machine driven frame by frame (deploy, inference, every kind of malformed
# or out-of-protocol input), fragments (truncated, bit-flipped, hostile and
# random), and a real Coordinator against scripted misbehaving boards. It
# needs neither the tool nor board processes, so the CLI (the slowest code
# to compile under ASan) is not built. The other test files, run_test's real
# board processes among them, run in the normal build only: building them
# sanitized did not fit CI's time on 2 cores (docs/reliability.md).
# Needs the test data (scripts/setup.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TS_SANITIZE_BUILD_DIR:-build-asan}"
JOBS="${TS_SANITIZE_JOBS:-2}"
SUBSET=(link_test wire_test digest_test worker_test fragment_test)
T0=$SECONDS
echo "[sanitize] configure $BUILD_DIR (-DTINYSPLIT_SANITIZE=ON)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTINYSPLIT_SANITIZE=ON -DTINYSPLIT_BENCH=OFF >/dev/null
echo "[sanitize] build ${#SUBSET[@]} test programs (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${SUBSET[@]}"
T1=$SECONDS
labels="^($(IFS='|'; echo "${SUBSET[*]}"))\$"
# Leaks are errors too; a report stops the process with a non-zero status.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
echo "[sanitize] ctest -L '$labels'"
ctest --test-dir "$BUILD_DIR" -L "$labels" --output-on-failure -j "$JOBS"
echo "[sanitize] no sanitizer report: build $((T1 - T0)) s, tests $((SECONDS - T1)) s"
