#!/usr/bin/env node
// Latency of an int8 ONNX model on ONNX Runtime's CPU provider, single thread,
// for tinysplit's comparison (scripts/bench.sh). Prints one JSON object:
//   {median_ms, mean_ms, min_ms, max_ms, runs, warmup, ort_version, model,
//    input_type, int8_allowed, kernels, outputs, agreement?}
// `outputs` are the raw quantised outputs in tinysplit's int8 encoding (a
// uint8 model's values are shifted back by 128); `kernels` counts the op
// types of the graph ONNX Runtime actually runs (after its QDQ fusion), which
// shows whether it ran int8 kernels (QLinearConv, QGemm, ...) or float ones.
//
// Usage:
//   node ort_bench.js --model M.onnx --input in.bin [--expect ours.bin]
//                     [--check-dir DIR] [--warmup 20] [--runs 100]
//                     [--int8-allowed 0|1]
// in.bin holds the quantised input as int8 bytes (C-H-W, batch 1), exactly
// what tinysplit's run_int8 consumes; ours.bin holds run_int8's output bytes.
// --check-dir compares the output of every DIR/input_K.bin with DIR/ours_K.bin.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

function usage(msg) {
  if (msg) process.stderr.write(`ort_bench: ${msg}\n`);
  process.stderr.write(
    'usage: node ort_bench.js --model M.onnx --input in.bin [--expect ours.bin] ' +
      '[--check-dir DIR] [--warmup N] [--runs N] [--int8-allowed 0|1]\n',
  );
  process.exit(msg ? 2 : 0);
}

function parseArgs(argv) {
  const a = { warmup: 20, runs: 100, int8Allowed: '1' };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      return argv[++i];
    };
    if (k === '--model') a.model = v();
    else if (k === '--input') a.input = v();
    else if (k === '--expect') a.expect = v();
    else if (k === '--check-dir') a.checkDir = v();
    else if (k === '--warmup') a.warmup = Number(v());
    else if (k === '--runs') a.runs = Number(v());
    else if (k === '--int8-allowed') a.int8Allowed = v();
    else if (k === '--help' || k === '-h') usage();
    else usage(`unknown argument '${k}'`);
  }
  if (!a.model || !a.input) usage('--model and --input are required');
  if (!(Number.isInteger(a.runs) && a.runs > 0 && Number.isInteger(a.warmup) && a.warmup >= 0))
    usage('--runs must be a positive integer and --warmup a non-negative one');
  if (a.int8Allowed !== '0' && a.int8Allowed !== '1') usage('--int8-allowed takes 0 or 1');
  return a;
}

