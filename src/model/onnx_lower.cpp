// ONNX import, step 3: decoded nodes -> float IR. See onnx_lower.h.
#include "model/onnx_lower.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "model/onnx_const_fold.h"
#include "model/onnx_upsample.h"

namespace ts::onnx_import {
namespace {

struct Value {
  bool is_const = false;
  int tensor = -1;  // internal tensor id (computed values)
  Dims dims;        // ONNX dims (computed values)
  ConstPtr c;       // constants
};

// A conv or pool window along H and W, with the output size.
struct Window {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int pt = 0, pl = 0, pb = 0, pr = 0;
  int oh = 0, ow = 0;
  bool ceil_padded = false;  // ceil_mode added padding at the end

  void apply(Node& nd) const {
    nd.kh = kh;
    nd.kw = kw;
    nd.sh = sh;
    nd.sw = sw;
    nd.dh = dh;
    nd.dw = dw;
    nd.pad_t = pt;
    nd.pad_l = pl;
    nd.pad_b = pb;
    nd.pad_r = pr;
  }
};

class Lowering {
 public:
  Lowering(const Model& m, std::string name) : m_(m), name_(std::move(name)) {}
  Graph run();

 private:
  void handle(const OnnxNode& n);
  Graph finish();

  // --- the node being handled (cur_) and its inputs
  bool present(int i) const { return i < int(in_.size()) && in_[size_t(i)] != nullptr; }
  const Value& dyn(int i) const;
  const Value& dyn_map(int i) const;  // a computed [1,C,H,W] (4-D) input
  const Const* operand(int i) const;
  const Const& cst(int i) const { return need(operand_, i); }
  bool output_used(int k) const;

  // --- building the graph
  Shape ir_shape(const Dims& d) const;
  void define(const std::string& name, Value v);
  void define_const(Const c) { define(cur_->outputs[0], Value{true, -1, {}, std::make_shared<Const>(std::move(c))}); }
  void alias(const Value& v, const Dims& dims, int k = 0);
  Node base(Op op, std::vector<int> inputs = {}) const;
  int emit(Node nd, const Dims& out_dims, int k = 0);  // defines output k
  Window window(const Dims& x, int kh, int kw, bool pool) const;
  std::vector<float> per_channel(const Const& k, const Dims& x) const;
  void affine(const Value& x, std::vector<float> gamma, std::vector<float> beta, bool pure_add);
  Node fully_connected(const Value& a, const Const& b, bool gemm, int64_t& n_out) const;

  // --- one function per op family
  void identity();
  void unary(Op op);
  void clip();
  void conv();
  void batchnorm();
  void binary();
  void concat();
  void pool(bool avg);
  void global_pool(bool avg);
  void reduce_mean();
  void gemm();
  void matmul();
  void pad();
  void softmax();
  void reshape_like();
  void slice();
  void split();
  void transpose();
  void prelu();
  void take(const Value& x, const std::vector<int64_t>& start, const std::vector<int64_t>& step, const Dims& out, int k);
  void resize();
  void conv_transpose();

  const Model& m_;
  std::string name_;
  std::unordered_map<std::string, Value> env_;
  std::unordered_map<std::string, int> uses_;

  // Graph under construction (internal tensor ids).
  std::vector<std::string> tname_;
  std::vector<Shape> tshape_;
  std::vector<int> producer_;
  std::vector<Node> nodes_;
  std::vector<char> pure_add_;  // node is a BatchNorm made from "x + constant"
  int input_tensor_ = -1;

