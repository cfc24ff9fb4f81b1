#include "model/qgraph.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/crc32.h"
#include "core/op.h"
#include "model/bytes.h"
#include "util/atomic_file.h"
#include "util/input_file.h"

namespace ts {

using core::QOp;

int32_t QNode::channels_with_data() const {
  const core::OpDef* d = core::op_def(op);
  return d && d->per_channel_data ? geo.out.c : 0;
}

int64_t QNode::bytes_per_channel() const {
  const int32_t c = channels_with_data();
  if (c == 0) return 0;
  // One channel's arrays as the op lays them out (core/op.h).
  const core::DataLayout one = core::op_def(op)->layout(geo, 1);
  return one.n[core::kWeights] + 4 * (one.n[core::kBias] + one.n[core::kMult] + one.n[core::kShift]) + one.n[core::kLut];
}

int64_t QNode::shared_bytes() const {
  if (channels_with_data()) return 0;
  return int64_t(lut.size()) + 4 * int64_t(mult.size() + shift.size());
}

core::LayerDesc QGraph::desc(int i) const {
  const QNode& n = nodes.at(i);
  core::LayerDesc d = n.geo;
  d.weights = n.weights.empty() ? nullptr : n.weights.data();
  d.bias = n.bias.empty() ? nullptr : n.bias.data();
  d.mult = n.mult.empty() ? nullptr : n.mult.data();
  d.shift = n.shift.empty() ? nullptr : n.shift.data();
  d.lut = n.lut.empty() ? nullptr : n.lut.data();
  d.oc_base = 0;
  return d;
}

namespace {

// Bounds a quantised layer must meet before the int8 kernels may run it (the
// kernels trust their descriptor; see core/layer.h and core/kernels.cpp): the
// common bounds and each op's own checks and data layout are the op table's
// (core/op.h), shared with the fragment reader; what is here is the model's
// own (operands agree with their tensors, a sound accumulator).
constexpr int64_t kMaxElems = int64_t(1) << 28;  // elements of one tensor
// A Conv/Gemm accumulator is bias + fan_in products (x - zp) * w with
// |x - zp| <= 255 and |w| <= 128, plus one product in flight (the flat
// convolution adds and removes edge taps); it must stay inside int32.
constexpr int64_t kMaxProduct = 255 * 128;

using core::in_i8;
using core::shift_ok;

// "what (field = value)" of a refusal from the op table.
std::string reason(const core::Why& w) {
  return std::string(w.what ? w.what : "bad field") + " (" + w.field + " = " + std::to_string(w.value) + ")";
}

// The data arrays against the op's layout (core/op.h) for the channels the
// node holds; "" if they agree.
std::string data_defect(const QNode& n, const core::OpDef& op) {
  const core::LayerDesc& g = n.geo;
  const int32_t C = n.channels_with_data();
  const core::DataLayout want = op.layout(g, C);
  auto size_is = [&](size_t have, int core_array) { return int64_t(have) == want.n[core_array]; };
  auto shifts_ok = [&]() {
    for (int32_t v : n.shift)
      if (!shift_ok(v)) return false;
    return true;
  };
  if (!size_is(n.weights.size(), core::kWeights)) return want.n[core::kWeights] ? "weights have the wrong size" : "unexpected weights";
  if (op.per_channel_data) {
    if (!size_is(n.bias.size(), core::kBias) || !size_is(n.mult.size(), core::kMult) || !size_is(n.shift.size(), core::kShift))
      return "per-channel data has the wrong size";
  } else {
    if (!size_is(n.bias.size(), core::kBias)) return "unexpected weights";
    if (!size_is(n.mult.size(), core::kMult) || !size_is(n.shift.size(), core::kShift))
      return want.n[core::kMult] ? "multiplier table has the wrong size" : "unexpected multiplier table";
  }
  if (!size_is(n.lut.size(), core::kLut)) return want.n[core::kLut] ? "lookup table has the wrong size" : "unexpected lookup table";
  if (!shifts_ok()) return op.per_channel_data ? "per-channel shift out of range" : "table shift out of range";
  if (C) {
    const int64_t per = want.n[core::kWeights] / C;  // fan-in
    const int64_t room = int64_t(INT32_MAX) - (per + 1) * kMaxProduct;
    if (room < 0) return "fan-in too large for int32 accumulation";
    for (int32_t b : n.bias)
      if (b > room || b < -room) return "bias too large for int32 accumulation";
  }
  return "";
}

// Everything about node n that the kernels rely on; returns the defect or "".
std::string node_defect(const QGraph& q, const QNode& n) {
  const core::LayerDesc& g = n.geo;
  const core::OpDef* op = core::op_def(n.op);
  if (!op || g.op != n.op) return "unknown op";
  if (n.inputs.empty() || n.inputs.size() > size_t(core::kMaxInputs) || int(n.inputs.size()) != g.n_inputs)
    return "bad input count";
  const core::Why b = core::desc_bounds(g);
  if (b.refused()) return reason(b);
  for (int k = 0; k < g.n_inputs; ++k)
    if (g.in_zp[k] != q.tensors[size_t(n.inputs[size_t(k)])].zp) return "bad input zero point";
  if (g.out_zp != q.tensors[size_t(n.output)].zp) return "bad output zero point";
  if (n.macs < 0) return "negative MAC count";
  core::Why w = op->check(g);
  if (!w.refused() && op->model_check) w = op->model_check(g);
  if (w.refused()) return reason(w);
  return data_defect(n, *op);
}

}  // namespace

void QGraph::link() {
  for (auto& t : tensors) {
    t.producer = -1;
    t.consumers.clear();
  }
  const int nt = int(tensors.size());
  if (input < 0 || input >= nt || output < 0 || output >= nt) throw Error("quantised model: bad input/output index");
  for (const auto& t : tensors)
    if (t.shape.c < 1 || t.shape.h < 1 || t.shape.w < 1 || t.shape.size() > kMaxElems || !in_i8(t.zp))
      throw Error("quantised model: tensor '" + t.name + "' has a bad shape or zero point");
  std::vector<char> ready(nt, 0);
  ready[input] = 1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const QNode& n = nodes[i];
    const std::string what = "quantised model: node '" + n.name + "' (" + core::qop_name(n.op) + ")";
    if (n.inputs.empty() || int(n.inputs.size()) != n.geo.n_inputs || n.inputs.size() > size_t(core::kMaxInputs))
      throw Error(what + " has a bad input count");
    for (int t : n.inputs) {
      if (t < 0 || t >= nt || !ready[t]) throw Error(what + " reads a tensor not yet computed");
      tensors[t].consumers.push_back(int(i));
    }
    if (n.output < 0 || n.output >= nt || ready[n.output]) throw Error(what + " has a bad output");
    ready[n.output] = 1;
    tensors[n.output].producer = int(i);
    // Descriptor dims must agree with the tensors.
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Shape& s = tensors[n.inputs[k]].shape;
      if (s.c != n.geo.in[k].c || s.h != n.geo.in[k].h || s.w != n.geo.in[k].w)
        throw Error(what + ": input dims disagree with its tensor");
    }
    const Shape& o = tensors[n.output].shape;
    if (o.c != n.geo.out.c || o.h != n.geo.out.h || o.w != n.geo.out.w)
      throw Error(what + ": output dims disagree with its tensor");
    const std::string defect = node_defect(*this, n);
    if (!defect.empty()) throw Error(what + ": " + defect);
  }
  if (!ready[output]) throw Error("quantised model: output is never computed");
}

