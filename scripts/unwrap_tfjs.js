#!/usr/bin/env node
// Turns the JavaScript-wrapped TF.js model shipped inside the nsfwjs npm package
// into a plain TF.js layers model on disk (model.json + one binary weight shard).
//
//   node scripts/unwrap_tfjs.js <package model dir> <out dir>
//       reads  <package model dir>/model.min.js              (UMD module whose export is the model.json object)
//              <package model dir>/group1-shard1of1.min.js   (UMD module whose export is the shard as base64)
//       writes <out dir>/model.json, <out dir>/group1-shard1of1.bin, <out dir>/labels.txt
//   node scripts/unwrap_tfjs.js --verify <out dir>
//       checks an unwrapped model (exit 0 when valid, 1 with one line on stderr otherwise)
//
// The wrapped files are evaluated in an empty vm context that only offers a CommonJS
// `module`/`exports` pair. This works whatever the surrounding package.json says about
// module types, and the code never sees node's globals.
'use strict';

const fs = require('fs');
const path = require('path');
const vm = require('vm');

const SHARD_NAME = 'group1-shard1of1.bin';
// Class order of the nsfwjs models (index of the softmax output).
const LABELS = ['Drawing', 'Hentai', 'Neutral', 'Porn', 'Sexy'];
// Bytes per stored element, by the dtype that is actually written in the shard.
const DTYPE_BYTES = {uint8: 1, int8: 1, uint16: 2, int16: 2, float16: 2, float32: 4, int32: 4, bool: 1};

function die(msg) {
  process.stderr.write(`unwrap_tfjs: ${msg}\n`);
  process.exit(1);
}

function evalUmd(file) {
  const code = fs.readFileSync(file, 'utf8');
  const mod = {exports: {}};
  vm.runInNewContext(code, {module: mod, exports: mod.exports}, {filename: file, timeout: 60000});
  return mod.exports;
}

// Bytes a manifest says the shard(s) must hold, or throws with the reason.
function expectedBytes(manifest) {
  if (!Array.isArray(manifest) || manifest.length === 0) throw new Error('weightsManifest is empty');
  let total = 0;
  for (const group of manifest) {
    if (!Array.isArray(group.weights)) throw new Error('weightsManifest group without weights');
    for (const w of group.weights) {
      if (!Array.isArray(w.shape)) throw new Error(`weight ${w.name} has no shape`);
      const count = w.shape.reduce((a, b) => a * b, 1);
      const stored = w.quantization ? w.quantization.dtype : w.dtype;
      const size = DTYPE_BYTES[stored];
      if (!size) throw new Error(`weight ${w.name} has unsupported stored dtype ${stored}`);
      total += count * size;
    }
  }
  return total;
}

function summarise(manifest) {
  const byDtype = {};
  let n = 0;
  for (const g of manifest) {
    for (const w of g.weights) {
      const key = w.quantization ? `${w.dtype} stored as ${w.quantization.dtype}` : w.dtype;
      byDtype[key] = (byDtype[key] || 0) + 1;
      n += 1;
    }
  }
  return {tensors: n, byDtype};
}

function verify(outDir) {
  const modelPath = path.join(outDir, 'model.json');
  const binPath = path.join(outDir, SHARD_NAME);
  const labelsPath = path.join(outDir, 'labels.txt');
  for (const p of [modelPath, binPath, labelsPath]) {
    if (!fs.existsSync(p)) throw new Error(`missing ${p}`);
  }
  const model = JSON.parse(fs.readFileSync(modelPath, 'utf8'));
  if (!model.modelTopology || !model.weightsManifest) throw new Error(`${modelPath} lacks modelTopology or weightsManifest`);
  const paths = model.weightsManifest.flatMap((g) => g.paths);
  if (paths.length !== 1 || paths[0] !== SHARD_NAME) throw new Error(`${modelPath} must name exactly one shard, ${SHARD_NAME}`);
  const want = expectedBytes(model.weightsManifest);
  const have = fs.statSync(binPath).size;
  if (want !== have) throw new Error(`${binPath} has ${have} bytes, the manifest needs ${want}`);
  const labels = fs.readFileSync(labelsPath, 'utf8').trim().split('\n');
  if (labels.join(',') !== LABELS.join(',')) throw new Error(`${labelsPath} is not ${LABELS.join(',')}`);
  return {bytes: have, ...summarise(model.weightsManifest)};
}

function writeAtomic(file, data) {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, data);
  fs.renameSync(tmp, file);
}

function unwrap(srcDir, outDir) {
  const modelJs = path.join(srcDir, 'model.min.js');
  const shardJs = path.join(srcDir, 'group1-shard1of1.min.js');
  for (const p of [modelJs, shardJs]) {
    if (!fs.existsSync(p)) die(`missing ${p}`);
  }
  const model = evalUmd(modelJs);
  if (!model || !model.modelTopology || !Array.isArray(model.weightsManifest)) {
    die(`${modelJs} did not export an object with modelTopology and weightsManifest`);
  }
  if (model.weightsManifest.length !== 1) die(`expected one weight group, found ${model.weightsManifest.length}`);
  const shard = evalUmd(shardJs);
  if (typeof shard !== 'string' || shard.length === 0) die(`${shardJs} did not export a base64 string`);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(shard)) die(`${shardJs} exports a string that is not plain base64`);
  const bytes = Buffer.from(shard, 'base64');

  let want;
  try {
    want = expectedBytes(model.weightsManifest);
  } catch (e) {
    die(e.message);
  }
  if (bytes.length !== want) die(`decoded shard has ${bytes.length} bytes, the manifest needs ${want}`);

  const out = {
    format: 'layers-model',
    modelTopology: model.modelTopology,
    weightsManifest: [{paths: [SHARD_NAME], weights: model.weightsManifest[0].weights}],
  };
  fs.mkdirSync(outDir, {recursive: true});
  writeAtomic(path.join(outDir, SHARD_NAME), bytes);
  writeAtomic(path.join(outDir, 'labels.txt'), LABELS.join('\n') + '\n');
  // model.json last: its presence marks a complete unwrap.
  writeAtomic(path.join(outDir, 'model.json'), JSON.stringify(out));
  return verify(outDir);
}

function main(argv) {
  if (argv.length === 2 && argv[0] === '--verify') {
    try {
      const info = verify(argv[1]);
      process.stdout.write(JSON.stringify(info) + '\n');
    } catch (e) {
      die(e.message);
    }
    return;
  }
  if (argv.length !== 2 || argv[0].startsWith('-')) {
    process.stderr.write('usage: unwrap_tfjs.js <package model dir> <out dir>\n       unwrap_tfjs.js --verify <out dir>\n');
    process.exit(2);
  }
  let info;
  try {
    info = unwrap(argv[0], argv[1]);
  } catch (e) {
    die(e.message);
  }
  process.stdout.write(JSON.stringify(info) + '\n');
}

main(process.argv.slice(2));
