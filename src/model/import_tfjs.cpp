#include "model/import_tfjs.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/json_bounded.h"
#include "util/input_file.h"

namespace ts {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct WeightStore {
  std::map<std::string, std::pair<std::vector<int>, std::vector<float>>> w;
  std::string file;

  const std::vector<float>& get(const std::string& layer, const std::string& param, size_t expect) const {
    auto it = w.find(layer + "/" + param);
    if (it == w.end()) throw Error(file + ": weight '" + layer + "/" + param + "' is missing from the manifest");
    if (expect && it->second.second.size() != expect)
      throw Error(file + ": weight '" + layer + "/" + param + "' has " + std::to_string(it->second.second.size()) +
                  " values, expected " + std::to_string(expect));
    return it->second.second;
  }
  bool has(const std::string& layer, const std::string& param) const { return w.count(layer + "/" + param) != 0; }
};

std::string read_file(const fs::path& p, const std::string& what) {
  return read_input_file(p.string(), what, kMaxModelFileBytes);
}

size_t dtype_bytes(const std::string& dt, const std::string& ctx) {
  if (dt == "uint8" || dt == "int8") return 1;
  if (dt == "uint16" || dt == "int16" || dt == "float16") return 2;
  if (dt == "float32" || dt == "int32") return 4;
  throw Error(ctx + ": unsupported weight dtype '" + dt + "'");
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400), exp - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Bounds on the numbers a model file may hold: geometry as the kernels and
// fragments accept it (see graph.cpp), channel and unit counts that keep every
// tensor inside int32 arithmetic.
constexpr int kMaxGeom = 1 << 10;     // kernel, stride, dilation, padding
constexpr int kMaxChannels = 1 << 15;  // filters, units, input height/width
constexpr int kMaxWeightDims = 8;

// An integer field, checked for type and range before it is converted (a
// float or an out-of-range number must not reach get<int>).
int int_of(const json& v, const std::string& ctx, const std::string& what, int lo, int hi) {
  if (!v.is_number_integer())
    throw Error(ctx + ": '" + what + "' must be a whole number (got " + v.dump().substr(0, 40) + ")");
  const bool ok = v.is_number_unsigned()
                     ? v.get<uint64_t>() <= uint64_t(hi) && (lo <= 0 || v.get<uint64_t>() >= uint64_t(lo))
                     : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!ok)
    throw Error(ctx + ": '" + what + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                " (got " + v.dump().substr(0, 40) + ")");
  return int(v.get<int64_t>());
}

int opt_int(const json& c, const char* key, int dflt, const std::string& ctx, int lo, int hi) {
  if (!c.contains(key)) return dflt;
  return int_of(c.at(key), ctx, key, lo, hi);
}

WeightStore load_weights(const json& manifest, const fs::path& dir, const std::string& file,
                         const ShardReader& read_shard) {
  WeightStore ws;
  ws.file = file;
  if (!manifest.is_array()) throw Error(file + ": weightsManifest is not a list");
  for (const auto& group : manifest) {
    std::string blob;
    for (const auto& p : group.at("paths")) blob += read_shard(p.get<std::string>());
    (void)dir;
    size_t off = 0;
    for (const auto& wj : group.at("weights")) {
      const std::string name = wj.at("name").get<std::string>();
      const json& shape_j = wj.at("shape");
      if (!shape_j.is_array() || shape_j.size() > size_t(kMaxWeightDims))
        throw Error(file + ": weight '" + name + "' has a bad shape");
      std::vector<int> shape;
      // The shard bounds the element count: checking against its size before
      // multiplying further keeps the product from overflowing.
      size_t count = 1;
      for (const auto& dj : shape_j) {
        const int d = int_of(dj, file + ": weight '" + name + "'", "shape", 0, 1 << 30);
        shape.push_back(d);
        count *= size_t(d);
        if (count > blob.size()) throw Error(file + ": weight shard is truncated at '" + name + "'");
      }
      const std::string dtype = wj.value("dtype", "float32");
      if (wj.contains("quantization")) {
        const auto& q = wj.at("quantization");
        const std::string qd = q.at("dtype").get<std::string>();
        const size_t nb = dtype_bytes(qd, file);
        if (count * nb > blob.size() - off) throw Error(file + ": weight shard is truncated at '" + name + "'");
      } else if (dtype == "float32" && count * 4 > blob.size() - off) {
        throw Error(file + ": weight shard is truncated at '" + name + "'");
      }
      std::vector<float> vals(count);
      if (wj.contains("quantization")) {
        const auto& q = wj.at("quantization");
        const std::string qd = q.at("dtype").get<std::string>();
        const size_t nb = dtype_bytes(qd, file);
        const auto* src = reinterpret_cast<const uint8_t*>(blob.data() + off);
        if (qd == "float16") {
          for (size_t i = 0; i < count; ++i) vals[i] = half_to_float(uint16_t(src[2 * i] | (src[2 * i + 1] << 8)));
        } else if (qd == "uint8" || qd == "uint16") {
          const double mn = q.at("min").get<double>(), sc = q.at("scale").get<double>();
          for (size_t i = 0; i < count; ++i) {
            const uint32_t v = nb == 1 ? src[i] : uint32_t(src[2 * i] | (src[2 * i + 1] << 8));
            vals[i] = float(mn + double(v) * sc);
          }
        } else {
          throw Error(file + ": unsupported quantization dtype '" + qd + "' for '" + name + "'");
        }
        off += count * nb;
      } else {
        if (dtype != "float32") throw Error(file + ": unsupported weight dtype '" + dtype + "' for '" + name + "'");
        if (count) std::memcpy(vals.data(), blob.data() + off, count * 4);
        off += count * 4;
      }
      for (float v : vals)
        if (!std::isfinite(v)) throw Error(file + ": weight '" + name + "' holds a non-finite value");
      ws.w[name] = {std::move(shape), std::move(vals)};
    }
    if (off != blob.size())
      throw Error(file + ": weight shard has " + std::to_string(blob.size()) + " bytes, manifest describes " +
                  std::to_string(off));
  }
  return ws;
}