int64_t QGraph::total_macs() const {
  int64_t s = 0;
  for (auto& n : nodes) s += n.macs;
  return s;
}

int64_t QGraph::weight_bytes() const {
  int64_t s = 0;
  for (auto& n : nodes) s += n.bytes_per_channel() * n.channels_with_data() + n.shared_bytes();
  return s;
}

// ---------------------------------------------------------------- format

namespace {
constexpr uint32_t kMagic = 0x4D515354;  // "TSQM"
constexpr uint32_t kVersion = 2;  // 2: the input's channel order (ImageNorm::bgr)

void put_dims(ByteWriter& w, const core::Dims& d) { w.i32(d.c); w.i32(d.h); w.i32(d.w); }
core::Dims get_dims(ByteReader& r) { core::Dims d; d.c = r.i32(); d.h = r.i32(); d.w = r.i32(); return d; }
}  // namespace

std::vector<uint8_t> serialize_qgraph(const QGraph& q) {
  ByteWriter w;
  w.u32(kMagic);
  w.u32(kVersion);
  w.str(q.source);
  w.str(q.calibration);
  w.u32(uint32_t(q.labels.size()));
  for (auto& l : q.labels) w.str(l);
  for (int c = 0; c < 3; ++c) { w.f32(q.in_norm.mean[c]); w.f32(q.in_norm.std[c]); }
  w.u8(q.in_norm.bgr ? 1 : 0);
  w.i32(q.input);
  w.i32(q.output);
  w.u8(q.softmax_output ? 1 : 0);
  w.u32(uint32_t(q.tensors.size()));
  for (auto& t : q.tensors) {
    w.str(t.name);
    w.i32(t.shape.c); w.i32(t.shape.h); w.i32(t.shape.w);
    w.f32(t.scale);
    w.i32(t.zp);
  }
  w.u32(uint32_t(q.nodes.size()));
  for (auto& n : q.nodes) {
    const auto& g = n.geo;
    w.str(n.name);
    w.u8(uint8_t(n.op));
    w.u32(uint32_t(n.inputs.size()));
    for (int t : n.inputs) w.i32(t);
    w.i32(n.output);
    w.u8(g.n_inputs);
    w.u8(g.count_include_pad);
    for (int k = 0; k < core::kMaxInputs; ++k) { put_dims(w, g.in[k]); w.i32(g.in_zp[k]); w.i32(g.in_mult[k]); w.i32(g.in_shift[k]); }
    put_dims(w, g.out);
    for (int32_t v : {g.out_zp, g.act_min, g.act_max, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_t, g.pad_l, g.pad_b,
                      g.pad_r, g.groups, g.left_shift, g.out_mult, g.out_shift})
      w.i32(v);
    w.vec_i8(n.weights);
    w.vec_i32(n.bias);
    w.vec_i32(n.mult);
    w.vec_i32(n.shift);
    w.vec_i8(n.lut);
    w.u64(uint64_t(n.macs));
  }
  w.u32(crc32(w.buf.data(), w.buf.size()));
  return w.buf;
}

