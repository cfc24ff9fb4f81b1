#!/usr/bin/env bash
# int8 inference latency, single thread: tinysplit's run_int8 against ONNX Runtime (CPU provider,
# QDQ model fused into its int8 kernels) on the same quantised MobileNetV2, the same input and the
# same machine, in one run. Prints a table at input sizes 112 and 224.
#
#   bash scripts/bench.sh [--rounds N] [--runs N] [--build-dir DIR] [--out DIR] [--json] [--write-docs]
#                         [--avx2-only]
#
#   --rounds N      alternate ours / ORT N times (default 3); figures pool all rounds
#   --runs N        ORT timed runs per round and model (default 100; 20 warm-up runs first)
#   --build-dir DIR C++ build folder (default build-bench; configured Release if new)
#   --out DIR       where the exported models, raw results and summary go (default DIR/bench-out)
#   --json          print the summary as JSON instead of the table
#   --write-docs    also rewrite the results block of docs/benchmarks.md (the only tracked file
#                   this script ever writes, and only when asked; not with --avx2-only)
#   --avx2-only     both sides limited to AVX2 on a CPU that has AVX-512 (issue 24's AVX2 bar):
#                   ours with TS_KERNELS=avx2, ONNX Runtime's node with scripts/bench/cpuid_avx2.c
#                   preloaded, which traps CPUID (Linux CPUID faulting) and hides AVX-512,
#                   AVX-VNNI and AMX from it, so MLAS picks its AVX2 kernels. Stops with one line
#                   if the kernel or CPU cannot trap CPUID. x86-64 Linux only.
#
# Needs models/mobilenetv2 and data/ (scripts/setup.sh) and node; installs onnxruntime-node into
# scripts/bench/node_modules from the lock file on first use. Builds only int8_bench.
#
# Time: ours is Google Benchmark's per-iteration time; ORT's is the time of each session.run.
# Both are reported as wall-clock and as CPU time of the process; on a machine shared with other
# work the CPU times are the fair comparison (wall time then also counts waiting for a core).
# The summary's "isa" says which instruction sets each side was allowed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-bench"
OUT=""
ROUNDS=3
RUNS=100
JSON=0
WRITE_DOCS=0
AVX2_ONLY=0
JOBS="${TS_JOBS:-2}"

die() { echo "bench: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) need_value "$@"; ROUNDS="$2"; shift 2 ;;
    --runs) need_value "$@"; RUNS="$2"; shift 2 ;;
    --build-dir) need_value "$@"; BUILD="$(realpath -m "$2")"; shift 2 ;;
    --out) need_value "$@"; OUT="$(realpath -m "$2")"; shift 2 ;;
    --json) JSON=1; shift ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    --avx2-only) AVX2_ONLY=1; shift ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"
if [[ $AVX2_ONLY == 1 ]]; then
  [[ $WRITE_DOCS == 0 ]] || die "--write-docs records the native run; not with --avx2-only"
  [[ -z "${TS_KERNELS:-}" || "$TS_KERNELS" == avx2 ]] || die "--avx2-only runs ours with TS_KERNELS=avx2, not TS_KERNELS=$TS_KERNELS"
  [[ "$(uname -m)" == x86_64 ]] || die "--avx2-only needs an x86-64 Linux machine"
fi
OUT="${OUT:-$BUILD/bench-out}"
command -v node >/dev/null || die "node is not installed (scripts/setup.sh installs it)"
[[ -f "$ROOT/models/mobilenetv2/model.json" ]] || die "models/mobilenetv2 is missing; run scripts/setup.sh first"

log() { if [[ $JSON == 0 ]]; then echo "bench: $*"; else echo "bench: $*" >&2; fi; }

# ---- build (only the benchmark)
log "building int8_bench in $BUILD"
mkdir -p "$OUT"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 || { cat "$OUT/cmake.log" >&2; die "cmake configure failed"; }
fi
cmake --build "$BUILD" --target int8_bench -j "$JOBS" >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log" >&2; die "build failed (log: $OUT/build.log)"; }
BENCH="$BUILD/int8_bench"

