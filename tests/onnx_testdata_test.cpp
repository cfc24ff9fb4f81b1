// ONNX's own operator test cases (Debian package libonnx-testdata) run
// through tinysplit's int8 kernels and float executor.
//
// Each case is a folder with model.onnx and test_data_set_0/{input,output}_*.pb
// (TensorProto). We parse them with the ONNX protobuf API and compare:
//  - integer cases (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger,
//    uint8/int8 MaxPool/Add/Mul/Clip, QuantizeLinear, DequantizeLinear) with
//    core::compute_range, the quantiser or the host-side (de)quantisation;
//  - float cases with run_float on a one-node ts::Graph (eval_node when a
//    node has several runtime operands, since a Graph has one input).
// Our IR is batch 1 C-H-W, so batched cases run once per batch item (and
// Gemm/MatMul once per row, Softmax once per slice along its axis, Concat
// once per index before its axis).
//
// Scope: every case under node/, pytorch-converted/, pytorch-operator/ and
// simple/ whose nodes (ignoring Constant) all belong to kScopeOps is either
// run (kRun) or skipped with a reason (kSkipped); the test
// ScopeIsCompletelyListed fails on any case in scope that is in neither
// list, so nothing is left out silently. Run the binary directly to print
// the results table (docs/kernels.md quotes it).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/qmath.h"
#include "model/import_onnx.h"
#include "model/float_exec.h"
#include "model/graph.h"
#include "model/qgraph.h"
#include "model/quantize.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using core::Dims;
using core::KernelStatus;
using core::LayerDesc;
using core::QOp;
using core::View;

// ---------------------------------------------------------------- data

std::string data_root() {
  if (const char* e = std::getenv("TS_ONNX_TESTDATA")) return e;
  return "/usr/share/libonnx-testdata/data";  // `dpkg -L libonnx-testdata`
}

#define REQUIRE_TESTDATA()                                                                                      \
  ASSERT_TRUE(fs::is_directory(data_root() + "/node"))                                                          \
      << "ONNX test data not found at " << data_root()                                                          \
      << ": install Debian's libonnx-testdata by running scripts/setup.sh (or set TS_ONNX_TESTDATA to its data " \
         "folder)"

// Thrown by a handler for a feature it does not implement: the case must then
// be moved to kSkipped with the reason.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Any tensor's elements as doubles (exact for every type used here).
struct Arr {
  int type = 0;
  std::vector<int64_t> dims;
  std::vector<double> v;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  std::vector<float> f() const { return std::vector<float>(v.begin(), v.end()); }
};

template <class T>
void decode_raw(const std::string& raw, std::vector<double>& out) {
  const size_t n = raw.size() / sizeof(T);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = double(x);
  }
}

Arr from_proto(const onnx::TensorProto& t) {
  Arr a;
  a.type = t.data_type();
  for (int64_t d : t.dims()) a.dims.push_back(d);
  using TP = onnx::TensorProto;
  if (t.has_raw_data()) {
    const std::string& r = t.raw_data();
    switch (a.type) {
      case TP::FLOAT: decode_raw<float>(r, a.v); break;
      case TP::DOUBLE: decode_raw<double>(r, a.v); break;
      case TP::UINT8: decode_raw<uint8_t>(r, a.v); break;
      case TP::INT8: decode_raw<int8_t>(r, a.v); break;
      case TP::INT32: decode_raw<int32_t>(r, a.v); break;
      case TP::INT64: decode_raw<int64_t>(r, a.v); break;
      default: throw Unsupported("tensor element type " + std::to_string(a.type));
    }
  } else {
    switch (a.type) {
      case TP::FLOAT: a.v.assign(t.float_data().begin(), t.float_data().end()); break;
      case TP::DOUBLE: a.v.assign(t.double_data().begin(), t.double_data().end()); break;
      case TP::INT64: a.v.assign(t.int64_data().begin(), t.int64_data().end()); break;
      case TP::UINT8:
      case TP::INT8:
      case TP::INT32: a.v.assign(t.int32_data().begin(), t.int32_data().end()); break;
      default: throw Unsupported("tensor element type " + std::to_string(a.type));
    }
  }
  if (int64_t(a.v.size()) != a.numel())
    throw std::runtime_error("tensor '" + t.name() + "' has " + std::to_string(a.v.size()) + " values for " +
                             std::to_string(a.numel()) + " elements");
  return a;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Case {
  std::string id;  // e.g. "node/test_relu"
  onnx::ModelProto m;
  int opset = 0;
  std::map<std::string, Arr> val;  // initializers, Constant outputs, runtime inputs
  std::vector<std::string> runtime;  // graph inputs fed from input_*.pb, in order
  std::vector<Arr> want;             // expected outputs
  std::vector<const onnx::NodeProto*> nodes;  // compute nodes (not Constant)

  const Arr& in(const onnx::NodeProto& n, int i) const {
    if (i >= n.input_size() || n.input(i).empty()) throw std::runtime_error("missing input " + std::to_string(i));
    auto it = val.find(n.input(i));
    if (it == val.end()) throw Unsupported("input '" + n.input(i) + "' is computed by another node");
    return it->second;
  }
  bool has_in(const onnx::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }
  const onnx::NodeProto& node() const {
    if (nodes.size() != 1) throw Unsupported(std::to_string(nodes.size()) + " compute nodes");
    return *nodes[0];
  }
};

bool load_model(const std::string& dir, onnx::ModelProto* m) { return m->ParseFromString(slurp(dir + "/model.onnx")); }

Case load_case(const std::string& id) {
  Case c;
  c.id = id;
  const std::string dir = data_root() + "/" + id;
  if (!load_model(dir, &c.m)) throw std::runtime_error("cannot parse " + dir + "/model.onnx");
  for (const auto& o : c.m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") c.opset = int(o.version());
  const auto& g = c.m.graph();
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) {
    c.val[t.name()] = from_proto(t);
    inits.insert(t.name());
  }
  for (const auto& n : g.node()) {
    if (n.op_type() == "Constant") {
      for (const auto& a : n.attribute())
        if (a.name() == "value") c.val[n.output(0)] = from_proto(a.t());
      continue;
    }
    c.nodes.push_back(&n);
  }
  for (const auto& i : g.input())
    if (!inits.count(i.name())) c.runtime.push_back(i.name());
  for (size_t k = 0; k < c.runtime.size(); ++k) {
    onnx::TensorProto t;
    const std::string p = dir + "/test_data_set_0/input_" + std::to_string(k) + ".pb";
    if (!t.ParseFromString(slurp(p))) throw std::runtime_error("cannot parse " + p);
    c.val[c.runtime[k]] = from_proto(t);
  }
  for (int k = 0; k < g.output_size(); ++k) {
    onnx::TensorProto t;
    const std::string p = dir + "/test_data_set_0/output_" + std::to_string(k) + ".pb";
    if (!t.ParseFromString(slurp(p))) throw std::runtime_error("cannot parse " + p);
    c.want.push_back(from_proto(t));
  }
  return c;
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t attr_i(const onnx::NodeProto& n, const char* name, int64_t def) {
  const auto* a = attr(n, name);
  return a ? a->i() : def;
}
float attr_f(const onnx::NodeProto& n, const char* name, float def) {
  const auto* a = attr(n, name);
  return a ? a->f() : def;
}
std::string attr_s(const onnx::NodeProto& n, const char* name, const std::string& def) {
  const auto* a = attr(n, name);
  return a ? a->s() : def;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name) {
  const auto* a = attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

// ---------------------------------------------------------------- outcome

struct Outcome {
  std::string how;     // how the comparison was made
  bool pass = false;
  std::string detail;  // measured error
};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Float comparison: |got - want| <= kAtol + kRtol * |want|.
constexpr double kAtol = 1e-5, kRtol = 1e-4;

Outcome compare_float(const std::vector<float>& got, const Arr& want) {
  Outcome o;
  o.how = "float, tol 1e-5 abs + 1e-4 rel";
  if (int64_t(got.size()) != want.numel()) {
    o.detail = "size " + std::to_string(got.size()) + " vs " + std::to_string(want.numel());
    return o;
  }
  double worst = 0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want.v[i]);
    if (!(d <= kAtol + kRtol * std::fabs(want.v[i]))) ok = false;
    if (!(d <= worst)) worst = d;  // NaN-safe
  }
  o.pass = ok;
  o.detail = "max abs err " + fmt("%.2g", worst);
  return o;
}

// Integer comparison; max_lsb 0 means bit-exact.
Outcome compare_int(const std::vector<int64_t>& got, const Arr& want, int max_lsb, const std::string& how) {
  Outcome o;
  o.how = how;
  if (int64_t(got.size()) != want.numel()) {
    o.detail = "size " + std::to_string(got.size()) + " vs " + std::to_string(want.numel());
    return o;
  }
  int64_t worst = 0, differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t d = std::llabs(got[i] - int64_t(want.v[i]));
    worst = std::max(worst, d);
    differ += d != 0;
  }
  o.pass = worst <= max_lsb;
  o.detail = "max diff " + std::to_string(worst) + ", " + std::to_string(differ) + " of " +
             std::to_string(got.size()) + " differ";
  return o;
}