  const OnnxNode* cur_ = nullptr;
  std::vector<const Value*> in_;
  const ConstInput operand_ = [this](int i) { return operand(i); };
};

const Value& Lowering::dyn(int i) const {
  if (!present(i)) throw Fail("input " + std::to_string(i) + " is missing");
  const Value& v = *in_[size_t(i)];
  if (v.is_const)
    throw Fail("input " + std::to_string(i) + " ('" + cur_->inputs[size_t(i)] +
               "') is a constant here; only tensors computed from the image are supported");
  return v;
}

const Value& Lowering::dyn_map(int i) const {
  const Value& x = dyn(i);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  return x;
}

const Const* Lowering::operand(int i) const {
  if (!present(i)) return nullptr;
  const Value& v = *in_[size_t(i)];
  if (!v.is_const)
    throw Fail("input " + std::to_string(i) + " ('" + cur_->inputs[size_t(i)] +
               "') must be a constant (initializer or shape arithmetic), but it is computed from the image");
  return v.c.get();
}

bool Lowering::output_used(int k) const {
  if (k >= int(cur_->outputs.size()) || cur_->outputs[size_t(k)].empty()) return false;
  auto it = uses_.find(cur_->outputs[size_t(k)]);
  return it != uses_.end() && it->second > 0;
}

Shape Lowering::ir_shape(const Dims& d) const {
  if (d.size() == 4 && d[0] == 1) return Shape{int(d[1]), int(d[2]), int(d[3])};
  if (d.size() == 2 && d[0] == 1) return Shape{int(d[1]), 1, 1};
  throw Fail("tensor shape " + dims_str(d) + " is not supported (expected [1,C,H,W] or [1,N])");
}

void Lowering::define(const std::string& name, Value v) {
  if (name.empty()) return;
  if (!env_.emplace(name, std::move(v)).second) throw Fail("value '" + name + "' is defined twice");
}

void Lowering::alias(const Value& v, const Dims& dims, int k) {
  Value a = v;
  if (!a.is_const) a.dims = dims;
  define(cur_->outputs[size_t(k)], std::move(a));
}

Node Lowering::base(Op op, std::vector<int> inputs) const {
  Node nd;
  nd.op = op;
  nd.name = cur_->label();
  nd.inputs = std::move(inputs);
  return nd;
}

int Lowering::emit(Node nd, const Dims& out_dims, int k) {
  for (int64_t d : out_dims)
    if (d < 1 || d > kMaxDim) throw Fail("output shape " + dims_str(out_dims) + " is not valid");
  const Shape s = ir_shape(out_dims);
  numel(out_dims);
  const int t = int(tname_.size());
  tname_.push_back(cur_->outputs[size_t(k)]);
  tshape_.push_back(s);
  producer_.push_back(int(nodes_.size()));
  nd.output = t;
  nodes_.push_back(std::move(nd));
  pure_add_.push_back(0);
  define(cur_->outputs[size_t(k)], Value{false, t, out_dims, nullptr});
  return int(nodes_.size()) - 1;
}

// Output size and padding of a conv/pool window along H and W.
Window Lowering::window(const Dims& x, int kh, int kw, bool pool) const {
  const OnnxNode& n = *cur_;
  Window w;
  w.kh = kh;
  w.kw = kw;
  if (kh < 1 || kw < 1) throw Fail("kernel size must be positive");
  auto pair = [&](const char* name, int& a, int& b) {
    auto v = n.attr_ints(name);
    if (v.empty()) return;
    if (v.size() != 2) throw Fail(std::string("'") + name + "' must have 2 entries (only 2-D is supported)");
    if (v[0] < 1 || v[1] < 1 || v[0] > kMaxDim || v[1] > kMaxDim)
      throw Fail(std::string("'") + name + "' must be positive");
    a = int(v[0]);
    b = int(v[1]);
  };
  pair("strides", w.sh, w.sw);
  pair("dilations", w.dh, w.dw);
  if (pool && (w.dh != 1 || w.dw != 1)) throw Fail("dilated pooling is not supported");
  const int H = int(x[2]), W = int(x[3]);
  const int ekh = (kh - 1) * w.dh + 1, ekw = (kw - 1) * w.dw + 1;
  const std::string ap = n.attr_s("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto p = n.attr_ints("pads");
    if (!p.empty()) {
      if (p.size() != 4) throw Fail("'pads' must have 4 entries (only 2-D is supported)");
      for (int64_t v : p)
        if (v < 0 || v > kMaxDim) throw Fail("'pads' " + dims_str(p) + " must be non-negative");
      w.pt = int(p[0]);
      w.pl = int(p[1]);
      w.pb = int(p[2]);
      w.pr = int(p[3]);
    }
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    auto same = [&](int in, int s, int ek, int& p0, int& p1) {
      const int out = (in + s - 1) / s;
      const int total = std::max(0, (out - 1) * s + ek - in);
      const int small = total / 2;
      p0 = ap == "SAME_UPPER" ? small : total - small;
      p1 = total - p0;
    };
    same(H, w.sh, ekh, w.pt, w.pb);
    same(W, w.sw, ekw, w.pl, w.pr);
  } else if (ap != "VALID") {
    throw Fail("unknown auto_pad '" + ap + "'");
  }
  const bool ceil = n.attr_i("ceil_mode", 0) != 0;
  auto out = [&](int in, int ek, int s, int p0, int& p1, int& o) {
    const int span = in + p0 + p1 - ek;
    if (span < 0)
      throw Fail("input " + std::to_string(H) + "x" + std::to_string(W) + " is too small for a " +
                 std::to_string(kh) + "x" + std::to_string(kw) + " window");
    if (!ceil) {
      o = span / s + 1;
      return;
    }
    o = (span + s - 1) / s + 1;
    if ((o - 1) * s >= in + p0) --o;  // the last window must start inside the input or its front pad
    const int extra = (o - 1) * s + ek - (in + p0 + p1);
    if (extra > 0) {
      p1 += extra;
      w.ceil_padded = true;
    }
  };
  out(H, ekh, w.sh, w.pt, w.pb, w.oh);
  out(W, ekw, w.sw, w.pl, w.pr, w.ow);
  return w;
}

// A constant operand that broadcasts over a computed tensor of ONNX dims x as
// a scalar or per channel, as a vector of one value per (IR) channel.
std::vector<float> Lowering::per_channel(const Const& k, const Dims& x) const {
  const int C = int(x[1]);
  const int64_t n = numel(k.dims);
  if (k.dims.size() > x.size())
    throw Fail("constant of shape " + dims_str(k.dims) + " would broadcast " + dims_str(x) + " to a higher rank");
  if (n == 1) return std::vector<float>(size_t(C), float(k.v.at(0)));
  Dims kd(x.size() - k.dims.size(), 1);
  kd.insert(kd.end(), k.dims.begin(), k.dims.end());
  for (size_t a = 0; a < x.size(); ++a) {
    const bool ok = kd[a] == 1 || (a == 1 && kd[a] == C);
    if (!ok)
      throw Fail("constant of shape " + dims_str(k.dims) + " does not broadcast per channel over " + dims_str(x) +
                 " (only scalars and per-channel constants are supported)");
  }
  return to_floats(k);
}

// y = x * gamma[c] + beta[c], as a BatchNorm with mean 0, var 1, eps 0.
void Lowering::affine(const Value& x, std::vector<float> gamma, std::vector<float> beta, bool pure_add) {
  bool noop = true;
  for (size_t c = 0; c < gamma.size(); ++c) noop = noop && gamma[c] == 1.f && beta[c] == 0.f;
  if (noop) return alias(x, x.dims);
  Node nd = base(Op::BatchNorm, {x.tensor});
  const size_t C = gamma.size();
  nd.gamma = std::move(gamma);
  nd.beta = std::move(beta);
  nd.mean.assign(C, 0.f);
  nd.var.assign(C, 1.f);
  nd.eps = 0.f;
  const int idx = emit(std::move(nd), x.dims);
  pure_add_[size_t(idx)] = pure_add;
}

// ------------------------------------------------------------- the model

Graph Lowering::run() {
  for (const auto& [name, c] : m_.initializers) env_[name] = Value{true, -1, {}, c};
  input_tensor_ = 0;
  tname_.push_back(m_.input);
  tshape_.push_back(ir_shape(m_.input_dims));
  producer_.push_back(-1);
  env_[m_.input] = Value{false, 0, m_.input_dims, nullptr};
  for (const OnnxNode& n : m_.nodes)
    for (const auto& s : n.inputs) ++uses_[s];
  for (const auto& o : m_.outputs) ++uses_[o];

  for (const OnnxNode& n : m_.nodes) {
    cur_ = &n;
    try {
      handle(n);
    } catch (const Fail& e) {
      throw Error(name_ + ": node '" + n.label() + "' (" + n.op + "): " + e.what() + m_.size_note);
    }
  }
  try {
    return finish();
  } catch (const Fail& e) {
    throw Error(name_ + ": " + e.what() + m_.size_note);
  } catch (const Error& e) {
    throw Error(name_ + ": " + e.what() + m_.size_note);
  }
}

void Lowering::handle(const OnnxNode& n) {
  const std::string& op = n.op;
  if (!n.domain.empty() && n.domain != "ai.onnx")
    throw Error(name_ + ": unsupported op '" + n.domain + "." + op + "' at node '" + n.label() + "'");
  if (n.outputs.empty() || n.outputs[0].empty()) throw Fail("the node has no output");
  in_.assign(n.inputs.size(), nullptr);
  bool all_const = true;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i].empty()) continue;
    auto it = env_.find(n.inputs[i]);
    if (it == env_.end())
      throw Fail("input '" + n.inputs[i] + "' is not produced by an earlier node, an initializer or the graph input");
    in_[i] = &it->second;
    all_const = all_const && it->second.is_const;
  }

  if (op == "Identity" || op == "Dropout") return identity();
  if (op == "Shape" || op == "Size") {
    if (!present(0)) throw Fail("input 0 is missing");
    const Value& x = *in_[0];
    return define_const(shape_of(n, x.is_const ? x.c->dims : x.dims));
  }
  if (all_const)
    if (std::optional<Const> c = fold_constant(n, operand_, m_.opset)) return define_const(std::move(*c));

  using Handler = std::function<void(Lowering&)>;
  static const std::unordered_map<std::string, Handler> handlers = {
      {"Conv", &Lowering::conv},
      {"BatchNormalization", &Lowering::batchnorm},
      {"Relu", [](Lowering& l) { l.unary(Op::Relu); }},
      {"Sigmoid", [](Lowering& l) { l.unary(Op::Sigmoid); }},
      {"HardSwish", [](Lowering& l) { l.unary(Op::HardSwish); }},
      {"HardSigmoid", [](Lowering& l) { l.unary(Op::HardSigmoid); }},
      {"LeakyRelu", [](Lowering& l) { l.unary(Op::LeakyRelu); }},
      {"Tanh", [](Lowering& l) { l.unary(Op::Tanh); }},
      {"PRelu", &Lowering::prelu},
      {"Slice", &Lowering::slice},
      {"Split", &Lowering::split},
      {"Transpose", &Lowering::transpose},
      {"Clip", &Lowering::clip},
      {"Add", &Lowering::binary},
      {"Sub", &Lowering::binary},
      {"Mul", &Lowering::binary},
      {"Div", &Lowering::binary},
      {"Concat", &Lowering::concat},
      {"AveragePool", [](Lowering& l) { l.pool(true); }},
      {"MaxPool", [](Lowering& l) { l.pool(false); }},
      {"GlobalAveragePool", [](Lowering& l) { l.global_pool(true); }},
      {"GlobalMaxPool", [](Lowering& l) { l.global_pool(false); }},
      {"ReduceMean", &Lowering::reduce_mean},
      {"Gemm", &Lowering::gemm},
      {"MatMul", &Lowering::matmul},
      {"Pad", &Lowering::pad},
      {"Resize", &Lowering::resize},
      {"Upsample", &Lowering::resize},
      {"ConvTranspose", &Lowering::conv_transpose},
      {"Softmax", &Lowering::softmax},
      {"Flatten", &Lowering::reshape_like},
      {"Reshape", &Lowering::reshape_like},
      {"Squeeze", &Lowering::reshape_like},
      {"Unsqueeze", &Lowering::reshape_like},
  };
  auto h = handlers.find(op);
  if (h == handlers.end()) throw Error(name_ + ": unsupported op '" + op + "' at node '" + n.label() + "'");
  h->second(*this);
}

