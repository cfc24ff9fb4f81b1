// ONNX import, step 1: protobuf -> the neutral Model of onnx_decode.h.
#include "model/onnx_decode.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML)

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "model/graph.h"  // ts::Error

namespace ts::onnx_import {

namespace pb = ::onnx;

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

int64_t to_i64(double v) {
  constexpr double lim = 4.0e18;
  if (std::isnan(v)) throw Fail("NaN in integer arithmetic");
  if (v > lim) return int64_t(4000000000000000000LL);
  if (v < -lim) return -int64_t(4000000000000000000LL);
  return int64_t(v);
}

std::vector<float> to_floats(const Const& c) { return std::vector<float>(c.v.begin(), c.v.end()); }

std::vector<int64_t> to_ints(const Const& c) {
  std::vector<int64_t> r;
  r.reserve(c.v.size());
  for (double x : c.v) r.push_back(to_i64(x));
  return r;
}

// ------------------------------------------------------------- tensors

namespace {

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

// Reads elements stored as T in raw_data, or else in the typed field f.
template <typename T, typename Field>
void read(const pb::TensorProto& t, const Field& f, int64_t n, std::vector<double>& out, const std::string& what) {
  t.has_raw_data() ? read_raw<T>(t.raw_data(), n, out, what) : read_field(f, n, out, what);
}

}  // namespace

ElemKind elem_kind(int64_t type) {
  switch (type) {
    case pb::TensorProto::FLOAT:
    case pb::TensorProto::FLOAT16: return ElemKind::Float;
    case pb::TensorProto::DOUBLE: return ElemKind::Double;
    case pb::TensorProto::BOOL: return ElemKind::Bool;
    case pb::TensorProto::INT8:
    case pb::TensorProto::UINT8:
    case pb::TensorProto::INT16:
    case pb::TensorProto::UINT16:
    case pb::TensorProto::INT32:
    case pb::TensorProto::UINT32:
    case pb::TensorProto::INT64:
    case pb::TensorProto::UINT64: return ElemKind::Int;
    default: return ElemKind::Other;
  }
}
static_assert(kOnnxFloat == pb::TensorProto::FLOAT);

ConstPtr decode_tensor(const pb::TensorProto& t, const std::string& what) {
  if (t.data_location() == pb::TensorProto::EXTERNAL)
    throw Fail(what + " keeps its data in an external file, which is not supported");
  if (t.has_segment()) throw Fail(what + " is segmented, which is not supported");
  auto c = std::make_shared<Const>();
  for (int64_t d : t.dims()) c->dims.push_back(d);
  const int64_t n = numel(c->dims);
  c->is_int = true;
  switch (t.data_type()) {
    case pb::TensorProto::FLOAT:
      c->is_int = false;
      read<float>(t, t.float_data(), n, c->v, what);
      break;
    case pb::TensorProto::DOUBLE:
      c->is_int = false;
      read<double>(t, t.double_data(), n, c->v, what);
      break;
    case pb::TensorProto::FLOAT16:
      c->is_int = false;
      read<uint16_t>(t, t.int32_data(), n, c->v, what);
      for (double& x : c->v) x = half_to_float(uint16_t(x));
      break;
    case pb::TensorProto::INT64: read<int64_t>(t, t.int64_data(), n, c->v, what); break;
    case pb::TensorProto::INT32: read<int32_t>(t, t.int32_data(), n, c->v, what); break;
    case pb::TensorProto::INT16: read<int16_t>(t, t.int32_data(), n, c->v, what); break;
    case pb::TensorProto::UINT16: read<uint16_t>(t, t.int32_data(), n, c->v, what); break;
    case pb::TensorProto::INT8: read<int8_t>(t, t.int32_data(), n, c->v, what); break;
    case pb::TensorProto::UINT8:
    case pb::TensorProto::BOOL: read<uint8_t>(t, t.int32_data(), n, c->v, what); break;
    case pb::TensorProto::UINT32: read<uint32_t>(t, t.uint64_data(), n, c->v, what); break;
    case pb::TensorProto::UINT64: read<uint64_t>(t, t.uint64_data(), n, c->v, what); break;
    default:
      throw Fail(what + " has unsupported element type " + std::to_string(t.data_type()));
  }
  return c;
}

// ------------------------------------------------------------- attributes

std::string OnnxNode::label() const {
  if (!name.empty()) return name;
  return "#" + std::to_string(index) + (outputs.empty() ? std::string() : " (output '" + outputs[0] + "')");
}

const Attr* OnnxNode::attr(const char* n) const {
  for (const Attr& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

int64_t OnnxNode::attr_i(const char* n, int64_t def) const {
  const Attr* a = attr(n);
  if (!a) return def;
  if (a->type != Attr::Type::Int && !(a->type == Attr::Type::Undefined && a->has_i))
    throw Fail(std::string("attribute '") + n + "' should be an integer");
  return a->i;
}

float OnnxNode::attr_f(const char* n, float def) const {
  const Attr* a = attr(n);
  if (!a) return def;
  if (a->type == Attr::Type::Int) return float(a->i);
  if (a->type != Attr::Type::Float && !(a->type == Attr::Type::Undefined && a->has_f))
    throw Fail(std::string("attribute '") + n + "' should be a float");
  return a->f;
}

std::string OnnxNode::attr_s(const char* n, const std::string& def) const {
  const Attr* a = attr(n);
  if (!a) return def;
  if (a->type != Attr::Type::String && !(a->type == Attr::Type::Undefined && a->has_s))
    throw Fail(std::string("attribute '") + n + "' should be a string");
  return a->s;
}

std::vector<int64_t> OnnxNode::attr_ints(const char* n) const {
  const Attr* a = attr(n);
  if (!a) return {};
  if (a->type != Attr::Type::Ints && a->type != Attr::Type::Undefined)
    throw Fail(std::string("attribute '") + n + "' should be a list of integers");
  return a->ints;
}

// ------------------------------------------------------------- the model

namespace {

Attr decode_attr(const pb::AttributeProto& p) {
  Attr a;
  a.name = p.name();
  switch (p.type()) {
    case pb::AttributeProto::UNDEFINED: a.type = Attr::Type::Undefined; break;
    case pb::AttributeProto::FLOAT: a.type = Attr::Type::Float; break;
    case pb::AttributeProto::INT: a.type = Attr::Type::Int; break;
    case pb::AttributeProto::STRING: a.type = Attr::Type::String; break;
    case pb::AttributeProto::INTS: a.type = Attr::Type::Ints; break;
    default: a.type = Attr::Type::Other; break;
  }
  a.has_i = p.has_i();
  a.has_f = p.has_f();
  a.has_s = p.has_s();
  a.i = p.i();
  a.f = p.f();
  a.s = p.s();
  a.ints.assign(p.ints().begin(), p.ints().end());
  a.floats.assign(p.floats().begin(), p.floats().end());
  a.t = &p.t();
  return a;
}

OnnxNode decode_node(const pb::NodeProto& p, int index) {
  OnnxNode n;
  n.index = index;
  n.name = p.name();
  n.op = p.op_type();
  n.domain = p.domain();
  n.inputs.assign(p.input().begin(), p.input().end());
  n.outputs.assign(p.output().begin(), p.output().end());
  for (const auto& a : p.attribute()) n.attrs.push_back(decode_attr(a));
  return n;
}

int read_opset(const pb::ModelProto& m) {
  int opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = int(o.version());
  if (opset <= 0) throw Fail("the model declares no ONNX opset version");
  return opset;
}

// The one graph input that is not an initializer: float32 [1,C,H,W].
void read_input(const pb::GraphProto& g, int input_size, Model& m) {
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
  const Dims stored = d;
  if (d[0] == -1) d[0] = 1;
  if (d[0] != 1) throw Fail(what + " has batch size " + std::to_string(d[0]) + "; only batch 1 is supported");
  if (d[1] < 1 || d[1] > 4096) throw Fail(what + " must have a fixed number of channels");
  if (input_size > 0) {
    d[2] = d[3] = input_size;
  } else if (d[2] < 1 || d[3] < 1) {
    throw Fail(what + " has no fixed height and width; give an input size");
  }
  if (d[2] > kMaxDim || d[3] > kMaxDim) throw Fail(what + " is too large");
  m.input = vi.name();
  m.input_dims = d;
  // Errors in later steps may come from a changed input size: say so.
  if (input_size > 0 && (stored[2] != input_size || stored[3] != input_size)) {
    auto dim = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string("?"); };
    m.size_note = " (input size " + std::to_string(input_size) + "x" + std::to_string(input_size) +
                  " instead of the stored " + dim(stored[2]) + "x" + dim(stored[3]) + ")";
  }
}

}  // namespace

std::shared_ptr<const pb::ModelProto> parse_model(const std::string& bytes, const std::string& name) {
  auto model = std::make_shared<pb::ModelProto>();
  if (!model->ParseFromString(bytes))
    throw Error(name + ": cannot parse as an ONNX model (the file is truncated, corrupt or not ONNX)");
  return model;
}

Model decode(std::shared_ptr<const pb::ModelProto> proto, const std::string& name, int input_size) {
  const pb::ModelProto& mp = *proto;
  if (!mp.has_graph()) throw Error(name + ": not an ONNX model (no graph)");
  const pb::GraphProto& g = mp.graph();
  Model m;
  try {
    m.opset = read_opset(mp);
    for (const auto& t : g.initializer()) {
      if (t.name().empty()) throw Fail("an initializer has no name");
      m.initializers.emplace_back(t.name(), decode_tensor(t, "initializer '" + t.name() + "'"));
    }
    read_input(g, input_size, m);
    if (g.node_size() == 0) throw Fail("the graph has no nodes");
    if (g.output_size() != 1)
      throw Fail("the model has " + std::to_string(g.output_size()) + " outputs; exactly one is supported");
  } catch (const Fail& e) {
    throw Error(name + ": " + e.what());
  }
  for (int i = 0; i < g.node_size(); ++i) m.nodes.push_back(decode_node(g.node(i), i));
  for (const auto& o : g.output()) m.outputs.push_back(o.name());
  m.proto = std::move(proto);
  return m;
}

std::vector<int64_t> declared_input_dims(const ::onnx::ModelProto& model) {
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

}  // namespace ts::onnx_import