# ---- --avx2-only: the CPUID-masking preload for ONNX Runtime's node, checked before use
ORT_PRELOAD=()
NODE_FLAGS=()
if [[ $AVX2_ONLY == 1 ]]; then
  command -v gcc >/dev/null || die "--avx2-only needs gcc (to build scripts/bench/cpuid_avx2.c)"
  mkdir -p "$BUILD/cpuid_avx2"
  gcc -O2 -Wall -shared -fPIC -o "$BUILD/cpuid_avx2/cpuid_avx2.so" "$ROOT/scripts/bench/cpuid_avx2.c" \
    && gcc -O2 -Wall -pthread -o "$BUILD/cpuid_avx2/cpuid_probe" "$ROOT/scripts/bench/cpuid_probe.c" \
    || die "--avx2-only: compiling scripts/bench/cpuid_avx2.c or cpuid_probe.c failed"
  "$BUILD/cpuid_avx2/cpuid_probe" >"$OUT/cpuid_native.txt" 2>&1 || true
  probe_rc=0
  LD_PRELOAD="$BUILD/cpuid_avx2/cpuid_avx2.so" "$BUILD/cpuid_avx2/cpuid_probe" --expect-avx2-only \
    >"$OUT/cpuid_masked.txt" 2>&1 || probe_rc=$?
  if [[ $probe_rc != 0 ]]; then
    why="$(tail -n 1 "$OUT/cpuid_masked.txt")"
    die "--avx2-only: CPUID cannot be masked here: ${why:-cpuid_probe under the preload exited with status $probe_rc}"
  fi
  ORT_PRELOAD=(env LD_PRELOAD="$BUILD/cpuid_avx2/cpuid_avx2.so" CPUID_AVX2_LOG=1)
  # node's WebAssembly trap handler takes SIGSEGV over and does not hand unknown faults on to
  # the handler before it (the first trapped CPUID would then kill node); the benchmark runs
  # no WebAssembly.
  NODE_FLAGS=(--disable-wasm-trap-handler)
  export TS_KERNELS=avx2
  log "avx2-only: ours with TS_KERNELS=avx2; ONNX Runtime's node under cpuid_avx2.so ($(sed -n 1p "$OUT/cpuid_masked.txt"))"
fi

