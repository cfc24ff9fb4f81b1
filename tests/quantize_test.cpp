// Fold + calibrate + quantise on small float graphs built by hand, and the
// .tsqm serialisation of the result.
//
// For each graph:
//  - fold() preserves run_float's output: max|folded - original| <= 1e-5 of
//    the output's largest magnitude;
//  - quantize() after minmax calibration on random inputs gives an int8 model
//    whose dequantised run_int8 output is within a few LSB (output scale) of
//    the float model run on the same (dequantised) input. The bound per
//    graph is stated in the table below; the measured worst case is printed.
//  - serialize -> deserialize -> serialize is byte-identical, every corrupted
//    byte and every truncation is refused with ts::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/float_exec.h"
#include "model/fold.h"
#include "model/graph.h"
#include "model/qgraph.h"
#include "model/quantize.h"

namespace ts {
namespace {

using Rng = std::mt19937;

std::vector<float> uniform(Rng& r, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(r);
  return v;
}

// Small graph builder: every helper appends one node and returns its output
// tensor, with the shape from the IR's own shape inference.
struct Builder {
  Graph g;
  Rng& r;
  int count = 0;
  Builder(Shape in, Rng& rng) : r(rng) { g.input = g.add_tensor("input", in); }

  int add(Node n, std::vector<int> ins) {
    n.inputs = std::move(ins);
    n.name = std::string(op_name(n.op)) + "_" + std::to_string(count++);
    const Shape s = infer_shape(g, n);
    n.output = g.add_tensor(n.name + "_out", s);
    g.add_node(n);
    return n.output;
  }
  int conv(int x, int cout, int k, int s = 1, int pad = 0, int groups = 1, int dil = 1) {
    Node n;
    n.op = Op::Conv;
    n.kh = n.kw = k;
    n.sh = n.sw = s;
    n.pad_t = n.pad_l = n.pad_b = n.pad_r = pad;
    n.dh = n.dw = dil;
    n.groups = groups;
    const int cin = g.shape(x).c;
    const float fan = float(cin / groups * k * k);
    n.weights = uniform(r, size_t(cout) * (cin / groups) * k * k, -1.f / std::sqrt(fan), 1.f / std::sqrt(fan));
    n.bias = uniform(r, size_t(cout), -0.1f, 0.1f);
    return add(n, {x});
  }
  int bn(int x) {
    Node n;
    n.op = Op::BatchNorm;
    const size_t C = size_t(g.shape(x).c);
    n.gamma = uniform(r, C, 0.5f, 1.5f);
    n.beta = uniform(r, C, -0.2f, 0.2f);
    n.mean = uniform(r, C, -0.1f, 0.1f);
    n.var = uniform(r, C, 0.5f, 2.0f);
    n.eps = 1e-3f;
    return add(n, {x});
  }
  int unary(int x, Op op, float lo = 0.f, float hi = 6.f) {
    Node n;
    n.op = op;
    n.lo = lo;
    n.hi = hi;
    return add(n, {x});
  }
  int binary(Op op, int a, int b) {
    Node n;
    n.op = op;
    return add(n, {a, b});
  }
  int pool(int x, Op op, int k, int s, int pad, bool cip = false) {
    Node n;
    n.op = op;
    n.kh = n.kw = k;
    n.sh = n.sw = s;
    n.pad_t = n.pad_l = n.pad_b = n.pad_r = pad;
    n.count_include_pad = cip;
    return add(n, {x});
  }
  int gap(int x) {
    Node n;
    n.op = Op::GlobalAvgPool;
    return add(n, {x});
  }
  int flatten(int x) {
    Node n;
    n.op = Op::Flatten;
    return add(n, {x});
  }
  int gemm(int x, int out) {
    Node n;
    n.op = Op::Gemm;
    const size_t K = size_t(g.shape(x).size());
    n.weights = uniform(r, size_t(out) * K, -1.f / std::sqrt(float(K)), 1.f / std::sqrt(float(K)));
    n.bias = uniform(r, size_t(out), -0.1f, 0.1f);
    return add(n, {x});
  }
  int concat(std::vector<int> xs) {
    Node n;
    n.op = Op::Concat;
    return add(n, std::move(xs));
  }
  int pad(int x, int t, int l, int b, int rr) {
    Node n;
    n.op = Op::Pad;
    n.pad_t = t; n.pad_l = l; n.pad_b = b; n.pad_r = rr;
    return add(n, {x});
  }
  Graph done(int out) {
    g.output = out;
    g.validate();
    return g;
  }
};

struct GraphCase {
  const char* name;
  Shape in;
  double max_lsb;   // bound on max |int8 - float| in output LSBs
  std::function<int(Builder&)> build;
};

// The graphs. Bounds: one quantised layer after the input costs ~1 LSB
// (weight rounding + output rounding); every further requantised tensor
// adds its own half-LSB rounding, amplified by the layers after it.
const std::vector<GraphCase>& cases() {
  static const std::vector<GraphCase> all = {
      {"conv_bn_relu6", {3, 8, 8}, 2.0,
       [](Builder& b) { return b.unary(b.bn(b.conv(b.g.input, 6, 3, 1, 1)), Op::Clip, 0.f, 6.f); }},
      {"depthwise_bn_relu", {4, 9, 7}, 2.0,
       [](Builder& b) { return b.unary(b.bn(b.conv(b.g.input, 4, 3, 2, 1, 4)), Op::Relu); }},
      {"residual_add", {4, 6, 6}, 4.0,
       [](Builder& b) {
         const int t0 = b.conv(b.g.input, 4, 3, 1, 1);
         const int t1 = b.unary(b.conv(t0, 4, 3, 1, 1), Op::Relu);
         return b.unary(b.binary(Op::Add, t0, t1), Op::Relu);
       }},
      {"avgpool_cip0", {3, 9, 9}, 3.0,
       [](Builder& b) { return b.pool(b.conv(b.g.input, 4, 3, 1, 1), Op::AvgPool, 3, 2, 1, false); }},
      {"avgpool_cip1", {3, 9, 9}, 3.0,
       [](Builder& b) { return b.pool(b.conv(b.g.input, 4, 3, 1, 1), Op::AvgPool, 3, 2, 1, true); }},
      {"gap_flatten_gemm_softmax", {3, 8, 8}, 3.0,
       [](Builder& b) {
         const int f = b.flatten(b.gap(b.unary(b.conv(b.g.input, 8, 3, 1, 1), Op::Relu)));
         Node sm;
         sm.op = Op::Softmax;
         return b.add(sm, {b.gemm(f, 10)});
       }},
      {"gemm_on_chw", {2, 4, 5}, 2.0,
       [](Builder& b) { return b.gemm(b.flatten(b.g.input), 7); }},
      {"hardswish_lut", {3, 7, 7}, 3.0,
       [](Builder& b) { return b.unary(b.conv(b.g.input, 5, 3, 1, 1), Op::HardSwish); }},
      {"sigmoid_hardsigmoid_lut", {3, 6, 6}, 3.0,
       [](Builder& b) {
         const int c = b.conv(b.g.input, 4, 3, 1, 1);
         Node hs;
         hs.op = Op::HardSigmoid;
         hs.alpha = 0.2f;
         hs.beta_hs = 0.5f;
         return b.binary(Op::Add, b.unary(c, Op::Sigmoid), b.add(hs, {c}));
       }},
      {"concat_three_scales", {3, 6, 6}, 3.0,
       [](Builder& b) {
         const int a = b.conv(b.g.input, 2, 3, 1, 1);
         const int c = b.unary(b.conv(b.g.input, 3, 1), Op::Relu);
         const int d = b.unary(b.g.input, Op::Clip, -0.25f, 0.25f);
         return b.conv(b.concat({a, c, d}), 4, 1);
       }},
      {"mul_per_channel_broadcast", {4, 6, 6}, 4.0,
       [](Builder& b) {
         const int x = b.conv(b.g.input, 4, 3, 1, 1);
         const int s = b.unary(b.conv(b.gap(x), 4, 1), Op::Sigmoid);
         return b.binary(Op::Mul, x, s);
       }},
      {"pad_maxpool_pad_conv", {3, 7, 7}, 3.0,
       [](Builder& b) {
         const int m = b.pool(b.pad(b.conv(b.g.input, 4, 3), 1, 1, 1, 1), Op::MaxPool, 3, 2, 1);
         return b.conv(b.pad(m, 1, 0, 2, 1), 3, 3);  // this Pad folds into the conv
       }},
      {"dilated_strided_chain", {3, 12, 12}, 4.0,
       [](Builder& b) {
         const int a = b.unary(b.bn(b.conv(b.g.input, 6, 3, 2, 2, 1, 2)), Op::Clip, 0.f, 6.f);
         const int d = b.unary(b.conv(a, 6, 3, 1, 1, 6), Op::Relu);
         return b.conv(d, 5, 1);
       }},
  };
  return all;
}

Graph build(const GraphCase& c, Rng& r) {
  Builder b(c.in, r);
  const int out = c.build(b);
  return b.done(out);
}

float max_abs(const std::vector<float>& v) {
  float m = 0.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

class QuantizeGraphs : public ::testing::TestWithParam<size_t> {};

TEST_P(QuantizeGraphs, FoldPreservesFloatOutput) {
  const GraphCase& c = cases()[GetParam()];
  Rng r(100 + unsigned(GetParam()));
  const Graph g = build(c, r);
  FoldStats st;
  const Graph f = fold(g, &st);
  for (const Node& n : f.nodes) {
    EXPECT_NE(n.op, Op::BatchNorm) << c.name;
    EXPECT_NE(n.op, Op::Flatten) << c.name;
    EXPECT_NE(n.op, Op::Identity) << c.name;
  }
  for (int i = 0; i < 5; ++i) {
    const auto x = uniform(r, size_t(c.in.size()), -1.f, 1.f);
    const auto a = run_float(g, x), b = run_float(f, x);
    ASSERT_EQ(a.size(), b.size());
    const float scale = std::max(max_abs(a), 1e-6f);
    for (size_t k = 0; k < a.size(); ++k)
      ASSERT_LE(std::fabs(a[k] - b[k]), 1e-5f * scale) << c.name << " element " << k << ": " << a[k] << " vs " << b[k];
  }
}

TEST(Fold, CountsWhatItFolded) {
  Rng r(5);
  const Graph g = build(cases()[0], r);  // conv + bn + relu6
  FoldStats st;
  const Graph f = fold(g, &st);
  EXPECT_EQ(st.batchnorm_folded, 1);
  EXPECT_EQ(st.activations_fused, 1);
  ASSERT_EQ(f.nodes.size(), 1u);
  EXPECT_EQ(f.nodes[0].act, Act::Relu6);

  const Graph g2 = build(cases()[11], r);  // pad -> maxpool -> pad -> conv
  const Graph f2 = fold(g2, &st);
  EXPECT_EQ(st.pads_merged, 1);  // only the Pad feeding the conv
  int pads = 0;
  for (const Node& n : f2.nodes) pads += n.op == Op::Pad;
  EXPECT_EQ(pads, 1);
}

TEST_P(QuantizeGraphs, Int8CloseToFloat) {
  const GraphCase& c = cases()[GetParam()];
  Rng r(200 + unsigned(GetParam()));
  const Graph f = fold(build(c, r));
  std::vector<std::vector<float>> calib;
  for (int i = 0; i < 16; ++i) calib.push_back(uniform(r, size_t(c.in.size()), -1.f, 1.f));
  const Calibration cal = calibrate(f, calib, CalibOptions{});
  const QGraph q = quantize(f, cal);
  const QTensor& out = q.tensors.at(q.output);
  ASSERT_GT(out.scale, 0.f);

  double worst = 0, sum = 0;
  size_t count = 0;
  for (const auto& x : calib) {
    // The float model sees exactly the values the int8 model sees.
    const std::vector<int8_t> xq = quantize_input(q, x);
    const QTensor& in = q.tensors.at(q.input);
    std::vector<float> xd(xq.size());
    for (size_t i = 0; i < xq.size(); ++i) xd[i] = in.scale * float(int32_t(xq[i]) - in.zp);
    std::vector<std::vector<float>> all;
    run_float(f, xd, &all);
    const std::vector<float>& want = all.at(size_t(q.output));  // pre-softmax if the model ends in one
    const std::vector<float> got = dequantize_output(q, run_int8(q, xq));
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const double e = std::fabs(double(got[k]) - double(want[k])) / out.scale;
      worst = std::max(worst, e);
      sum += e;
      ++count;
    }
  }
  const double mean = sum / double(count);
  std::printf("[quantize] %-26s out scale %.5f  max err %.2f LSB  mean %.3f LSB  (bound %.1f)\n", c.name,
              double(out.scale), worst, mean, c.max_lsb);
  EXPECT_LE(worst, c.max_lsb) << c.name;
  EXPECT_LE(mean, 0.75) << c.name;
  EXPECT_EQ(q.softmax_output, std::string(c.name) == "gap_flatten_gemm_softmax");
}

TEST(Quantize, RefusesUnfoldedGraphsAndInnerSoftmax) {
  Rng r(3);
  const Graph g = build(cases()[0], r);  // still has its BatchNorm
  std::vector<std::vector<float>> calib{uniform(r, size_t(g.shape(g.input).size()), -1.f, 1.f)};
  EXPECT_THROW(quantize(g, calibrate(g, calib, CalibOptions{})), Error);

  Builder b(Shape{4, 1, 1}, r);
  Node sm;
  sm.op = Op::Softmax;
  const int s = b.add(sm, {b.g.input});
  const Graph g2 = b.done(b.gemm(s, 3));
  const std::vector<std::vector<float>> calib2{uniform(r, 4, -1.f, 1.f)};
  EXPECT_THROW(quantize(g2, calibrate(g2, calib2, CalibOptions{})), Error);
}

std::string case_name(const ::testing::TestParamInfo<size_t>& i) { return cases()[i.param].name; }

INSTANTIATE_TEST_SUITE_P(Graphs, QuantizeGraphs, ::testing::Range(size_t(0), cases().size()), case_name);

// ---------------------------------------------------------------- serialisation

QGraph quantized(size_t which, unsigned seed) {
  Rng r(seed);
  const GraphCase& c = cases()[which];
  const Graph f = fold(build(c, r));
  std::vector<std::vector<float>> calib;
  for (int i = 0; i < 4; ++i) calib.push_back(uniform(r, size_t(c.in.size()), -1.f, 1.f));
  QGraph q = quantize(f, calibrate(f, calib, CalibOptions{}));
  q.labels = {"zero", "one", "two"};
  q.source = "quantize_test:" + std::string(c.name);
  return q;
}

TEST(QGraphFormat, RoundTripIsByteIdenticalAndRunsTheSame) {
  for (size_t i = 0; i < cases().size(); ++i) {
    const QGraph q = quantized(i, 7);
    const std::vector<uint8_t> bytes = serialize_qgraph(q);
    const QGraph back = deserialize_qgraph(bytes, "memory");
    EXPECT_EQ(serialize_qgraph(back), bytes) << cases()[i].name;
    EXPECT_EQ(back.labels, q.labels);
    EXPECT_EQ(back.softmax_output, q.softmax_output);
    Rng r(1);
    std::vector<int8_t> x(size_t(q.shape(q.input).size()));
    for (auto& v : x) v = int8_t(std::uniform_int_distribution<int>(-128, 127)(r));
    EXPECT_EQ(run_int8(back, x), run_int8(q, x)) << cases()[i].name;
  }
}

// run_int8 (buffers pooled by liveness, kept between calls) gives
// run_int8_all's output, on every test graph, also when graphs of other
// sizes ran before it on the same thread and with repeated calls.
TEST(RunInt8, PooledBuffersGiveTheSameOutputAsRunInt8All) {
  for (int rep = 0; rep < 2; ++rep)
    for (size_t i = 0; i < cases().size(); ++i) {
      const QGraph q = quantized(i, 7);
      Rng r(uint32_t(3 + i + 10 * rep));
      std::vector<int8_t> x(size_t(q.shape(q.input).size()));
      for (auto& v : x) v = int8_t(std::uniform_int_distribution<int>(-128, 127)(r));
      const auto all = run_int8_all(q, x);
      EXPECT_EQ(run_int8(q, x), all[size_t(q.output)]) << cases()[i].name;
      EXPECT_EQ(run_int8(q, x), all[size_t(q.output)]) << cases()[i].name << " (second call)";
    }
}

TEST(QGraphFormat, SaveLoadFile) {
  const QGraph q = quantized(2, 9);
  const std::string path = std::string(TS_BINARY_DIR) + "/quantize_test_roundtrip.tsqm";
  save_qgraph(q, path);
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file, serialize_qgraph(q));
  EXPECT_EQ(serialize_qgraph(load_qgraph(path)), file);
  std::remove(path.c_str());
  EXPECT_THROW(load_qgraph(path), Error);  // missing file
}

TEST(QGraphFormat, EveryCorruptedByteIsAnError) {
  const QGraph q = quantized(10, 11);  // mul broadcast: several node kinds
  const std::vector<uint8_t> good = serialize_qgraph(q);
  ASSERT_GT(good.size(), 200u);
  for (uint8_t flip : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
    for (size_t i = 0; i < good.size(); ++i) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= flip;
      EXPECT_THROW(deserialize_qgraph(bad, "corrupt"), Error) << "byte " << i << " ^ " << int(flip);
    }
  }
}

TEST(QGraphFormat, EveryTruncationIsAnError) {
  const QGraph q = quantized(4, 13);
  const std::vector<uint8_t> good = serialize_qgraph(q);
  for (size_t n = 0; n < good.size(); ++n) {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + ptrdiff_t(n));
    EXPECT_THROW(deserialize_qgraph(cut, "truncated"), Error) << "length " << n;
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_THROW(deserialize_qgraph(longer, "extended"), Error);
}

// The error names the file and says what is wrong, in one line.
TEST(QGraphFormat, ErrorMessagesNameTheInput) {
  const std::vector<uint8_t> good = serialize_qgraph(quantized(0, 3));
  std::vector<uint8_t> bad = good;
  bad[good.size() / 2] ^= 0x10;
  try {
    deserialize_qgraph(bad, "model.tsqm");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model.tsqm"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ts