QGraph deserialize_qgraph(const std::vector<uint8_t>& bytes, const std::string& what) {
  if (bytes.size() < 12) throw Error(what + ": not a tinysplit quantised model (too short)");
  ByteReader r(bytes.data(), bytes.size() - 4, what);
  if (r.u32() != kMagic) throw Error(what + ": not a tinysplit quantised model (bad magic)");
  const uint32_t ver = r.u32();
  if (ver != kVersion) throw Error(what + ": quantised model version " + std::to_string(ver) + " is not supported (need " + std::to_string(kVersion) + ")");
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= uint32_t(bytes[bytes.size() - 4 + i]) << (8 * i);
  if (stored != crc32(bytes.data(), bytes.size() - 4)) throw Error(what + ": checksum mismatch (file is corrupt)");
  QGraph q;
  q.source = r.str();
  q.calibration = r.str();
  const uint32_t nl = r.u32();
  if (nl > 100000) throw Error(what + ": corrupt label count");
  for (uint32_t i = 0; i < nl; ++i) q.labels.push_back(r.str());
  for (int c = 0; c < 3; ++c) { q.in_norm.mean[c] = r.f32(); q.in_norm.std[c] = r.f32(); }
  q.in_norm.bgr = r.u8() != 0;
  q.input = r.i32();
  q.output = r.i32();
  q.softmax_output = r.u8() != 0;
  const uint32_t nt = r.u32();
  if (nt > 1000000) throw Error(what + ": corrupt tensor count");
  for (uint32_t i = 0; i < nt; ++i) {
    QTensor t;
    t.name = r.str();
    t.shape.c = r.i32(); t.shape.h = r.i32(); t.shape.w = r.i32();
    if (t.shape.c <= 0 || t.shape.h <= 0 || t.shape.w <= 0 || t.shape.size() > kMaxElems)
      throw Error(what + ": corrupt tensor shape");
    t.scale = r.f32();
    t.zp = r.i32();
    q.tensors.push_back(std::move(t));
  }
  const uint32_t nn = r.u32();
  if (nn > 1000000) throw Error(what + ": corrupt node count");
  for (uint32_t i = 0; i < nn; ++i) {
    QNode n;
    auto& g = n.geo;
    n.name = r.str();
    n.op = QOp(r.u8());
    if (!core::qop_known(uint8_t(n.op))) throw Error(what + ": unknown op code in node '" + n.name + "'");
    g.op = n.op;
    const uint32_t ni = r.u32();
    if (ni > uint32_t(core::kMaxInputs)) throw Error(what + ": corrupt input count");
    for (uint32_t k = 0; k < ni; ++k) n.inputs.push_back(r.i32());
    n.output = r.i32();
    g.n_inputs = r.u8();
    g.count_include_pad = r.u8();
    for (int k = 0; k < core::kMaxInputs; ++k) { g.in[k] = get_dims(r); g.in_zp[k] = r.i32(); g.in_mult[k] = r.i32(); g.in_shift[k] = r.i32(); }
    g.out = get_dims(r);
    int32_t* fields[] = {&g.out_zp, &g.act_min, &g.act_max, &g.kh, &g.kw, &g.sh, &g.sw, &g.dh, &g.dw, &g.pad_t, &g.pad_l,
                         &g.pad_b, &g.pad_r, &g.groups, &g.left_shift, &g.out_mult, &g.out_shift};
    for (int32_t* f : fields) *f = r.i32();
    n.weights = r.vec_i8<int8_t>();
    n.bias = r.vec_i32();
    n.mult = r.vec_i32();
    n.shift = r.vec_i32();
    n.lut = r.vec_i8<int8_t>();
    n.macs = int64_t(r.u64());
    q.nodes.push_back(std::move(n));
  }
  if (r.remaining() != 0) throw Error(what + ": trailing bytes after the model");
  q.link();
  return q;
}