# ---- ONNX Runtime for node (its CPU binary ships inside the npm package; nothing is downloaded
# by its install script with ONNXRUNTIME_NODE_INSTALL=skip)
ORT_DIR="$ROOT/scripts/bench"
if ! (cd "$ORT_DIR" && node -e "require('onnxruntime-node')" >/dev/null 2>&1); then
  log "installing onnxruntime-node (npm ci in scripts/bench)"
  (cd "$ORT_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >"$OUT/npm.log" 2>&1) \
    || { tail -n 20 "$OUT/npm.log" >&2; die "npm ci failed (log: $OUT/npm.log)"; }
fi

# ---- export: QDQ models (int8 and uint8 activations), the default photo's input, our outputs
log "exporting the quantised models to ONNX ($OUT/export)"
rm -rf "$OUT/export"
"$BENCH" --ts_export="$OUT/export" >"$OUT/export.log" 2>&1 || { cat "$OUT/export.log" >&2; die "export failed"; }

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r/$ROUNDS: tinysplit run_int8"
  "$BENCH" --benchmark_filter='^BM_Int8/(112|224)$' --benchmark_repetitions=5 --benchmark_min_time=0.5 \
    --benchmark_format=json --benchmark_out="$OUT/ours_r$r.json" --benchmark_out_format=json >/dev/null 2>"$OUT/ours_r$r.log" \
    || { cat "$OUT/ours_r$r.log" >&2; die "int8_bench failed"; }
  if grep -q '^TS_KERNELS=' "$OUT/ours_r$r.log"; then die "int8_bench: $(grep -m1 '^TS_KERNELS=' "$OUT/ours_r$r.log")"; fi
  for size in 112 224; do
    for act in u8 s8; do
      log "round $r/$ROUNDS: ONNX Runtime, $size, ${act} activations"
      check=()
      [[ $r == 1 ]] && check=(--check-dir "$OUT/export/$size/check")
      "${ORT_PRELOAD[@]}" node "${NODE_FLAGS[@]}" "$ORT_DIR/ort_bench.js" --model "$OUT/export/$size/model_$act.onnx" --input "$OUT/export/$size/input.bin" \
        --expect "$OUT/export/$size/ours.bin" "${check[@]}" --runs "$RUNS" --int8-allowed 1 \
        >"$OUT/ort_${size}_${act}_r$r.json" 2>"$OUT/ort_${size}_${act}_r$r.log" \
        || { cat "$OUT/ort_${size}_${act}_r$r.log" >&2; die "ort_bench failed"; }
      if [[ $AVX2_ONLY == 1 ]] && ! grep -q '^cpuid_avx2: pid [0-9]* answered [1-9]' "$OUT/ort_${size}_${act}_r$r.log"; then
        die "--avx2-only: ONNX Runtime's node ran without its CPUID instructions being trapped"
      fi
    done
  done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---- summary
CPU_MODEL="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
CXX_VERSION="$( (c++ --version 2>/dev/null || true) | head -n 1)"
CPU_FLAGS="$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -n 1 | tr ' ' '\n' \
  | grep -E '^(avx|avx2|fma|avx512.*|avx_vnni.*|amx.*)$' | tr '\n' ' ' | sed 's/ $//')" || true
if [[ $AVX2_ONLY == 1 ]]; then
  ISA="avx2 (ours: TS_KERNELS=avx2; AVX-512, AVX-VNNI and AMX hidden from ONNX Runtime by CPUID faulting)"
elif [[ -n "${TS_KERNELS:-}" ]]; then
  ISA="ours: TS_KERNELS=$TS_KERNELS; ONNX Runtime: every instruction set the CPU reports"
else
  ISA="native (each side picks its kernels from the CPU's features)"
fi
export OUT ROUNDS RUNS CPU_MODEL CXX_VERSION LOAD_BEFORE LOAD_AFTER CPU_FLAGS ISA
export NPROC="$(nproc)"
node - "$JSON" >"$OUT/summary.txt" <<'EOF'
const fs = require('fs');
const path = require('path');
const env = process.env;
const out = env.OUT;
const rounds = Number(env.ROUNDS);
const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const read = (f) => JSON.parse(fs.readFileSync(path.join(out, f), 'utf8'));
const summary = { isa: env.ISA, machine: { cpu: env.CPU_MODEL, cpu_flags: env.CPU_FLAGS, cores: Number(env.NPROC),
  load_before: env.LOAD_BEFORE, load_after: env.LOAD_AFTER, compiler: env.CXX_VERSION, threads: 1 }, rounds,
  ort_runs_per_round: Number(env.RUNS), sizes: {} };
for (const size of [112, 224]) {
  const wall = [], cpu = [];
  for (let r = 1; r <= rounds; ++r) {
    for (const b of read(`ours_r${r}.json`).benchmarks) {
      if (b.run_type !== 'iteration' || b.name !== `BM_Int8/${size}`) continue;
      wall.push(b.real_time); cpu.push(b.cpu_time);  // milliseconds (the benchmark's unit)
    }
  }
  const s = { ours: { wall_median_ms: median(wall), wall_min_ms: Math.min(...wall), cpu_median_ms: median(cpu), cpu_min_ms: Math.min(...cpu), repetitions: wall.length } };
  for (const act of ['u8', 's8']) {
    const rs = [];
    for (let r = 1; r <= rounds; ++r) rs.push(read(`ort_${size}_${act}_r${r}.json`));
    s[`ort_${act}`] = {
      wall_median_ms: median(rs.map((x) => x.median_ms)), wall_min_ms: Math.min(...rs.map((x) => x.min_ms)),
      cpu_median_ms: median(rs.map((x) => x.cpu_median_ms)), cpu_min_ms: Math.min(...rs.map((x) => x.cpu_min_ms)),
      ort_version: rs[0].ort_version, kernels: rs[0].kernels, agreement: rs[0].check || rs[0].agreement,
    };
  }
  const best = s.ort_u8.cpu_median_ms <= s.ort_s8.cpu_median_ms ? 'u8' : 's8';
  s.ort_best = best;
  s.ratio_cpu = s.ours.cpu_median_ms / s[`ort_${best}`].cpu_median_ms;
  s.ratio_wall = s.ours.wall_median_ms / s[`ort_${best}`].wall_median_ms;
  summary.sizes[size] = s;
}
fs.writeFileSync(path.join(out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
if (process.argv[2] === '1') { process.stdout.write(JSON.stringify(summary) + '\n'); process.exit(0); }
const f = (x) => x.toFixed(x < 10 ? 2 : 1);
const lines = [];
lines.push(`| input | ours wall ms | ours CPU ms | ORT wall ms | ORT CPU ms | ours / ORT (CPU) | ours / ORT (wall) |`);
lines.push(`|---|---|---|---|---|---|---|`);
for (const size of [112, 224]) {
  const s = summary.sizes[size];
  const o = s[`ort_${s.ort_best}`];
  lines.push(`| ${size}x${size} | ${f(s.ours.wall_median_ms)} | ${f(s.ours.cpu_median_ms)} | ${f(o.wall_median_ms)} | ${f(o.cpu_median_ms)} | ${s.ratio_cpu.toFixed(1)}x | ${s.ratio_wall.toFixed(1)}x |`);
}
lines.push('');
for (const size of [112, 224]) {
  const s = summary.sizes[size];
  const other = s.ort_best === 'u8' ? 's8' : 'u8';
  lines.push(`${size}: ORT figures are its faster layout, ${s.ort_best === 'u8' ? 'uint8' : 'int8'} activations; ` +
    `with ${other === 'u8' ? 'uint8' : 'int8'} activations it took ${f(s[`ort_${other}`].cpu_median_ms)} ms CPU.`);
  const a = s[`ort_${s.ort_best}`].agreement;
  if (a) lines.push(`${size}: outputs vs run_int8 over ${a.inputs} photos: ${a.differing} of ${a.values} logits differ ` +
    `(|diff| histogram ${JSON.stringify(a.abs_diff_histogram)}, max ${a.max_abs_diff} steps); same top class on ${a.same_argmax}/${a.inputs}.`);
}
const m = summary.machine;
lines.push('');
lines.push(`Medians over ${rounds} alternating rounds (ours: 5 repetitions per round; ORT: ${env.RUNS} runs per round after 20 warm-up), single thread.`);
lines.push(`Instruction sets: ${summary.isa}; the CPU reports ${m.cpu_flags}.`);
lines.push(`Machine: ${m.cpu}, ${m.cores} cores; load average ${m.load_before} before, ${m.load_after} after; ${m.compiler}; ONNX Runtime ${summary.sizes[224].ort_u8.ort_version} (onnxruntime-node, CPU provider).`);
process.stdout.write(lines.join('\n') + '\n');
EOF
cat "$OUT/summary.txt"

if [[ $WRITE_DOCS == 1 ]]; then
  DOC="$ROOT/docs/benchmarks.md"
  grep -q '<!-- bench:begin -->' "$DOC" && grep -q '<!-- bench:end -->' "$DOC" || die "$DOC has no <!-- bench:begin/end --> block"
  {
    sed -n '1,/<!-- bench:begin -->/p' "$DOC"
    echo "Generated by \`bash scripts/bench.sh --write-docs\` on $(date -u +%Y-%m-%d)."
    echo
    cat "$OUT/summary.txt"
    sed -n '/<!-- bench:end -->/,$p' "$DOC"
  } >"$OUT/benchmarks.md.new"
  mv "$OUT/benchmarks.md.new" "$DOC"
  log "updated $DOC"
fi
log "raw results in $OUT"
