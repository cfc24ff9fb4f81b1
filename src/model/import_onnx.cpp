// ONNX -> float IR. See import_onnx.h for what is accepted.
//
// The importer walks the ONNX nodes in their (topological) order and keeps, for
// every ONNX value name, either a constant (initializers, Constant nodes and
// everything computed only from them or from known shapes) or a computed
// tensor with its ONNX dims. Computed tensors become IR nodes in a private
// list; at the end an Add-of-constant right after a Conv/Gemm is folded into
// the bias, Relu + Clip becomes one Clip, x * HardSigmoid(x) becomes HardSwish,
// nodes that do not lead to the output are dropped, and the rest is written
// into a Graph and validated.
#include "model/import_onnx.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML)

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

namespace ts {
namespace {

using Dims = std::vector<int64_t>;
namespace pb = ::onnx;

// A problem found while handling one node; the caller adds file and node.
struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int64_t kMaxElems = int64_t(1) << 30;  // per tensor, a sanity bound
constexpr int64_t kMaxDim = int64_t(1) << 24;

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) {
    if (x < 0 || x > kMaxElems) throw Fail("bad dimension in shape " + dims_str(d));
    n *= x;
    if (n > kMaxElems) throw Fail("shape " + dims_str(d) + " is too large");
  }
  return n;
}

// Clamps a double holding an integer (shape arithmetic) into int64 range.
int64_t to_i64(double v) {
  constexpr double lim = 4.0e18;
  if (std::isnan(v)) throw Fail("NaN in integer arithmetic");
  if (v > lim) return int64_t(4000000000000000000LL);
  if (v < -lim) return -int64_t(4000000000000000000LL);
  return int64_t(v);
}

// A constant tensor. Values are kept as doubles (exact for float32 and for
// the integer sizes that shape arithmetic produces).
struct Const {
  bool is_int = false;
  Dims dims;
  std::vector<double> v;
};
using ConstPtr = std::shared_ptr<const Const>;

struct Value {
  bool is_const = false;
  int tensor = -1;  // internal tensor id (computed values)
  Dims dims;        // ONNX dims (computed values)
  ConstPtr c;       // constants
};

float half_to_float(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(float(man), -24);
  else if (exp == 31)
    v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(float(man | 0x400), exp - 25);
  return sign ? -v : v;
}

template <typename T>
void read_raw(const std::string& raw, int64_t n, std::vector<double>& out, const std::string& what) {
  if (int64_t(raw.size()) != n * int64_t(sizeof(T)))
    throw Fail(what + " has " + std::to_string(raw.size()) + " bytes of data, its shape needs " +
               std::to_string(n * int64_t(sizeof(T))));
  out.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
    out[size_t(i)] = double(x);
  }
}

template <typename Field>
void read_field(const Field& f, int64_t n, std::vector<double>& out, const std::string& what) {
  if (int64_t(f.size()) != n)
    throw Fail(what + " has " + std::to_string(f.size()) + " values, its shape needs " + std::to_string(n));
  out.assign(f.begin(), f.end());
}

ConstPtr parse_tensor(const pb::TensorProto& t, const std::string& what) {
  if (t.data_location() == pb::TensorProto::EXTERNAL)
    throw Fail(what + " keeps its data in an external file, which is not supported");
  if (t.has_segment()) throw Fail(what + " is segmented, which is not supported");
  auto c = std::make_shared<Const>();
  for (int64_t d : t.dims()) c->dims.push_back(d);
  const int64_t n = numel(c->dims);
  const bool raw = t.has_raw_data();
  const std::string& r = t.raw_data();
  switch (t.data_type()) {
    case pb::TensorProto::FLOAT:
      raw ? read_raw<float>(r, n, c->v, what) : read_field(t.float_data(), n, c->v, what);
      break;
    case pb::TensorProto::DOUBLE:
      raw ? read_raw<double>(r, n, c->v, what) : read_field(t.double_data(), n, c->v, what);
      break;
    case pb::TensorProto::FLOAT16: {
      std::vector<double> bits;
      raw ? read_raw<uint16_t>(r, n, bits, what) : read_field(t.int32_data(), n, bits, what);
      c->v.resize(bits.size());
      for (size_t i = 0; i < bits.size(); ++i) c->v[i] = half_to_float(uint16_t(bits[i]));
      break;
    }
    case pb::TensorProto::INT64:
      c->is_int = true;
      if (raw) {
        if (int64_t(r.size()) != n * 8)
          throw Fail(what + " has " + std::to_string(r.size()) + " bytes of data, its shape needs " +
                     std::to_string(n * 8));
        c->v.resize(size_t(n));
        for (int64_t i = 0; i < n; ++i) {
          int64_t x;
          std::memcpy(&x, r.data() + i * 8, 8);
          c->v[size_t(i)] = double(x);
        }
      } else {
        read_field(t.int64_data(), n, c->v, what);
      }
      break;
    case pb::TensorProto::INT32:
      c->is_int = true;
      raw ? read_raw<int32_t>(r, n, c->v, what) : read_field(t.int32_data(), n, c->v, what);
      break;
    case pb::TensorProto::INT16:
      c->is_int = true;
      raw ? read_raw<int16_t>(r, n, c->v, what) : read_field(t.int32_data(), n, c->v, what);
      break;
    case pb::TensorProto::UINT16:
      c->is_int = true;
      raw ? read_raw<uint16_t>(r, n, c->v, what) : read_field(t.int32_data(), n, c->v, what);
      break;
    case pb::TensorProto::INT8:
      c->is_int = true;
      raw ? read_raw<int8_t>(r, n, c->v, what) : read_field(t.int32_data(), n, c->v, what);
      break;
    case pb::TensorProto::UINT8:
    case pb::TensorProto::BOOL:
      c->is_int = true;
      raw ? read_raw<uint8_t>(r, n, c->v, what) : read_field(t.int32_data(), n, c->v, what);
      break;
    case pb::TensorProto::UINT32:
      c->is_int = true;
      raw ? read_raw<uint32_t>(r, n, c->v, what) : read_field(t.uint64_data(), n, c->v, what);
      break;
    case pb::TensorProto::UINT64:
      c->is_int = true;
      raw ? read_raw<uint64_t>(r, n, c->v, what) : read_field(t.uint64_data(), n, c->v, what);
      break;
    default:
      throw Fail(what + " has unsupported element type " + std::to_string(t.data_type()));
  }
  return c;
}