// kernel_size, strides, dilation_rate, pool_size: one integer or a pair, each
// in 1..kMaxGeom (0 would divide by zero in the shape arithmetic).
std::pair<int, int> pair_of(const json& v, const std::string& ctx, const char* what) {
  if (v.is_number_integer()) {
    const int k = int_of(v, ctx, what, 1, kMaxGeom);
    return {k, k};
  }
  if (v.is_array() && v.size() == 2) return {int_of(v[0], ctx, what, 1, kMaxGeom), int_of(v[1], ctx, what, 1, kMaxGeom)};
  throw Error(ctx + ": '" + what + "' must be an integer or a pair of integers");
}

// Keras 'same' padding for one axis at the actual input size.
void same_pad(int in, int k, int s, int d, int* p0, int* p1) {
  const int out = (in + s - 1) / s;
  const int total = std::max(0, (out - 1) * s + (k - 1) * d + 1 - in);
  *p0 = total / 2;
  *p1 = total - *p0;
}

struct Importer {
  Graph g;
  WeightStore ws;
  std::string file;
  std::map<std::string, int> tensor_of;  // Keras layer name -> tensor
  std::map<std::string, bool> from_flatten_hwc;  // tensor came from Flatten of a spatial map
  std::map<std::string, Shape> flatten_src;

  // The layer's one call: a list of inputs, each [layer name, ...].
  const json& inbound(const json& layer) const {
    const auto& nodes = layer.at("inbound_nodes");
    const std::string lname = layer.value("name", std::string("?"));
    if (!nodes.is_array() || nodes.size() != 1)
      throw Error(file + ": layer '" + lname + "' is called " + std::to_string(nodes.is_array() ? nodes.size() : 0) +
                  " times; layers must be called exactly once");
    const auto& ins = nodes.at(0);
    if (!ins.is_array() || ins.empty()) throw Error(file + ": layer '" + lname + "' has no inputs");
    return ins;
  }

  int input_tensor(const json& layer, size_t i) {
    const auto& ins = inbound(layer);
    if (i >= ins.size()) throw Error(file + ": layer '" + layer.value("name", std::string("?")) + "' lacks input " + std::to_string(i));
    if (!ins.at(i).is_array() || ins.at(i).empty() || !ins.at(i).at(0).is_string())
      throw Error(file + ": layer '" + layer.value("name", std::string("?")) + "' has a malformed input " + std::to_string(i));
    const std::string src = ins.at(i).at(0).get<std::string>();
    auto it = tensor_of.find(src);
    if (it == tensor_of.end()) throw Error(file + ": layer '" + layer.at("name").get<std::string>() + "' reads unknown layer '" + src + "'");
    return it->second;
  }

