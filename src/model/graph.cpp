#include "model/graph.h"

#include <algorithm>
#include <unordered_map>

#include "core/layer.h"
#include "core/op.h"

namespace ts {

const char* op_name(Op op) {
  switch (op) {
    case Op::Conv: return "Conv";
    case Op::BatchNorm: return "BatchNorm";
    case Op::Relu: return "Relu";
    case Op::Clip: return "Clip";
    case Op::HardSigmoid: return "HardSigmoid";
    case Op::HardSwish: return "HardSwish";
    case Op::Sigmoid: return "Sigmoid";
    case Op::Add: return "Add";
    case Op::Mul: return "Mul";
    case Op::Concat: return "Concat";
    case Op::AvgPool: return "AvgPool";
    case Op::GlobalAvgPool: return "GlobalAvgPool";
    case Op::MaxPool: return "MaxPool";
    case Op::Gemm: return "Gemm";
    case Op::Flatten: return "Flatten";
    case Op::Pad: return "Pad";
    case Op::Softmax: return "Softmax";
    case Op::LeakyRelu: return "LeakyRelu";
    case Op::Tanh: return "Tanh";
    case Op::PRelu: return "PRelu";
    case Op::Slice: return "Slice";
    case Op::Shuffle: return "Shuffle";
    case Op::Resize: return "Resize";
    case Op::ConvTranspose: return "ConvTranspose";
    case Op::Transpose: return "Transpose";
    case Op::Identity: return "Identity";
  }
  return "?";
}

bool is_activation(Op op) {
  switch (op) {
    case Op::Relu:
    case Op::Clip:
    case Op::HardSigmoid:
    case Op::HardSwish:
    case Op::Sigmoid:
    case Op::LeakyRelu:
    case Op::Tanh:
    case Op::PRelu: return true;
    default: return false;
  }
}

bool per_channel_table(const Node& n) {
  if (n.op == Op::PRelu) return true;
  for (size_t c = 1; c < n.post_s.size(); ++c)
    if (n.post_s[c] != n.post_s[0] || n.post_t[c] != n.post_t[0]) return true;
  return false;
}

std::string to_string(const Shape& s) {
  return std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
}

int Graph::add_tensor(const std::string& name, Shape s) {
  Tensor t;
  t.name = name;
  t.shape = s;
  tensors.push_back(std::move(t));
  return int(tensors.size()) - 1;
}

int Graph::add_node(Node n) {
  const int idx = int(nodes.size());
  for (int in : n.inputs) {
    if (in < 0 || in >= int(tensors.size()))
      throw Error("node '" + n.name + "': input tensor index out of range");
    tensors[in].consumers.push_back(idx);
  }
  if (n.output < 0 || n.output >= int(tensors.size()))
    throw Error("node '" + n.name + "': output tensor index out of range");
  if (tensors[n.output].producer != -1 || n.output == input)
    throw Error("node '" + n.name + "': tensor '" + tensors[n.output].name + "' has two producers");
  tensors[n.output].producer = idx;
  nodes.push_back(std::move(n));
  return idx;
}

// Bounds every importer's geometry must meet (the same as the quantised
// model's and the fragment reader's, core/op.h desc_bounds): kernels, strides and dilations 1..1024,
// padding 0..1024, and tensors of at most 2^28 elements, so the shape
// arithmetic below and the kernels' index arithmetic stay inside int32.
constexpr int kMaxGeom = 1 << 10;
constexpr int64_t kMaxTensorElems = int64_t(1) << 28;

static void check_geometry(const Node& n, bool dilated) {
  auto bad = [&](const char* what, int v, int lo) {
    return Error("node '" + n.name + "' (" + op_name(n.op) + "): " + what + " " + std::to_string(v) +
                 " is outside " + std::to_string(lo) + ".." + std::to_string(kMaxGeom));
  };
  for (auto [what, v] : {std::pair{"kernel size", n.kh}, {"kernel size", n.kw}, {"stride", n.sh}, {"stride", n.sw}})
    if (v < 1 || v > kMaxGeom) throw bad(what, v, 1);
  if (dilated)
    for (int v : {n.dh, n.dw})
      if (v < 1 || v > kMaxGeom) throw bad("dilation", v, 1);
  for (int v : {n.pad_t, n.pad_l, n.pad_b, n.pad_r})
    if (v < 0 || v > kMaxGeom) throw bad("padding", v, 0);
}

static int conv_out(int in, int k, int s, int d, int p0, int p1) {
  const int eff = d * (k - 1) + 1;
  const int span = in + p0 + p1 - eff;
  if (span < 0) return 0;
  return span / s + 1;
}

static Shape infer_shape_unchecked(const Graph& g, const Node& n);

Shape infer_shape(const Graph& g, const Node& n) {
  const Shape s = infer_shape_unchecked(g, n);
  if (s.c < 1 || s.h < 1 || s.w < 1 || s.size() > kMaxTensorElems)
    throw Error("node '" + n.name + "' (" + op_name(n.op) + "): output shape " + to_string(s) +
                " is empty or larger than " + std::to_string(kMaxTensorElems) + " elements");
  return s;
}

static Shape infer_shape_unchecked(const Graph& g, const Node& n) {
  auto in = [&](size_t i) -> const Shape& {
    if (i >= n.inputs.size()) throw Error("node '" + n.name + "': missing input " + std::to_string(i));
    const Shape& s = g.shape(n.inputs[i]);
    if (s.c < 1 || s.h < 1 || s.w < 1 || s.size() > kMaxTensorElems)
      throw Error("node '" + n.name + "': input " + std::to_string(i) + " has the unusable shape " + to_string(s));
    return s;
  };
  auto fail = [&](const std::string& why) -> Error {
    return Error("node '" + n.name + "' (" + op_name(n.op) + "): " + why);
  };
  if (is_activation(n.op)) {
    if (n.op == Op::PRelu && int64_t(n.weights.size()) != in(0).c) throw fail("slope count does not match the channels");
    if (n.post_s.size() != n.post_t.size() || (!n.post_s.empty() && int64_t(n.post_s.size()) != in(0).c))
      throw fail("post-activation affine does not match the channels");
    return in(0);
  }
  switch (n.op) {
    case Op::Conv: {
      const Shape& x = in(0);
      check_geometry(n, true);
      if (n.groups <= 0 || x.c % n.groups) throw fail("input channels not divisible by groups");
      const int cin_g = x.c / n.groups;
      if (n.weights.empty() || n.weights.size() % (size_t(cin_g) * n.kh * n.kw))
        throw fail("weight size does not match kernel and input channels");
      if (n.weights.size() / (size_t(cin_g) * n.kh * n.kw) > size_t(kMaxTensorElems))
        throw fail("too many output channels");
      const int cout = int(n.weights.size() / (size_t(cin_g) * n.kh * n.kw));
      if (cout % n.groups) throw fail("output channels not divisible by groups");
      if (!n.bias.empty() && int(n.bias.size()) != cout) throw fail("bias size mismatch");
      Shape o{cout, conv_out(x.h, n.kh, n.sh, n.dh, n.pad_t, n.pad_b),
              conv_out(x.w, n.kw, n.sw, n.dw, n.pad_l, n.pad_r)};
      if (o.h <= 0 || o.w <= 0) throw fail("input " + to_string(x) + " is too small for the kernel");
      return o;
    }
    case Op::ConvTranspose: {
      const Shape& x = in(0);
      check_geometry(n, false);
      if (n.groups <= 0 || x.c % n.groups) throw fail("input channels not divisible by groups");
      const size_t per_out = size_t(x.c / n.groups) * n.kh * n.kw;
      if (n.weights.empty() || n.weights.size() % per_out) throw fail("weight size does not match kernel and input channels");
      if (n.weights.size() / per_out > size_t(kMaxTensorElems)) throw fail("too many output channels");
      const int cout = int(n.weights.size() / per_out);
      if (cout % n.groups) throw fail("output channels not divisible by groups");
      if (!n.bias.empty() && int(n.bias.size()) != cout) throw fail("bias size mismatch");
      return {cout, int(std::min<int64_t>(kMaxTensorElems, int64_t(x.h - 1) * n.sh + n.kh - n.pad_t - n.pad_b)),
              int(std::min<int64_t>(kMaxTensorElems, int64_t(x.w - 1) * n.sw + n.kw - n.pad_l - n.pad_r))};
    }
    case Op::Resize: {
      const Shape& x = in(0);
      if (n.interp < 1 || n.interp > 2 || n.coord < 1 || n.coord > 4 || n.rounding < 1 || n.rounding > 4)
        throw fail("unknown Resize mode");
      return {x.c, n.out_h, n.out_w};
    }
    case Op::AvgPool:
    case Op::MaxPool: {
      const Shape& x = in(0);
      check_geometry(n, false);
      Shape o{x.c, conv_out(x.h, n.kh, n.sh, 1, n.pad_t, n.pad_b),
              conv_out(x.w, n.kw, n.sw, 1, n.pad_l, n.pad_r)};
      if (o.h <= 0 || o.w <= 0) throw fail("input " + to_string(x) + " is too small for the pool window");
      return o;
    }
    case Op::GlobalAvgPool: return {in(0).c, 1, 1};
    case Op::BatchNorm: {
      const Shape& x = in(0);
      if (int(n.gamma.size()) != x.c || n.beta.size() != n.gamma.size() ||
          n.mean.size() != n.gamma.size() || n.var.size() != n.gamma.size())
        throw fail("parameter size does not match " + std::to_string(x.c) + " channels");
      return x;
    }
    case Op::Identity:
      return in(0);
    case Op::Shuffle:
      if (n.groups < 1 || in(0).c % n.groups) throw fail("groups do not divide the channels");
      return in(0);
    case Op::Transpose: {
      const Shape& x = in(0);
      const int ext[3] = {x.c, x.h, x.w};
      bool seen[3] = {false, false, false};
      for (int p : n.perm) {
        if (p < 0 || p > 2 || seen[p]) throw fail("perm is not a permutation of the axes C, H, W");
        seen[p] = true;
      }
      return {ext[n.perm[0]], ext[n.perm[1]], ext[n.perm[2]]};
    }
    case Op::Slice: {
      const Shape& x = in(0);
      const Shape o{n.slice_c, n.slice_h, n.slice_w};
      for (int v : {n.dh, n.sh, n.sw, n.pad_b, n.pad_t, n.pad_l})
        if (v < 0 || v > kMaxGeom) throw fail("slice start or step " + std::to_string(v) + " is outside 0.." + std::to_string(kMaxGeom));
      if (o.c < 1 || o.h < 1 || o.w < 1 || n.dh < 1 || n.sh < 1 || n.sw < 1 ||
          int64_t(n.pad_b) + int64_t(o.c - 1) * n.dh >= x.c || int64_t(n.pad_t) + int64_t(o.h - 1) * n.sh >= x.h ||
          int64_t(n.pad_l) + int64_t(o.w - 1) * n.sw >= x.w)
        throw fail("slice " + to_string(o) + " does not fit the input " + to_string(x));
      return o;
    }
    case Op::Softmax: return in(0);
    case Op::Add: {
      // sh x sw > 1: the second operand nearest-upsampled by those factors
      // (a Resize folded in, model/fold.cpp).
      const Shape& a = in(0);
      const Shape& b = in(1);
      if (n.sh < 1 || n.sw < 1 || n.sh > kMaxGeom || n.sw > kMaxGeom)
        throw fail("upsampling factors " + std::to_string(n.sh) + "x" + std::to_string(n.sw) + " are outside 1.." +
                   std::to_string(kMaxGeom));
      if (b.c != a.c || int64_t(b.h) * n.sh != a.h || int64_t(b.w) * n.sw != a.w)
        throw fail("operand shapes differ: " + to_string(a) + " vs " + to_string(b) +
                   (n.sh > 1 || n.sw > 1 ? " upsampled " + std::to_string(n.sh) + "x" + std::to_string(n.sw) : ""));
      return a;
    }
    case Op::Mul: {
      const Shape& a = in(0);
      const Shape& b = in(1);
      if (a == b) return a;
      if (b.c == a.c && b.h == 1 && b.w == 1) return a;
      throw fail("unsupported broadcast " + to_string(a) + " * " + to_string(b));
    }
    case Op::Concat: {
      Shape o = in(0);
      o.c = 0;
      int64_t c = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Shape& s = in(i);
        if (s.h != o.h || s.w != o.w) throw fail("concat operands differ in spatial size");
        c += s.c;
      }
      if (c > kMaxTensorElems) throw fail("too many channels");
      o.c = int(c);
      return o;
    }
    case Op::Gemm: {
      const int64_t fan_in = in(0).size();
      if (n.weights.empty() || int64_t(n.weights.size()) % fan_in) throw fail("weight size does not match input size " + std::to_string(fan_in));
      if (int64_t(n.weights.size()) / fan_in > kMaxTensorElems) throw fail("too many outputs");
      const int out = int(int64_t(n.weights.size()) / fan_in);
      if (!n.bias.empty() && int(n.bias.size()) != out) throw fail("bias size mismatch");
      return {out, 1, 1};
    }
    case Op::Flatten:
      if (in(0).size() > kMaxTensorElems) throw fail("input is too large");
      return {int(in(0).size()), 1, 1};
    case Op::Pad: {
      const Shape& x = in(0);
      check_geometry(n, false);
      return {x.c, x.h + n.pad_t + n.pad_b, x.w + n.pad_l + n.pad_r};
    }
    default: break;  // the activations, above
  }
  throw fail("unknown op");
}

