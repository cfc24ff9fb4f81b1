#!/usr/bin/env node
// Float reference runner: evaluates a TF.js layers model with TensorFlow.js on its pure-JS CPU
// backend and prints the class probabilities as JSON. It is the independent float "truth" that
// tinysplit's own float executor is compared against.
//
//   node scripts/ref/tfjs_ref.js <model.json> <input.bin> <H> <W>
//   node scripts/ref/tfjs_ref.js <model.json> --batch <list.txt> <H> <W>
//
// input.bin: raw little-endian float32 in NHWC order, shape [1,H,W,3], already preprocessed
// (pixel / 255). With --batch, list.txt names one input.bin per line (blank lines and lines
// starting with # are skipped); the model is loaded once and one JSON line is printed per input,
// in list order, each with an extra "input" field holding the path.
//
// Output (stdout, one line per input):
//   {"probs":[p0,...,p4],"logits":[z0,...,z4]}
// probs is the model's own output (its last Dense layer ends in softmax). logits are the values
// of that Dense layer before the softmax, obtained by running a second output head with a linear
// activation and the same weights; they are null if the last layer is not Dense+softmax.
//
// Input size: the stored model declares batch_input_shape [null,224,224,3]; the runner rewrites it
// to [null,H,W,3]. Every layer of MobileNetV2 works at other sizes except the final
// AveragePooling2D (7x7 window, stride 7, 'valid'): at 224 it covers exactly the whole 7x7 map,
// at 112 the map is 3x3 and the layer cannot run. Rule: an AveragePooling2D whose window is
// larger than its input map is run as GlobalAveragePooling2D (the Flatten after it is dropped,
// being a no-op); any other pool runs as stored. So 224x224 runs the published model unchanged,
// and at 112 the head averages the whole 3x3 map. This agrees with tinysplit's TF.js importer,
// which takes any window covering the whole map as a global average (at 224 both are the same
// mean of 49 values). A note on stderr names each pool so replaced.
//
// Weights are read from the local files named by the manifest; nothing is fetched over a network.
'use strict';

// TF.js prints notices through console.log/console.warn; keep stdout for JSON only.
console.log = console.error;
console.warn = console.error;
console.info = console.error;

const fs = require('fs');
const path = require('path');

function die(msg, code = 1) {
  process.stderr.write(`tfjs_ref: ${msg}\n`);
  process.exit(code);
}

const USAGE =
  'usage: tfjs_ref.js <model.json> <input.bin> <H> <W>\n' +
  '       tfjs_ref.js <model.json> --batch <list.txt> <H> <W>\n' +
  'input.bin: little-endian float32 NHWC [1,H,W,3], pixel/255. Prints {"probs":[...],"logits":[...]} per input.\n';

function parseArgs(argv) {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const pos = [];
  let batch = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--batch') {
      if (i + 1 >= argv.length) die('--batch needs a list file', 2);
      batch = argv[++i];
    } else if (argv[i].startsWith('--')) {
      die(`unknown option ${argv[i]}`, 2);
    } else {
      pos.push(argv[i]);
    }
  }
  let modelPath, inputs, h, w;
  if (batch !== null) {
    if (pos.length !== 3) die(`wrong arguments\n${USAGE}`, 2);
    [modelPath, h, w] = pos;
    if (!fs.existsSync(batch)) die(`no such list file: ${batch}`);
    const base = path.dirname(path.resolve(batch));
    inputs = fs.readFileSync(batch, 'utf8').split('\n').map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => (path.isAbsolute(l) || fs.existsSync(l) ? l : path.join(base, l)));
    if (inputs.length === 0) die(`${batch} lists no inputs`);
  } else {
    if (pos.length !== 4) die(`wrong arguments\n${USAGE}`, 2);
    [modelPath, , h, w] = pos;
    inputs = [pos[1]];
  }
  const H = Number(h);
  const W = Number(w);
  if (!Number.isInteger(H) || !Number.isInteger(W) || H < 32 || W < 32) die(`H and W must be integers >= 32, got ${h} ${w}`, 2);
  return {modelPath, inputs, H, W, batch: batch !== null};
}