  int emit(Node n, const std::string& out_name) {
    n.output = g.add_tensor(out_name, Shape{});
    const int idx = int(g.nodes.size());
    g.nodes.push_back(n);  // temporarily, for shape inference
    Shape s = infer_shape(g, g.nodes.back());
    g.nodes.pop_back();
    g.tensors[n.output].shape = s;
    g.add_node(std::move(n));
    (void)idx;
    return g.nodes.back().output;
  }

  // Adds an activation node after `t` named `name`.
  int activation(const std::string& act, int t, const std::string& name) {
    if (act == "linear") return t;
    Node n;
    n.name = name;
    n.inputs = {t};
    if (act == "relu") n.op = Op::Relu;
    else if (act == "relu6") { n.op = Op::Clip; n.lo = 0; n.hi = 6; }
    else if (act == "sigmoid") n.op = Op::Sigmoid;
    else if (act == "hard_sigmoid") { n.op = Op::HardSigmoid; n.alpha = 0.2f; n.beta_hs = 0.5f; }
    else if (act == "softmax") n.op = Op::Softmax;
    else throw Error(file + ": unsupported activation '" + act + "' at layer '" + name + "'");
    return emit(std::move(n), name);
  }

  // One Keras layer class: reads the layer (its config c, its name) and
  // returns the tensor it produces.
  using Handler = int (Importer::*)(const json& L, const json& c, const std::string& name, const std::string& ctx);

  void layer(const json& L) {
    const std::string cls = L.at("class_name").get<std::string>();
    if (cls == "InputLayer") return;  // handled before
    const json& c = L.at("config");
    const std::string name = L.value("name", c.value("name", std::string("?")));
    static const std::map<std::string, Handler> handlers = {
        {"ZeroPadding2D", &Importer::zero_padding},
        {"Conv2D", &Importer::conv},
        {"DepthwiseConv2D", &Importer::conv},
        {"BatchNormalization", &Importer::batch_norm},
        {"ReLU", &Importer::relu},
        {"Activation", &Importer::activation_layer},
        {"Add", &Importer::add_or_multiply},
        {"Multiply", &Importer::add_or_multiply},
        {"Concatenate", &Importer::concatenate},
        {"AveragePooling2D", &Importer::pooling},
        {"MaxPooling2D", &Importer::pooling},
        {"GlobalAveragePooling2D", &Importer::global_average},
        {"Flatten", &Importer::flatten},
        {"Dense", &Importer::dense},
        {"Dropout", &Importer::identity},
        {"SpatialDropout2D", &Importer::identity},
        {"GaussianNoise", &Importer::identity},
        {"GaussianDropout", &Importer::identity},
    };
    const auto it = handlers.find(cls);
    if (it == handlers.end()) throw Error(file + ": unsupported layer type '" + cls + "' at layer '" + name + "'");
    tensor_of[name] = (this->*(it->second))(L, c, name, file + ": layer '" + name + "' (" + cls + ")");
  }

  int zero_padding(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    Node n;
    n.name = name;
    n.op = Op::Pad;
    n.inputs = {input_tensor(L, 0)};
    const json& p = c.at("padding");
    auto pad = [&](const json& v) { return int_of(v, ctx, "padding", 0, kMaxGeom); };
    if (p.is_number_integer()) n.pad_t = n.pad_b = n.pad_l = n.pad_r = pad(p);
    else if (p.is_array() && p.size() == 2 && p[0].is_array() && p[1].is_array() && p[0].size() == 2 &&
             p[1].size() == 2) {
      n.pad_t = pad(p[0][0]); n.pad_b = pad(p[0][1]); n.pad_l = pad(p[1][0]); n.pad_r = pad(p[1][1]);
    } else if (p.is_array() && p.size() == 2) {
      n.pad_t = n.pad_b = pad(p[0]); n.pad_l = n.pad_r = pad(p[1]);
    } else throw Error(ctx + ": unsupported padding spec");
    return emit(std::move(n), name);
  }