std::vector<float> to_floats(const Const& c) { return std::vector<float>(c.v.begin(), c.v.end()); }

std::vector<int64_t> to_ints(const Const& c) {
  std::vector<int64_t> r;
  r.reserve(c.v.size());
  for (double x : c.v) r.push_back(to_i64(x));
  return r;
}

int64_t norm_axis(int64_t axis, size_t rank, const char* what = "axis") {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r)
    throw Fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

// Row-major strides of dims.
std::vector<int64_t> strides_of(const Dims& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = int(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

// Calls f(out_flat_index, multi_index) for every element of dims, in order.
template <typename F>
void for_each_index(const Dims& dims, F f) {
  const int64_t n = numel(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (int a = int(dims.size()) - 1; a >= 0; --a) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
  }
}

// Resolves a Reshape target (0 copies the input dim unless allowzero, -1 is inferred).
Dims reshape_target(const Dims& in, const std::vector<int64_t>& shape, bool allowzero) {
  Dims out(shape.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) throw Fail("Reshape copies dimension " + std::to_string(i) + " that the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) throw Fail("Reshape target " + dims_str(shape) + " has two -1 entries");
      infer = int(i);
      continue;
    }
    if (d < 0) throw Fail("Reshape target " + dims_str(shape) + " has a negative size");
    out[i] = d;
    known *= d;
  }
  const int64_t total = numel(in);
  if (infer >= 0) {
    if (known == 0 || total % known) throw Fail("cannot reshape " + dims_str(in) + " to " + dims_str(shape));
    out[size_t(infer)] = total / known;
  }
  if (numel(out) != total) throw Fail("cannot reshape " + dims_str(in) + " to " + dims_str(shape));
  return out;
}

// ------------------------------------------------------------- attributes

const pb::AttributeProto* find_attr(const pb::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_i(const pb::NodeProto& n, const char* name, int64_t def) {
  const auto* a = find_attr(n, name);
  if (!a) return def;
  if (a->type() != pb::AttributeProto::INT && !(a->type() == pb::AttributeProto::UNDEFINED && a->has_i()))
    throw Fail(std::string("attribute '") + name + "' should be an integer");
  return a->i();
}

float attr_f(const pb::NodeProto& n, const char* name, float def) {
  const auto* a = find_attr(n, name);
  if (!a) return def;
  if (a->type() == pb::AttributeProto::INT) return float(a->i());
  if (a->type() != pb::AttributeProto::FLOAT && !(a->type() == pb::AttributeProto::UNDEFINED && a->has_f()))
    throw Fail(std::string("attribute '") + name + "' should be a float");
  return a->f();
}

std::string attr_s(const pb::NodeProto& n, const char* name, const std::string& def) {
  const auto* a = find_attr(n, name);
  if (!a) return def;
  if (a->type() != pb::AttributeProto::STRING && !(a->type() == pb::AttributeProto::UNDEFINED && a->has_s()))
    throw Fail(std::string("attribute '") + name + "' should be a string");
  return a->s();
}

// Empty if absent.
std::vector<int64_t> attr_ints(const pb::NodeProto& n, const char* name) {
  const auto* a = find_attr(n, name);
  if (!a) return {};
  if (a->type() != pb::AttributeProto::INTS && a->type() != pb::AttributeProto::UNDEFINED)
    throw Fail(std::string("attribute '") + name + "' should be a list of integers");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// ------------------------------------------------------------- the importer

struct Window {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int pt = 0, pl = 0, pb = 0, pr = 0;
  int oh = 0, ow = 0;
  bool ceil_padded = false;  // ceil_mode added padding at the end
};

class Importer {
 public:
  Importer(std::string name, int input_size) : name_(std::move(name)), input_size_(input_size) {}
  Graph run(const pb::ModelProto& m);

 private:
  // --- model-level steps
  void read_opset(const pb::ModelProto& m);
  void read_input(const pb::GraphProto& g);
  void handle(const pb::NodeProto& n);
  Graph finish(const pb::GraphProto& g);
  std::string label(const pb::NodeProto& n, int index) const;

  // --- per-node helpers (cur_ is the node being handled)
  bool present(int i) const { return i < int(in_.size()) && in_[size_t(i)] != nullptr; }
  const Value& dyn(int i) const;
  const Const& cst(int i) const;
  Shape ir_shape(const Dims& d) const;
  void define(const std::string& name, Value v);
  void define_const(Const c) { define(cur_->output(0), Value{true, -1, {}, std::make_shared<Const>(std::move(c))}); }
  void alias(const Value& v, const Dims& dims);
  Node base(Op op) const;
  int emit(Node nd, const Dims& out_dims);
  bool output_used(int k) const;
  Window window(const Dims& x, int kh, int kw, bool pool) const;
  std::vector<float> per_channel(const Const& k, const Dims& x) const;
  void affine(const Value& x, std::vector<float> gamma, std::vector<float> beta, bool pure_add);
  void reshape_dyn(const Value& x, const Dims& out);

  // --- op handlers
  bool fold_const();
  void conv();
  void batchnorm();
  void clip();
  void binary(const std::string& op);
  void concat();
  void pool(bool avg);
  void global_pool(bool avg);
  void reduce_mean();
  void gemm();
  void matmul();
  void pad();
  void softmax();
  void unary(Op op);

  std::string name_;
  int input_size_;
  int opset_ = 0;
  std::unordered_map<std::string, Value> env_;
  std::unordered_map<std::string, int> uses_;

  // Graph under construction (internal tensor ids).
  std::vector<std::string> tname_;
  std::vector<Shape> tshape_;
  std::vector<int> producer_;
  std::vector<Node> nodes_;
  std::vector<char> pure_add_;  // node is a BatchNorm made from "x + constant"
  int input_tensor_ = -1;
  Dims stored_dims_;  // input dims as stored (-1 where not fixed)

  const pb::NodeProto* cur_ = nullptr;
  int cur_index_ = 0;
  std::vector<const Value*> in_;
};

std::string Importer::label(const pb::NodeProto& n, int index) const {
  if (!n.name().empty()) return n.name();
  return "#" + std::to_string(index) + (n.output_size() ? " (output '" + n.output(0) + "')" : std::string());
}

const Value& Importer::dyn(int i) const {
  if (!present(i)) throw Fail("input " + std::to_string(i) + " is missing");
  const Value& v = *in_[size_t(i)];
  if (v.is_const)
    throw Fail("input " + std::to_string(i) + " ('" + cur_->input(i) +
               "') is a constant here; only tensors computed from the image are supported");
  return v;
}

const Const& Importer::cst(int i) const {
  if (!present(i)) throw Fail("input " + std::to_string(i) + " is missing");
  const Value& v = *in_[size_t(i)];
  if (!v.is_const)
    throw Fail("input " + std::to_string(i) + " ('" + cur_->input(i) +
               "') must be a constant (initializer or shape arithmetic), but it is computed from the image");
  return *v.c;
}

Shape Importer::ir_shape(const Dims& d) const {
  if (d.size() == 4 && d[0] == 1) return Shape{int(d[1]), int(d[2]), int(d[3])};
  if (d.size() == 2 && d[0] == 1) return Shape{int(d[1]), 1, 1};
  throw Fail("tensor shape " + dims_str(d) + " is not supported (expected [1,C,H,W] or [1,N])");
}

void Importer::define(const std::string& name, Value v) {
  if (name.empty()) return;
  if (!env_.emplace(name, std::move(v)).second) throw Fail("value '" + name + "' is defined twice");
}

void Importer::alias(const Value& v, const Dims& dims) {
  Value a = v;
  if (!a.is_const) a.dims = dims;
  define(cur_->output(0), std::move(a));
}

Node Importer::base(Op op) const {
  Node nd;
  nd.op = op;
  nd.name = label(*cur_, cur_index_);
  return nd;
}

bool Importer::output_used(int k) const {
  if (k >= cur_->output_size() || cur_->output(k).empty()) return false;
  auto it = uses_.find(cur_->output(k));
  return it != uses_.end() && it->second > 0;
}

int Importer::emit(Node nd, const Dims& out_dims) {
  for (int64_t d : out_dims)
    if (d < 1 || d > kMaxDim) throw Fail("output shape " + dims_str(out_dims) + " is not valid");
  const Shape s = ir_shape(out_dims);
  numel(out_dims);
  const int t = int(tname_.size());
  tname_.push_back(cur_->output(0));
  tshape_.push_back(s);
  producer_.push_back(int(nodes_.size()));
  nd.output = t;
  nodes_.push_back(std::move(nd));
  pure_add_.push_back(0);
  define(cur_->output(0), Value{false, t, out_dims, nullptr});
  return int(nodes_.size()) - 1;
}

// Output size and padding of a conv/pool window along H and W.
Window Importer::window(const Dims& x, int kh, int kw, bool pool) const {
  const pb::NodeProto& n = *cur_;
  Window w;
  w.kh = kh;
  w.kw = kw;
  if (kh < 1 || kw < 1) throw Fail("kernel size must be positive");
  auto pair = [&](const char* name, int& a, int& b) {
    auto v = attr_ints(n, name);
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
  const std::string ap = attr_s(n, "auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto p = attr_ints(n, "pads");
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
  const bool ceil = attr_i(n, "ceil_mode", 0) != 0;
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
std::vector<float> Importer::per_channel(const Const& k, const Dims& x) const {
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
void Importer::affine(const Value& x, std::vector<float> gamma, std::vector<float> beta, bool pure_add) {
  bool noop = true;
  for (size_t c = 0; c < gamma.size(); ++c) noop = noop && gamma[c] == 1.f && beta[c] == 0.f;
  if (noop) return alias(x, x.dims);
  Node nd = base(Op::BatchNorm);
  nd.inputs = {x.tensor};
  const size_t C = gamma.size();
  nd.gamma = std::move(gamma);
  nd.beta = std::move(beta);
  nd.mean.assign(C, 0.f);
  nd.var.assign(C, 1.f);
  nd.eps = 0.f;
  const int idx = emit(std::move(nd), x.dims);
  pure_add_[size_t(idx)] = pure_add;
}

// A computed tensor that changes only its ONNX dims: free when the IR shape
// stays the same, a Flatten when it becomes [1,N], unsupported otherwise.
void Importer::reshape_dyn(const Value& x, const Dims& out) {
  if (numel(out) != numel(x.dims)) throw Fail("cannot reshape " + dims_str(x.dims) + " to " + dims_str(out));
  const bool flat = out.size() == 2 && out[0] == 1;
  const bool img = out.size() == 4 && out[0] == 1;
  if ((flat || img) && ir_shape(out) == ir_shape(x.dims)) return alias(x, out);
  if (flat) {
    Node nd = base(Op::Flatten);
    nd.inputs = {x.tensor};
    emit(std::move(nd), out);
    return;
  }
  throw Fail("reshaping " + dims_str(x.dims) + " to " + dims_str(out) +
             " is not supported (only flattening to [1,N])");
}

void Importer::read_opset(const pb::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = int(o.version());
  if (opset_ <= 0) throw Fail("the model declares no ONNX opset version");
}

void Importer::read_input(const pb::GraphProto& g) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<const pb::ValueInfoProto*> ins;
  for (const auto& vi : g.input())
    if (!inits.count(vi.name())) ins.push_back(&vi);
  if (ins.empty()) throw Fail("the model has no input");
  if (ins.size() > 1) {
    std::string names;
    for (auto* vi : ins) names += (names.empty() ? "'" : ", '") + vi->name() + "'";
    throw Fail("the model has " + std::to_string(ins.size()) + " inputs (" + names +
               "); only one image input is supported");
  }
  const pb::ValueInfoProto& vi = *ins[0];
  const std::string what = "input '" + vi.name() + "'";
  if (!vi.type().has_tensor_type()) throw Fail(what + " is not a tensor");
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() != pb::TensorProto::FLOAT)
    throw Fail(what + " has element type " + std::to_string(tt.elem_type()) + "; only float32 is supported");
  if (!tt.has_shape() || tt.shape().dim_size() != 4)
    throw Fail(what + " must have an NCHW shape [1,C,H,W]");
  Dims d(4, -1);
  for (int i = 0; i < 4; ++i) {
    const auto& dim = tt.shape().dim(i);
    if (dim.has_dim_value()) d[size_t(i)] = dim.dim_value();
  }
  stored_dims_ = d;
  if (d[0] == -1) d[0] = 1;
  if (d[0] != 1) throw Fail(what + " has batch size " + std::to_string(d[0]) + "; only batch 1 is supported");
  if (d[1] < 1 || d[1] > 4096) throw Fail(what + " must have a fixed number of channels");
  if (input_size_ > 0) {
    d[2] = d[3] = input_size_;
  } else if (d[2] < 1 || d[3] < 1) {
    throw Fail(what + " has no fixed height and width; give an input size");
  }
  if (d[2] > kMaxDim || d[3] > kMaxDim) throw Fail(what + " is too large");
  input_tensor_ = 0;
  tname_.push_back(vi.name());
  tshape_.push_back(ir_shape(d));
  producer_.push_back(-1);
  env_[vi.name()] = Value{false, 0, d, nullptr};
}

Graph Importer::run(const pb::ModelProto& m) {
  if (!m.has_graph()) throw Error(name_ + ": not an ONNX model (no graph)");
  const pb::GraphProto& g = m.graph();
  try {
    read_opset(m);
    for (const auto& t : g.initializer()) {
      if (t.name().empty()) throw Fail("an initializer has no name");
      auto c = parse_tensor(t, "initializer '" + t.name() + "'");
      env_[t.name()] = Value{true, -1, {}, c};
    }
    read_input(g);
    if (g.node_size() == 0) throw Fail("the graph has no nodes");
    if (g.output_size() != 1)
      throw Fail("the model has " + std::to_string(g.output_size()) + " outputs; exactly one is supported");
    for (const auto& n : g.node())
      for (const auto& s : n.input()) ++uses_[s];
    for (const auto& o : g.output()) ++uses_[o.name()];
  } catch (const Fail& e) {
    throw Error(name_ + ": " + e.what());
  }

  // Errors below may come from a changed input size: say so.
  std::string size_note;
  if (input_size_ > 0 && (stored_dims_[2] != input_size_ || stored_dims_[3] != input_size_)) {
    auto dim = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string("?"); };
    size_note = " (input size " + std::to_string(input_size_) + "x" + std::to_string(input_size_) +
                " instead of the stored " + dim(stored_dims_[2]) + "x" + dim(stored_dims_[3]) + ")";
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const pb::NodeProto& n = g.node(i);
    cur_ = &n;
    cur_index_ = i;
    try {
      handle(n);
    } catch (const Fail& e) {
      throw Error(name_ + ": node '" + label(n, i) + "' (" + n.op_type() + "): " + e.what() + size_note);
    }
  }
  try {
    return finish(g);
  } catch (const Fail& e) {
    throw Error(name_ + ": " + e.what() + size_note);
  } catch (const Error& e) {
    throw Error(name_ + ": " + e.what() + size_note);
  }
}

void Importer::handle(const pb::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    throw Error(name_ + ": unsupported op '" + n.domain() + "." + op + "' at node '" + label(n, cur_index_) + "'");
  if (n.output_size() < 1 || n.output(0).empty()) throw Fail("the node has no output");
  in_.assign(size_t(n.input_size()), nullptr);
  bool all_const = true;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    auto it = env_.find(n.input(i));
    if (it == env_.end())
      throw Fail("input '" + n.input(i) + "' is not produced by an earlier node, an initializer or the graph input");
    in_[size_t(i)] = &it->second;
    all_const = all_const && it->second.is_const;
  }

  if (op == "Identity" || op == "Dropout") {
    if (output_used(1)) throw Fail("the dropout mask output is not supported");
    if (!present(0)) throw Fail("input 0 is missing");
    const Value& x = *in_[0];
    return alias(x, x.dims);
  }
  if (op == "Shape" || op == "Size") {
    if (!present(0)) throw Fail("input 0 is missing");
    const Value& x = *in_[0];
    Dims d = x.is_const ? x.c->dims : x.dims;
    Const c;
    c.is_int = true;
    if (op == "Size") {
      c.v = {double(numel(d))};
      return define_const(std::move(c));
    }
    int64_t r = int64_t(d.size());
    int64_t s = attr_i(n, "start", 0), e = attr_i(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = std::clamp<int64_t>(s, 0, r);
    e = std::clamp<int64_t>(e, 0, r);
    for (int64_t i = s; i < e; ++i) c.v.push_back(double(d[size_t(i)]));
    c.dims = {int64_t(c.v.size())};
    return define_const(std::move(c));
  }
  if (all_const && fold_const()) return;

  if (op == "Conv") return conv();
  if (op == "BatchNormalization") return batchnorm();
  if (op == "Relu") return unary(Op::Relu);
  if (op == "Sigmoid") return unary(Op::Sigmoid);
  if (op == "HardSwish") return unary(Op::HardSwish);
  if (op == "HardSigmoid") return unary(Op::HardSigmoid);
  if (op == "Clip") return clip();
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return binary(op);
  if (op == "Concat") return concat();
  if (op == "AveragePool") return pool(true);
  if (op == "MaxPool") return pool(false);
  if (op == "GlobalAveragePool") return global_pool(true);
  if (op == "GlobalMaxPool") return global_pool(false);
  if (op == "ReduceMean") return reduce_mean();
  if (op == "Gemm") return gemm();
  if (op == "MatMul") return matmul();
  if (op == "Pad") return pad();
  if (op == "Softmax") return softmax();
  if (op == "Flatten") {
    const Value& x = dyn(0);
    const int64_t axis = norm_axis(attr_i(n, "axis", 1), x.dims.size() + 1);
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < x.dims.size(); ++i) (int64_t(i) < axis ? a : b) *= x.dims[i];
    return reshape_dyn(x, {a, b});
  }
  if (op == "Reshape") {
    const Value& x = dyn(0);
    return reshape_dyn(x, reshape_target(x.dims, to_ints(cst(1)), attr_i(n, "allowzero", 0) != 0));
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    const Value& x = dyn(0);
    std::vector<int64_t> axes = opset_ >= 13 ? (present(1) ? to_ints(cst(1)) : std::vector<int64_t>{})
                                             : attr_ints(n, "axes");
    Dims out;
    if (op == "Squeeze") {
      std::set<int64_t> drop;
      for (int64_t a : axes) drop.insert(norm_axis(a, x.dims.size()));
      for (size_t i = 0; i < x.dims.size(); ++i) {
        const bool listed = drop.count(int64_t(i)) > 0;
        if (listed && x.dims[i] != 1) throw Fail("cannot squeeze axis " + std::to_string(i) + " of " + dims_str(x.dims));
        if (!(listed || (axes.empty() && x.dims[i] == 1))) out.push_back(x.dims[i]);
      }
    } else {
      if (axes.empty()) throw Fail("Unsqueeze needs axes");
      const size_t rank = x.dims.size() + axes.size();
      std::vector<char> ins(rank, 0);
      for (int64_t a : axes) ins[size_t(norm_axis(a, rank))] = 1;
      size_t j = 0;
      for (size_t i = 0; i < rank; ++i) out.push_back(ins[i] ? 1 : x.dims.at(j++));
    }
    return reshape_dyn(x, out);
  }
  throw Error(name_ + ": unsupported op '" + op + "' at node '" + label(n, cur_index_) + "'");
}

// Evaluates a node whose inputs are all constants. Returns false when the op is
// not one of the shape-arithmetic ops handled here.
bool Importer::fold_const() {
  const pb::NodeProto& n = *cur_;
  const std::string& op = n.op_type();
  auto c = [&](int i) -> const Const& { return cst(i); };

  if (op == "Constant") {
    Const r;
    if (const auto* a = find_attr(n, "value")) {
      auto t = parse_tensor(a->t(), "constant");
      r = *t;
    } else if ((a = find_attr(n, "value_float"))) {
      r.v = {double(a->f())};
    } else if ((a = find_attr(n, "value_floats"))) {
      r.v.assign(a->floats().begin(), a->floats().end());
      r.dims = {int64_t(r.v.size())};
    } else if ((a = find_attr(n, "value_int"))) {
      r.is_int = true;
      r.v = {double(a->i())};
    } else if ((a = find_attr(n, "value_ints"))) {
      r.is_int = true;
      r.v.assign(a->ints().begin(), a->ints().end());
      r.dims = {int64_t(r.v.size())};
    } else {
      throw Fail("only tensor, float and int constants are supported");
    }
    define_const(std::move(r));
    return true;
  }
  if (op == "ConstantOfShape") {
    Const r;
    r.dims = to_ints(c(0));
    if (numel(r.dims) > (int64_t(1) << 24)) throw Fail("ConstantOfShape " + dims_str(r.dims) + " is too large");
    double val = 0;
    if (const auto* a = find_attr(n, "value")) {
      auto t = parse_tensor(a->t(), "ConstantOfShape value");
      if (t->v.size() != 1) throw Fail("ConstantOfShape value must have one element");
      val = t->v[0];
      r.is_int = t->is_int;
    }
    r.v.assign(size_t(numel(r.dims)), val);
    define_const(std::move(r));
    return true;
  }
  if (op == "Cast") {
    Const r = c(0);
    const int64_t to = attr_i(n, "to", pb::TensorProto::FLOAT);
    switch (to) {
      case pb::TensorProto::FLOAT:
      case pb::TensorProto::FLOAT16:
        r.is_int = false;
        for (double& x : r.v) x = double(float(x));
        break;
      case pb::TensorProto::DOUBLE:
        r.is_int = false;
        break;
      case pb::TensorProto::BOOL:
        r.is_int = true;
        for (double& x : r.v) x = x != 0 ? 1 : 0;
        break;
      case pb::TensorProto::INT8:
      case pb::TensorProto::UINT8:
      case pb::TensorProto::INT16:
      case pb::TensorProto::UINT16:
      case pb::TensorProto::INT32:
      case pb::TensorProto::UINT32:
      case pb::TensorProto::INT64:
      case pb::TensorProto::UINT64:
        r.is_int = true;
        for (double& x : r.v) x = std::trunc(x);
        break;
      default:
        throw Fail("Cast to element type " + std::to_string(to) + " is not supported");
    }
    define_const(std::move(r));
    return true;
  }
  if (op == "Reshape") {
    Const r = c(0);
    r.dims = reshape_target(r.dims, to_ints(c(1)), attr_i(n, "allowzero", 0) != 0);
    define_const(std::move(r));
    return true;
  }
  if (op == "Flatten") {
    Const r = c(0);
    const int64_t axis = norm_axis(attr_i(n, "axis", 1), r.dims.size() + 1);
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < r.dims.size(); ++i) (int64_t(i) < axis ? a : b) *= r.dims[i];
    r.dims = {a, b};
    define_const(std::move(r));
    return true;
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    Const r = c(0);
    std::vector<int64_t> axes =
        opset_ >= 13 ? (present(1) ? to_ints(c(1)) : std::vector<int64_t>{}) : attr_ints(n, "axes");
    Dims out;
    if (op == "Squeeze") {
      std::set<int64_t> drop;
      for (int64_t a : axes) drop.insert(norm_axis(a, r.dims.size()));
      for (size_t i = 0; i < r.dims.size(); ++i) {
        const bool listed = drop.count(int64_t(i)) > 0;
        if (listed && r.dims[i] != 1) throw Fail("cannot squeeze a dimension that is not 1");
        if (!(listed || (axes.empty() && r.dims[i] == 1))) out.push_back(r.dims[i]);
      }
    } else {
      const size_t rank = r.dims.size() + axes.size();
      std::vector<char> ins(rank, 0);
      for (int64_t a : axes) ins[size_t(norm_axis(a, rank))] = 1;
      size_t j = 0;
      for (size_t i = 0; i < rank; ++i) out.push_back(ins[i] ? 1 : r.dims.at(j++));
    }
    r.dims = out;
    define_const(std::move(r));
    return true;
  }
  if (op == "Concat") {
    std::vector<const Const*> parts;
    for (int i = 0; i < n.input_size(); ++i)
      if (present(i)) parts.push_back(&c(i));
    if (parts.empty()) throw Fail("Concat has no inputs");
    const size_t rank = parts[0]->dims.size();
    const int64_t axis = norm_axis(attr_i(n, "axis", 0), rank);
    Const r;
    r.is_int = true;
    r.dims = parts[0]->dims;
    r.dims[size_t(axis)] = 0;
    for (const Const* p : parts) {
      if (p->dims.size() != rank) throw Fail("Concat inputs differ in rank");
      for (size_t a = 0; a < rank; ++a)
        if (int64_t(a) != axis && p->dims[a] != parts[0]->dims[a]) throw Fail("Concat inputs differ in shape");
      r.dims[size_t(axis)] += p->dims[size_t(axis)];
      r.is_int = r.is_int && p->is_int;
    }
    int64_t outer = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= r.dims[size_t(a)];
    for (int64_t o = 0; o < outer; ++o)
      for (const Const* p : parts) {
        const int64_t chunk = numel(p->dims) / std::max<int64_t>(outer, 1);
        r.v.insert(r.v.end(), p->v.begin() + o * chunk, p->v.begin() + (o + 1) * chunk);
      }
    define_const(std::move(r));
    return true;
  }
  if (op == "Gather") {
    const Const& d = c(0);
    const Const& ix = c(1);
    if (d.dims.empty()) throw Fail("Gather on a scalar");
    const int64_t axis = norm_axis(attr_i(n, "axis", 0), d.dims.size());
    const int64_t len = d.dims[size_t(axis)];
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= d.dims[size_t(a)];
    for (size_t a = size_t(axis) + 1; a < d.dims.size(); ++a) inner *= d.dims[a];
    Const r;
    r.is_int = d.is_int;
    r.dims.assign(d.dims.begin(), d.dims.begin() + axis);
    r.dims.insert(r.dims.end(), ix.dims.begin(), ix.dims.end());
    r.dims.insert(r.dims.end(), d.dims.begin() + axis + 1, d.dims.end());
    for (int64_t o = 0; o < outer; ++o)
      for (double iv : ix.v) {
        int64_t k = to_i64(iv);
        if (k < 0) k += len;
        if (k < 0 || k >= len) throw Fail("Gather index " + std::to_string(to_i64(iv)) + " is out of range");
        auto start = d.v.begin() + (o * len + k) * inner;
        r.v.insert(r.v.end(), start, start + inner);
      }
    define_const(std::move(r));
    return true;
  }
  if (op == "Slice") {
    const Const& d = c(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = attr_ints(n, "starts");
      ends = attr_ints(n, "ends");
      axes = attr_ints(n, "axes");
    } else {
      starts = to_ints(c(1));
      ends = to_ints(c(2));
      if (present(3)) axes = to_ints(c(3));
      if (present(4)) steps = to_ints(c(4));
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      throw Fail("Slice starts/ends/axes/steps differ in length");
    const size_t rank = d.dims.size();
    std::vector<int64_t> st(rank, 0), sp(rank, 1);
    Dims od = d.dims;
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t a = size_t(norm_axis(axes[i], rank));
      const int64_t dim = d.dims[a], step = steps[i];
      if (step == 0) throw Fail("Slice step 0");
      int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
      int64_t cnt;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        cnt = e > s ? (e - s + step - 1) / step : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        cnt = s > e ? (s - e - step - 1) / -step : 0;
      }
      st[a] = s;
      sp[a] = step;
      od[a] = cnt;
    }
    Const r;
    r.is_int = d.is_int;
    r.dims = od;
    const auto ds = strides_of(d.dims);
    for_each_index(od, [&](int64_t, const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (size_t a = 0; a < rank; ++a) off += (st[a] + idx[a] * sp[a]) * ds[a];
      r.v.push_back(d.v.at(size_t(off)));
    });
    define_const(std::move(r));
    return true;
  }
  if (op == "Transpose") {
    const Const& d = c(0);
    const size_t rank = d.dims.size();
    auto perm = attr_ints(n, "perm");
    if (perm.empty())
      for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(rank - 1 - i));
    if (perm.size() != rank) throw Fail("Transpose perm does not match the rank");
    Const r;
    r.is_int = d.is_int;
    for (int64_t p : perm) r.dims.push_back(d.dims.at(size_t(norm_axis(p, rank))));
    const auto ds = strides_of(d.dims);
    for_each_index(r.dims, [&](int64_t, const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (size_t a = 0; a < rank; ++a) off += idx[a] * ds[size_t(norm_axis(perm[a], rank))];
      r.v.push_back(d.v.at(size_t(off)));
    });
    define_const(std::move(r));
    return true;
  }
  static const std::set<std::string> unary = {"Neg", "Floor", "Ceil", "Sqrt", "Abs", "Relu", "Reciprocal"};
  if (unary.count(op)) {
    Const r = c(0);
    for (double& x : r.v) {
      if (op == "Neg") x = -x;
      else if (op == "Floor") x = std::floor(x);
      else if (op == "Ceil") x = std::ceil(x);
      else if (op == "Sqrt") x = std::sqrt(x);
      else if (op == "Abs") x = std::fabs(x);
      else if (op == "Relu") x = std::max(x, 0.0);
      else x = 1.0 / x;
      if (!r.is_int) x = double(float(x));
    }
    define_const(std::move(r));
    return true;
  }
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max"};
  if (binary.count(op)) {
    const Const& a = c(0);
    const Const& b = c(1);
    const size_t rank = std::max(a.dims.size(), b.dims.size());
    Dims ad(rank - a.dims.size(), 1), bd(rank - b.dims.size(), 1);
    ad.insert(ad.end(), a.dims.begin(), a.dims.end());
    bd.insert(bd.end(), b.dims.begin(), b.dims.end());
    Const r;
    r.is_int = a.is_int && b.is_int;
    r.dims.resize(rank);
    for (size_t i = 0; i < rank; ++i) {
      if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
        throw Fail("cannot broadcast " + dims_str(a.dims) + " with " + dims_str(b.dims));
      r.dims[i] = ad[i] == 1 ? bd[i] : ad[i];
    }
    auto as = strides_of(ad), bs = strides_of(bd);
    for_each_index(r.dims, [&](int64_t, const std::vector<int64_t>& idx) {
      int64_t ao = 0, bo = 0;
      for (size_t i = 0; i < rank; ++i) {
        if (ad[i] != 1) ao += idx[i] * as[i];
        if (bd[i] != 1) bo += idx[i] * bs[i];
      }
      const double x = a.v.at(size_t(ao)), y = b.v.at(size_t(bo));
      double z;
      if (op == "Add") z = x + y;
      else if (op == "Sub") z = x - y;
      else if (op == "Mul") z = x * y;
      else if (op == "Div") {
        if (r.is_int && y == 0) throw Fail("integer division by zero");
        z = r.is_int ? std::trunc(x / y) : x / y;
      } else if (op == "Pow") z = std::pow(x, y);
      else if (op == "Min") z = std::min(x, y);
      else z = std::max(x, y);
      r.v.push_back(r.is_int ? z : double(float(z)));
    });
    define_const(std::move(r));
    return true;
  }
  return false;
}