const DTYPE_BYTES = {uint8: 1, int8: 1, uint16: 2, int16: 2, float16: 2, float32: 4, int32: 4, bool: 1};
const specBytes = (s) => s.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[s.quantization ? s.quantization.dtype : s.dtype];

// Reads model.json and its shards from disk once.
function readModelFiles(modelPath) {
  if (!fs.existsSync(modelPath)) die(`no such model file: ${modelPath}`);
  let model;
  try {
    model = JSON.parse(fs.readFileSync(modelPath, 'utf8'));
  } catch (e) {
    die(`${modelPath} is not JSON: ${e.message}`);
  }
  if (!model.modelTopology || !Array.isArray(model.weightsManifest)) die(`${modelPath} lacks modelTopology or weightsManifest`);
  const dir = path.dirname(modelPath);
  const weightSpecs = [];
  const buffers = [];
  for (const group of model.weightsManifest) {
    for (const p of group.paths) {
      const f = path.join(dir, p);
      if (!fs.existsSync(f)) die(`weight shard ${f} is missing`);
      buffers.push(fs.readFileSync(f));
    }
    weightSpecs.push(...group.weights);
  }
  const data = Buffer.concat(buffers);
  const need = weightSpecs.reduce((a, s) => a + specBytes(s), 0);
  if (Number.isNaN(need)) die(`${modelPath}: a weight has an unsupported dtype`);
  if (need !== data.length) die(`weight shards hold ${data.length} bytes, the manifest needs ${need}`);
  return {model, weightSpecs, data};
}

// Builds what tf.io expects from an IOHandler's load(): the topology rewritten for an
// [null,H,W,3] input, the AveragePooling2D layers named in `globalPools` turned into
// GlobalAveragePooling2D, and an extra linear copy of a final Dense+softmax layer (the logits
// head) whose weights are copies of that layer's.
function artifacts(files, H, W, globalPools) {
  const topology = JSON.parse(JSON.stringify(files.model.modelTopology));
  const config = (topology.model_config || topology).config;
  if (!config || !Array.isArray(config.layers)) die('unsupported topology (no model_config.config.layers)');
  const layers = config.layers;
  let inputs = 0;
  for (const l of layers) {
    if (l.class_name === 'InputLayer') {
      const s = l.config.batch_input_shape;
      if (!Array.isArray(s) || s.length !== 4 || s[3] !== 3) die(`input layer ${l.name} is not NHWC with 3 channels`);
      l.config.batch_input_shape = [null, H, W, 3];
      inputs += 1;
    }
  }
  if (inputs !== 1) die(`expected one InputLayer, found ${inputs}`);

  const poolSizes = {};
  for (const l of layers) {
    if (l.class_name !== 'AveragePooling2D') continue;
    poolSizes[l.name] = l.config.pool_size;
    if (!globalPools.has(l.name)) continue;
    l.class_name = 'GlobalAveragePooling2D';
    l.config = {name: l.config.name, trainable: l.config.trainable, data_format: l.config.data_format || 'channels_last'};
    // The global pool already yields [N,C]; a Flatten right after it would be a no-op that
    // TF.js refuses (it wants rank >= 3), so drop it and feed its consumers from the pool.
    const flats = layers.filter((f) => f.class_name === 'Flatten' && f.inbound_nodes.length === 1 &&
      f.inbound_nodes[0].length === 1 && f.inbound_nodes[0][0][0] === l.name);
    for (const f of flats) {
      layers.splice(layers.indexOf(f), 1);
      for (const m of layers) {
        for (const node of m.inbound_nodes) for (const edge of node) if (edge[0] === f.name) edge[0] = l.name;
      }
      for (const o of config.output_layers) if (o[0] === f.name) o[0] = l.name;
    }
  }

  let weightSpecs = files.weightSpecs;
  let weightData = files.data;
  const outName = config.output_layers && config.output_layers.length === 1 ? config.output_layers[0][0] : null;
  const last = layers.find((l) => l.name === outName);
  if (last && last.class_name === 'Dense' && last.config.activation === 'softmax' &&
      weightSpecs.some((s) => s.name === `${last.name}/kernel`)) {
    const copy = JSON.parse(JSON.stringify(last));
    copy.name = `${last.name}__logits`;
    copy.config.name = copy.name;
    copy.config.activation = 'linear';
    layers.push(copy);
    config.output_layers.push([copy.name, 0, 0]);
    const extraSpecs = [];
    const extraBufs = [];
    let offset = 0;
    for (const s of weightSpecs) {
      const n = specBytes(s);
      if (s.name.startsWith(`${last.name}/`)) {
        extraSpecs.push({...s, name: copy.name + s.name.slice(last.name.length)});
        extraBufs.push(weightData.subarray(offset, offset + n));
      }
      offset += n;
    }
    weightSpecs = weightSpecs.concat(extraSpecs);
    weightData = Buffer.concat([weightData, ...extraBufs]);
  }
  return {
    modelTopology: topology,
    weightSpecs,
    weightData: weightData.buffer.slice(weightData.byteOffset, weightData.byteOffset + weightData.byteLength),
    format: files.model.format || 'layers-model',
    poolSizes,
  };
}