void Graph::validate() {
  for (auto& t : tensors) t.consumers.clear();
  if (input < 0 || input >= int(tensors.size())) throw Error("graph has no input tensor");
  if (output < 0 || output >= int(tensors.size())) throw Error("graph has no output tensor");
  std::vector<char> ready(tensors.size(), 0);
  ready[input] = 1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    for (int t : n.inputs) {
      if (t < 0 || t >= int(tensors.size())) throw Error("node '" + n.name + "': bad input index");
      if (!ready[t]) throw Error("node '" + n.name + "': input '" + tensors[t].name + "' is not computed before it");
      tensors[t].consumers.push_back(int(i));
    }
    if (n.output < 0 || n.output >= int(tensors.size())) throw Error("node '" + n.name + "': bad output index");
    if (ready[n.output]) throw Error("tensor '" + tensors[n.output].name + "' has two producers");
    ready[n.output] = 1;
    tensors[n.output].producer = int(i);
    const Shape s = infer_shape(*this, n);
    if (s != tensors[n.output].shape)
      throw Error("node '" + n.name + "': output shape " + to_string(tensors[n.output].shape) +
                  " disagrees with inferred " + to_string(s));
  }
  if (!ready[output]) throw Error("graph output '" + tensors[output].name + "' is never computed");
}

