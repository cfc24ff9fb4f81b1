#!/usr/bin/env bash
# The whole CTest suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc's, from Debian's g++): a separate build folder configured with
# -DTINYSPLIT_SANITIZE=ON (CMakeLists.txt: -O1 -g1, no benchmarks), every test
# program and the tinysplit binary built there, then every test. The CLI
# tests, host boards (tinysplit worker processes) and the coordinator of the
# QEMU firmware tests are this build's tinysplit, so they run sanitized too;
# the firmware itself is the normal Cortex-M7 image (TS_FIRMWARE). CI runs
# this from scripts/test.sh.
#
#   bash scripts/sanitize.sh                 # build build-asan, run every test
#   bash scripts/sanitize.sh --programs "wire_test worker_test"   # only these
#                                            # test programs (and tinysplit)
#   bash scripts/sanitize.sh -R wire_test    # extra arguments go to ctest
#   TS_SANITIZE_BUILD_DIR=DIR TS_SANITIZE_JOBS=N bash scripts/sanitize.sh
#
# Reports go to files (ASAN_OPTIONS/UBSAN_OPTIONS log_path; gcc's UBSan ignores
# it and prints to stderr, so the tests' output is searched too) in
# DIR/sanitizer-reports, one per process that had one, not to stderr: a board
# process is often a child whose stderr is a log file, and a run that
# survives a board's abort (failover) would hide it. Any report aborts its
# process, and after CTest any report file fails this script, even if every
# test passed; the reports are printed. Leaks count.
# Needs the test data (scripts/setup.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TS_SANITIZE_BUILD_DIR:-build-asan}"
JOBS="${TS_SANITIZE_JOBS:-2}"
PROGRAMS=()
if [[ "${1:-}" == --programs ]]; then
  read -r -a PROGRAMS <<<"${2:-}"
  ((${#PROGRAMS[@]})) || { echo "sanitize.sh: --programs needs a list of test programs" >&2; exit 2; }
  shift 2
fi
T0=$SECONDS
echo "[sanitize] configure $BUILD_DIR (-DTINYSPLIT_SANITIZE=ON)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTINYSPLIT_SANITIZE=ON -DTINYSPLIT_BENCH=OFF >/dev/null
ctest_sel=()
if ((${#PROGRAMS[@]})); then
  echo "[sanitize] build tinysplit and ${#PROGRAMS[@]} test programs: ${PROGRAMS[*]} (-j$JOBS)"
  cmake --build "$BUILD_DIR" -j "$JOBS" --target tinysplit "${PROGRAMS[@]}"
  ctest_sel=(-L "^($(IFS='|'; echo "${PROGRAMS[*]}"))\$")
else
  echo "[sanitize] build the tool and every test program (-j$JOBS)"
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
T1=$SECONDS
REPORTS="$(cd "$BUILD_DIR" && pwd)/sanitizer-reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# abort_on_error: a report stops the process (SIGABRT, a failed test or a
# dead board); log_path: the report lands in $REPORTS/{asan,ubsan}.PID.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1:log_path=$REPORTS/ubsan"
echo "[sanitize] ctest -j$JOBS ${ctest_sel[*]} $*"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "${ctest_sel[@]}" "$@" || status=$?
T2=$SECONDS
# gcc's combined ASan + UBSan runtime prints UBSan reports to stderr whatever
# UBSAN_OPTIONS' log_path says: look for them in every test's output too
# (tests/support/shell.h echoes the captured stderr of a command that had
# one, boards started by the tool included).
LOG="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [[ -f "$LOG" ]] && grep -qE ': runtime error: |ERROR: (AddressSanitizer|LeakSanitizer)|SUMMARY: (UndefinedBehavior|Address|Leak)Sanitizer' "$LOG"; then
  grep -nE -B2 -A12 ': runtime error: |ERROR: (AddressSanitizer|LeakSanitizer)' "$LOG" | head -200 >"$REPORTS/from-test-output.txt"
fi
shopt -s nullglob
reports=("$REPORTS"/*)
if ((${#reports[@]})); then
  for r in "${reports[@]}"; do
    echo "===== $r"
    cat "$r"
  done
  echo "[sanitize] FAILED: ${#reports[@]} sanitizer report(s) above (build $((T1 - T0)) s, tests $((T2 - T1)) s)" >&2
  exit 1
fi
if ((status != 0)); then
  echo "[sanitize] FAILED: ctest exited with $status, no sanitizer report (build $((T1 - T0)) s, tests $((T2 - T1)) s)" >&2
  exit "$status"
fi
echo "[sanitize] no sanitizer report: build $((T1 - T0)) s, tests $((T2 - T1)) s"