// ---- A minimal protobuf reader: just enough of onnx.proto to list the
// graph's nodes and the input's element type.
// ModelProto.graph = 7; GraphProto.node = 1, input = 11; NodeProto.op_type = 4,
// domain = 7; ValueInfoProto.type = 2; TypeProto.tensor_type = 1;
// TypeProto.Tensor.elem_type = 1.
function* fields(buf, start = 0, end = buf.length) {
  let p = start;
  const varint = () => {
    let r = 0n;
    let shift = 0n;
    for (;;) {
      if (p >= end) throw new Error('truncated protobuf');
      const b = buf[p++];
      r |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return r;
      shift += 7n;
    }
  };
  while (p < end) {
    const key = Number(varint());
    const field = key >>> 3;
    const wire = key & 7;
    if (wire === 0) yield { field, value: varint() };
    else if (wire === 1) { yield { field, start: p, end: p + 8 }; p += 8; }
    else if (wire === 5) { yield { field, start: p, end: p + 4 }; p += 4; }
    else if (wire === 2) {
      const len = Number(varint());
      yield { field, start: p, end: p + len };
      p += len;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
}
function sub(buf, f, fieldNo) {
  for (const g of fields(buf, f.start, f.end)) if (g.field === fieldNo) return g;
  return null;
}
function describeModel(buf) {
  const out = { ops: {}, inputElemType: null };
  for (const f of fields(buf)) {
    if (f.field !== 7) continue;
    for (const g of fields(buf, f.start, f.end)) {
      if (g.field === 1) {
        let op = '';
        let domain = '';
        for (const h of fields(buf, g.start, g.end)) {
          if (h.field === 4) op = buf.toString('utf8', h.start, h.end);
          if (h.field === 7) domain = buf.toString('utf8', h.start, h.end);
        }
        const key = domain && domain !== 'ai.onnx' ? `${domain}.${op}` : op;
        out.ops[key] = (out.ops[key] || 0) + 1;
      } else if (g.field === 11 && out.inputElemType === null) {
        const type = sub(buf, g, 2);
        const tensor = type && sub(buf, type, 1);
        if (tensor) for (const h of fields(buf, tensor.start, tensor.end)) if (h.field === 1) out.inputElemType = Number(h.value);
      }
    }
  }
  return out;
}

const ELEM_INT8 = 3;
const ELEM_UINT8 = 2;

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  const mean = s.reduce((x, y) => x + y, 0) / s.length;
  return { median_ms: median, mean_ms: mean, min_ms: s[0], max_ms: s[s.length - 1] };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    process.stderr.write(`ort_bench: onnxruntime-node is not installed (cd scripts/bench && npm ci): ${e.message}\n`);
    process.exit(1);
  }
  const modelBytes = fs.readFileSync(args.model);
  const info = describeModel(modelBytes);
  if (info.inputElemType !== ELEM_INT8 && info.inputElemType !== ELEM_UINT8)
    throw new Error(`model input must be int8 or uint8 (elem_type ${info.inputElemType})`);
  const shift = info.inputElemType === ELEM_UINT8 ? 128 : 0;

  // ONNX Runtime writes the graph it will run (after fusion) here.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_bench-'));
  const optimizedPath = path.join(tmp, 'optimized.onnx');
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    optimizedModelFilePath: optimizedPath,
    logSeverityLevel: 3,  // its warning about saving an optimised model is expected
    // On x86, ONNX Runtime fuses QDQ groups with int8 (not uint8) activations
    // only when this is set; without it such a model runs its convolutions in
    // float. It changes nothing for a uint8 model.
    extra: { session: { qdqisint8allowed: args.int8Allowed } },
  });
  const kernels = fs.existsSync(optimizedPath) ? describeModel(fs.readFileSync(optimizedPath)).ops : null;
  fs.rmSync(tmp, { recursive: true, force: true });

  const inputName = session.inputNames[0];
  const outputName = session.outputNames[0];
  // The model's input is [1, C, H, W]; the shape is recovered from the byte
  // count with the square RGB image tinysplit feeds (C = 3).
  const toFeeds = (bytes) => {
    const hw = Math.round(Math.sqrt(bytes.length / 3));
    if (3 * hw * hw !== bytes.length) throw new Error(`input of ${bytes.length} bytes is not 3 x S x S`);
    let data;
    if (shift) {
      data = new Uint8Array(bytes.length);
      for (let i = 0; i < bytes.length; ++i) data[i] = ((bytes[i] << 24) >> 24) + 128;
    } else {
      data = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length);
    }
    return { [inputName]: new ort.Tensor(shift ? 'uint8' : 'int8', data, [1, 3, hw, hw]) };
  };
  const ours8 = (r) => Array.from(r[outputName].data, (v) => Number(v) - shift);
  const feeds = toFeeds(fs.readFileSync(args.input));

  let result;
  for (let i = 0; i < args.warmup; ++i) result = await session.run(feeds);
  const ms = [];
  const cpu = [];
  for (let i = 0; i < args.runs; ++i) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    result = await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const dc = process.cpuUsage(c0);
    cpu.push((dc.user + dc.system) / 1e3);
  }
  const outputs = ours8(result);
  const cpuStats = stats(cpu);

  const report = {
    ...stats(ms),
    cpu_median_ms: cpuStats.median_ms,
    cpu_min_ms: cpuStats.min_ms,
    runs: args.runs,
    warmup: args.warmup,
    ort_version: ort.env.versions ? ort.env.versions.node || ort.env.versions.common : 'unknown',
    model: path.basename(args.model),
    input_type: shift ? 'uint8' : 'int8',
    int8_allowed: args.int8Allowed === '1',
    kernels,
    outputs,
  };
  if (args.expect) {
    const ours = Array.from(new Int8Array(fs.readFileSync(args.expect)));
    report.agreement = compare([{ ours, theirs: outputs }]);
  }
  if (args.checkDir) {
    // Every DIR/input_K.bin against run_int8's DIR/ours_K.bin.
    const pairs = [];
    const names = fs.readdirSync(args.checkDir).filter((f) => /^input_\d+\.bin$/.test(f));
    for (const f of names.sort()) {
      const k = f.match(/\d+/)[0];
      const ours = Array.from(new Int8Array(fs.readFileSync(path.join(args.checkDir, `ours_${k}.bin`))));
      const theirs = ours8(await session.run(toFeeds(fs.readFileSync(path.join(args.checkDir, f)))));
      pairs.push({ ours, theirs });
    }
    report.check = compare(pairs);
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

// Agreement of quantised outputs over several inputs: how many values differ,
// by how much (histogram of |difference|), and whether the top class agrees.
function compare(pairs) {
  const r = { inputs: 0, values: 0, differing: 0, max_abs_diff: 0, abs_diff_histogram: {}, identical_inputs: 0, same_argmax: 0 };
  for (const { ours, theirs } of pairs) {
    if (ours.length !== theirs.length) throw new Error(`output sizes differ: ours ${ours.length}, ORT ${theirs.length}`);
    let same = true;
    for (let i = 0; i < ours.length; ++i) {
      const d = Math.abs(ours[i] - theirs[i]);
      r.abs_diff_histogram[d] = (r.abs_diff_histogram[d] || 0) + 1;
      if (d) {
        r.differing += 1;
        same = false;
      }
      r.max_abs_diff = Math.max(r.max_abs_diff, d);
    }
    r.inputs += 1;
    r.values += ours.length;
    if (same) r.identical_inputs += 1;
    if (argmax(ours) === argmax(theirs)) r.same_argmax += 1;
  }
  return r;
}

function argmax(v) {
  let k = 0;
  for (let i = 1; i < v.length; ++i) if (v[i] > v[k]) k = i;
  return k;
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e.message}\n`);
  process.exit(1);
});