async function buildModel(tf, art, args) {
  const handler = {load: async () => art};
  try {
    return await tf.loadLayersModel(handler, {strict: true});
  } catch (e) {
    die(`could not build the model at ${args.H}x${args.W}: ${e.message}`);
  }
}

function readInput(file, H, W) {
  if (!fs.existsSync(file)) die(`no such input file: ${file}`);
  const buf = fs.readFileSync(file);
  const want = H * W * 3 * 4;
  if (buf.length !== want) die(`${file} has ${buf.length} bytes; [1,${H},${W},3] float32 needs ${want}`);
  const out = new Float32Array(H * W * 3);
  for (let i = 0; i < out.length; i++) out[i] = buf.readFloatLE(4 * i);
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const tf = require('@tensorflow/tfjs');
  if (!(await tf.setBackend('cpu'))) die('TF.js CPU backend is not available');
  await tf.ready();
  // The CPU backend prints a banner suggesting the native node backend on first use; skip it.
  if ('firstUse' in tf.backend()) tf.backend().firstUse = false;

  const files = readModelFiles(args.modelPath);
  // First build with every AveragePooling2D turned global (that builds at any input size) to
  // learn the map each pool sees. A pool whose window is larger than its map cannot run as
  // stored and stays a global average; the others are put back as stored and the model is
  // built again, so at 224x224 the published model runs unchanged.
  const allPools = new Set(Object.keys(artifacts(files, args.H, args.W, new Set()).poolSizes));
  let art = artifacts(files, args.H, args.W, allPools);
  let model = await buildModel(tf, art, args);
  const keepGlobal = new Set();
  for (const name of allPools) {
    const [, h, w] = model.getLayer(name).input.shape;
    const [kh, kw] = art.poolSizes[name];
    if (kh > h || kw > w) keepGlobal.add(name);
  }
  if (keepGlobal.size !== allPools.size) {
    model.dispose();
    art = artifacts(files, args.H, args.W, keepGlobal);
    model = await buildModel(tf, art, args);
  }
  for (const name of keepGlobal) {
    const [, h, w] = model.getLayer(name).input.shape;
    process.stderr.write(`tfjs_ref: ${name} (${art.poolSizes[name].join('x')} window) sees a ${h}x${w} map: run as a global average\n`);
  }

  for (const file of args.inputs) {
    const data = readInput(file, args.H, args.W);
    const outs = tf.tidy(() => {
      const x = tf.tensor4d(data, [1, args.H, args.W, 3], 'float32');
      const y = model.predict(x);
      return Array.isArray(y) ? y.map((t) => t.dataSync().slice()) : [y.dataSync().slice()];
    });
    const rec = {probs: Array.from(outs[0]), logits: outs.length > 1 ? Array.from(outs[1]) : null};
    if (args.batch) rec.input = file;
    process.stdout.write(JSON.stringify(rec) + '\n');
  }
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