void Importer::unary(Op op) {
  const Value& x = dyn(0);
  Node nd = base(op);
  nd.inputs = {x.tensor};
  if (op == Op::HardSigmoid) {
    nd.alpha = attr_f(*cur_, "alpha", 0.2f);
    nd.beta_hs = attr_f(*cur_, "beta", 0.5f);
  }
  emit(std::move(nd), x.dims);
}

void Importer::clip() {
  const Value& x = dyn(0);
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  if (opset_ < 11) {
    lo = attr_f(*cur_, "min", lo);
    hi = attr_f(*cur_, "max", hi);
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
  Node nd = base(Op::Clip);
  nd.inputs = {x.tensor};
  nd.lo = lo;
  nd.hi = hi;
  emit(std::move(nd), x.dims);
}

void Importer::conv() {
  const Value& x = dyn(0);
  const Const& w = cst(1);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  if (w.dims.size() != 4) throw Fail("weights of shape " + dims_str(w.dims) + " (only 2-D convolution is supported)");
  const int64_t O = w.dims[0], Ig = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t groups = attr_i(*cur_, "group", 1);
  const int64_t C = x.dims[1];
  if (groups < 1 || C % groups || Ig * groups != C || O % groups)
    throw Fail("weights " + dims_str(w.dims) + " with group " + std::to_string(groups) + " do not fit input " +
               dims_str(x.dims));
  auto ks = attr_ints(*cur_, "kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != kh || ks[1] != kw))
    throw Fail("kernel_shape " + dims_str(ks) + " disagrees with weights " + dims_str(w.dims));
  if (kh > kMaxDim || kw > kMaxDim) throw Fail("kernel too large");
  const Window win = window(x.dims, int(kh), int(kw), false);
  Node nd = base(Op::Conv);
  nd.inputs = {x.tensor};
  nd.kh = win.kh;
  nd.kw = win.kw;
  nd.sh = win.sh;
  nd.sw = win.sw;
  nd.dh = win.dh;
  nd.dw = win.dw;
  nd.pad_t = win.pt;
  nd.pad_l = win.pl;
  nd.pad_b = win.pb;
  nd.pad_r = win.pr;
  nd.groups = int(groups);
  nd.weights = to_floats(w);
  if (present(2)) {
    const Const& b = cst(2);
    if (int64_t(b.v.size()) != O) throw Fail("bias has " + std::to_string(b.v.size()) + " values for " + std::to_string(O) + " outputs");
    nd.bias = to_floats(b);
  }
  emit(std::move(nd), {1, O, win.oh, win.ow});
}

void Importer::batchnorm() {
  const Value& x = dyn(0);
  if (attr_i(*cur_, "training_mode", 0) != 0) throw Fail("training mode is not supported");
  if (attr_i(*cur_, "spatial", 1) == 0) throw Fail("per-activation (spatial=0) normalisation is not supported");
  for (int k = 1; k < cur_->output_size(); ++k)
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
  Node nd = base(Op::BatchNorm);
  nd.inputs = {x.tensor};
  nd.gamma = param(1, "scale");
  nd.beta = param(2, "bias");
  nd.mean = param(3, "mean");
  nd.var = param(4, "var");
  nd.eps = attr_f(*cur_, "epsilon", 1e-5f);
  emit(std::move(nd), x.dims);
}

void Importer::binary(const std::string& op) {
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

void Importer::concat() {
  std::vector<const Value*> parts;
  for (int i = 0; i < cur_->input_size(); ++i)
    if (present(i)) parts.push_back(&dyn(i));
  if (parts.empty()) throw Fail("no inputs");
  const Dims& d0 = parts[0]->dims;
  const int64_t axis = norm_axis(attr_i(*cur_, "axis", 1), d0.size());
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

void Importer::pool(bool avg) {
  const Value& x = dyn(0);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  if (!avg && output_used(1)) throw Fail("the indices output is not supported");
  auto ks = attr_ints(*cur_, "kernel_shape");
  if (ks.size() != 2) throw Fail("kernel_shape must have 2 entries (only 2-D pooling is supported)");
  if (ks[0] < 1 || ks[1] < 1 || ks[0] > kMaxDim || ks[1] > kMaxDim) throw Fail("bad kernel_shape");
  const Window w = window(x.dims, int(ks[0]), int(ks[1]), true);
  Node nd = base(avg ? Op::AvgPool : Op::MaxPool);
  nd.inputs = {x.tensor};
  nd.kh = w.kh;
  nd.kw = w.kw;
  nd.sh = w.sh;
  nd.sw = w.sw;
  nd.pad_t = w.pt;
  nd.pad_l = w.pl;
  nd.pad_b = w.pb;
  nd.pad_r = w.pr;
  if (avg) {
    nd.count_include_pad = attr_i(*cur_, "count_include_pad", 0) != 0;
    if (nd.count_include_pad && w.ceil_padded)
      throw Fail("AveragePool with ceil_mode and count_include_pad is not supported");
  }
  emit(std::move(nd), {1, x.dims[1], w.oh, w.ow});
}

void Importer::global_pool(bool avg) {
  const Value& x = dyn(0);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  Node nd = base(avg ? Op::GlobalAvgPool : Op::MaxPool);
  nd.inputs = {x.tensor};
  if (!avg) {  // a max pool whose window is the whole image
    nd.kh = int(x.dims[2]);
    nd.kw = int(x.dims[3]);
  }
  emit(std::move(nd), {1, x.dims[1], 1, 1});
}

void Importer::reduce_mean() {
  const Value& x = dyn(0);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  std::vector<int64_t> axes = opset_ >= 18 ? (present(1) ? to_ints(cst(1)) : std::vector<int64_t>{})
                                           : attr_ints(*cur_, "axes");
  std::set<int64_t> s;
  for (int64_t a : axes) s.insert(norm_axis(a, 4));
  if (s != std::set<int64_t>{2, 3})
    throw Fail("only the mean over H and W (axes [2,3]) is supported, got axes " + dims_str(axes));
  const bool keep = attr_i(*cur_, "keepdims", 1) != 0;
  Node nd = base(Op::GlobalAvgPool);
  nd.inputs = {x.tensor};
  emit(std::move(nd), keep ? Dims{1, x.dims[1], 1, 1} : Dims{1, x.dims[1]});
}

void Importer::gemm() {
  const Value& a = dyn(0);
  const Const& b = cst(1);
  if (attr_i(*cur_, "transA", 0) != 0) throw Fail("transA=1 is not supported");
  if (a.dims.size() != 2 || a.dims[0] != 1) throw Fail("input shape " + dims_str(a.dims) + " is not [1,K]");
  if (b.dims.size() != 2) throw Fail("weights of shape " + dims_str(b.dims) + " are not a matrix");
  const bool tb = attr_i(*cur_, "transB", 0) != 0;
  const int64_t K = tb ? b.dims[1] : b.dims[0], N = tb ? b.dims[0] : b.dims[1];
  if (K != a.dims[1])
    throw Fail("weights " + dims_str(b.dims) + (tb ? " (transposed)" : "") + " expect " + std::to_string(K) +
               " inputs but the input has shape " + dims_str(a.dims));
  const float alpha = attr_f(*cur_, "alpha", 1.f), beta = attr_f(*cur_, "beta", 1.f);
  Node nd = base(Op::Gemm);
  nd.inputs = {a.tensor};
  nd.weights.resize(size_t(N * K));
  for (int64_t o = 0; o < N; ++o)
    for (int64_t i = 0; i < K; ++i) {
      const double v = tb ? b.v[size_t(o * K + i)] : b.v[size_t(i * N + o)];
      nd.weights[size_t(o * K + i)] = alpha == 1.f ? float(v) : float(v) * alpha;
    }
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

void Importer::matmul() {
  if (present(0) && in_[0]->is_const) throw Fail("a constant first operand is not supported");
  const Value& a = dyn(0);
  if (present(1) && !in_[1]->is_const) throw Fail("MatMul of two computed tensors is not supported");
  const Const& b = cst(1);
  if (a.dims.size() != 2 || a.dims[0] != 1) throw Fail("input shape " + dims_str(a.dims) + " is not [1,K]");
  if (b.dims.size() != 2) throw Fail("weights of shape " + dims_str(b.dims) + " are not a matrix");
  const int64_t K = b.dims[0], N = b.dims[1];
  if (K != a.dims[1])
    throw Fail("weights " + dims_str(b.dims) + " expect " + std::to_string(K) + " inputs but the input has shape " +
               dims_str(a.dims));
  Node nd = base(Op::Gemm);
  nd.inputs = {a.tensor};
  nd.weights.resize(size_t(N * K));
  for (int64_t o = 0; o < N; ++o)
    for (int64_t i = 0; i < K; ++i) nd.weights[size_t(o * K + i)] = float(b.v[size_t(i * N + o)]);
  emit(std::move(nd), {1, N});
}

void Importer::pad() {
  const Value& x = dyn(0);
  if (x.dims.size() != 4) throw Fail("input shape " + dims_str(x.dims) + " is not [1,C,H,W]");
  const std::string mode = attr_s(*cur_, "mode", "constant");
  if (mode != "constant") throw Fail("pad mode '" + mode + "' is not supported (only constant zero)");
  std::vector<int64_t> pads;
  double value = 0;
  if (opset_ < 11) {
    pads = attr_ints(*cur_, "pads");
    value = attr_f(*cur_, "value", 0.f);
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
  Node nd = base(Op::Pad);
  nd.inputs = {x.tensor};
  nd.pad_t = int(pads[2]);
  nd.pad_l = int(pads[3]);
  nd.pad_b = int(pads[6]);
  nd.pad_r = int(pads[7]);
  emit(std::move(nd), {1, x.dims[1], x.dims[2] + pads[2] + pads[6], x.dims[3] + pads[3] + pads[7]});
}

void Importer::softmax() {
  const Value& x = dyn(0);
  const Dims& d = x.dims;
  const int64_t axis = norm_axis(attr_i(*cur_, "axis", opset_ >= 13 ? -1 : 1), d.size());
  bool ok;
  if (opset_ >= 13) {  // over one axis: it must be the only one longer than 1, and the channel axis
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
  Node nd = base(Op::Softmax);
  nd.inputs = {x.tensor};
  emit(std::move(nd), d);
}

Graph Importer::finish(const pb::GraphProto& g) {
  const std::string& out_name = g.output(0).name();
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
    if (!prod || users[size_t(x)] != 1 || (prod->op != Op::Conv && prod->op != Op::Gemm)) continue;
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

Graph import_onnx_bytes(const std::string& bytes, const std::string& name, int input_size) {
  if (input_size < 0) throw Error(name + ": input size must not be negative");
  if (bytes.empty()) throw Error(name + ": the file is empty");
  pb::ModelProto model;
  if (!model.ParseFromString(bytes))
    throw Error(name + ": cannot parse as an ONNX model (the file is truncated, corrupt or not ONNX)");
  Importer imp(name, input_size);
  try {
    return imp.run(model);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(name + ": out of memory while importing (the model declares huge tensors)");
  } catch (const std::exception& e) {
    throw Error(name + ": malformed model (" + e.what() + ")");
  }
}

std::vector<int64_t> onnx_input_dims(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open file");
  pb::ModelProto model;
  if (!model.ParseFromIstream(&f) || !model.has_graph())
    throw Error(path + ": cannot parse as an ONNX model (the file is truncated, corrupt or not ONNX)");
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  for (const auto& vi : model.graph().input()) {
    if (inits.count(vi.name())) continue;
    std::vector<int64_t> d;
    if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
      for (const auto& dim : vi.type().tensor_type().shape().dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    return d;
  }
  return {};
}

Graph import_onnx(const std::string& path, int input_size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open file");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(path + ": read error");
  return import_onnx_bytes(ss.str(), path, input_size);
}

}  // namespace ts
