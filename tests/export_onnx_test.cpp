// ONNX export (QDQ form): the written bytes parse back as an ONNX model whose
// graph is well formed (every value defined before use), has the expected
// ops, and carries our exact int8 weights, int32 biases, scales and zero
// points. Checked on a small hand-built QGraph covering every op kind the
// exporter writes, and on the real MobileNetV2 when models/mobilenetv2 exists.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

#include "model/export_onnx.h"
#include "model/pipeline.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using core::QOp;

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

std::map<std::string, int> op_counts(const onnx::GraphProto& g) {
  std::map<std::string, int> c;
  for (const auto& n : g.node()) ++c[n.op_type()];
  return c;
}

const onnx::TensorProto* initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

std::vector<int64_t> dims(const onnx::TensorProto& t) { return {t.dims().begin(), t.dims().end()}; }

// Every node input is a graph input, an initializer or an earlier node's
// output; no value is produced twice; the graph output is produced.
void expect_well_formed(const onnx::GraphProto& g) {
  std::set<std::string> known;
  for (const auto& i : g.input()) known.insert(i.name());
  for (const auto& t : g.initializer()) EXPECT_TRUE(known.insert(t.name()).second) << "duplicate " << t.name();
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) EXPECT_TRUE(in.empty() || known.count(in)) << n.op_type() << " reads undefined '" << in << "'";
    for (const auto& out : n.output()) EXPECT_TRUE(known.insert(out).second) << "'" << out << "' produced twice";
  }
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_TRUE(known.count(g.output(0).name()));
}

// The initializer behind input `k` of the DequantizeLinear that produces
// `value`.
const onnx::TensorProto* dq_source(const onnx::GraphProto& g, const std::string& value, int k) {
  for (const auto& n : g.node())
    if (n.op_type() == "DequantizeLinear" && n.output(0) == value) return initializer(g, n.input(k));
  return nullptr;
}

const onnx::NodeProto* node_named(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& n : g.node())
    if (n.name() == name) return &n;
  return nullptr;
}

double multiplier(int32_t m, int32_t shift) { return std::ldexp(double(m), shift - 31); }

// ---------------------------------------------------------------- small graph

int add_tensor(QGraph& q, const std::string& name, Shape s, float scale, int32_t zp) {
  QTensor t;
  t.name = name;
  t.shape = s;
  t.scale = scale;
  t.zp = zp;
  q.tensors.push_back(t);
  return int(q.tensors.size()) - 1;
}

core::Dims D(const Shape& s) { return core::Dims{s.c, s.h, s.w}; }

QNode make_node(const QGraph& q, const std::string& name, QOp op, std::vector<int> in, int out) {
  QNode n;
  n.name = name;
  n.op = op;
  n.geo.op = op;
  n.inputs = in;
  n.output = out;
  n.geo.n_inputs = uint8_t(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    n.geo.in[k] = D(q.shape(in[k]));
    n.geo.in_zp[k] = q.tensors[in[k]].zp;
  }
  n.geo.out = D(q.shape(out));
  n.geo.out_zp = q.tensors[out].zp;
  return n;
}

// Per-channel data: weights 1, -2, 3, ... (mod 255, symmetric), bias
// 100*o - 50, multiplier from s_in * s_w / s_out with s_w = 0.01 * (o + 1).
void fill_weighted(QGraph& q, QNode& n, int per_channel) {
  const int C = n.geo.out.c;
  for (int i = 0; i < C * per_channel; ++i) n.weights.push_back(int8_t((i * 37 % 255) - 127));
  const double s_in = q.tensors[n.inputs[0]].scale, s_out = q.tensors[n.output].scale;
  for (int o = 0; o < C; ++o) {
    n.bias.push_back(100 * o - 50);
    int32_t m, s;
    quantize_multiplier(s_in * 0.01 * (o + 1) / s_out, &m, &s);
    n.mult.push_back(m);
    n.shift.push_back(s);
  }
}