// ---------------------------------------------------------------- float helpers

// Runs one node on a fresh Graph whose tensors have the given shapes. With
// one operand this is run_float on a validated graph (which also checks our
// shape inference against ONNX's output shape); with several, eval_node.
std::vector<float> run_node(Node n, const std::vector<Shape>& ins, Shape out, const std::vector<std::vector<float>>& xs) {
  Graph g;
  for (size_t i = 0; i < ins.size(); ++i) n.inputs.push_back(g.add_tensor("in" + std::to_string(i), ins[i]));
  g.input = n.inputs[0];
  n.output = g.add_tensor("out", out);
  if (n.name.empty()) n.name = op_name(n.op);
  g.add_node(n);
  g.output = n.output;
  if (ins.size() == 1) {
    g.validate();
    return run_float(g, xs[0]);
  }
  const Shape s = infer_shape(g, g.nodes[0]);
  if (s != out) throw Error("inferred shape " + to_string(s) + " differs from ONNX's " + to_string(out));
  std::vector<const std::vector<float>*> p;
  for (const auto& x : xs) p.push_back(&x);
  return eval_node(g, g.nodes[0], p);
}

// [N, C, L] -> (C, 1, L); [N, C, H, W] -> (C, H, W).
Shape item_shape(const std::vector<int64_t>& d) {
  if (d.size() == 3) return Shape{int(d[1]), 1, int(d[2])};
  if (d.size() == 4) return Shape{int(d[1]), int(d[2]), int(d[3])};
  throw Unsupported(std::to_string(int(d.size()) - 2) + "-D spatial input (IR is 2-D, 1-D runs as H = 1)");
}

std::vector<float> slice(const Arr& a, int64_t item, int64_t per) {
  return std::vector<float>(a.v.begin() + item * per, a.v.begin() + (item + 1) * per);
}

// Spatial attributes of Conv/pools as (h, w) pairs; 1-D inputs get h = 1 defaults.
struct Spatial {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
};

Spatial spatial(const onnx::NodeProto& n, const std::vector<int64_t>& xdims, int kh, int kw) {
  Spatial s;
  const size_t r = xdims.size() - 2;  // 1 or 2
  s.kh = kh;
  s.kw = kw;
  auto two = [&](const std::vector<int64_t>& v, int def, int* h, int* w) {
    if (v.empty()) { *h = def; *w = def; return; }
    if (v.size() != r) throw std::runtime_error("attribute rank");
    if (r == 1) { *h = def; *w = int(v[0]); } else { *h = int(v[0]); *w = int(v[1]); }
  };
  two(attr_ints(n, "strides"), 1, &s.sh, &s.sw);
  two(attr_ints(n, "dilations"), 1, &s.dh, &s.dw);
  if (r == 1) s.sh = s.dh = 1;
  const auto pads = attr_ints(n, "pads");
  if (!pads.empty()) {
    if (pads.size() != 2 * r) throw std::runtime_error("pads rank");
    if (r == 1) { s.pl = int(pads[0]); s.pr = int(pads[1]); }
    else { s.pt = int(pads[0]); s.pl = int(pads[1]); s.pb = int(pads[2]); s.pr = int(pads[3]); }
  }
  const std::string ap = attr_s(n, "auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    auto same = [&](int in, int k, int st, int d, int* p0, int* p1) {
      const int out = (in + st - 1) / st;
      const int total = std::max(0, (out - 1) * st + (k - 1) * d + 1 - in);
      *p0 = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      *p1 = total - *p0;
    };
    const int H = r == 1 ? 1 : int(xdims[2]), W = int(xdims.back());
    same(H, s.kh, s.sh, s.dh, &s.pt, &s.pb);
    same(W, s.kw, s.sw, s.dw, &s.pl, &s.pr);
  } else if (ap == "VALID") {
    s.pt = s.pl = s.pb = s.pr = 0;
  } else if (ap != "NOTSET") {
    throw Unsupported("auto_pad " + ap);
  }
  return s;
}

void set_geometry(Node& n, const Spatial& s) {
  n.kh = s.kh; n.kw = s.kw; n.sh = s.sh; n.sw = s.sw; n.dh = s.dh; n.dw = s.dw;
  n.pad_t = s.pt; n.pad_l = s.pl; n.pad_b = s.pb; n.pad_r = s.pr;
}

// ---------------------------------------------------------------- float handlers