  // Conv2D and DepthwiseConv2D: Keras kernels [kh][kw][cin][cout or mult]
  // into our [o][cin/groups][kh][kw].
  int conv(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    check_channels_last(c, ctx);
    const int x = input_tensor(L, 0);
    const Shape in = g.shape(x);
    Node n;
    n.name = name;
    n.op = Op::Conv;
    n.inputs = {x};
    std::tie(n.kh, n.kw) = pair_of(c.at("kernel_size"), ctx, "kernel_size");
    std::tie(n.sh, n.sw) = pair_of(c.value("strides", json::array({1, 1})), ctx, "strides");
    std::tie(n.dh, n.dw) = pair_of(c.value("dilation_rate", json::array({1, 1})), ctx, "dilation_rate");
    const std::string pad = c.value("padding", std::string("valid"));
    if (pad == "same") {
      same_pad(in.h, n.kh, n.sh, n.dh, &n.pad_t, &n.pad_b);
      same_pad(in.w, n.kw, n.sw, n.dw, &n.pad_l, &n.pad_r);
    } else if (pad != "valid") throw Error(ctx + ": unsupported padding '" + pad + "'");
    int cout;
    const size_t ksp = size_t(n.kh) * n.kw;
    if (L.at("class_name").get<std::string>() == "Conv2D") {
      if (opt_int(c, "groups", 1, ctx, 1, kMaxChannels) != 1) throw Error(ctx + ": grouped Conv2D is not supported");
      cout = int_of(c.at("filters"), ctx, "filters", 1, kMaxChannels);
      const auto& k = ws.get(name, "kernel", ksp * in.c * cout);  // [kh][kw][cin][cout]
      n.weights.resize(k.size());
      for (int o = 0; o < cout; ++o)
        for (int i = 0; i < in.c; ++i)
          for (int y = 0; y < n.kh; ++y)
            for (int xx = 0; xx < n.kw; ++xx)
              n.weights[((size_t(o) * in.c + i) * n.kh + y) * n.kw + xx] =
                  k[((size_t(y) * n.kw + xx) * in.c + i) * cout + o];
    } else {
      const int mult = opt_int(c, "depth_multiplier", 1, ctx, 1, kMaxChannels);
      if (int64_t(in.c) * mult > kMaxChannels) throw Error(ctx + ": too many output channels");
      cout = in.c * mult;
      n.groups = in.c;
      const auto& k = ws.get(name, "depthwise_kernel", ksp * in.c * mult);  // [kh][kw][cin][mult]
      n.weights.resize(k.size());
      for (int i = 0; i < in.c; ++i)
        for (int m = 0; m < mult; ++m)
          for (int y = 0; y < n.kh; ++y)
            for (int xx = 0; xx < n.kw; ++xx)
              n.weights[(size_t(i * mult + m) * n.kh + y) * n.kw + xx] = k[((size_t(y) * n.kw + xx) * in.c + i) * mult + m];
    }
    if (c.value("use_bias", true)) n.bias = ws.get(name, "bias", size_t(cout));
    const int out = emit(std::move(n), name);
    return activation(c.value("activation", std::string("linear")), out, name + "/act");
  }

  int batch_norm(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    const int x = input_tensor(L, 0);
    const int C = g.shape(x).c;
    const json& ax = c.value("axis", json(-1));
    const int axis = int_of(ax.is_array() ? ax.at(0) : ax, ctx, "axis", -4, 4);
    if (axis != -1 && axis != 3) throw Error(ctx + ": only channel-axis BatchNormalization is supported");
    Node n;
    n.name = name;
    n.op = Op::BatchNorm;
    n.inputs = {x};
    n.eps = c.value("epsilon", 1e-3f);
    n.gamma = c.value("scale", true) ? ws.get(name, "gamma", C) : std::vector<float>(C, 1.f);
    n.beta = c.value("center", true) ? ws.get(name, "beta", C) : std::vector<float>(C, 0.f);
    n.mean = ws.get(name, "moving_mean", C);
    n.var = ws.get(name, "moving_variance", C);
    return emit(std::move(n), name);
  }

  int relu(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    Node n;
    n.name = name;
    n.inputs = {input_tensor(L, 0)};
    const double slope = c.value("negative_slope", 0.0), thr = c.value("threshold", 0.0);
    if (slope != 0.0 || thr != 0.0) throw Error(ctx + ": leaky or thresholded ReLU is not supported");
    if (c.contains("max_value") && !c.at("max_value").is_null()) {
      n.op = Op::Clip;
      n.lo = 0;
      n.hi = c.at("max_value").get<float>();
    } else {
      n.op = Op::Relu;
    }
    return emit(std::move(n), name);
  }

  int activation_layer(const json& L, const json& c, const std::string& name, const std::string&) {
    return activation(c.at("activation").get<std::string>(), input_tensor(L, 0), name);
  }

  int add_or_multiply(const json& L, const json&, const std::string& name, const std::string& ctx) {
    const size_t k = inbound(L).size();
    if (k != 2) throw Error(ctx + ": only two operands are supported");
    Node n;
    n.name = name;
    n.op = L.at("class_name").get<std::string>() == "Add" ? Op::Add : Op::Mul;
    n.inputs = {input_tensor(L, 0), input_tensor(L, 1)};
    return emit(std::move(n), name);
  }