void Graph::compact() {
  // Bypass Identity nodes: every use of an Identity's output becomes a use
  // of its input.
  std::vector<int> alias(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) alias[t] = int(t);
  auto resolve = [&](int t) {
    while (alias[t] != t) t = alias[t];
    return t;
  };
  std::vector<Node> kept;
  for (auto& n : nodes) {
    if (n.op == Op::Identity) {
      alias[n.output] = resolve(n.inputs.at(0));
      continue;
    }
    for (int& t : n.inputs) t = resolve(t);
    kept.push_back(std::move(n));
  }
  const int out = resolve(output);
  // Keep only tensors that are used.
  std::vector<char> used(tensors.size(), 0);
  used[input] = 1;
  used[out] = 1;
  for (auto& n : kept) {
    for (int t : n.inputs) used[t] = 1;
    used[n.output] = 1;
  }
  std::vector<int> remap(tensors.size(), -1);
  std::vector<Tensor> nt;
  for (size_t t = 0; t < tensors.size(); ++t)
    if (used[t]) {
      remap[t] = int(nt.size());
      nt.push_back(std::move(tensors[t]));
      nt.back().producer = -1;
      nt.back().consumers.clear();
    }
  for (auto& n : kept) {
    for (int& t : n.inputs) t = remap[t];
    n.output = remap[n.output];
  }
  tensors = std::move(nt);
  nodes = std::move(kept);
  input = remap[input];
  output = remap[out];
  validate();
}