Outcome run_conv(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const Arr& w = c.in(n, 1);
  Node node;
  node.op = Op::Conv;
  node.groups = int(attr_i(n, "group", 1));
  node.weights = w.f();
  if (c.has_in(n, 2)) node.bias = c.in(n, 2).f();
  const int kh = x.dims.size() == 4 ? int(w.dims[2]) : 1, kw = int(w.dims.back());
  set_geometry(node, spatial(n, x.dims, kh, kw));
  const Shape is = item_shape(x.dims), os = item_shape(c.want[0].dims);
  std::vector<float> got;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    const auto y = run_node(node, {is}, os, {slice(x, b, is.size())});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

Outcome run_pool(const Case& c) {
  const auto& n = c.node();
  if (n.output_size() > 1) throw Unsupported("second output (indices)");
  const Arr& x = c.in(n, 0);
  for (int64_t d : attr_ints(n, "dilations"))
    if (d != 1) throw Unsupported("dilated pooling");
  const auto k = attr_ints(n, "kernel_shape");
  Node node;
  node.op = n.op_type() == "MaxPool" ? Op::MaxPool : Op::AvgPool;
  node.count_include_pad = attr_i(n, "count_include_pad", 0) != 0;
  Spatial s = spatial(n, x.dims, k.size() == 2 ? int(k[0]) : 1, int(k.back()));
  const Shape is = item_shape(x.dims), os = item_shape(c.want[0].dims);
  if (attr_i(n, "ceil_mode", 0)) {
    // The last window may hang over the end: extend the end padding so the
    // floor formula gives ONNX's ceil size. Padding never wins a max and is
    // not counted by an average without count_include_pad.
    if (node.count_include_pad) throw Unsupported("ceil_mode with count_include_pad");
    auto extend = [](int in, int k_, int st, int p0, int* p1, int want) {
      while ((in + p0 + *p1 - k_) / st + 1 < want) ++*p1;
    };
    extend(is.h, s.kh, s.sh, s.pt, &s.pb, os.h);
    extend(is.w, s.kw, s.sw, s.pl, &s.pr, os.w);
  }
  set_geometry(node, s);
  std::vector<float> got;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    const auto y = run_node(node, {is}, os, {slice(x, b, is.size())});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

Outcome run_global_pool(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const Shape is = item_shape(x.dims), os{is.c, 1, 1};
  Node node;
  if (n.op_type() == "GlobalAveragePool") {
    node.op = Op::GlobalAvgPool;
  } else {  // GlobalMaxPool is a MaxPool whose window is the whole plane
    node.op = Op::MaxPool;
    node.kh = is.h;
    node.kw = is.w;
  }
  std::vector<float> got;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    const auto y = run_node(node, {is}, os, {slice(x, b, is.size())});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

Outcome run_batchnorm(const Case& c) {
  const auto& n = c.node();
  if (attr_i(n, "training_mode", 0) || c.want.size() > 1) throw Unsupported("training mode");
  const Arr& x = c.in(n, 0);
  Node node;
  node.op = Op::BatchNorm;
  node.gamma = c.in(n, 1).f();
  node.beta = c.in(n, 2).f();
  node.mean = c.in(n, 3).f();
  node.var = c.in(n, 4).f();
  node.eps = attr_f(n, "epsilon", 1e-5f);
  const Shape is = item_shape(x.dims);
  std::vector<float> got;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    const auto y = run_node(node, {is}, is, {slice(x, b, is.size())});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

// Graphs of elementwise nodes on equal shapes (Relu, Clip, HardSigmoid,
// HardSwish, Sigmoid, Add, Mul): tensors become (N, 1, 1).
Outcome run_elementwise(const Case& c) {
  Graph g;
  std::map<std::string, int> t;
  const int64_t N = c.want[0].numel();
  const Shape s{int(N), 1, 1};
  std::vector<std::string> external;
  auto tensor = [&](const std::string& name) {
    auto it = t.find(name);
    if (it != t.end()) return it->second;
    auto v = c.val.find(name);
    if (v == c.val.end()) throw std::runtime_error("unknown value " + name);
    if (v->second.type != onnx::TensorProto::FLOAT) throw Unsupported("non-float operands");
    if (v->second.numel() != N) throw Unsupported("broadcasting");
    external.push_back(name);
    return t[name] = g.add_tensor(name, s);
  };
  for (const auto* np : c.nodes) {
    const auto& n = *np;
    Node node;
    node.name = n.name().empty() ? n.op_type() : n.name();
    std::vector<int> ins{tensor(n.input(0))};
    const std::string op = n.op_type();
    if (op == "Relu") {
      node.op = Op::Relu;
    } else if (op == "Sigmoid") {
      node.op = Op::Sigmoid;
    } else if (op == "HardSwish") {
      node.op = Op::HardSwish;
    } else if (op == "HardSigmoid") {
      node.op = Op::HardSigmoid;
      node.alpha = attr_f(n, "alpha", 0.2f);
      node.beta_hs = attr_f(n, "beta", 0.5f);
    } else if (op == "Clip") {
      node.op = Op::Clip;
      node.lo = -std::numeric_limits<float>::infinity();
      node.hi = std::numeric_limits<float>::infinity();
      if (c.opset < 11) {
        node.lo = attr_f(n, "min", node.lo);
        node.hi = attr_f(n, "max", node.hi);
      } else {
        if (c.has_in(n, 1)) node.lo = float(c.in(n, 1).v.at(0));
        if (c.has_in(n, 2)) node.hi = float(c.in(n, 2).v.at(0));
      }
    } else if (op == "Add" || op == "Mul") {
      node.op = op == "Add" ? Op::Add : Op::Mul;
      ins.push_back(tensor(n.input(1)));
    } else {
      throw Unsupported("op " + op);
    }
    node.inputs = ins;
    node.output = g.add_tensor(n.output(0), s);
    t[n.output(0)] = node.output;
    g.add_node(node);
  }
  g.input = t.at(external.at(0));
  g.output = t.at(c.m.graph().output(0).name());
  std::vector<float> got;
  if (external.size() == 1) {
    g.validate();
    got = run_float(g, c.val.at(external[0]).f());
  } else {
    // Several graph inputs: evaluate node by node.
    std::vector<std::vector<float>> v(g.tensors.size());
    for (const auto& e : external) v[size_t(t.at(e))] = c.val.at(e).f();
    for (const Node& node : g.nodes) {
      std::vector<const std::vector<float>*> p;
      for (int i : node.inputs) p.push_back(&v[size_t(i)]);
      v[size_t(node.output)] = eval_node(g, node, p);
    }
    got = v[size_t(g.output)];
  }
  return compare_float(got, c.want[0]);
}

Outcome run_gemm(const Case& c) {
  const auto& n = c.node();
  const Arr& A = c.in(n, 0);
  const Arr& B = c.in(n, 1);
  const bool ta = attr_i(n, "transA", 0) != 0, tb = attr_i(n, "transB", 0) != 0;
  const float alpha = attr_f(n, "alpha", 1.f), beta = attr_f(n, "beta", 1.f);
  const int64_t M = ta ? A.dims[1] : A.dims[0], K = ta ? A.dims[0] : A.dims[1];
  const int64_t N = tb ? B.dims[0] : B.dims[1];
  auto a = [&](int64_t m, int64_t k) { return A.v[size_t(ta ? k * M + m : m * K + k)]; };
  auto b = [&](int64_t k, int64_t j) { return B.v[size_t(tb ? j * K + k : k * N + j)]; };
  std::vector<int64_t> cd;
  const Arr* C = c.has_in(n, 2) ? &c.in(n, 2) : nullptr;
  if (C) {
    cd = C->dims;
    while (cd.size() < 2) cd.insert(cd.begin(), 1);
  }
  // One Gemm node per row of A': weights alpha * B'^T, bias beta * C[m, :].
  Node node;
  node.op = Op::Gemm;
  node.weights.resize(size_t(N * K));
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) node.weights[size_t(j * K + k)] = float(alpha * b(k, j));
  std::vector<float> got;
  for (int64_t m = 0; m < M; ++m) {
    node.bias.clear();
    if (C && beta != 0.f) {
      node.bias.resize(size_t(N));
      for (int64_t j = 0; j < N; ++j)
        node.bias[size_t(j)] = float(beta * C->v[size_t((cd[0] == 1 ? 0 : m) * cd[1] + (cd[1] == 1 ? 0 : j))]);
    }
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) row[size_t(k)] = float(a(m, k));
    const auto y = run_node(node, {Shape{int(K), 1, 1}}, Shape{int(N), 1, 1}, {row});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

// Softmax over one axis (opset >= 13) or over the flattened dims from the
// axis on (opset < 13): each slice runs as a (L, 1, 1) Softmax.
Outcome run_softmax(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const int64_t r = int64_t(x.dims.size());
  int64_t axis = attr_i(n, "axis", c.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : (i == axis ? len : inner)) *= x.dims[size_t(i)];
  if (c.opset < 13) {
    len *= inner;
    inner = 1;
  }
  Node node;
  node.op = Op::Softmax;
  std::vector<float> got(size_t(x.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<float> v(static_cast<size_t>(len));
      for (int64_t k = 0; k < len; ++k) v[size_t(k)] = float(x.v[size_t((o * len + k) * inner + i)]);
      const auto y = run_node(node, {Shape{int(len), 1, 1}}, Shape{int(len), 1, 1}, {v});
      for (int64_t k = 0; k < len; ++k) got[size_t((o * len + k) * inner + i)] = y[size_t(k)];
    }
  return compare_float(got, c.want[0]);
}

// Concat along any axis: per index before the axis, operands are
// (dim[axis], 1, inner) and concatenate along channels.
Outcome run_concat(const Case& c) {
  const auto& n = c.node();
  const Arr& x0 = c.in(n, 0);
  const int64_t r = int64_t(x0.dims.size());
  int64_t axis = attr_i(n, "axis", 1);
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x0.dims[size_t(i)];
  for (int64_t i = axis + 1; i < r; ++i) inner *= x0.dims[size_t(i)];
  Node node;
  node.op = Op::Concat;
  std::vector<float> got;
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<Shape> shapes;
    std::vector<std::vector<float>> xs;
    int total = 0;
    for (int k = 0; k < n.input_size(); ++k) {
      const Arr& xk = c.in(n, k);
      const int64_t len = xk.dims[size_t(axis)];
      shapes.push_back(Shape{int(len), 1, int(inner)});
      xs.push_back(slice(xk, o, len * inner));
      total += int(len);
    }
    const auto y = run_node(node, shapes, Shape{total, 1, int(inner)}, xs);
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

// Flatten keeps C-H-W order: the data must come out unchanged.
Outcome run_flatten(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  std::vector<int64_t> d = x.dims;
  while (d.size() > 3) {  // merge leading dims into C
    d[1] *= d[0];
    d.erase(d.begin());
  }
  while (d.size() < 3) d.push_back(1);
  Node node;
  node.op = Op::Flatten;
  const Shape is{int(d[0]), int(d[1]), int(d[2])};
  const auto got = run_node(node, {is}, Shape{int(is.size()), 1, 1}, {x.f()});
  return compare_float(got, c.want[0]);
}

Outcome run_pad(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  if (attr_s(n, "mode", "constant") != "constant") throw Unsupported("mode " + attr_s(n, "mode", ""));
  std::vector<int64_t> pads;
  float value = 0.f;
  if (c.opset < 11) {
    pads = attr_ints(n, "pads");
    value = attr_f(n, "value", 0.f);
  } else {
    for (double v : c.in(n, 1).v) pads.push_back(int64_t(v));
    if (c.has_in(n, 2)) value = float(c.in(n, 2).v.at(0));
  }
  if (value != 0.f) throw Unsupported("non-zero pad value");
  if (x.dims.size() != 4 || pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5])
    throw Unsupported("padding outside H and W");
  Node node;
  node.op = Op::Pad;
  node.pad_t = int(pads[2]);
  node.pad_l = int(pads[3]);
  node.pad_b = int(pads[6]);
  node.pad_r = int(pads[7]);
  const Shape is = item_shape(x.dims), os = item_shape(c.want[0].dims);
  std::vector<float> got;
  for (int64_t b = 0; b < x.dims[0]; ++b) {
    const auto y = run_node(node, {is}, os, {slice(x, b, is.size())});
    got.insert(got.end(), y.begin(), y.end());
  }
  return compare_float(got, c.want[0]);
}

// ---------------------------------------------------------------- integer helpers

// uint8 data and zero points move to int8 by subtracting 128, which keeps
// every difference x - zp unchanged; int8 stays as it is.
int32_t to_i8(double v, int type) { return type == onnx::TensorProto::UINT8 ? int32_t(v) - 128 : int32_t(v); }
int64_t from_i8(int32_t v, int type) { return type == onnx::TensorProto::UINT8 ? int64_t(v) + 128 : int64_t(v); }
int32_t zp_of(const Case& c, const onnx::NodeProto& n, int i, int type) {
  return c.has_in(n, i) ? to_i8(c.in(n, i).v.at(0), c.in(n, i).type) : to_i8(0, type);
}

std::vector<int8_t> to_i8_vec(const Arr& a) {
  std::vector<int8_t> r(a.v.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = int8_t(to_i8(a.v[i], a.type));
  return r;
}

// A convolution (or, with H = W = 1 and one tap, a matrix product row) in
// int8 through core::compute_range. ONNX allows a weight zero point; our
// kernels take symmetric int8 weights, so with w = w8 - wzp8 the sum
//   sum (x - xzp)(w8 - wzp8) = sum (x - xzp) w8  -  wzp8 * sum (x - xzp)
// is computed with weights w8 and the second term folded into the bias. That
// term depends on the input window, so such layers run one output neuron at a
// time (a descriptor per neuron, oc_base = its channel), which the kernel
// supports as any other run.
struct IntConv {
  LayerDesc geo;                     // op, dims, geometry, zero points, requant clamp
  std::vector<int8_t> x, w;          // int8 input (one item) and weights [o][cin/g][kh][kw]
  std::vector<int32_t> bias, mult, shift, wzp;  // per output channel

  // Window sum of (x - xzp) over the taps output neuron i reads.
  int64_t window_sum(int32_t i) const {
    const Dims& X = geo.in[0];
    const int32_t hw = geo.out.h * geo.out.w;
    const int32_t o = i / hw, oy = (i % hw) / geo.out.w, ox = i % geo.out.w;
    const int32_t cin_g = X.c / geo.groups, g = o / (geo.out.c / geo.groups);
    int64_t s = 0;
    for (int32_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
      for (int32_t ky = 0; ky < geo.kh; ++ky)
        for (int32_t kx = 0; kx < geo.kw; ++kx) {
          const int32_t iy = oy * geo.sh - geo.pad_t + ky * geo.dh, ix = ox * geo.sw - geo.pad_l + kx * geo.dw;
          if (iy < 0 || iy >= X.h || ix < 0 || ix >= X.w) continue;
          s += int32_t(x[size_t((ci * X.h + iy) * X.w + ix)]) - geo.in_zp[0];
        }
    return s;
  }

  // Output neuron i with `extra` added to its bias.
  int8_t one(int32_t i, int64_t extra) const {
    const int32_t hw = geo.out.h * geo.out.w;
    const int32_t o = geo.op == QOp::Gemm ? i : i / hw;
    const size_t per = w.size() / size_t(geo.out.c);
    const int64_t b = int64_t(bias[size_t(o)]) + extra;
    if (b < INT32_MIN || b > INT32_MAX) throw std::runtime_error("bias does not fit int32");
    const int32_t b32 = int32_t(b);
    LayerDesc d = geo;
    d.oc_base = o;
    d.weights = w.data() + size_t(o) * per;
    d.bias = &b32;
    d.mult = &mult[size_t(o)];
    d.shift = &shift[size_t(o)];
    const View v{x.data(), 0, geo.in[0].c, 0, geo.in[0].h};
    int8_t out = 0;
    const KernelStatus st = core::compute_range(d, &v, i, i + 1, &out, 1);
    if (st != KernelStatus::Ok) throw std::runtime_error("compute_range status " + std::to_string(int(st)));
    return out;
  }

  bool symmetric() const {
    return std::all_of(wzp.begin(), wzp.end(), [](int32_t z) { return z == 0; });
  }

  std::vector<int8_t> run() const {
    const int32_t N = geo.out.size();
    std::vector<int8_t> out(static_cast<size_t>(N));
    if (symmetric()) {
      // The usual case: one call over the whole layer.
      LayerDesc d = geo;
      d.weights = w.data();
      d.bias = bias.data();
      d.mult = mult.data();
      d.shift = shift.data();
      const View v{x.data(), 0, geo.in[0].c, 0, geo.in[0].h};
      const KernelStatus st = core::compute_range(d, &v, 0, N, out.data(), geo.out.c);
      if (st != KernelStatus::Ok) throw std::runtime_error("compute_range status " + std::to_string(int(st)));
      return out;
    }
    const int32_t hw = geo.out.h * geo.out.w;
    for (int32_t i = 0; i < N; ++i) {
      const int32_t o = geo.op == QOp::Gemm ? i : i / hw;
      out[size_t(i)] = one(i, -int64_t(wzp[size_t(o)]) * window_sum(i));
    }
    return out;
  }

  // Exact int32 accumulators, read through the kernel: with the identity
  // requantisation (M = 1: mult 2^30, shift 1, output zero point 0) the kernel
  // returns clamp(acc + bias, -128, 127); shifting the bias by multiples of
  // 254 until the result is not clamped recovers any accumulator exactly.
  std::vector<int64_t> accumulators() const {
    IntConv id = *this;
    id.geo.out_zp = 0;
    id.geo.act_min = -128;
    id.geo.act_max = 127;
    std::fill(id.mult.begin(), id.mult.end(), 1 << 30);
    std::fill(id.shift.begin(), id.shift.end(), 1);
    const int32_t N = geo.out.size(), hw = geo.out.h * geo.out.w;
    std::vector<int64_t> acc(static_cast<size_t>(N));
    for (int32_t i = 0; i < N; ++i) {
      const int32_t o = geo.op == QOp::Gemm ? i : i / hw;
      const int64_t base = -int64_t(wzp[size_t(o)]) * window_sum(i);
      int64_t off = 0;
      for (int step = 0;; ++step) {
        if (step > 100000) throw std::runtime_error("accumulator out of reach");
        const int32_t r = id.one(i, base + off);
        if (r > -128 && r < 127) {
          acc[size_t(i)] = int64_t(r) - off - bias[size_t(o)];
          break;
        }
        off += r == 127 ? -254 : 254;
      }
    }
    return acc;
  }
};

// ---------------------------------------------------------------- integer handlers

// QLinearConv / ConvInteger.
IntConv int_conv(const Case& c, bool qlinear) {
  const auto& n = c.node();
  // QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, [B]
  // ConvInteger: x, w, [x_zp], [w_zp]
  const int ix = 0, iw = qlinear ? 3 : 1;
  const Arr& x = c.in(n, ix);
  const Arr& w = c.in(n, iw);
  if (x.dims.size() != 4) throw Unsupported("non 2-D convolution");
  IntConv ic;
  LayerDesc& d = ic.geo;
  d.op = QOp::Conv;
  d.in[0] = Dims{int32_t(x.dims[1]), int32_t(x.dims[2]), int32_t(x.dims[3])};
  d.in_zp[0] = zp_of(c, n, 2, x.type);
  const Spatial s = spatial(n, x.dims, int(w.dims[2]), int(w.dims[3]));
  d.kh = s.kh; d.kw = s.kw; d.sh = s.sh; d.sw = s.sw; d.dh = s.dh; d.dw = s.dw;
  d.pad_t = s.pt; d.pad_l = s.pl; d.pad_b = s.pb; d.pad_r = s.pr;
  d.groups = int32_t(attr_i(n, "group", 1));
  const Arr& y = c.want[0];
  d.out = Dims{int32_t(y.dims[1]), int32_t(y.dims[2]), int32_t(y.dims[3])};
  const int M = d.out.c;
  ic.x = to_i8_vec(x);
  ic.w = to_i8_vec(w);
  ic.bias.assign(size_t(M), 0);
  ic.mult.assign(size_t(M), 0);
  ic.shift.assign(size_t(M), 0);
  ic.wzp.assign(size_t(M), to_i8(0, w.type));
  const int izp = qlinear ? 5 : 3;
  if (c.has_in(n, izp)) {
    const Arr& z = c.in(n, izp);
    for (int o = 0; o < M; ++o) ic.wzp[size_t(o)] = to_i8(z.v[z.v.size() == 1 ? 0 : size_t(o)], z.type);
  }
  if (qlinear) {
    const double xs = c.in(n, 1).v.at(0), ys = c.in(n, 6).v.at(0);
    const Arr& ws = c.in(n, 4);
    d.out_zp = zp_of(c, n, 7, y.type);
    for (int o = 0; o < M; ++o)
      quantize_multiplier(xs * ws.v[ws.v.size() == 1 ? 0 : size_t(o)] / ys, &ic.mult[size_t(o)], &ic.shift[size_t(o)]);
    if (c.has_in(n, 8))
      for (int o = 0; o < M; ++o) ic.bias[size_t(o)] = int32_t(c.in(n, 8).v[size_t(o)]);
  }
  return ic;
}

Outcome run_qlinearconv(const Case& c) {
  const IntConv ic = int_conv(c, true);
  const auto y8 = ic.run();
  std::vector<int64_t> got;
  for (int8_t v : y8) got.push_back(from_i8(v, c.want[0].type));
  return compare_int(got, c.want[0], 1, "int8 kernel, <= 1 LSB (ONNX: float, half-even)");
}

Outcome run_convinteger(const Case& c) {
  const IntConv ic = int_conv(c, false);
  return compare_int(ic.accumulators(), c.want[0], 0, "int32 accumulators, bit-exact");
}

// QLinearMatMul / MatMulInteger: each row of A (per batch matrix) is a Gemm
// over K inputs with N outputs; B's columns are the weights.
struct MatMulRows {
  std::vector<IntConv> rows;
};

MatMulRows int_matmul(const Case& c, bool qlinear) {
  const auto& n = c.node();
  // QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
  // MatMulInteger: A, B, [a_zp], [b_zp]
  const Arr& A = c.in(n, 0);
  const Arr& B = c.in(n, qlinear ? 3 : 1);
  if (A.dims.size() != B.dims.size() || A.dims.size() < 2) throw Unsupported("broadcast matmul");
  const size_t r = A.dims.size();
  const int64_t M = A.dims[r - 2], K = A.dims[r - 1], N = B.dims[r - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (A.dims[i] != B.dims[i]) throw Unsupported("broadcast matmul");
    batch *= A.dims[i];
  }
  const int a_zp = zp_of(c, n, 2, A.type);
  const int b_zp_in = qlinear ? 5 : 3;
  if (c.has_in(n, b_zp_in) && c.in(n, b_zp_in).v.size() != 1) throw Unsupported("per-column b zero point");
  if (c.has_in(n, 2) && c.in(n, 2).v.size() != 1) throw Unsupported("per-row a zero point");
  const int b_zp = zp_of(c, n, b_zp_in, B.type);
  int32_t m = 0, s = 0;
  int32_t y_zp = 0;
  if (qlinear) {
    quantize_multiplier(c.in(n, 1).v.at(0) * c.in(n, 4).v.at(0) / c.in(n, 6).v.at(0), &m, &s);
    y_zp = zp_of(c, n, 7, c.want[0].type);
  }
  const auto a8 = to_i8_vec(A), b8 = to_i8_vec(B);
  MatMulRows mr;
  for (int64_t bt = 0; bt < batch; ++bt)
    for (int64_t i = 0; i < M; ++i) {
      IntConv ic;
      LayerDesc& d = ic.geo;
      d.op = QOp::Gemm;
      d.in[0] = Dims{int32_t(K), 1, 1};
      d.in_zp[0] = a_zp;
      d.out = Dims{int32_t(N), 1, 1};
      d.out_zp = y_zp;
      ic.x.assign(a8.begin() + (bt * M + i) * K, a8.begin() + (bt * M + i + 1) * K);
      ic.w.resize(size_t(N * K));
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) ic.w[size_t(j * K + k)] = b8[size_t((bt * K + k) * N + j)];
      ic.bias.assign(size_t(N), 0);
      ic.mult.assign(size_t(N), m);
      ic.shift.assign(size_t(N), s);
      ic.wzp.assign(size_t(N), b_zp);
      mr.rows.push_back(std::move(ic));
    }
  return mr;
}

// For a Gemm row the weight-zero-point term -b_zp * sum_k (a_k - a_zp) is the
// same for every output, so it is an ordinary per-channel bias and the row
// runs as one compute_range call over all N outputs.
std::vector<int8_t> run_gemm_row(IntConv ic) {
  const int64_t s = ic.window_sum(0);  // H = W = 1, one tap per input channel: the whole row
  for (size_t j = 0; j < ic.bias.size(); ++j) {
    const int64_t b = int64_t(ic.bias[j]) - int64_t(ic.wzp[j]) * s;
    if (b < INT32_MIN || b > INT32_MAX) throw std::runtime_error("bias does not fit int32");
    ic.bias[j] = int32_t(b);
  }
  std::fill(ic.wzp.begin(), ic.wzp.end(), 0);
  return ic.run();
}

Outcome run_qlinearmatmul(const Case& c) {
  const MatMulRows mr = int_matmul(c, true);
  std::vector<int64_t> got;
  for (const IntConv& row : mr.rows)
    for (int8_t v : run_gemm_row(row)) got.push_back(from_i8(v, c.want[0].type));
  return compare_int(got, c.want[0], 1, "int8 kernel, <= 1 LSB (ONNX: float, half-even)");
}

Outcome run_matmulinteger(const Case& c) {
  const MatMulRows mr = int_matmul(c, false);
  std::vector<int64_t> got;
  for (const IntConv& row : mr.rows)
    for (int64_t v : row.accumulators()) got.push_back(v);
  return compare_int(got, c.want[0], 0, "int32 accumulators, bit-exact");
}

// uint8 Add / Mul with every scale 1 (real value = the uint8 value): the
// quantised Add (left shift 20, operands rescaled by 1/2, output by 2^-19)
// and Mul (multiplier 1) must return exact integer sums and products.
Outcome run_int_binary(const Case& c) {
  const auto& n = c.node();
  const Arr& a = c.in(n, 0);
  const Arr& b = c.in(n, 1);
  if (a.type != onnx::TensorProto::UINT8 || a.numel() != b.numel()) throw Unsupported("operands");
  const int32_t N = int32_t(a.numel());
  LayerDesc d;
  d.op = n.op_type() == "Add" ? QOp::Add : QOp::Mul;
  d.n_inputs = 2;
  d.in[0] = d.in[1] = d.out = Dims{N, 1, 1};
  d.in_zp[0] = d.in_zp[1] = d.out_zp = -128;  // int8 q = u8 - 128, real = q + 128
  if (d.op == QOp::Add) {
    d.left_shift = 20;
    quantize_multiplier(1.0 / 2.0, &d.in_mult[0], &d.in_shift[0]);
    quantize_multiplier(1.0 / 2.0, &d.in_mult[1], &d.in_shift[1]);
    quantize_multiplier(2.0 / double(1 << 20), &d.out_mult, &d.out_shift);
  } else {
    quantize_multiplier(1.0, &d.out_mult, &d.out_shift);
  }
  const auto a8 = to_i8_vec(a), b8 = to_i8_vec(b);
  const View v[2] = {View{a8.data(), 0, N, 0, 1}, View{b8.data(), 0, N, 0, 1}};
  std::vector<int8_t> y(static_cast<size_t>(N));
  if (core::compute_range(d, v, 0, N, y.data(), 0) != KernelStatus::Ok) throw std::runtime_error("kernel failed");
  std::vector<int64_t> got;
  for (int8_t q : y) got.push_back(int64_t(q) + 128);
  return compare_int(got, c.want[0], 0, "int8 kernel, scale 1, bit-exact");
}

// uint8 MaxPool and int8 Clip through the quantiser: a one-node float graph
// calibrated so that every tensor has scale 1 (range [0,255] -> zp -128 for
// uint8, [-128,127] -> zp 0 for int8), quantize(), then run_int8.
Outcome run_int_via_quantizer(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const bool u8 = x.type == onnx::TensorProto::UINT8;
  if (!u8 && x.type != onnx::TensorProto::INT8) throw Unsupported("element type");
  Graph g;
  Node node;
  Shape is, os;
  if (n.op_type() == "MaxPool") {
    node.op = Op::MaxPool;
    const auto k = attr_ints(n, "kernel_shape");
    set_geometry(node, spatial(n, x.dims, int(k[0]), int(k[1])));
    if (x.dims[0] != 1) throw Unsupported("batch");
    is = item_shape(x.dims);
    os = item_shape(c.want[0].dims);
  } else if (n.op_type() == "Clip") {
    node.op = Op::Clip;
    node.lo = -std::numeric_limits<float>::infinity();
    node.hi = std::numeric_limits<float>::infinity();
    if (c.has_in(n, 1)) node.lo = float(c.in(n, 1).v.at(0));
    if (c.has_in(n, 2)) node.hi = float(c.in(n, 2).v.at(0));
    is = os = Shape{int(x.numel()), 1, 1};
  } else {
    throw Unsupported("op " + n.op_type());
  }
  g.input = g.add_tensor("x", is);
  node.name = n.op_type();
  node.inputs = {g.input};
  node.output = g.add_tensor("y", os);
  g.add_node(node);
  g.output = node.output;
  g.validate();
  Calibration cal;
  cal.lo.assign(2, u8 ? 0.f : -128.f);
  cal.hi.assign(2, u8 ? 255.f : 127.f);
  cal.images = 1;
  cal.method = "fixed";
  const QGraph q = quantize(g, cal);
  for (const auto& t : q.tensors)
    if (t.scale != 1.f || t.zp != (u8 ? -128 : 0)) throw std::runtime_error("calibration did not give scale 1");
  const auto y = run_int8(q, to_i8_vec(x));
  std::vector<int64_t> got;
  for (int8_t v : y) got.push_back(from_i8(v, x.type));
  return compare_int(got, c.want[0], 0, "quantize() + run_int8, scale 1, bit-exact");
}

// Per-channel parameters along `axis` (QuantizeLinear / DequantizeLinear):
// calls fn(channel, element index) for every element.
void per_axis(const Arr& x, const Arr& scale, int64_t axis, const std::function<void(size_t, size_t)>& fn) {
  if (scale.v.size() == 1) {
    for (size_t i = 0; i < x.v.size(); ++i) fn(0, i);
    return;
  }
  if (axis < 0) axis += int64_t(x.dims.size());
  int64_t inner = 1;
  for (size_t i = size_t(axis) + 1; i < x.dims.size(); ++i) inner *= x.dims[i];
  const int64_t C = x.dims[size_t(axis)];
  for (size_t i = 0; i < x.v.size(); ++i) fn(size_t((int64_t(i) / inner) % C), i);
}

QGraph one_tensor(size_t n, float scale, int32_t zp) {
  QGraph q;
  QTensor t;
  t.name = "t";
  t.shape = Shape{int(n), 1, 1};
  t.scale = scale;
  t.zp = zp;
  q.tensors.push_back(t);
  q.input = q.output = 0;
  return q;
}

// QuantizeLinear against ts::quantize_input (host preprocessing). Ours rounds
// half away from zero, ONNX half to even: they may differ by 1 at exact ties.
Outcome run_quantizelinear(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const Arr& s = c.in(n, 1);
  const Arr& z = c.in(n, 2);
  const int64_t axis = attr_i(n, "axis", 1);
  std::vector<int64_t> got(x.v.size());
  int ties = 0;
  per_axis(x, s, axis, [&](size_t ch, size_t i) {
    const QGraph q = one_tensor(1, float(s.v[ch]), to_i8(z.v[ch], z.type));
    const auto r = quantize_input(q, {float(x.v[i])});
    got[i] = from_i8(r[0], z.type);
    const double t = x.v[i] / s.v[ch];
    if (t - std::floor(t) == 0.5) ++ties;
  });
  Outcome o = compare_int(got, c.want[0], 0, "ts::quantize_input, bit-exact");
  o.detail += ", " + std::to_string(ties) + " exact ties in the data";
  return o;
}

Outcome run_dequantizelinear(const Case& c) {
  const auto& n = c.node();
  const Arr& x = c.in(n, 0);
  const Arr& s = c.in(n, 1);
  const Arr& z = c.in(n, 2);
  std::vector<float> got(x.v.size());
  per_axis(x, s, attr_i(n, "axis", 1), [&](size_t ch, size_t i) {
    const QGraph q = one_tensor(1, float(s.v[ch]), to_i8(z.v[ch], z.type));
    got[i] = dequantize_output(q, {int8_t(to_i8(x.v[i], x.type))})[0];
  });
  Outcome o = compare_float(got, c.want[0]);
  bool exact = o.pass;
  for (size_t i = 0; exact && i < got.size(); ++i) exact = double(got[i]) == c.want[0].v[i];
  o.how = "ts::dequantize_output, bit-exact float";
  o.pass = exact;
  return o;
}

// ---------------------------------------------------------------- the lists

using Handler = Outcome (*)(const Case&);

struct RunCase {
  const char* id;
  Handler fn;
};

// clang-format off
const std::vector<RunCase> kRun = {
  // ---- integer
  {"node/test_qlinearconv", run_qlinearconv},
  {"node/test_qlinearmatmul_2D", run_qlinearmatmul},
  {"node/test_qlinearmatmul_3D", run_qlinearmatmul},
  {"node/test_basic_convinteger", run_convinteger},
  {"node/test_convinteger_with_padding", run_convinteger},
  {"node/test_convinteger_without_padding", run_convinteger},
  {"node/test_matmulinteger", run_matmulinteger},
  {"node/test_maxpool_2d_uint8", run_int_via_quantizer},
  {"node/test_clip_default_int8_inbounds", run_int_via_quantizer},
  {"node/test_clip_default_int8_max", run_int_via_quantizer},
  {"node/test_clip_default_int8_min", run_int_via_quantizer},
  {"node/test_add_uint8", run_int_binary},
  {"node/test_mul_uint8", run_int_binary},
  {"node/test_quantizelinear", run_quantizelinear},
  {"node/test_quantizelinear_axis", run_quantizelinear},
  {"node/test_dequantizelinear", run_dequantizelinear},
  {"node/test_dequantizelinear_axis", run_dequantizelinear},
  // ---- Conv
  {"node/test_basic_conv_with_padding", run_conv},
  {"node/test_basic_conv_without_padding", run_conv},
  {"node/test_conv_with_autopad_same", run_conv},
  {"node/test_conv_with_strides_and_asymmetric_padding", run_conv},
  {"node/test_conv_with_strides_no_padding", run_conv},
  {"node/test_conv_with_strides_padding", run_conv},
  {"pytorch-converted/test_Conv1d", run_conv},
  {"pytorch-converted/test_Conv1d_dilated", run_conv},
  {"pytorch-converted/test_Conv1d_groups", run_conv},
  {"pytorch-converted/test_Conv1d_pad1", run_conv},
  {"pytorch-converted/test_Conv1d_pad1size1", run_conv},
  {"pytorch-converted/test_Conv1d_pad2", run_conv},
  {"pytorch-converted/test_Conv1d_pad2size1", run_conv},
  {"pytorch-converted/test_Conv1d_stride", run_conv},
  {"pytorch-converted/test_Conv2d", run_conv},
  {"pytorch-converted/test_Conv2d_depthwise", run_conv},
  {"pytorch-converted/test_Conv2d_depthwise_padded", run_conv},
  {"pytorch-converted/test_Conv2d_depthwise_strided", run_conv},
  {"pytorch-converted/test_Conv2d_depthwise_with_multiplier", run_conv},
  {"pytorch-converted/test_Conv2d_dilated", run_conv},
  {"pytorch-converted/test_Conv2d_groups", run_conv},
  {"pytorch-converted/test_Conv2d_groups_thnn", run_conv},
  {"pytorch-converted/test_Conv2d_no_bias", run_conv},
  {"pytorch-converted/test_Conv2d_padding", run_conv},
  {"pytorch-converted/test_Conv2d_strided", run_conv},
  {"pytorch-operator/test_operator_conv", run_conv},
  // ---- Gemm
  {"node/test_gemm_all_attributes", run_gemm},
  {"node/test_gemm_alpha", run_gemm},
  {"node/test_gemm_beta", run_gemm},
  {"node/test_gemm_default_matrix_bias", run_gemm},
  {"node/test_gemm_default_no_bias", run_gemm},
  {"node/test_gemm_default_scalar_bias", run_gemm},
  {"node/test_gemm_default_single_elem_vector_bias", run_gemm},
  {"node/test_gemm_default_vector_bias", run_gemm},
  {"node/test_gemm_default_zero_bias", run_gemm},
  {"node/test_gemm_transposeA", run_gemm},
  {"node/test_gemm_transposeB", run_gemm},
  {"pytorch-converted/test_Linear", run_gemm},
  {"pytorch-operator/test_operator_mm", run_gemm},
  // ---- pools
  {"node/test_averagepool_1d_default", run_pool},
  {"node/test_averagepool_2d_ceil", run_pool},
  {"node/test_averagepool_2d_default", run_pool},
  {"node/test_averagepool_2d_pads", run_pool},
  {"node/test_averagepool_2d_pads_count_include_pad", run_pool},
  {"node/test_averagepool_2d_precomputed_pads", run_pool},
  {"node/test_averagepool_2d_precomputed_pads_count_include_pad", run_pool},
  {"node/test_averagepool_2d_precomputed_same_upper", run_pool},
  {"node/test_averagepool_2d_precomputed_strides", run_pool},
  {"node/test_averagepool_2d_same_lower", run_pool},
  {"node/test_averagepool_2d_same_upper", run_pool},
  {"node/test_averagepool_2d_strides", run_pool},
  {"pytorch-converted/test_AvgPool2d", run_pool},
  {"pytorch-converted/test_AvgPool2d_stride", run_pool},
  {"node/test_maxpool_1d_default", run_pool},
  {"node/test_maxpool_2d_ceil", run_pool},
  {"node/test_maxpool_2d_default", run_pool},
  {"node/test_maxpool_2d_pads", run_pool},
  {"node/test_maxpool_2d_precomputed_pads", run_pool},
  {"node/test_maxpool_2d_precomputed_same_upper", run_pool},
  {"node/test_maxpool_2d_precomputed_strides", run_pool},
  {"node/test_maxpool_2d_same_lower", run_pool},
  {"node/test_maxpool_2d_same_upper", run_pool},
  {"node/test_maxpool_2d_strides", run_pool},
  {"pytorch-converted/test_MaxPool1d", run_pool},
  {"pytorch-converted/test_MaxPool1d_stride", run_pool},
  {"pytorch-converted/test_MaxPool2d", run_pool},
  {"pytorch-operator/test_operator_maxpool", run_pool},
  {"node/test_globalaveragepool", run_global_pool},
  {"node/test_globalaveragepool_precomputed", run_global_pool},
  {"node/test_globalmaxpool", run_global_pool},
  {"node/test_globalmaxpool_precomputed", run_global_pool},
  // ---- BatchNormalization (inference)
  {"node/test_batchnorm_epsilon", run_batchnorm},
  {"node/test_batchnorm_example", run_batchnorm},
  {"pytorch-converted/test_BatchNorm1d_3d_input_eval", run_batchnorm},
  {"pytorch-converted/test_BatchNorm2d_eval", run_batchnorm},
  {"pytorch-converted/test_BatchNorm2d_momentum_eval", run_batchnorm},
  // ---- elementwise
  {"node/test_relu", run_elementwise},
  {"node/test_sigmoid", run_elementwise},
  {"node/test_sigmoid_example", run_elementwise},
  {"node/test_hardsigmoid", run_elementwise},
  {"node/test_hardsigmoid_default", run_elementwise},
  {"node/test_hardsigmoid_example", run_elementwise},
  {"node/test_hardswish", run_elementwise},
  {"node/test_hardswish_expanded", run_elementwise},
  {"node/test_clip", run_elementwise},
  {"node/test_clip_default_inbounds", run_elementwise},
  {"node/test_clip_default_max", run_elementwise},
  {"node/test_clip_default_min", run_elementwise},
  {"node/test_clip_example", run_elementwise},
  {"node/test_clip_inbounds", run_elementwise},
  {"node/test_clip_outbounds", run_elementwise},
  {"node/test_clip_splitbounds", run_elementwise},
  {"node/test_add", run_elementwise},
  {"node/test_mul", run_elementwise},
  {"node/test_mul_example", run_elementwise},
  {"pytorch-converted/test_ReLU", run_elementwise},
  {"pytorch-converted/test_Sigmoid", run_elementwise},
  {"pytorch-operator/test_operator_clip", run_elementwise},
  {"simple/test_single_relu_model", run_elementwise},
  // ---- Softmax
  {"node/test_softmax_axis_0", run_softmax},
  {"node/test_softmax_axis_1", run_softmax},
  {"node/test_softmax_axis_2", run_softmax},
  {"node/test_softmax_default_axis", run_softmax},
  {"node/test_softmax_example", run_softmax},
  {"node/test_softmax_large_number", run_softmax},
  {"node/test_softmax_negative_axis", run_softmax},
  {"pytorch-converted/test_Softmax", run_softmax},
  {"pytorch-converted/test_softmax_functional_dim3", run_softmax},
  {"pytorch-converted/test_softmax_lastdim", run_softmax},
  // ---- Concat
  {"node/test_concat_1d_axis_0", run_concat},
  {"node/test_concat_1d_axis_negative_1", run_concat},
  {"node/test_concat_2d_axis_0", run_concat},
  {"node/test_concat_2d_axis_1", run_concat},
  {"node/test_concat_2d_axis_negative_1", run_concat},
  {"node/test_concat_2d_axis_negative_2", run_concat},
  {"node/test_concat_3d_axis_0", run_concat},
  {"node/test_concat_3d_axis_1", run_concat},
  {"node/test_concat_3d_axis_2", run_concat},
  {"node/test_concat_3d_axis_negative_1", run_concat},
  {"node/test_concat_3d_axis_negative_2", run_concat},
  {"node/test_concat_3d_axis_negative_3", run_concat},
  {"pytorch-operator/test_operator_concat2", run_concat},
  // ---- Flatten
  {"node/test_flatten_axis0", run_flatten},
  {"node/test_flatten_axis1", run_flatten},
  {"node/test_flatten_axis2", run_flatten},
  {"node/test_flatten_axis3", run_flatten},
  {"node/test_flatten_default_axis", run_flatten},
  {"node/test_flatten_negative_axis1", run_flatten},
  {"node/test_flatten_negative_axis2", run_flatten},
  {"node/test_flatten_negative_axis3", run_flatten},
  {"node/test_flatten_negative_axis4", run_flatten},
  {"pytorch-operator/test_operator_flatten", run_flatten},
  {"pytorch-operator/test_operator_view", run_flatten},
  // ---- Pad
  {"pytorch-converted/test_ZeroPad2d", run_pad},
};

struct SkipCase {
  const char* id;
  const char* why;
};

const std::vector<SkipCase> kSkipped = {
  {"node/test_add_bcast", "broadcast over the last axis ([3,4,5] + [5]); IR Add takes equal shapes"},
  {"node/test_mul_bcast", "broadcast over the last axis ([3,4,5] * [5]); IR Mul broadcasts only per channel (C,1,1)"},
  {"pytorch-operator/test_operator_add_broadcast", "double tensors, broadcasting Add"},
  {"pytorch-operator/test_operator_add_size1_broadcast", "double tensors, broadcasting Add"},
  {"pytorch-operator/test_operator_add_size1_right_broadcast", "double tensors, broadcasting Add"},
  {"pytorch-operator/test_operator_add_size1_singleton_broadcast", "double tensors, broadcasting Add"},
  {"pytorch-operator/test_operator_addconstant", "double tensors, Add of a broadcast constant"},
  {"pytorch-operator/test_operator_non_float_params", "int64 Add/Mul"},
  {"pytorch-operator/test_operator_addmm", "second Gemm's bias is the first Gemm's output (a computed tensor); IR Gemm bias is a constant"},
  {"node/test_averagepool_3d_default", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_AvgPool3d", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_AvgPool3d_stride", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_AvgPool3d_stride1_pad0_gpu_input", "3-D pooling (IR is 2-D)"},
  {"node/test_maxpool_3d_default", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_MaxPool3d", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_MaxPool3d_stride", "3-D pooling (IR is 2-D)"},
  {"pytorch-converted/test_MaxPool3d_stride_padding", "3-D pooling (IR is 2-D)"},
  {"node/test_maxpool_2d_dilations", "dilated pooling (IR pools have no dilation)"},
  {"pytorch-converted/test_MaxPool1d_stride_padding_dilation", "dilated pooling (IR pools have no dilation)"},
  {"pytorch-converted/test_MaxPool2d_stride_padding_dilation", "dilated pooling (IR pools have no dilation)"},
  {"node/test_maxpool_with_argmax_2d_precomputed_pads", "second output (argmax indices)"},
  {"node/test_maxpool_with_argmax_2d_precomputed_strides", "second output (argmax indices)"},
  {"pytorch-converted/test_Conv3d", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_dilated", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_dilated_strided", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_groups", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_no_bias", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_stride", "3-D convolution (IR is 2-D)"},
  {"pytorch-converted/test_Conv3d_stride_padding", "3-D convolution (IR is 2-D)"},
  {"node/test_batchnorm_epsilon_training_mode", "training mode (batch statistics, running-mean outputs)"},
  {"node/test_batchnorm_example_training_mode", "training mode (batch statistics, running-mean outputs)"},
  {"pytorch-converted/test_BatchNorm3d_eval", "3-D input (IR is 2-D)"},
  {"pytorch-converted/test_BatchNorm3d_momentum_eval", "3-D input (IR is 2-D)"},
  {"node/test_constant_pad", "pad value 1.2 (IR Pad is zero padding)"},
  {"pytorch-converted/test_ConstantPad2d", "pad value 2 (IR Pad is zero padding)"},
  {"node/test_edge_pad", "edge padding (IR Pad is zero padding)"},
  {"node/test_reflect_pad", "reflect padding (IR Pad is zero padding)"},
  {"pytorch-converted/test_ReflectionPad2d", "reflect padding (IR Pad is zero padding)"},
  {"pytorch-converted/test_ReplicationPad2d", "edge padding (IR Pad is zero padding)"},
  {"pytorch-operator/test_operator_pad", "reflect padding (IR Pad is zero padding)"},
};
// clang-format on

// gtest prints parameters in test names and failures: show the case id.
void PrintTo(const RunCase& r, std::ostream* os) { *os << r.id; }
void PrintTo(const SkipCase& s, std::ostream* os) { *os << s.id; }

// Ops whose cases are in scope (a case is in scope when all of its nodes,
// Constant aside, are among these).
const std::set<std::string> kScopeOps = {
    "Conv", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QuantizeLinear", "DequantizeLinear",
    "Gemm", "AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool", "Relu", "Clip", "HardSigmoid",
    "HardSwish", "Sigmoid", "Add", "Mul", "Concat", "Softmax", "Flatten", "Pad", "BatchNormalization"};

// ---------------------------------------------------------------- results table

struct Row {
  std::string id, ops, how, result, detail;
};

std::mutex g_rows_mu;
std::map<std::string, Row>& rows() {
  static std::map<std::string, Row> r;
  return r;
}

void record(const Row& r) {
  std::lock_guard<std::mutex> l(g_rows_mu);
  rows()[r.id] = r;
}

class TableEnv : public ::testing::Environment {
 public:
  void TearDown() override {
    if (rows().empty()) return;
    int pass = 0, fail = 0, skip = 0;
    std::printf("\n| case | op | compared | result |\n|---|---|---|---|\n");
    for (const auto& [id, r] : rows()) {
      std::printf("| %s | %s | %s | %s%s%s |\n", id.c_str(), r.ops.c_str(), r.how.c_str(), r.result.c_str(),
                  r.detail.empty() ? "" : ": ", r.detail.c_str());
      pass += r.result == "pass";
      fail += r.result == "FAIL";
      skip += r.result == "refused";
    }
    std::printf("\nonnx testdata: %d passed, %d failed, %d refused by the importer as unsupported\n", pass, fail, skip);
  }
};
[[maybe_unused]] ::testing::Environment* const g_env = ::testing::AddGlobalTestEnvironment(new TableEnv);

std::string ops_of(const Case& c) {
  std::string s;
  for (const auto* n : c.nodes) s += (s.empty() ? "" : "+") + n->op_type();
  return s;
}

std::string param_name(const std::string& id) {
  std::string s;
  for (char ch : id) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

// ---------------------------------------------------------------- tests

class OnnxRun : public ::testing::TestWithParam<RunCase> {};

TEST_P(OnnxRun, MatchesExpectedOutput) {
  REQUIRE_TESTDATA();
  const RunCase rc = GetParam();
  Row row;
  row.id = rc.id;
  try {
    const Case c = load_case(rc.id);
    row.ops = ops_of(c);
    const Outcome o = rc.fn(c);
    row.how = o.how;
    row.detail = o.detail;
    row.result = o.pass ? "pass" : "FAIL";
    EXPECT_TRUE(o.pass) << rc.id << ": " << o.how << ": " << o.detail;
  } catch (const Unsupported& e) {
    row.result = "FAIL";
    row.detail = std::string("unsupported: ") + e.what();
    ADD_FAILURE() << rc.id << " uses something we do not support (" << e.what()
                  << "): fix the handler or move the case to kSkipped with that reason";
  } catch (const std::exception& e) {
    row.result = "FAIL";
    row.detail = e.what();
    ADD_FAILURE() << rc.id << ": " << e.what();
  }
  record(row);
}

INSTANTIATE_TEST_SUITE_P(Cases, OnnxRun, ::testing::ValuesIn(kRun),
                         [](const ::testing::TestParamInfo<RunCase>& i) { return param_name(i.param.id); });

class OnnxSkipped : public ::testing::TestWithParam<SkipCase> {};

TEST_P(OnnxSkipped, IsRefusedCleanly) {
  REQUIRE_TESTDATA();
  const SkipCase sc = GetParam();
  onnx::ModelProto m;
  ASSERT_TRUE(load_model(data_root() + "/" + sc.id, &m)) << sc.id << " is listed as skipped but does not exist";
  std::string ops;
  for (const auto& n : m.graph().node())
    if (n.op_type() != "Constant") ops += (ops.empty() ? "" : "+") + n.op_type();
  record(Row{sc.id, ops, "-", "refused", sc.why});
  // Out of our scope, so the importer must refuse it with one clear error
  // rather than compute something else.
  try {
    (void)ts::import_onnx(data_root() + "/" + sc.id + "/model.onnx", 0);
    ADD_FAILURE() << sc.id << " (" << sc.why << ") was imported although it is listed as unsupported";
  } catch (const ts::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_FALSE(msg.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OnnxSkipped, ::testing::ValuesIn(kSkipped),
                         [](const ::testing::TestParamInfo<SkipCase>& i) { return param_name(i.param.id); });

// Every case in scope is either run or skipped by name: nothing is dropped
// silently, and a new testdata release with new cases fails here until they
// are listed.
TEST(OnnxTestdata, ScopeIsCompletelyListed) {
  REQUIRE_TESTDATA();
  std::set<std::string> listed;
  for (const auto& r : kRun) EXPECT_TRUE(listed.insert(r.id).second) << "listed twice: " << r.id;
  for (const auto& s : kSkipped) EXPECT_TRUE(listed.insert(s.id).second) << "listed twice: " << s.id;
  int in_scope = 0, out_of_scope = 0;
  for (const char* group : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    const fs::path dir = fs::path(data_root()) / group;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!fs::exists(e.path() / "model.onnx")) continue;
      onnx::ModelProto m;
      ASSERT_TRUE(load_model(e.path().string(), &m)) << e.path();
      bool all = true, any = false;
      for (const auto& n : m.graph().node()) {
        if (n.op_type() == "Constant") continue;
        any = true;
        all = all && kScopeOps.count(n.op_type()) > 0;
      }
      const std::string id = std::string(group) + "/" + e.path().filename().string();
      if (any && all) {
        ++in_scope;
        EXPECT_TRUE(listed.count(id)) << id << " is in scope but neither run nor listed as skipped";
      } else {
        ++out_of_scope;
      }
    }
  }
  EXPECT_EQ(size_t(in_scope), listed.size()) << "a listed case is not in scope";
  std::printf("[onnx] %d cases in scope (%zu run, %zu skipped), %d out of scope\n", in_scope, kRun.size(),
              kSkipped.size(), out_of_scope);
}

}  // namespace
}  // namespace ts