void save_qgraph(const QGraph& q, const std::string& path) {
  const auto bytes = serialize_qgraph(q);
  write_file_atomic(path, bytes.data(), bytes.size());
}

QGraph load_qgraph(const std::string& path) {
  const std::string text = read_input_file(path, "quantised model", kMaxModelFileBytes);
  return deserialize_qgraph(std::vector<uint8_t>(text.begin(), text.end()), path);
}

// ---------------------------------------------------------------- execution

std::vector<int8_t> quantize_input(const QGraph& q, const std::vector<float>& x) {
  const QTensor& t = q.tensors.at(q.input);
  if (int64_t(x.size()) != t.shape.size())
    throw Error("input has " + std::to_string(x.size()) + " values, model expects " + to_string(t.shape));
  std::vector<int8_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const long v = std::lround(double(x[i]) / t.scale) + t.zp;
    out[i] = int8_t(std::clamp<long>(v, -128, 127));
  }
  return out;
}

namespace {

// Views of node n's whole operands, their data from data(tensor).
template <class Data>
void whole_views(const QGraph& q, const QNode& n, Data&& data, core::View* views) {
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Shape& s = q.shape(n.inputs[k]);
    views[k] = core::View{data(n.inputs[k]), 0, s.c, 0, s.h};
  }
}

}  // namespace

std::vector<std::vector<int8_t>> run_int8_all(const QGraph& q, const std::vector<int8_t>& input) {
  std::vector<std::vector<int8_t>> t(q.tensors.size());
  if (int64_t(input.size()) != q.shape(q.input).size()) throw Error("int8 input has the wrong size");
  t[q.input] = input;
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    const QNode& n = q.nodes[i];
    const core::LayerDesc d = q.desc(int(i));
    core::View views[core::kMaxInputs];
    whole_views(q, n, [&](int x) { return t[size_t(x)].data(); }, views);
    auto& out = t[n.output];
    out.resize(size_t(q.shape(n.output).size()));
    const auto st = core::compute_range(d, views, 0, int32_t(out.size()), out.data(), n.channels_with_data());
    if (st != core::KernelStatus::Ok)
      throw Error("int8 kernel failed at node '" + n.name + "' (status " + std::to_string(int(st)) + ")");
  }
  return t;
}

