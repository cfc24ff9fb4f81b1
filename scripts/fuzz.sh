#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) if needed and runs
# each for a fixed time in a single process (libFuzzer's default), one after
# another; with --jobs N in libFuzzer's fork mode, N processes per target.
#
#   bash scripts/fuzz.sh --seconds S [--json] [--target T]... [--seeds] [--jobs N]
#   bash scripts/fuzz.sh --runs N [--json] [--target T]... [--jobs N]
#
# --seconds runs each target for S seconds with a random seed (exploration).
# --runs runs each target for exactly N inputs with libFuzzer seed 1 on the
# committed seeds: the same inputs on every machine, so the test suite's
# FuzzSmoke is reproducible and cannot fail on one machine and pass on another.
# --jobs N (2..64), for long runs: -fork=N, N jobs at a time, each on a random
# share of the corpus; with --runs N it stops once the jobs together have run
# at least N inputs (checked as each job ends). No seed is given then
# (libFuzzer would hand the same -seed to every job): each job picks its own,
# so such a run is not reproducible.
#
# Per target it prints `execs` (inputs run) and `crashes` (0 or 1: libFuzzer
# stops at the first crash, leak, timeout or out-of-memory, and the input is
# saved as crash-*/leak-*/timeout-*/oom-* in the artefact folder, named on
# stderr). --json prints {"targets":[{"name":..,"execs":..,"crashes":..},...]}.
# Exit status 1 if any target crashed.
#
# The corpus each target runs on is a copy of fuzz/corpus/<target> in the
# build folder (new inputs found go there, the committed seeds stay small).
# --seeds regenerates fuzz/corpus/ from the project's own code (make_seeds).
#
# Environment: TS_FUZZ_BUILD_DIR (default build-fuzz), TS_FUZZ_ARGS (extra
# libFuzzer flags, e.g. -max_len=4096). Packages (clang with its fuzzer and
# sanitizer runtimes, ccache) are installed when missing (needs root).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ALL_TARGETS=(wire worker fragment tsqm onnx tfjs testbed image)
SECONDS_PER=""
RUNS=""
JSON=0
SEEDS=0
JOBS=""
TARGETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER="${2:-}"; shift 2 ;;
    --runs) RUNS="${2:-}"; shift 2 ;;
    --json) JSON=1; shift ;;
    --target) TARGETS+=("${2:-}"); shift 2 ;;
    --seeds) SEEDS=1; shift ;;
    --jobs) JOBS="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n "$RUNS" ]]; then
  [[ -z "$SECONDS_PER" && $SEEDS -eq 0 ]] || { echo "fuzz.sh: --runs goes without --seconds and --seeds" >&2; exit 2; }
  [[ "$RUNS" =~ ^[1-9][0-9]{0,8}$ ]] || { echo "fuzz.sh: --runs needs a whole number of inputs >= 1" >&2; exit 2; }
elif [[ $SEEDS -eq 0 ]] && ! [[ "$SECONDS_PER" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds needs a whole number of seconds >= 1" >&2; exit 2
fi
if [[ -n "$JOBS" ]] && ! { [[ "$JOBS" =~ ^[1-9][0-9]?$ ]] && ((JOBS >= 2 && JOBS <= 64)); }; then
  echo "fuzz.sh: --jobs needs a whole number of processes from 2 to 64" >&2; exit 2
fi
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${ALL_TARGETS[*]})" >&2; exit 2; }
done
BUILD="${TS_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"

# ---- packages: Debian's clang 14 with libFuzzer and the sanitizer runtimes
need=()
command -v clang++ >/dev/null || need+=(clang)
[[ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ]] || need+=(libclang-rt-14-dev)
command -v ccache >/dev/null || need+=(ccache)
if [[ ${#need[@]} -gt 0 ]]; then
  [[ $EUID -eq 0 ]] || { echo "fuzz.sh: missing packages ${need[*]} (run as root to install them)" >&2; exit 1; }
  echo "fuzz.sh: installing ${need[*]}" >&2
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
         { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"; }; } \
       >"${TMPDIR:-/tmp}/tinysplit-fuzz-apt.log" 2>&1; then
    tail -n 20 "${TMPDIR:-/tmp}/tinysplit-fuzz-apt.log" >&2
    echo "fuzz.sh: could not install ${need[*]}" >&2; exit 1
  fi
fi

# ---- build (incremental; ccache shared with other builds when present)
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.ccache}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log="$BUILD/fuzz-build.log"
mkdir -p "$BUILD"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  if ! CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DTINYSPLIT_FUZZ=ON -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$log" 2>&1; then
    tail -n 30 "$log" >&2; echo "fuzz.sh: configuring the fuzz build failed (log: $log)" >&2; exit 1
  fi
fi
if ! cmake --build "$BUILD" -j "${TS_JOBS:-2}" --target fuzz_all >>"$log" 2>&1; then
  grep -m 20 -A 5 "error" "$log" >&2 || tail -n 30 "$log" >&2
  echo "fuzz.sh: building the fuzz targets failed (log: $log)" >&2; exit 1
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

if [[ $SEEDS -eq 1 ]]; then
  rm -rf "$ROOT/fuzz/corpus"
  ASAN_OPTIONS=detect_leaks=0 "$BUILD/fuzz/make_seeds" "$ROOT/fuzz/corpus"
  echo "fuzz.sh: wrote $(find "$ROOT/fuzz/corpus" -type f | wc -l) seeds to fuzz/corpus" >&2
  [[ -n "$SECONDS_PER" ]] || exit 0
fi

# ---- run
any_crash=0
results=()
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  art="$BUILD/artifacts/$t"
  mkdir -p "$art"
  if [[ -n "$RUNS" ]]; then
    # A fresh copy of the committed seeds, nothing the earlier runs found.
    corpus="$BUILD/corpus-runs/$t"
    rm -rf "$corpus"
    limit=(-runs="$RUNS")
    [[ -n "$JOBS" ]] || limit+=(-seed=1)
  else
    limit=(-max_total_time="$SECONDS_PER")
  fi
  [[ -z "$JOBS" ]] || limit+=(-fork="$JOBS")
  mkdir -p "$corpus"
  cp -n "$ROOT/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  out="$BUILD/fuzz-$t.log"
  set +e
  # shellcheck disable=SC2086
  "$BUILD/fuzz/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$art/" ${TS_FUZZ_ARGS:-} "$corpus" >"$out" 2>&1
  rc=$?
  set -e
  execs="$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$' || true)"
  if [[ -z "$execs" ]]; then  # no final stats (killed): the last status line
    execs="$(grep -o '^#[0-9]*' "$out" | tail -n 1 | tr -d '#' || true)"
  fi
  execs="${execs:-0}"
  crashes=0
  if [[ $rc -ne 0 ]]; then
    crashes=1
    any_crash=1
    echo "fuzz.sh: $t crashed (exit $rc); input saved in $art/, log $out:" >&2
    grep -m 12 -E "ERROR|check failed|runtime error|SUMMARY|Test unit written" "$out" >&2 || tail -n 20 "$out" >&2
  fi
  results+=("$t $execs $crashes")
  [[ $JSON -eq 1 ]] || printf '%-10s execs %12s  crashes %d\n' "$t" "$execs" "$crashes"
done
if [[ $JSON -eq 1 ]]; then
  printf '{"targets":['
  sep=""
  for r in "${results[@]}"; do
    read -r n e c <<<"$r"
    printf '%s{"name":"%s","execs":%s,"crashes":%s}' "$sep" "$n" "$e" "$c"
    sep=","
  done
  printf ']}\n'
fi
exit $any_crash
