// Float executor against ONNX Runtime on one input tensor:
//   node scripts/bench/ort_float_check.js MODEL.onnx INPUT.npy OURS.npy
// INPUT.npy float32 [1,C,H,W] (what `tinysplit eval --input` takes), OURS.npy the float output
// `tinysplit eval --input INPUT.npy --save-output OURS.npy` wrote. Prints one JSON line: the max
// absolute difference, the map's range, and their ratio. Exit 1 if the ratio is above 1e-4.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// float32 little-endian .npy (version 1 or 2 header), as a Float32Array and its shape.
function readNpy(path) {
  const b = fs.readFileSync(path);
  if (b.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + hlen;
  const header = b.toString('latin1', major === 1 ? 10 : 12, start);
  if (!/'descr':\s*'<f4'/.test(header)) throw new Error(`${path}: not float32 little-endian`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + start, b.byteOffset + b.length));
  return { data, shape };
}

async function main() {
  const [model, input, ours] = process.argv.slice(2);
  if (!ours) throw new Error('usage: ort_float_check.js MODEL.onnx INPUT.npy OURS.npy');
  const x = readNpy(input);
  const y = readNpy(ours);
  const s = await ort.InferenceSession.create(model, { executionProviders: ['cpu'], graphOptimizationLevel: 'disabled' });
  const out = await s.run({ [s.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) });
  const r = out[s.outputNames[0]].data;
  if (r.length !== y.data.length) throw new Error(`sizes differ: onnxruntime ${r.length}, ours ${y.data.length}`);
  let diff = 0, lo = Infinity, hi = -Infinity;
  for (let i = 0; i < r.length; ++i) {
    diff = Math.max(diff, Math.abs(r[i] - y.data[i]));
    lo = Math.min(lo, r[i]);
    hi = Math.max(hi, r[i]);
  }
  const range = hi - lo;
  const ratio = range > 0 ? diff / range : diff;
  console.log(JSON.stringify({ elements: r.length, max_abs_diff: diff, map_min: lo, map_max: hi, ratio, ort: ort.env.versions ? ort.env.versions.common : undefined }));
  process.exit(ratio <= 1e-4 ? 0 : 1);
}

main().catch((e) => { console.error(`ort_float_check: ${e.message}`); process.exit(2); });
