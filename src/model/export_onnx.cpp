// QGraph -> ONNX (QDQ form). See export_onnx.h for the mapping and its limits.
#include "model/export_onnx.h"

#include "core/op.h"
#include "core/ops/resize.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML)

#include <cctype>
#include <cmath>
#include <fstream>
#include <unordered_set>

namespace ts {

namespace pb = ::onnx;
using core::QOp;

namespace {

// Output size of a sliding window along one axis as ONNX defines it.
int64_t window_out(int64_t in, int64_t pad0, int64_t pad1, int64_t k, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t span = in + pad0 + pad1 - ((k - 1) * dil + 1);
  if (span < 0) return 0;
  return (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
}

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') ? c : '_';
  return r;
}

class Exporter {
 public:
  Exporter(const QGraph& q, const OnnxExportOptions& opt) : q_(q), opt_(opt) {
    off_ = opt.activations == OnnxExportOptions::Activations::Uint8 ? 128 : 0;
    act_type_ = off_ ? pb::TensorProto::UINT8 : pb::TensorProto::INT8;
  }

  pb::ModelProto build() {
    pb::ModelProto m;
    m.set_ir_version(7);  // the IR of opset 13; readable by any current runtime
    m.set_producer_name("tinysplit");
    m.set_producer_version("0.1.0");
    m.set_doc_string("int8 QDQ export of a tinysplit quantised model (" + q_.source + ")");
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opt_.opset);
    g_ = m.mutable_graph();
    g_->set_name("tinysplit_qdq");

    const int nt = int(q_.tensors.size());
    qname_.assign(nt, "");
    rank_.assign(nt, 4);
    for (int t = 0; t < nt; ++t) qname_[t] = "t" + std::to_string(t) + "_" + sanitize(q_.tensors[t].name);
    qname_[q_.output] = kOnnxOutputName;

    // Input: the quantised tensor itself, or float followed by QuantizeLinear.
    const Shape& xs = q_.shape(q_.input);
    if (opt_.float_input) {
      add_value(g_->add_input(), kOnnxInputName, pb::TensorProto::FLOAT, {1, xs.c, xs.h, xs.w});
      node("QuantizeLinear", {kOnnxInputName, scale(q_.input), zero_point(q_.input)}, {qname_[q_.input]});
    } else {
      qname_[q_.input] = kOnnxInputName;
      add_value(g_->add_input(), kOnnxInputName, act_type_, {1, xs.c, xs.h, xs.w});
    }

    for (size_t i = 0; i < q_.nodes.size(); ++i) emit(q_.nodes[i], q_.desc(int(i)));

    const Shape& ys = q_.shape(q_.output);
    if (rank_[q_.output] == 2)
      add_value(g_->add_output(), kOnnxOutputName, act_type_, {1, ys.c});
    else
      add_value(g_->add_output(), kOnnxOutputName, act_type_, {1, ys.c, ys.h, ys.w});
    return m;
  }

 private:
  const QGraph& q_;
  OnnxExportOptions opt_;
  pb::GraphProto* g_ = nullptr;
  int off_ = 0;
  pb::TensorProto_DataType act_type_ = pb::TensorProto::INT8;
  std::vector<std::string> qname_;  // name of each tensor's quantised value
  std::vector<int> rank_;           // 4 ([1,C,H,W]) or 2 ([1,C], after Gemm)
  std::unordered_set<std::string> inits_;  // initializer names written so far
  int uid_ = 0;

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(uid_++); }

  static void add_value(pb::ValueInfoProto* v, const std::string& name, int elem, std::initializer_list<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }

  pb::NodeProto* node(const std::string& op, std::initializer_list<std::string> in, std::initializer_list<std::string> out,
                      const std::string& name = {}) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? fresh(op) : name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }

  static void attr_int(pb::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_str(pb::NodeProto* n, const char* name, const char* v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(pb::NodeProto* n, const char* name, std::initializer_list<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(pb::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  // Initialiser with raw little-endian data (the host is little-endian, as
  // the rest of tinysplit's formats assume).
  std::string init(const std::string& name, int elem, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
    if (!inits_.insert(name).second) throw Error("ONNX export: internal: initializer '" + name + "' written twice");
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data), bytes));
    return name;
  }
  std::string init_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    return init(name, pb::TensorProto::FLOAT, dims, v.data(), v.size() * 4);
  }
  std::string init_i32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int32_t>& v) {
    return init(name, pb::TensorProto::INT32, dims, v.data(), v.size() * 4);
  }
  std::string init_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    return init(name, pb::TensorProto::INT64, dims, v.data(), v.size() * 8);
  }
  std::string init_i8(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int8_t>& v) {
    return init(name, pb::TensorProto::INT8, dims, v.data(), v.size());
  }
  // Activation-typed values (int8 as is, or uint8 shifted by 128).
  std::string init_act(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = uint8_t(v[i] + off_);
    return init(name, act_type_, dims, b.data(), b.size());
  }

  // Per-tensor quantisation parameters, created once per tensor.
  std::string scale(int t) {
    const std::string name = qname_[t] + ".scale";
    if (!has_init(name)) init_f32(name, {}, {q_.tensors[t].scale});
    return name;
  }
  std::string zero_point(int t) {
    const std::string name = qname_[t] + ".zp";
    if (!has_init(name)) init_act(name, {}, {q_.tensors[t].zp});
    return name;
  }
  bool has_init(const std::string& name) const { return inits_.count(name) != 0; }

  // The quantised value of tensor t as [1,C,H,W].
  std::string as_4d(int t) {
    if (rank_[t] == 4) return qname_[t];
    const Shape& s = q_.shape(t);
    const std::string shape = init_i64(fresh(qname_[t] + ".shape4"), {4}, {1, s.c, s.h, s.w});
    const std::string out = fresh(qname_[t] + ".4d");
    node("Reshape", {qname_[t], shape}, {out});
    return out;
  }
  // The quantised value of tensor t flattened to [1, C*H*W] (CHW order, as
  // our Gemm reads it).
  std::string as_2d(int t) {
    if (rank_[t] == 2) return qname_[t];
    const std::string out = fresh(qname_[t] + ".2d");
    attr_int(node("Flatten", {qname_[t]}, {out}), "axis", 1);
    return out;
  }
  // A DequantizeLinear dedicated to one consumer (each QDQ group owns its DQ
  // nodes, as ONNX Runtime's fusion expects).
  std::string dequant(const std::string& qvalue, int t) {
    const std::string out = fresh(qname_[t] + ".dq");
    node("DequantizeLinear", {qvalue, scale(t), zero_point(t)}, {out});
    return out;
  }
  // QuantizeLinear into tensor t, then the fused activation clamp if it is
  // not a no-op. The clamp is applied to the quantised values (ONNX Clip
  // takes int8/uint8), exactly as our kernels clamp after requantising, and
  // it keeps the DQ -> op -> Q group intact for ONNX Runtime's int8 fusion.
  void requant(const std::string& real, const core::LayerDesc& d, int t, const std::string& name) {
    if (d.act_min <= -128 && d.act_max >= 127) {
      node("QuantizeLinear", {real, scale(t), zero_point(t)}, {qname_[t]}, name + ".q");
      return;
    }
    const std::string unclamped = fresh(qname_[t] + ".unclamped");
    node("QuantizeLinear", {real, scale(t), zero_point(t)}, {unclamped}, name + ".q");
    const std::string lo = init_act(fresh(qname_[t] + ".act_min"), {}, {d.act_min});
    const std::string hi = init_act(fresh(qname_[t] + ".act_max"), {}, {d.act_max});
    node("Clip", {unclamped, lo, hi}, {qname_[t]}, name + ".clamp");
  }

  // Per-channel weight scale from the stored multiplier: M = s_in * s_w /
  // s_out, M = mult * 2^(shift - 31).
  float weight_scale(const QNode& n, int c) const {
    const double s_in = q_.tensors[n.inputs[0]].scale, s_out = q_.tensors[n.output].scale;
    double m = std::ldexp(double(n.mult[c]), n.shift[c] - 31);
    // A multiplier that underflowed to 0 makes the channel output its zero
    // point; a vanishing scale does the same in ONNX.
    if (m <= 0) m = std::ldexp(1.0, -40);
    return float(m * s_out / s_in);
  }

  // Conv or Gemm: DQ(x), DQ(w) per channel, DQ(bias), float op, Q.
  void emit_weighted(const QNode& n, const core::LayerDesc& d) {
    const int x = n.inputs[0], y = n.output;
    const int C = n.channels_with_data();
    const std::string base = sanitize(n.name.empty() ? "node" : n.name);
    std::vector<float> ws(C), bs(C);
    for (int c = 0; c < C; ++c) {
      ws[c] = weight_scale(n, c);
      bs[c] = q_.tensors[x].scale * ws[c];
    }
    std::vector<int64_t> wdims;
    if (n.op == QOp::Conv)
      wdims = {C, d.in[0].c / d.groups, d.kh, d.kw};
    else
      wdims = {C, int64_t(n.weights.size()) / C};
    const std::string w = init_i8(fresh(base + ".w"), wdims, n.weights);
    const std::string wsn = init_f32(fresh(base + ".w_scale"), {C}, ws);
    const std::string wzp = init_i8(fresh(base + ".w_zp"), {C}, std::vector<int8_t>(size_t(C), 0));
    const std::string wf = fresh(base + ".w_dq");
    attr_int(node("DequantizeLinear", {w, wsn, wzp}, {wf}), "axis", 0);
    const std::string b = init_i32(fresh(base + ".b"), {C}, n.bias);
    const std::string bsn = init_f32(fresh(base + ".b_scale"), {C}, bs);
    const std::string bzp = init_i32(fresh(base + ".b_zp"), {C}, std::vector<int32_t>(size_t(C), 0));
    const std::string bf = fresh(base + ".b_dq");
    attr_int(node("DequantizeLinear", {b, bsn, bzp}, {bf}), "axis", 0);

    const std::string real = fresh(base + ".real");
    if (n.op == QOp::Conv) {
      const std::string xf = dequant(as_4d(x), x);
      auto* conv = node("Conv", {xf, wf, bf}, {real}, base);
      attr_ints(conv, "kernel_shape", {d.kh, d.kw});
      attr_ints(conv, "strides", {d.sh, d.sw});
      attr_ints(conv, "dilations", {d.dh, d.dw});
      attr_ints(conv, "pads", {d.pad_t, d.pad_l, d.pad_b, d.pad_r});
      attr_int(conv, "group", d.groups);
      check_window(n, d, d.dh, d.dw, false);
      rank_[y] = 4;
    } else {
      const std::string xf = dequant(as_2d(x), x);
      auto* gemm = node("Gemm", {xf, wf, bf}, {real}, base);
      attr_int(gemm, "transB", 1);
      rank_[y] = 2;
    }
    requant(real, d, y, base);
  }

  // ONNX derives a window op's output size from its input, pads and strides;
  // refuse a geometry whose stored output size ONNX would not reproduce.
  // Returns whether ceil_mode is needed (pools only).
  bool check_window(const QNode& n, const core::LayerDesc& d, int dh, int dw, bool allow_ceil) {
    for (int ceil = 0; ceil <= (allow_ceil ? 1 : 0); ++ceil) {
      const int64_t oh = window_out(d.in[0].h, d.pad_t, d.pad_b, d.kh, d.sh, dh, ceil);
      const int64_t ow = window_out(d.in[0].w, d.pad_l, d.pad_r, d.kw, d.sw, dw, ceil);
      if (oh == d.out.h && ow == d.out.w) return ceil != 0;
    }
    throw Error("ONNX export: node '" + n.name + "' has an output size ONNX cannot derive from its window");
  }

  // Add / Mul in the real domain, requantised; an Add's second operand read
  // nearest-upsampled (core/ops/add.cpp) gets a Resize first: output index o
  // reads o / factor, ONNX's asymmetric floor.
  void emit_binary(const QNode& n, const core::LayerDesc& d, const std::string& base) {
    const std::string a = dequant(as_4d(n.inputs[0]), n.inputs[0]);
    std::string b = dequant(as_4d(n.inputs[1]), n.inputs[1]);
    if (n.op == QOp::Add && (d.sh != 1 || d.sw != 1)) {
      const std::string sizes = init_i64(fresh(base + ".up_sizes"), {4}, {1, d.out.c, d.out.h, d.out.w});
      const std::string up = fresh(base + ".up");
      auto* r = node("Resize", {b, "", "", sizes}, {up}, base + ".up");
      attr_str(r, "mode", "nearest");
      attr_str(r, "coordinate_transformation_mode", "asymmetric");
      attr_str(r, "nearest_mode", "floor");
      b = up;
    }
    const std::string real = fresh(base + ".real");
    node(n.op == QOp::Add ? "Add" : "Mul", {a, b}, {real}, base);
    requant(real, d, n.output, base);
  }

  void emit(const QNode& n, const core::LayerDesc& d) {
    const std::string base = sanitize(n.name.empty() ? "node" : n.name);
    const int y = n.output;
    switch (n.op) {
      case QOp::Conv:
      case QOp::Gemm:
        emit_weighted(n, d);
        return;
      case QOp::Add:
      case QOp::Mul:
        emit_binary(n, d, base);
        return;
      case QOp::Concat: {
        // Operands first: the DequantizeLinear nodes must precede the Concat.
        std::vector<std::string> parts;
        for (int t : n.inputs) parts.push_back(dequant(as_4d(t), t));
        auto* c = node("Concat", {}, {fresh(base + ".real")}, base);
        for (const auto& p : parts) c->add_input(p);
        attr_int(c, "axis", 1);
        requant(c->output(0), d, y, base);
        return;
      }
      case QOp::GlobalAvgPool: {
        const std::string real = fresh(base + ".real");
        node("GlobalAveragePool", {dequant(as_4d(n.inputs[0]), n.inputs[0])}, {real}, base);
        requant(real, d, y, base);
        return;
      }
      case QOp::AvgPool: {
        const bool ceil = check_window(n, d, 1, 1, true);
        const std::string real = fresh(base + ".real");
        auto* p = node("AveragePool", {dequant(as_4d(n.inputs[0]), n.inputs[0])}, {real}, base);
        attr_ints(p, "kernel_shape", {d.kh, d.kw});
        attr_ints(p, "strides", {d.sh, d.sw});
        attr_ints(p, "pads", {d.pad_t, d.pad_l, d.pad_b, d.pad_r});
        attr_int(p, "count_include_pad", d.count_include_pad);
        if (ceil) attr_int(p, "ceil_mode", 1);
        requant(real, d, y, base);
        return;
      }
      case QOp::MaxPool: {
        // Values are only moved: MaxPool runs on the quantised tensor itself
        // (ONNX MaxPool-12 takes int8/uint8; padding never wins, as ours).
        const bool ceil = check_window(n, d, 1, 1, true);
        auto* p = node("MaxPool", {as_4d(n.inputs[0])}, {qname_[y]}, base);
        attr_ints(p, "kernel_shape", {d.kh, d.kw});
        attr_ints(p, "strides", {d.sh, d.sw});
        attr_ints(p, "pads", {d.pad_t, d.pad_l, d.pad_b, d.pad_r});
        if (ceil) attr_int(p, "ceil_mode", 1);
        if (d.act_min > -128 || d.act_max < 127) {
          const std::string pooled = fresh(base + ".pooled");
          p->set_output(0, pooled);
          const std::string lo = init_act(fresh(base + ".lo"), {}, {d.act_min});
          const std::string hi = init_act(fresh(base + ".hi"), {}, {d.act_max});
          node("Clip", {pooled, lo, hi}, {qname_[y]});
        }
        return;
      }
      case QOp::Pad: {
        const std::string pads =
            init_i64(fresh(base + ".pads"), {8}, {0, 0, d.pad_t, d.pad_l, 0, 0, d.pad_b, d.pad_r});
        const std::string value = init_act(fresh(base + ".value"), {}, {d.out_zp});
        node("Pad", {as_4d(n.inputs[0]), pads, value}, {qname_[y]}, base);
        return;
      }
      case QOp::Resize: {
        // Nearest only moves values: ONNX Resize on the quantised tensor, to
        // the stored size. Bilinear's integer blend has no ONNX equivalent.
        if (d.kh != core::resize::kNearest)
          throw Error("ONNX export: node '" + n.name + "' (Resize): bilinear Resize cannot be exported");
        static const char* const kCoord[] = {"", "asymmetric", "half_pixel", "align_corners", "pytorch_half_pixel"};
        static const char* const kRound[] = {"", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
        const std::string sizes = init_i64(fresh(base + ".sizes"), {4}, {1, d.out.c, d.out.h, d.out.w});
        auto* r = node("Resize", {as_4d(n.inputs[0]), "", "", sizes}, {qname_[y]}, base);
        attr_str(r, "mode", "nearest");
        attr_str(r, "coordinate_transformation_mode", kCoord[d.kw]);
        attr_str(r, "nearest_mode", kRound[d.dh]);
        return;
      }
      case QOp::ConvTranspose:
        throw Error("ONNX export: node '" + n.name + "' (ConvTranspose) cannot be exported yet");
      case QOp::Lut: {
        // out = table[x + 128] in the integer domain: Cast to int32, offset
        // (uint8 values already start at 0), Gather from the 256 entries.
        std::vector<int32_t> table(256);
        for (int i = 0; i < 256; ++i) table[size_t(i)] = n.lut[size_t(i)];
        const std::string lut = init_act(fresh(base + ".table"), {256}, table);
        const std::string idx = fresh(base + ".idx");
        attr_int(node("Cast", {qname_[n.inputs[0]]}, {idx}), "to", pb::TensorProto::INT32);
        std::string index = idx;
        if (off_ == 0) {
          index = fresh(base + ".idx128");
          node("Add", {idx, init_i32(fresh(base + ".k128"), {}, {128})}, {index});
        }
        node("Gather", {lut, index}, {qname_[y]}, base);
        rank_[y] = rank_[n.inputs[0]];
        return;
      }
      case QOp::ChannelLut: {
        // As Lut, from one flat table of C x 256 entries: channel c's index
        // is offset by c * 256.
        const int32_t C = d.out.c;
        std::vector<int32_t> table(n.lut.begin(), n.lut.end());
        std::vector<int32_t> offs(static_cast<size_t>(C));
        for (int32_t c = 0; c < C; ++c) offs[size_t(c)] = c * 256 + (off_ ? 0 : 128);
        const std::string lut = init_act(fresh(base + ".table"), {int64_t(C) * 256}, table);
        const std::string idx = fresh(base + ".idx"), index = fresh(base + ".index");
        attr_int(node("Cast", {as_4d(n.inputs[0])}, {idx}), "to", pb::TensorProto::INT32);
        node("Add", {idx, init_i32(fresh(base + ".offsets"), {1, C, 1, 1}, offs)}, {index});
        node("Gather", {lut, index}, {qname_[y]}, base);
        return;
      }
      case QOp::Slice: {
        // Values are only moved: Slice the quantised tensor.
        const std::string starts = init_i64(fresh(base + ".starts"), {3}, {d.pad_b, d.pad_t, d.pad_l});
        const std::string ends = init_i64(fresh(base + ".ends"), {3},
                                          {d.pad_b + int64_t(d.out.c - 1) * d.dh + 1, d.pad_t + int64_t(d.out.h - 1) * d.sh + 1,
                                           d.pad_l + int64_t(d.out.w - 1) * d.sw + 1});
        const std::string axes = init_i64(fresh(base + ".axes"), {3}, {1, 2, 3});
        const std::string steps = init_i64(fresh(base + ".steps"), {3}, {d.dh, d.sh, d.sw});
        node("Slice", {as_4d(n.inputs[0]), starts, ends, axes, steps}, {qname_[y]}, base);
        return;
      }
      case QOp::Shuffle: {
        // The channel shuffle as torch writes it: Reshape, Transpose, Reshape.
        const int64_t g = d.groups, C = d.out.c, H = d.out.h, W = d.out.w;
        const std::string split = fresh(base + ".split"), swapped = fresh(base + ".swapped");
        node("Reshape", {as_4d(n.inputs[0]), init_i64(fresh(base + ".shape5"), {5}, {1, g, C / g, H, W})}, {split});
        attr_ints(node("Transpose", {split}, {swapped}), "perm", {0, 2, 1, 3, 4});
        node("Reshape", {swapped, init_i64(fresh(base + ".shape4"), {4}, {1, C, H, W})}, {qname_[y]}, base);
        return;
      }
      case QOp::Transpose: {
        // Values are only moved: Transpose the quantised tensor, batch first.
        attr_ints(node("Transpose", {as_4d(n.inputs[0])}, {qname_[y]}, base), "perm",
                  {0, 1 + core::transpose_axis(d, 0), 1 + core::transpose_axis(d, 1), 1 + core::transpose_axis(d, 2)});
        return;
      }
    }
    throw Error("ONNX export: node '" + n.name + "' has an op that cannot be exported");
  }
};

}  // namespace

std::string qdq_onnx_bytes(const QGraph& q, const OnnxExportOptions& opt) {
  if (q.input < 0 || q.output < 0 || q.output == q.input) throw Error("ONNX export: the model has no computed output");
  if (opt.opset < 13) throw Error("ONNX export: opset 13 or newer is needed (per-channel DequantizeLinear)");
  Exporter ex(q, opt);
  const pb::ModelProto m = ex.build();
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw Error("ONNX export: the model does not serialise (over 2 GiB?)");
  return bytes;
}

void export_qdq_onnx(const QGraph& q, const std::string& path) { export_qdq_onnx(q, path, OnnxExportOptions{}); }

void export_qdq_onnx(const QGraph& q, const std::string& path, const OnnxExportOptions& opt) {
  const std::string bytes = qdq_onnx_bytes(q, opt);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write '" + path + "'");
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) throw Error("failed writing '" + path + "'");
}

}  // namespace ts