// input 3x8x8 -> conv 3x3 (+ReLU clamp) -> depthwise 3x3 stride 2 ->
// maxpool 2x2 + add of a pad->avgpool branch ... covering every op kind.
QGraph small_graph() {
  QGraph q;
  q.source = "test";
  const int x = add_tensor(q, "x", {3, 8, 8}, 0.02f, -5);
  const int c1 = add_tensor(q, "conv1", {4, 8, 8}, 0.05f, -128);
  const int dw = add_tensor(q, "dw", {4, 4, 4}, 0.04f, -100);
  const int mp = add_tensor(q, "maxpool", {4, 2, 2}, 0.04f, -100);
  const int pd = add_tensor(q, "pad", {4, 6, 6}, 0.04f, -100);
  const int ap = add_tensor(q, "avgpool", {4, 2, 2}, 0.03f, 7);
  const int sum = add_tensor(q, "sum", {4, 2, 2}, 0.06f, 3);
  const int cat = add_tensor(q, "cat", {8, 2, 2}, 0.06f, 3);
  const int mul = add_tensor(q, "mul", {8, 2, 2}, 0.07f, 1);
  const int gap = add_tensor(q, "gap", {8, 1, 1}, 0.05f, -2);
  const int fc = add_tensor(q, "fc", {3, 1, 1}, 0.1f, 4);
  const int lut = add_tensor(q, "sigmoid", {3, 1, 1}, 1.f / 256, -128);
  q.input = x;

  QNode n = make_node(q, "conv1", QOp::Conv, {x}, c1);
  n.geo.kh = n.geo.kw = 3;
  n.geo.pad_t = n.geo.pad_l = n.geo.pad_b = n.geo.pad_r = 1;
  n.geo.act_min = -128 + 10;  // a clamp that is not a no-op: exported as Clip
  fill_weighted(q, n, 3 * 9);
  q.nodes.push_back(n);

  n = make_node(q, "dw", QOp::Conv, {c1}, dw);
  n.geo.kh = n.geo.kw = 3;
  n.geo.sh = n.geo.sw = 2;
  n.geo.pad_b = n.geo.pad_r = 1;  // TF "SAME" at stride 2
  n.geo.groups = 4;
  fill_weighted(q, n, 9);
  q.nodes.push_back(n);

  n = make_node(q, "maxpool", QOp::MaxPool, {dw}, mp);
  n.geo.kh = n.geo.kw = 2;
  n.geo.sh = n.geo.sw = 2;
  q.nodes.push_back(n);

  n = make_node(q, "pad", QOp::Pad, {dw}, pd);
  n.geo.pad_t = n.geo.pad_l = n.geo.pad_b = n.geo.pad_r = 1;
  q.nodes.push_back(n);

  n = make_node(q, "avgpool", QOp::AvgPool, {pd}, ap);
  n.geo.kh = n.geo.kw = 3;
  n.geo.sh = n.geo.sw = 3;
  for (int c = 1; c <= 9; ++c) {
    int32_t m, s;
    quantize_multiplier(0.04 / (0.03 * c), &m, &s);
    n.mult.push_back(m);
    n.shift.push_back(s);
  }
  q.nodes.push_back(n);

  n = make_node(q, "add", QOp::Add, {mp, ap}, sum);
  n.geo.left_shift = 20;
  quantize_multiplier(0.5, &n.geo.in_mult[0], &n.geo.in_shift[0]);
  quantize_multiplier(0.375, &n.geo.in_mult[1], &n.geo.in_shift[1]);
  quantize_multiplier(2 * 0.04 / (double(1 << 20) * 0.06), &n.geo.out_mult, &n.geo.out_shift);
  q.nodes.push_back(n);

  n = make_node(q, "concat", QOp::Concat, {sum, mp}, cat);
  quantize_multiplier(1.0 * 0.999, &n.geo.in_mult[0], &n.geo.in_shift[0]);
  quantize_multiplier(0.04 / 0.06, &n.geo.in_mult[1], &n.geo.in_shift[1]);
  q.nodes.push_back(n);

  n = make_node(q, "mul", QOp::Mul, {cat, cat}, mul);
  quantize_multiplier(0.06 * 0.06 / 0.07, &n.geo.out_mult, &n.geo.out_shift);
  q.nodes.push_back(n);

  n = make_node(q, "gap", QOp::GlobalAvgPool, {mul}, gap);
  quantize_multiplier(0.07 / (0.05 * 4), &n.geo.out_mult, &n.geo.out_shift);
  q.nodes.push_back(n);

  n = make_node(q, "fc", QOp::Gemm, {gap}, fc);
  fill_weighted(q, n, 8);
  q.nodes.push_back(n);

  n = make_node(q, "sigmoid", QOp::Lut, {fc}, lut);
  for (int v = -128; v < 128; ++v) n.lut.push_back(int8_t(v / 2));
  q.nodes.push_back(n);

  q.output = lut;
  q.link();
  return q;
}