// ------------------------------------------------------------- op families

void Lowering::identity() {  // Identity, Dropout (constant or computed)
  if (output_used(1)) throw Fail("the dropout mask output is not supported");
  if (!present(0)) throw Fail("input 0 is missing");
  const Value& x = *in_[0];
  alias(x, x.dims);
}

// Flatten, Reshape, Squeeze, Unsqueeze of a computed tensor: free when the IR
// shape stays the same, a Flatten when it becomes [1,N], unsupported otherwise.
void Lowering::reshape_like() {
  const Value& x = dyn(0);
  const Dims out = reshaped_dims(*cur_, m_.opset, x.dims, operand_, false);
  if (numel(out) != numel(x.dims)) throw Fail("cannot reshape " + dims_str(x.dims) + " to " + dims_str(out));
  // The channel axis cut in two ([1,C,H,W] -> [1,g,C/g,H,W]) or joined
  // again: the same memory, kept as 5-D dims of the same tensor (the first
  // and last step of a channel shuffle, see transpose()).
  const Dims& xd = x.dims;
  if (xd.size() == 4 && out.size() == 5 && out[0] == 1 && out[3] == xd[2] && out[4] == xd[3]) return alias(x, out);
  if (xd.size() == 5 && out.size() == 4 && out[0] == 1 && out[2] == xd[3] && out[3] == xd[4]) return alias(x, out);
  const bool flat = out.size() == 2 && out[0] == 1;
  const bool img = out.size() == 4 && out[0] == 1;
  if ((flat || img) && ir_shape(out) == ir_shape(x.dims)) return alias(x, out);
  if (flat) {
    Node nd = base(Op::Flatten, {x.tensor});
    emit(std::move(nd), out);
    return;
  }
  throw Fail("reshaping " + dims_str(x.dims) + " to " + dims_str(out) +
             " is not supported (only flattening to [1,N])");
}