// The same computation as run_int8_all, keeping only what is still to be
// read: a tensor's buffer goes back to a pool after its last consumer, and
// the pool (one per thread) lives on between calls, so a repeated inference
// allocates nothing but its result and works in buffers already in cache
// (fresh buffers cost page faults and zero-filling every call).
std::vector<int8_t> run_int8(const QGraph& q, const std::vector<int8_t>& input) {
  if (int64_t(input.size()) != q.shape(q.input).size()) throw Error("int8 input has the wrong size");
  thread_local std::vector<std::vector<int8_t>> pool;
  const size_t nt = q.tensors.size();
  std::vector<int> last(nt, -1), slot(nt, -1);
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    for (int t : q.nodes[i].inputs) last[size_t(t)] = int(i);
    last[size_t(q.nodes[i].output)] = std::max(last[size_t(q.nodes[i].output)], int(i));
  }
  last[size_t(q.output)] = int(q.nodes.size());  // kept to the end
  std::vector<char> busy(pool.size(), 0);
  auto take = [&](size_t need) {
    int best = -1;  // the smallest free buffer that is big enough, else the biggest free one
    for (size_t b = 0; b < pool.size(); ++b) {
      if (busy[b]) continue;
      if (best < 0) { best = int(b); continue; }
      const size_t have = pool[b].size(), cur = pool[size_t(best)].size();
      if (cur >= need ? (have >= need && have < cur) : have > cur) best = int(b);
    }
    if (best < 0) {
      pool.emplace_back();
      busy.push_back(0);
      best = int(pool.size() - 1);
    }
    if (pool[size_t(best)].size() < need) pool[size_t(best)].resize(need);
    busy[size_t(best)] = 1;
    return best;
  };
  auto data = [&](int t) -> int8_t* {
    return t == q.input ? const_cast<int8_t*>(input.data()) : pool[size_t(slot[size_t(t)])].data();
  };
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    const QNode& n = q.nodes[i];
    const core::LayerDesc d = q.desc(int(i));
    core::View views[core::kMaxInputs];
    whole_views(q, n, data, views);
    const int64_t size = q.shape(n.output).size();
    slot[size_t(n.output)] = take(size_t(size));
    const auto st = core::compute_range(d, views, 0, int32_t(size), data(n.output), n.channels_with_data());
    if (st != core::KernelStatus::Ok)
      throw Error("int8 kernel failed at node '" + n.name + "' (status " + std::to_string(int(st)) + ")");
    for (int t : n.inputs)
      if (t != q.input && last[size_t(t)] == int(i) && slot[size_t(t)] >= 0) busy[size_t(slot[size_t(t)])] = 0;
    if (last[size_t(n.output)] == int(i)) busy[size_t(slot[size_t(n.output)])] = 0;
  }
  if (q.output == q.input) return input;
  const int8_t* o = data(q.output);
  return std::vector<int8_t>(o, o + q.shape(q.output).size());
}

std::vector<float> dequantize_output(const QGraph& q, const std::vector<int8_t>& out) {
  const QTensor& t = q.tensors.at(q.output);
  std::vector<float> r(out.size());
  for (size_t i = 0; i < out.size(); ++i) r[i] = t.scale * float(int32_t(out[i]) - t.zp);
  return r;
}

std::vector<float> output_probs(const QGraph& q, const std::vector<int8_t>& out) {
  std::vector<float> r = dequantize_output(q, out);
  if (!q.softmax_output) return r;
  const float mx = *std::max_element(r.begin(), r.end());
  double sum = 0;
  for (float& v : r) { v = std::exp(v - mx); sum += v; }
  for (float& v : r) v = float(v / sum);
  return r;
}

void quantize_multiplier(double m, int32_t* mult, int32_t* shift) {
  if (!(m > 0) || !std::isfinite(m)) { *mult = 0; *shift = 0; return; }
  int e = 0;
  const double frac = std::frexp(m, &e);  // m = frac * 2^e, frac in [0.5, 1)
  int64_t q = std::llround(frac * double(int64_t(1) << 31));
  if (q == (int64_t(1) << 31)) { q /= 2; ++e; }
  if (e < -31) { *mult = 0; *shift = 0; return; }
  if (e > 30) throw Error("requantisation multiplier " + std::to_string(m) + " is out of range");
  *mult = int32_t(q);
  *shift = e;
}

}  // namespace ts