// The one MAC count (core/op.h): the node as the quantised layer it becomes
// (geometry only), asked of the op table. Nodes that become no layer
// (Softmax, and before folding BatchNorm, Flatten, Identity) count 0.
int64_t node_macs(const Graph& g, const Node& n) {
  core::LayerDesc d;
  switch (n.op) {
    case Op::Conv: d.op = core::QOp::Conv; break;
    case Op::Gemm: d.op = core::QOp::Gemm; break;
    case Op::Add: d.op = core::QOp::Add; break;
    case Op::Mul: d.op = core::QOp::Mul; break;
    case Op::Concat: d.op = core::QOp::Concat; break;
    case Op::AvgPool: d.op = core::QOp::AvgPool; break;
    case Op::GlobalAvgPool: d.op = core::QOp::GlobalAvgPool; break;
    case Op::MaxPool: d.op = core::QOp::MaxPool; break;
    case Op::Pad: d.op = core::QOp::Pad; break;
    case Op::Resize: d.op = core::QOp::Resize; break;
    case Op::ConvTranspose: d.op = core::QOp::ConvTranspose; break;
    case Op::Slice: d.op = core::QOp::Slice; break;
    case Op::Shuffle: d.op = core::QOp::Shuffle; break;
    case Op::Transpose: d.op = core::QOp::Transpose; break;
    default:
      if (!is_activation(n.op)) return 0;
      d.op = per_channel_table(n) ? core::QOp::ChannelLut : core::QOp::Lut;
  }
  if (n.inputs.empty() || n.inputs.size() > size_t(core::kMaxInputs)) return 0;
  auto dims = [](const Shape& s) { return core::Dims{s.c, s.h, s.w}; };
  d.n_inputs = uint8_t(n.inputs.size());
  for (size_t k = 0; k < n.inputs.size(); ++k) d.in[k] = dims(g.shape(n.inputs[k]));
  d.out = dims(g.shape(n.output));
  d.kh = n.kh; d.kw = n.kw; d.sh = n.sh; d.sw = n.sw; d.dh = n.dh; d.dw = n.dw;
  d.pad_t = n.pad_t; d.pad_l = n.pad_l; d.pad_b = n.pad_b; d.pad_r = n.pad_r;
  d.groups = n.groups;
  if (n.op == Op::Resize) {
    d.kh = n.interp; d.kw = n.coord; d.dh = n.rounding;
  }
  if (n.op == Op::Transpose) core::set_transpose_perm(d, n.perm);
  return int64_t(core::range_macs(d, 0, d.out.size()));
}

int64_t node_params(const Node& n) {
  return int64_t(n.weights.size() + n.bias.size() + n.gamma.size() + n.beta.size() + n.mean.size() +
                 n.var.size());
}

}  // namespace ts