void Lowering::unary(Op op) {
  const Value& x = dyn(0);
  Node nd = base(op, {x.tensor});
  if (op == Op::HardSigmoid) {
    nd.alpha = cur_->attr_f("alpha", 0.2f);
    nd.beta_hs = cur_->attr_f("beta", 0.5f);
  }
  if (op == Op::LeakyRelu) nd.alpha = cur_->attr_f("alpha", 0.01f);
  emit(std::move(nd), x.dims);
}

void Lowering::prelu() {
  const Value& x = dyn_map(0);
  Node nd = base(Op::PRelu, {x.tensor});
  nd.weights = per_channel(cst(1), x.dims);
  emit(std::move(nd), x.dims);
}

// Output k as elements start + i * step of each axis of x (a 4-D tensor):
// free when it is all of x, a Slice node otherwise.
void Lowering::take(const Value& x, const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                    const Dims& out, int k) {
  for (size_t a = 0; a < 4; ++a)
    if (step[a] < 1) throw Fail("a negative step " + dims_str(step) + " (reversing an axis) is not supported");
  if (out[0] != 1) throw Fail("slicing the batch axis " + dims_str(out) + " is not supported");
  if (numel(out) == 0) throw Fail("output " + std::to_string(k) + " would be empty " + dims_str(out));
  if (out == x.dims) return alias(x, out, k);
  Node nd = base(Op::Slice, {x.tensor});
  nd.pad_b = int(start[1]);
  nd.dh = int(step[1]);
  nd.pad_t = int(start[2]);
  nd.sh = int(step[2]);
  nd.pad_l = int(start[3]);
  nd.sw = int(step[3]);
  nd.slice_c = int(out[1]);
  nd.slice_h = int(out[2]);
  nd.slice_w = int(out[3]);
  if (k > 0) nd.name += ":" + std::to_string(k);
  emit(std::move(nd), out, k);
}

void Lowering::slice() {
  const Value& x = dyn_map(0);
  const SliceAxes ax = slice_axes(*cur_, m_.opset, x.dims, operand_);
  take(x, ax.start, ax.step, ax.out, 0);
}

// Each used output is a Slice along the axis (a Concat's inverse).
void Lowering::split() {
  const Value x = dyn_map(0);
  const int64_t axis = norm_axis(cur_->attr_i("axis", 0), 4);
  const std::vector<int64_t> len = split_lengths(*cur_, m_.opset, x.dims, axis, operand_);
  int64_t at = 0;
  for (size_t k = 0; k < len.size(); ++k) {
    std::vector<int64_t> start(4, 0), step(4, 1);
    Dims out = x.dims;
    start[size_t(axis)] = at;
    out[size_t(axis)] = len[k];
    at += len[k];
    if (output_used(int(k))) take(x, start, step, out, int(k));
  }
}

// A 4-D permutation that keeps the batch axis first is a Transpose node; a
// 5-D one only as the channel shuffle (a [1,g,C/g,H,W] view of a [1,C,H,W]
// tensor with its two channel axes swapped, see reshape_like()). Free when
// the axes longer than 1 keep their order and the shape stays (or, in the
// shuffle, a group count or group size of 1).
void Lowering::transpose() {
  const Value& x = dyn(0);
  const Dims& d = x.dims;
  std::vector<int64_t> perm = cur_->attr_ints("perm");
  if (perm.empty())
    for (size_t a = d.size(); a-- > 0;) perm.push_back(int64_t(a));
  if (perm.size() != d.size()) throw Fail("perm " + dims_str(perm) + " does not match the rank of " + dims_str(d));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t a = 0; a < sorted.size(); ++a)
    if (sorted[a] != int64_t(a)) throw Fail("perm " + dims_str(perm) + " is not a permutation of the axes of " + dims_str(d));
  Dims out(d.size());
  std::vector<int64_t> moved;  // the axes longer than 1, in their new order
  for (size_t a = 0; a < perm.size(); ++a) {
    out[a] = d[size_t(perm[a])];
    if (out[a] != 1) moved.push_back(perm[a]);
  }
  const bool same_memory = std::is_sorted(moved.begin(), moved.end());
  if (same_memory && out == d) return alias(x, out);
  if (d.size() == 4) {
    if (perm[0] != 0)
      throw Fail("perm " + dims_str(perm) + " of " + dims_str(d) +
                 " moves the batch axis (only permutations of C, H, W with the batch first are supported)");
    Node nd = base(Op::Transpose, {x.tensor});
    for (int a = 0; a < 3; ++a) nd.perm[a] = int(perm[size_t(a) + 1] - 1);
    emit(std::move(nd), out);
    return;
  }
  const bool shuffle = d.size() == 5 && d[0] == 1 && perm == std::vector<int64_t>{0, 2, 1, 3, 4};
  if (!shuffle)
    throw Fail("perm " + dims_str(perm) + " of " + dims_str(d) +
               " is not supported (a 4-D [1,C,H,W] tensor with the batch first, or the channel shuffle: Reshape "
               "[1,C,H,W] to [1,g,C/g,H,W], Transpose perm [0,2,1,3,4], Reshape back)");
  if (same_memory) return alias(x, out);
  Node nd = base(Op::Shuffle, {x.tensor});
  nd.groups = int(d[1]);
  emit(std::move(nd), Dims{1, d[1] * d[2], d[3], d[4]});
  env_.at(cur_->outputs[0]).dims = out;
}