TEST(ExportOnnx, SmallGraphParsesBackWithEveryOp) {
  const QGraph q = small_graph();
  const onnx::ModelProto m = parse(qdq_onnx_bytes(q));
  EXPECT_EQ(m.ir_version(), 7);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 13);
  const auto& g = m.graph();
  expect_well_formed(g);

  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), kOnnxInputName);
  const auto& it = g.input(0).type().tensor_type();
  EXPECT_EQ(it.elem_type(), onnx::TensorProto::INT8);
  ASSERT_EQ(it.shape().dim_size(), 4);
  EXPECT_EQ(it.shape().dim(1).dim_value(), 3);
  EXPECT_EQ(it.shape().dim(3).dim_value(), 8);
  EXPECT_EQ(g.output(0).name(), kOnnxOutputName);
  // After a Gemm the values are [1, C].
  EXPECT_EQ(g.output(0).type().tensor_type().shape().dim_size(), 2);

  auto ops = op_counts(g);
  EXPECT_EQ(ops["Conv"], 2);
  EXPECT_EQ(ops["Gemm"], 1);
  EXPECT_EQ(ops["Add"], 2);  // the Add node, and the +128 index offset of the LUT
  EXPECT_EQ(ops["Mul"], 1);
  EXPECT_EQ(ops["Concat"], 1);
  EXPECT_EQ(ops["MaxPool"], 1);
  EXPECT_EQ(ops["Pad"], 1);
  EXPECT_EQ(ops["AveragePool"], 1);
  EXPECT_EQ(ops["GlobalAveragePool"], 1);
  EXPECT_EQ(ops["Flatten"], 1);
  EXPECT_EQ(ops["Gather"], 1);
  EXPECT_EQ(ops["Cast"], 1);
  EXPECT_EQ(ops["Clip"], 1);  // only conv1's clamp is not a no-op
  // One QuantizeLinear per tensor computed in float (conv1, dw, avgpool, add,
  // concat, mul, gap, fc); MaxPool, Pad and the LUT work on int8 directly.
  EXPECT_EQ(ops["QuantizeLinear"], 8);
  // One DequantizeLinear per float-op operand, plus weights and biases.
  EXPECT_EQ(ops["DequantizeLinear"], 1 + 1 + 1 + 2 + 2 + 2 + 1 + 1 + 3 * 2);

  // conv1: our exact int8 weights in OIHW, per-channel scales on axis 0,
  // int32 bias with scale s_in * s_w.
  const QNode& c1 = q.nodes[0];
  const auto* conv = node_named(g, "conv1");
  ASSERT_NE(conv, nullptr);
  const auto* w = dq_source(g, conv->input(1), 0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(dims(*w), (std::vector<int64_t>{4, 3, 3, 3}));
  ASSERT_EQ(w->raw_data().size(), c1.weights.size());
  EXPECT_EQ(0, std::memcmp(w->raw_data().data(), c1.weights.data(), c1.weights.size()));
  const auto* ws = dq_source(g, conv->input(1), 1);
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(dims(*ws), (std::vector<int64_t>{4}));
  const auto* b = dq_source(g, conv->input(2), 0);
  const auto* bs = dq_source(g, conv->input(2), 1);
  ASSERT_TRUE(b && bs);
  EXPECT_EQ(b->data_type(), onnx::TensorProto::INT32);
  ASSERT_EQ(b->raw_data().size(), 4 * c1.bias.size());
  EXPECT_EQ(0, std::memcmp(b->raw_data().data(), c1.bias.data(), 4 * c1.bias.size()));
  for (int o = 0; o < 4; ++o) {
    float sw, sb;
    std::memcpy(&sw, ws->raw_data().data() + 4 * o, 4);
    std::memcpy(&sb, bs->raw_data().data() + 4 * o, 4);
    EXPECT_NEAR(sw, 0.01 * (o + 1), 1e-7 * (o + 1)) << "weight scale recovered from the multiplier";
    EXPECT_NEAR(sb, 0.02 * sw, 1e-9);
    const double m_onnx = 0.02 * double(sw) / 0.05;
    EXPECT_NEAR(m_onnx / multiplier(c1.mult[o], c1.shift[o]), 1.0, 1e-6);
  }
  for (const auto& n : g.node())
    if (n.op_type() == "DequantizeLinear" && initializer(g, n.input(0)) &&
        initializer(g, n.input(0))->dims_size() > 0) {
      ASSERT_EQ(n.attribute_size(), 1);
      EXPECT_EQ(n.attribute(0).name(), "axis");
      EXPECT_EQ(n.attribute(0).i(), 0);
    }

  // Depthwise and Gemm weight shapes; the Conv attributes of the depthwise.
  const auto* dwn = node_named(g, "dw");
  ASSERT_NE(dwn, nullptr);
  EXPECT_EQ(dims(*dq_source(g, dwn->input(1), 0)), (std::vector<int64_t>{4, 1, 3, 3}));
  std::map<std::string, std::vector<int64_t>> attrs;
  for (const auto& a : dwn->attribute()) attrs[a.name()] = a.type() == onnx::AttributeProto::INT
                                                               ? std::vector<int64_t>{a.i()}
                                                               : std::vector<int64_t>(a.ints().begin(), a.ints().end());
  EXPECT_EQ(attrs["group"], (std::vector<int64_t>{4}));
  EXPECT_EQ(attrs["strides"], (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(attrs["pads"], (std::vector<int64_t>{0, 0, 1, 1}));
  const auto* fc = node_named(g, "fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(dims(*dq_source(g, fc->input(1), 0)), (std::vector<int64_t>{3, 8}));

  // Activation zero points are our int8 values.
  const auto* zp = initializer(g, "t1_conv1.zp");
  ASSERT_NE(zp, nullptr);
  EXPECT_EQ(zp->data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(int8_t(zp->raw_data()[0]), -128);
}

TEST(ExportOnnx, Uint8ActivationsShiftZeroPointsAndTables) {
  const QGraph q = small_graph();
  OnnxExportOptions opt;
  opt.activations = OnnxExportOptions::Activations::Uint8;
  const onnx::ModelProto m = parse(qdq_onnx_bytes(q, opt));
  const auto& g = m.graph();
  expect_well_formed(g);
  EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::UINT8);
  EXPECT_EQ(g.output(0).type().tensor_type().elem_type(), onnx::TensorProto::UINT8);
  for (int t = 0; t < int(q.tensors.size()); ++t) {
    const auto* zp = initializer(g, "t" + std::to_string(t) + "_" + q.tensors[size_t(t)].name + ".zp");
    if (!zp) continue;  // the input's and output's names differ
    EXPECT_EQ(zp->data_type(), onnx::TensorProto::UINT8);
    EXPECT_EQ(int(uint8_t(zp->raw_data()[0])), q.tensors[size_t(t)].zp + 128);
  }
  // Weights stay int8; the LUT needs no +128 offset any more.
  EXPECT_EQ(op_counts(g)["Add"], 1);
  const auto* conv = node_named(g, "conv1");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(dq_source(g, conv->input(1), 0)->data_type(), onnx::TensorProto::INT8);
}

TEST(ExportOnnx, FloatInputStartsWithQuantizeLinear) {
  OnnxExportOptions opt;
  opt.float_input = true;
  const onnx::ModelProto m = parse(qdq_onnx_bytes(small_graph(), opt));
  const auto& g = m.graph();
  expect_well_formed(g);
  EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  ASSERT_GT(g.node_size(), 0);
  EXPECT_EQ(g.node(0).op_type(), "QuantizeLinear");
  EXPECT_EQ(g.node(0).input(0), kOnnxInputName);
}

TEST(ExportOnnx, WritesTheFileAndRefusesAnUnwritablePath) {
  const QGraph q = small_graph();
  const fs::path p = fs::temp_directory_path() / ("ts_export_test_" + std::to_string(::getpid()) + ".onnx");
  export_qdq_onnx(q, p.string());
  ASSERT_TRUE(fs::exists(p));
  EXPECT_EQ(fs::file_size(p), qdq_onnx_bytes(q).size());
  fs::remove(p);
  EXPECT_THROW(export_qdq_onnx(q, "/nonexistent-dir/x.onnx"), Error);
}

TEST(ExportOnnx, RefusesAWindowOnnxCannotReproduce) {
  QGraph q = small_graph();
  q.nodes[0].geo.pad_b = 3;  // output 8x8 no longer follows from the pads
  EXPECT_THROW(qdq_onnx_bytes(q), Error);
}

// ---------------------------------------------------------------- MobileNetV2

TEST(ExportOnnx, MobileNetV2) {
  const std::string home = project_home();
  if (home.empty() || !fs::exists(fs::path(home) / "models" / "mobilenetv2" / "model.json"))
    FAIL() << "models/mobilenetv2 is absent (run scripts/setup.sh or scripts/fetch_model.sh first)";
  const QGraph q = quantized_model("mobilenetv2", 112, {});
  const onnx::ModelProto m = parse(qdq_onnx_bytes(q));
  const auto& g = m.graph();
  expect_well_formed(g);

  int convs = 0, adds = 0, gemms = 0, gaps = 0;
  int64_t weight_bytes = 0;
  for (const auto& n : q.nodes) {
    convs += n.op == QOp::Conv;
    adds += n.op == QOp::Add;
    gemms += n.op == QOp::Gemm;
    gaps += n.op == QOp::GlobalAvgPool;
    weight_bytes += int64_t(n.weights.size());
  }
  ASSERT_GT(convs, 30);
  auto ops = op_counts(g);
  EXPECT_EQ(ops["Conv"], convs);
  EXPECT_EQ(ops["Add"], adds);
  EXPECT_EQ(ops["Gemm"], gemms);
  EXPECT_EQ(ops["GlobalAveragePool"], gaps);
  EXPECT_EQ(ops["QuantizeLinear"], int(q.nodes.size()));

  // Every Conv's and Gemm's weights: OIHW shape from the node's geometry,
  // our bytes. The export keeps the node order, so the k-th Conv/Gemm of the
  // ONNX graph is the k-th of the QGraph.
  std::vector<const onnx::NodeProto*> weighted;
  for (const auto& n : g.node())
    if (n.op_type() == "Conv" || n.op_type() == "Gemm") weighted.push_back(&n);
  ASSERT_EQ(int(weighted.size()), convs + gemms);
  int64_t exported = 0;
  size_t k = 0;
  for (const auto& qn : q.nodes) {
    if (qn.op != QOp::Conv && qn.op != QOp::Gemm) continue;
    const auto* n = weighted[k++];
    EXPECT_EQ(n->op_type(), qn.op == QOp::Conv ? "Conv" : "Gemm") << qn.name;
    const auto* w = dq_source(g, n->input(1), 0);
    ASSERT_NE(w, nullptr) << qn.name;
    const auto& d = qn.geo;
    if (qn.op == QOp::Conv)
      EXPECT_EQ(dims(*w), (std::vector<int64_t>{d.out.c, d.in[0].c / d.groups, d.kh, d.kw})) << qn.name;
    else
      EXPECT_EQ(dims(*w), (std::vector<int64_t>{d.out.c, d.in[0].size()})) << qn.name;
    ASSERT_EQ(w->raw_data().size(), qn.weights.size());
    EXPECT_EQ(0, std::memcmp(w->raw_data().data(), qn.weights.data(), qn.weights.size())) << qn.name;
    exported += int64_t(w->raw_data().size());
  }
  EXPECT_EQ(exported, weight_bytes);
  const auto& out = g.output(0).type().tensor_type();
  EXPECT_EQ(out.shape().dim(1).dim_value(), q.shape(q.output).c);
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// Issue 23's ops export as ONNX of the same meaning: Shuffle as Reshape,
// Transpose, Reshape on the int8 tensor; Slice as Slice; ChannelLut as one
// Gather from a C x 256 table with per-channel offsets.
TEST(ExportOnnx, ShuffleSliceAndPerChannelTables) {
  const std::string dir = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";
  QuantizeOptions opt;
  {
    const QGraph q = quantized_model(dir + "shufflenet_v2.onnx", 0, opt);
    const onnx::ModelProto m = parse(qdq_onnx_bytes(q));
    expect_well_formed(m.graph());
    auto ops = op_counts(m.graph());
    int shuffles = 0, slices = 0;
    for (const QNode& n : q.nodes) {
      shuffles += n.op == QOp::Shuffle;
      slices += n.op == QOp::Slice;
    }
    EXPECT_EQ(shuffles, 16);
    EXPECT_EQ(ops["Transpose"], shuffles);
    EXPECT_EQ(ops["Slice"], slices);
    EXPECT_GE(ops["Reshape"], 2 * shuffles);
  }
  {
    const QGraph q = quantized_model(dir + "activations.onnx", 0, opt);
    const onnx::ModelProto m = parse(qdq_onnx_bytes(q));
    expect_well_formed(m.graph());
    int tables = 0, per_channel = 0;
    for (const QNode& n : q.nodes) {
      tables += n.op == QOp::Lut || n.op == QOp::ChannelLut;
      if (n.op == QOp::ChannelLut) {
        ++per_channel;
        EXPECT_EQ(int64_t(n.lut.size()), int64_t(256) * n.geo.out.c) << n.name;
      }
    }
    EXPECT_EQ(per_channel, 2);  // the two PRelus
    EXPECT_EQ(op_counts(m.graph())["Gather"], tables);
    // The per-channel table holds the whole C x 256 entries.
    bool found = false;
    for (const auto& t : m.graph().initializer())
      if (t.name().find(".table") != std::string::npos && t.dims_size() == 1 && t.dims(0) == 24 * 256) found = true;
    EXPECT_TRUE(found);
  }
}

// A Transpose of C, H, W exports as an ONNX Transpose of the int8 tensor with
// the batch axis first and the same permutation (the test model's four, in
// order: H<->W, C<->H, and both 3-cycles).
TEST(ExportOnnx, TransposeKeepsItsPerm) {
  QuantizeOptions opt;
  const QGraph q = quantized_model(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/transpose.onnx", 0, opt);
  const onnx::ModelProto m = parse(qdq_onnx_bytes(q));
  expect_well_formed(m.graph());
  std::vector<std::vector<int64_t>> perms;
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "Transpose") continue;
    ASSERT_EQ(n.attribute_size(), 1);
    perms.emplace_back(n.attribute(0).ints().begin(), n.attribute(0).ints().end());
  }
  const std::vector<std::vector<int64_t>> want{{0, 1, 3, 2}, {0, 2, 1, 3}, {0, 3, 1, 2}, {0, 2, 3, 1}};
  EXPECT_EQ(perms, want);
}

}  // namespace
}  // namespace ts