  int concatenate(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    const int axis = opt_int(c, "axis", -1, ctx, -4, 4);
    if (axis != -1 && axis != 3) throw Error(ctx + ": only channel concatenation is supported");
    Node n;
    n.name = name;
    n.op = Op::Concat;
    const size_t k = inbound(L).size();
    if (k > 8) throw Error(ctx + ": more than 8 operands are not supported");
    for (size_t i = 0; i < k; ++i) n.inputs.push_back(input_tensor(L, i));
    return emit(std::move(n), name);
  }

  int pooling(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    check_channels_last(c, ctx);
    const int x = input_tensor(L, 0);
    const Shape in = g.shape(x);
    Node n;
    n.name = name;
    n.inputs = {x};
    std::tie(n.kh, n.kw) = pair_of(c.at("pool_size"), ctx, "pool_size");
    const json st = c.value("strides", json());
    if (st.is_null()) { n.sh = n.kh; n.sw = n.kw; }
    else std::tie(n.sh, n.sw) = pair_of(st, ctx, "strides");
    const std::string pad = c.value("padding", std::string("valid"));
    const bool avg = L.at("class_name").get<std::string>() == "AveragePooling2D";
    if (avg && pad == "valid" && n.kh >= in.h && n.kw >= in.w) {
      // The window covers the whole map (or more): a global average.
      n.op = Op::GlobalAvgPool;
    } else {
      n.op = avg ? Op::AvgPool : Op::MaxPool;
      n.count_include_pad = false;  // Keras averages over valid taps only
      if (pad == "same") {
        same_pad(in.h, n.kh, n.sh, 1, &n.pad_t, &n.pad_b);
        same_pad(in.w, n.kw, n.sw, 1, &n.pad_l, &n.pad_r);
      } else if (pad != "valid") throw Error(ctx + ": unsupported padding '" + pad + "'");
    }
    return emit(std::move(n), name);
  }

  int global_average(const json& L, const json&, const std::string& name, const std::string&) {
    Node n;
    n.name = name;
    n.op = Op::GlobalAvgPool;
    n.inputs = {input_tensor(L, 0)};
    return emit(std::move(n), name);
  }

  int flatten(const json& L, const json&, const std::string& name, const std::string&) {
    const int x = input_tensor(L, 0);
    Node n;
    n.name = name;
    n.op = Op::Flatten;
    n.inputs = {x};
    const int out = emit(std::move(n), name);
    flatten_src[name] = g.shape(x);
    return out;
  }

  int dense(const json& L, const json& c, const std::string& name, const std::string& ctx) {
    const int x = input_tensor(L, 0);
    const Shape in = g.shape(x);
    if (in.h != 1 || in.w != 1) throw Error(ctx + ": Dense on a spatial tensor (without Flatten) is not supported");
    const int units = int_of(c.at("units"), ctx, "units", 1, kMaxChannels);
    const int fan_in = in.c;
    if (ws.has(name, "kernel") && ws.get(name, "kernel", 0).size() != size_t(fan_in) * units &&
        ws.get(name, "kernel", 0).size() % size_t(units) == 0)
      throw Error(ctx + ": gets " + std::to_string(fan_in) + " inputs at input size " + std::to_string(g.shape(g.input).h) +
                  ", but its weights are for " + std::to_string(ws.get(name, "kernel", 0).size() / size_t(units)) +
                  " (the model does not take this input size)");
    const auto& k = ws.get(name, "kernel", size_t(fan_in) * units);  // [in][out]
    Node n;
    n.name = name;
    n.op = Op::Gemm;
    n.inputs = {x};
    n.weights.resize(k.size());
    // Keras flattens H-W-C; our tensors are C-H-W: permute the rows.
    const std::string src = inbound(L).at(0).at(0).get<std::string>();
    Shape fs{fan_in, 1, 1};
    if (flatten_src.count(src)) fs = flatten_src[src];
    for (int o = 0; o < units; ++o)
      for (int ch = 0; ch < fs.c; ++ch)
        for (int y = 0; y < fs.h; ++y)
          for (int xx = 0; xx < fs.w; ++xx) {
            const size_t keras_row = (size_t(y) * fs.w + xx) * fs.c + ch;
            const size_t ours = (size_t(ch) * fs.h + y) * fs.w + xx;
            n.weights[size_t(o) * fan_in + ours] = k[keras_row * units + o];
          }
    if (c.value("use_bias", true)) n.bias = ws.get(name, "bias", size_t(units));
    const int out = emit(std::move(n), name);
    return activation(c.value("activation", std::string("linear")), out, name + "/act");
  }