void Lowering::clip() {
  const Value& x = dyn(0);
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  if (m_.opset < 11) {
    lo = cur_->attr_f("min", lo);
    hi = cur_->attr_f("max", hi);
  } else {
    auto scalar = [&](int i, float& v) {
      if (!present(i)) return;
      const Const& k = cst(i);
      if (k.v.size() != 1) throw Fail("Clip bounds must be scalars");
      v = float(k.v[0]);
    };
    scalar(1, lo);
    scalar(2, hi);
  }
  if (!(lo <= hi)) throw Fail("Clip min is above max");
  if (lo == 0.f && std::isinf(hi) && hi > 0) return unary(Op::Relu);
  Node nd = base(Op::Clip, {x.tensor});
  nd.lo = lo;
  nd.hi = hi;
  emit(std::move(nd), x.dims);
}

void Lowering::conv() {
  const Value& x = dyn(0);
  const Const& w = cst(1);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  if (w.dims.size() != 4) throw Fail("weights of shape " + dims_str(w.dims) + " (only 2-D convolution is supported)");
  const int64_t O = w.dims[0], Ig = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t groups = cur_->attr_i("group", 1);
  const int64_t C = x.dims[1];
  if (groups < 1 || C % groups || Ig * groups != C || O % groups)
    throw Fail("weights " + dims_str(w.dims) + " with group " + std::to_string(groups) + " do not fit input " +
               dims_str(x.dims));
  auto ks = cur_->attr_ints("kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != kh || ks[1] != kw))
    throw Fail("kernel_shape " + dims_str(ks) + " disagrees with weights " + dims_str(w.dims));
  if (kh > kMaxDim || kw > kMaxDim) throw Fail("kernel too large");
  const Window win = window(x.dims, int(kh), int(kw), false);
  Node nd = base(Op::Conv, {x.tensor});
  win.apply(nd);
  nd.groups = int(groups);
  nd.weights = to_floats(w);
  if (present(2)) {
    const Const& b = cst(2);
    if (int64_t(b.v.size()) != O) throw Fail("bias has " + std::to_string(b.v.size()) + " values for " + std::to_string(O) + " outputs");
    nd.bias = to_floats(b);
  }
  emit(std::move(nd), {1, O, win.oh, win.ow});
}

// Resize, Upsample, ConvTranspose: onnx_upsample.cpp.
void Lowering::resize() {
  const Value& x = dyn_map(0);
  Dims out;
  Node nd = lower_resize(*cur_, m_.opset, x.dims, operand_, &out);
  Node b = base(Op::Resize, {x.tensor});
  nd.name = b.name;
  nd.inputs = b.inputs;
  if (out == x.dims) return alias(x, x.dims);
  emit(std::move(nd), out);
}

void Lowering::conv_transpose() {
  const Value& x = dyn_map(0);
  Dims out;
  Node nd = lower_conv_transpose(*cur_, x.dims, cst(1), present(2) ? &cst(2) : nullptr, &out);
  Node b = base(Op::ConvTranspose, {x.tensor});
  nd.name = b.name;
  nd.inputs = b.inputs;
  emit(std::move(nd), out);
}

void Lowering::batchnorm() {
  const Value& x = dyn(0);
  if (cur_->attr_i("training_mode", 0) != 0) throw Fail("training mode is not supported");
  if (cur_->attr_i("spatial", 1) == 0) throw Fail("per-activation (spatial=0) normalisation is not supported");
  for (int k = 1; k < int(cur_->outputs.size()); ++k)
    if (output_used(k)) throw Fail("the running-statistics outputs are not supported");
  ir_shape(x.dims);
  const size_t C = size_t(x.dims[1]);
  auto param = [&](int i, const char* what) {
    const Const& k = cst(i);
    if (k.v.size() != C)
      throw Fail(std::string(what) + " has " + std::to_string(k.v.size()) + " values for " + std::to_string(C) +
                 " channels");
    return to_floats(k);
  };
  Node nd = base(Op::BatchNorm, {x.tensor});
  nd.gamma = param(1, "scale");
  nd.beta = param(2, "bias");
  nd.mean = param(3, "mean");
  nd.var = param(4, "var");
  nd.eps = cur_->attr_f("epsilon", 1e-5f);
  emit(std::move(nd), x.dims);
}

// Add, Sub, Mul, Div: of two computed tensors (Add, Mul), or of a computed
// tensor and a scalar or per-channel constant (an affine map).
void Lowering::binary() {
  const std::string& op = cur_->op;
  if (!present(0) || !present(1)) throw Fail("needs two inputs");
  const bool c0 = in_[0]->is_const, c1 = in_[1]->is_const;
  if (!c0 && !c1) {
    const Value& a = dyn(0);
    const Value& b = dyn(1);
    if (op == "Add" || op == "Mul") {
      Node nd = base(op == "Add" ? Op::Add : Op::Mul);
      if (a.dims == b.dims) {
        nd.inputs = {a.tensor, b.tensor};
        emit(std::move(nd), a.dims);
        return;
      }
      // Mul by a per-channel tensor (squeeze-excitation): [1,C,H,W] * [1,C,1,1].
      auto per_ch = [](const Dims& big, const Dims& small) {
        return big.size() == 4 && small.size() == 4 && small[0] == 1 && small[1] == big[1] && small[2] == 1 &&
               small[3] == 1;
      };
      if (op == "Mul" && per_ch(a.dims, b.dims)) {
        nd.inputs = {a.tensor, b.tensor};
        emit(std::move(nd), a.dims);
        return;
      }
      if (op == "Mul" && per_ch(b.dims, a.dims)) {
        nd.inputs = {b.tensor, a.tensor};
        emit(std::move(nd), b.dims);
        return;
      }
      throw Fail("broadcasting " + dims_str(a.dims) + " with " + dims_str(b.dims) +
                 " between two computed tensors is not supported");
    }
    throw Fail(op + " of two computed tensors is not supported");
  }
  const bool const_first = c0;
  const Value& x = dyn(const_first ? 1 : 0);
  ir_shape(x.dims);
  std::vector<float> k = per_channel(cst(const_first ? 0 : 1), x.dims);
  const size_t C = k.size();
  if (op == "Add") return affine(x, std::vector<float>(C, 1.f), k, true);
  if (op == "Mul") return affine(x, k, std::vector<float>(C, 0.f), false);
  if (op == "Sub") {
    if (const_first) return affine(x, std::vector<float>(C, -1.f), k, false);
    for (float& v : k) v = -v;
    return affine(x, std::vector<float>(C, 1.f), k, true);
  }
  // Div
  if (const_first) throw Fail("dividing a constant by a computed tensor is not supported");
  for (float& v : k) {
    if (v == 0.f) throw Fail("division by a zero constant");
    v = 1.f / v;
  }
  affine(x, k, std::vector<float>(C, 0.f), false);
}

void Lowering::concat() {
  std::vector<const Value*> parts;
  for (int i = 0; i < int(cur_->inputs.size()); ++i)
    if (present(i)) parts.push_back(&dyn(i));
  if (parts.empty()) throw Fail("no inputs");
  const Dims& d0 = parts[0]->dims;
  const int64_t axis = norm_axis(cur_->attr_i("axis", 1), d0.size());
  if (axis != 1) throw Fail("only concatenation along channels (axis 1) is supported, got axis " + std::to_string(axis));
  Dims out = d0;
  out[1] = 0;
  Node nd = base(Op::Concat);
  for (const Value* p : parts) {
    if (p->dims.size() != d0.size()) throw Fail("inputs differ in rank");
    for (size_t a = 0; a < d0.size(); ++a)
      if (a != 1 && p->dims[a] != d0[a])
        throw Fail("inputs " + dims_str(d0) + " and " + dims_str(p->dims) + " differ outside the channel axis");
    out[1] += p->dims[1];
    nd.inputs.push_back(p->tensor);
  }
  emit(std::move(nd), out);
}

void Lowering::pool(bool avg) {
  const Value& x = dyn_map(0);
  if (!avg && output_used(1)) throw Fail("the indices output is not supported");
  auto ks = cur_->attr_ints("kernel_shape");
  if (ks.size() != 2) throw Fail("kernel_shape must have 2 entries (only 2-D pooling is supported)");
  if (ks[0] < 1 || ks[1] < 1 || ks[0] > kMaxDim || ks[1] > kMaxDim) throw Fail("bad kernel_shape");
  const Window w = window(x.dims, int(ks[0]), int(ks[1]), true);
  Node nd = base(avg ? Op::AvgPool : Op::MaxPool, {x.tensor});
  w.apply(nd);
  if (avg) {
    nd.count_include_pad = cur_->attr_i("count_include_pad", 0) != 0;
    if (nd.count_include_pad && w.ceil_padded)
      throw Fail("AveragePool with ceil_mode and count_include_pad is not supported");
  }
  emit(std::move(nd), {1, x.dims[1], w.oh, w.ow});
}

void Lowering::global_pool(bool avg) {
  const Value& x = dyn_map(0);
  Node nd = base(avg ? Op::GlobalAvgPool : Op::MaxPool, {x.tensor});
  if (!avg) {  // a max pool whose window is the whole image
    nd.kh = int(x.dims[2]);
    nd.kw = int(x.dims[3]);
  }
  emit(std::move(nd), {1, x.dims[1], 1, 1});
}

void Lowering::reduce_mean() {
  const Value& x = dyn_map(0);
  std::vector<int64_t> axes = m_.opset >= 18 ? (present(1) ? to_ints(cst(1)) : std::vector<int64_t>{})
                                             : cur_->attr_ints("axes");
  std::set<int64_t> s;
  for (int64_t a : axes) s.insert(norm_axis(a, 4));
  if (s != std::set<int64_t>{2, 3})
    throw Fail("only the mean over H and W (axes [2,3]) is supported, got axes " + dims_str(axes));
  const bool keep = cur_->attr_i("keepdims", 1) != 0;
  Node nd = base(Op::GlobalAvgPool, {x.tensor});
  emit(std::move(nd), keep ? Dims{1, x.dims[1], 1, 1} : Dims{1, x.dims[1]});
}

// A Gemm node reading a ([1,K]) with the constant matrix b: [K][N], or [N][K]
// when a Gemm says transB; scaled by a Gemm's alpha. n_out = N.
Node Lowering::fully_connected(const Value& a, const Const& b, bool gemm, int64_t& n_out) const {
  if (a.dims.size() != 2 || a.dims[0] != 1) throw Fail("input shape " + dims_str(a.dims) + " is not [1,K]");
  if (b.dims.size() != 2) throw Fail("weights of shape " + dims_str(b.dims) + " are not a matrix");
  const bool tb = gemm && cur_->attr_i("transB", 0) != 0;
  const int64_t K = tb ? b.dims[1] : b.dims[0], N = tb ? b.dims[0] : b.dims[1];
  if (K != a.dims[1])
    throw Fail("weights " + dims_str(b.dims) + (tb ? " (transposed)" : "") + " expect " + std::to_string(K) +
               " inputs but the input has shape " + dims_str(a.dims));
  const float alpha = gemm ? cur_->attr_f("alpha", 1.f) : 1.f;
  Node nd = base(Op::Gemm, {a.tensor});
  nd.weights.resize(size_t(N * K));
  for (int64_t o = 0; o < N; ++o)
    for (int64_t i = 0; i < K; ++i) {
      const double v = tb ? b.v[size_t(o * K + i)] : b.v[size_t(i * N + o)];
      nd.weights[size_t(o * K + i)] = alpha == 1.f ? float(v) : float(v) * alpha;
    }
  n_out = N;
  return nd;
}

void Lowering::gemm() {
  const Value& a = dyn(0);
  const Const& b = cst(1);
  if (cur_->attr_i("transA", 0) != 0) throw Fail("transA=1 is not supported");
  int64_t N = 0;
  Node nd = fully_connected(a, b, true, N);
  const float beta = cur_->attr_f("beta", 1.f);
  if (present(2)) {
    const Const& c = cst(2);
    if ((c.v.size() != size_t(N) && c.v.size() != 1) || c.dims.size() > 2 || (c.dims.size() == 2 && c.dims[0] != 1))
      throw Fail("bias of shape " + dims_str(c.dims) + " does not match " + std::to_string(N) + " outputs");
    nd.bias.resize(size_t(N));
    for (int64_t o = 0; o < N; ++o) {
      const float v = float(c.v[c.v.size() == 1 ? 0 : size_t(o)]);
      nd.bias[size_t(o)] = beta == 1.f ? v : v * beta;
    }
  }
  emit(std::move(nd), {1, N});
}

void Lowering::matmul() {
  if (present(0) && in_[0]->is_const) throw Fail("a constant first operand is not supported");
  const Value& a = dyn(0);
  if (present(1) && !in_[1]->is_const) throw Fail("MatMul of two computed tensors is not supported");
  const Const& b = cst(1);
  int64_t N = 0;
  Node nd = fully_connected(a, b, false, N);
  emit(std::move(nd), {1, N});
}

void Lowering::pad() {
  const Value& x = dyn_map(0);
  const std::string mode = cur_->attr_s("mode", "constant");
  if (mode != "constant") throw Fail("pad mode '" + mode + "' is not supported (only constant zero)");
  std::vector<int64_t> pads;
  double value = 0;
  if (m_.opset < 11) {
    pads = cur_->attr_ints("pads");
    value = cur_->attr_f("value", 0.f);
  } else {
    pads = to_ints(cst(1));
    if (present(2)) {
      const Const& v = cst(2);
      if (v.v.size() != 1) throw Fail("constant_value must be a scalar");
      value = v.v[0];
    }
    if (present(3)) {  // opset 18 axes: pads lists begin/end for these axes only
      auto axes = to_ints(cst(3));
      if (pads.size() != 2 * axes.size()) throw Fail("pads and axes differ in length");
      std::vector<int64_t> full(8, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        const size_t a = size_t(norm_axis(axes[i], 4));
        full[a] = pads[i];
        full[a + 4] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (value != 0) throw Fail("only zero padding is supported (value " + std::to_string(value) + ")");
  if (pads.size() != 8) throw Fail("pads " + dims_str(pads) + " must have 8 entries for a 4-D tensor");
  if (pads[0] || pads[1] || pads[4] || pads[5]) throw Fail("padding of batch or channels " + dims_str(pads) + " is not supported");
  for (int64_t p : pads)
    if (p < 0) throw Fail("negative pads (cropping) " + dims_str(pads) + " are not supported");
  for (int64_t p : pads)
    if (p > kMaxDim) throw Fail("pads too large");
  if (pads[2] == 0 && pads[3] == 0 && pads[6] == 0 && pads[7] == 0) return alias(x, x.dims);
  Node nd = base(Op::Pad, {x.tensor});
  nd.pad_t = int(pads[2]);
  nd.pad_l = int(pads[3]);
  nd.pad_b = int(pads[6]);
  nd.pad_r = int(pads[7]);
  emit(std::move(nd), {1, x.dims[1], x.dims[2] + pads[2] + pads[6], x.dims[3] + pads[3] + pads[7]});
}

void Lowering::softmax() {
  const Value& x = dyn(0);
  const Dims& d = x.dims;
  const int64_t axis = norm_axis(cur_->attr_i("axis", m_.opset >= 13 ? -1 : 1), d.size());
  bool ok;
  if (m_.opset >= 13) {  // over one axis: it must be the only one longer than 1, and the channel axis
    ok = axis == 1;
    for (size_t a = 0; a < d.size(); ++a)
      if (int64_t(a) != axis && d[a] != 1) ok = false;
    if (d[size_t(axis)] == 1 && axis != 1) ok = false;
  } else {  // over all axes from `axis` on, flattened
    ok = axis <= 1;
    for (size_t a = 2; a < d.size(); ++a)
      if (d[a] != 1) ok = false;
  }
  if (!ok)
    throw Fail("softmax over axis " + std::to_string(axis) + " of " + dims_str(d) +
               " is not supported (only over the channels of [1,N] or [1,N,1,1])");
  Node nd = base(Op::Softmax, {x.tensor});
  emit(std::move(nd), d);
}

// ------------------------------------------------------------- the graph

Graph Lowering::finish() {
  const std::string& out_name = m_.outputs[0];
  auto it = env_.find(out_name);
  if (it == env_.end()) throw Fail("the graph output '" + out_name + "' is never computed");
  if (it->second.is_const) throw Fail("the graph output '" + out_name + "' is a constant");
  const int nt = int(tname_.size());
  std::vector<int> redirect(static_cast<size_t>(nt));
  for (int t = 0; t < nt; ++t) redirect[size_t(t)] = t;
  auto resolve = [&](int t) {
    while (redirect[size_t(t)] != t) t = redirect[size_t(t)];
    return t;
  };

  // Small rewrites that make the graph closer to what the later stages expect.
  // Each needs the rewritten tensor to have no other reader.
  std::vector<char> removed(nodes_.size(), 0);
  std::vector<int> users(size_t(nt), 0);
  auto recount = [&]() {
    for (Node& nd : nodes_)
      for (int& t : nd.inputs) t = resolve(t);
    std::fill(users.begin(), users.end(), 0);
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!removed[i])
        for (int t : nodes_[i].inputs) ++users[size_t(t)];
    ++users[size_t(resolve(it->second.tensor))];
  };
  auto producer = [&](int t) -> Node* {
    const int p = producer_[size_t(t)];
    return p < 0 || removed[size_t(p)] ? nullptr : &nodes_[size_t(p)];
  };

  // 1. "x + constant" right after a Conv/Gemm becomes part of its bias
  //    (MatMul + Add -> Gemm with bias).
  recount();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!pure_add_[i]) continue;
    const Node& add = nodes_[i];
    const int x = resolve(add.inputs[0]);
    Node* prod = producer(x);
    if (!prod || users[size_t(x)] != 1 || (prod->op != Op::Conv && prod->op != Op::ConvTranspose && prod->op != Op::Gemm)) continue;
    const size_t C = add.beta.size();
    if (prod->bias.empty()) prod->bias.assign(C, 0.f);
    for (size_t c = 0; c < C; ++c) prod->bias[c] += add.beta[c];
    removed[i] = 1;
    redirect[size_t(add.output)] = x;
  }

  // 2. Relu followed by Clip(max 6) (how torch exports F.relu6) is one Clip(0, 6).
  recount();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& clip = nodes_[i];
    if (removed[i] || clip.op != Op::Clip) continue;
    const int x = clip.inputs[0];
    Node* relu = producer(x);
    if (!relu || relu->op != Op::Relu || users[size_t(x)] != 1) continue;
    clip.lo = std::max(clip.lo, 0.f);
    clip.inputs[0] = relu->inputs[0];
    removed[size_t(producer_[size_t(x)])] = 1;
  }

  // 3. x * HardSigmoid(x) with alpha 1/6, beta 1/2 (how torch exports
  //    hardswish before opset 14) is one HardSwish.
  recount();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& mul = nodes_[i];
    if (removed[i] || mul.op != Op::Mul || mul.inputs.size() != 2) continue;
    for (int k = 0; k < 2; ++k) {
      const int s = mul.inputs[size_t(k)], x = mul.inputs[size_t(1 - k)];
      Node* hs = producer(s);
      if (!hs || hs->op != Op::HardSigmoid || hs->inputs[0] != x || users[size_t(s)] != 1 ||
          std::fabs(hs->alpha - 1.f / 6.f) > 1e-6f || hs->beta_hs != 0.5f)
        continue;
      removed[size_t(producer_[size_t(s)])] = 1;
      mul.op = Op::HardSwish;
      mul.inputs = {x};
      break;
    }
  }
  recount();
  const int out = resolve(it->second.tensor);
  if (out == input_tensor_) throw Fail("the model computes nothing (its output is its input)");

  // Keep only nodes that lead to the output.
  std::vector<char> need(size_t(nt), 0), live(nodes_.size(), 0);
  need[size_t(out)] = 1;
  for (int i = int(nodes_.size()) - 1; i >= 0; --i) {
    if (removed[size_t(i)] || !need[size_t(nodes_[size_t(i)].output)]) continue;
    live[size_t(i)] = 1;
    for (int t : nodes_[size_t(i)].inputs) need[size_t(t)] = 1;
  }

  Graph gr;
  gr.source = "onnx:" + name_;
  std::vector<int> map(size_t(nt), -1);
  map[size_t(input_tensor_)] = gr.add_tensor(tname_[size_t(input_tensor_)], tshape_[size_t(input_tensor_)]);
  gr.input = map[size_t(input_tensor_)];
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!live[i]) continue;
    Node nd = std::move(nodes_[i]);
    for (int& t : nd.inputs) t = map[size_t(t)];
    map[size_t(nd.output)] = gr.add_tensor(tname_[size_t(nd.output)], tshape_[size_t(nd.output)]);
    nd.output = map[size_t(nd.output)];
    gr.add_node(std::move(nd));
  }
  gr.output = map[size_t(out)];
  gr.validate();
  return gr;
}

}  // namespace

Graph lower(const Model& m, const std::string& name) { return Lowering(m, name).run(); }

}  // namespace ts::onnx_import