  // Dropout and noise layers: the identity at inference.
  int identity(const json& L, const json&, const std::string& name, const std::string&) {
    Node n;
    n.name = name;
    n.op = Op::Identity;
    n.inputs = {input_tensor(L, 0)};
    return emit(std::move(n), name);
  }

  static void check_channels_last(const json& c, const std::string& ctx) {
    if (c.value("data_format", std::string("channels_last")) != "channels_last")
      throw Error(ctx + ": only channels_last data format is supported");
  }
};

}  // namespace

Graph import_tfjs(const std::string& model_json, int input_size) {
  const fs::path path(model_json);
  const std::string text = read_file(path, "model file");
  const fs::path dir = path.parent_path();
  Graph g = import_tfjs_text(text, model_json, [&](const std::string& p) { return read_file(dir / p, "weight shard"); },
                             input_size);
  // Labels, if shipped beside the model.
  if (std::filesystem::exists(dir / "labels.txt")) {
    std::istringstream lf(read_input_file((dir / "labels.txt").string(), "labels file", kMaxTextFileBytes));
    for (std::string line; std::getline(lf, line);)
      if (!line.empty()) g.labels.push_back(line);
  }
  return g;
}

Graph import_tfjs_text(const std::string& text, const std::string& model_json, const ShardReader& read_shard,
                       int input_size) {
  const fs::path path(model_json);
  const json root = parse_json_bounded(text, model_json, "not valid JSON");
  try {
    if (!root.is_object() || !root.contains("modelTopology") || !root.contains("weightsManifest"))
      throw Error(model_json + ": not a TF.js layers model (needs modelTopology and weightsManifest)");
    const json& topo = root.at("modelTopology");
    const json& mc = topo.contains("model_config") ? topo.at("model_config") : topo;
    const std::string mcls = mc.value("class_name", std::string());
    if (mcls != "Model" && mcls != "Functional")
      throw Error(model_json + ": model class '" + mcls + "' is not supported (need a functional Keras Model)");
    const json& layers = mc.at("config").at("layers");

    Importer im;
    im.file = model_json;
    im.ws = load_weights(root.at("weightsManifest"), path.parent_path(), model_json, read_shard);
    im.g.source = "tfjs:" + model_json;

    // Input layer.
    bool have_input = false;
    for (const auto& L : layers) {
      if (L.at("class_name") != "InputLayer") continue;
      if (have_input) throw Error(model_json + ": models with several inputs are not supported");
      const auto shp = L.at("config").at("batch_input_shape");
      if (!shp.is_array() || shp.size() != 4) throw Error(model_json + ": input must be [batch, H, W, C]");
      const std::string ictx = model_json + ": input layer";
      int h = shp[1].is_null() ? 0 : int_of(shp[1], ictx, "batch_input_shape", 1, kMaxChannels);
      int w = shp[2].is_null() ? 0 : int_of(shp[2], ictx, "batch_input_shape", 1, kMaxChannels);
      const int ch = int_of(shp[3], ictx, "batch_input_shape", 1, kMaxChannels);
      if (input_size > 0) h = w = input_size;
      if (h <= 0 || w <= 0) throw Error(model_json + ": input size is not stored; pass --size");
      if (ch != 3) throw Error(model_json + ": input must have 3 channels (RGB), has " + std::to_string(ch));
      const std::string nm = L.at("name").get<std::string>();
      im.g.input = im.g.add_tensor(nm, Shape{ch, h, w});
      im.tensor_of[nm] = im.g.input;
      have_input = true;
    }
    if (!have_input) throw Error(model_json + ": no InputLayer");
    for (const auto& L : layers) im.layer(L);

    const json& outs = mc.at("config").at("output_layers");
    if (outs.size() != 1) throw Error(model_json + ": models with several outputs are not supported");
    const std::string out_name = outs.at(0).at(0).get<std::string>();
    if (!im.tensor_of.count(out_name)) throw Error(model_json + ": output layer '" + out_name + "' not found");
    im.g.output = im.tensor_of[out_name];

    im.g.compact();
    return std::move(im.g);
  } catch (const json::exception& e) {
    throw Error(model_json + ": malformed model (" + std::string(e.what()).substr(0, 160) + ")");
  }
}

}  // namespace ts
