// Float executor: small cases per op, computed by hand or by a naive formula
// written independently of the executor's loop ordering.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/float_exec.h"
#include "model/graph.h"

namespace ts {
namespace {

// A graph with one input of shape `in` and one node; returns the output.
std::vector<float> run_one(Node n, Shape in, Shape out, const std::vector<float>& x) {
  Graph g;
  g.input = g.add_tensor("x", in);
  n.inputs = {g.input};
  n.output = g.add_tensor("y", out);
  if (n.name.empty()) n.name = op_name(n.op);
  g.add_node(n);
  g.output = n.output;
  g.validate();  // also checks the lead's shape inference agrees with `out`
  return run_float(g, x);
}

// eval_node on a node with several inputs of the given shapes.
std::vector<float> eval_multi(Node n, const std::vector<Shape>& ins, Shape out,
                              const std::vector<std::vector<float>>& vals) {
  Graph g;
  std::vector<const std::vector<float>*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    n.inputs.push_back(g.add_tensor("x" + std::to_string(i), ins[i]));
    ptrs.push_back(&vals[i]);
  }
  n.output = g.add_tensor("y", out);
  n.name = op_name(n.op);
  EXPECT_EQ(infer_shape(g, n), out);
  return eval_node(g, n, ptrs);
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-6f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

std::vector<float> iota(int n, float start = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = start + float(i);
  return v;
}

Node conv_node(int cout, int cin_g, int kh, int kw, std::vector<float> w) {
  Node n;
  n.op = Op::Conv;
  n.kh = kh;
  n.kw = kw;
  n.weights = std::move(w);
  (void)cout;
  (void)cin_g;
  return n;
}

TEST(FloatExec, ConvAsymmetricPadByHand) {
  // 3x3 input 1..9, 2x2 kernel of ones, pads top 0 left 1 bottom 1 right 0.
  Node n = conv_node(1, 1, 2, 2, {1, 1, 1, 1});
  n.pad_t = 0;
  n.pad_l = 1;
  n.pad_b = 1;
  n.pad_r = 0;
  auto y = run_one(n, {1, 3, 3}, {1, 3, 3}, iota(9));
  expect_near(y, {5, 12, 16, 11, 24, 28, 7, 15, 17});
}

TEST(FloatExec, ConvDilationByHand) {
  // x[i][j] = 5i + j on 5x5; kernel [[1,2],[3,4]] with dilation 2, no pad:
  // y = x(i,j) + 2x(i,j+2) + 3x(i+2,j) + 4x(i+2,j+2) = 10 v + 82, v = 5i + j.
  Node n = conv_node(1, 1, 2, 2, {1, 2, 3, 4});
  n.dh = n.dw = 2;
  auto y = run_one(n, {1, 5, 5}, {1, 3, 3}, iota(25, 0.f));
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(10.f * float(5 * i + j) + 82.f);
  expect_near(y, want);
}

TEST(FloatExec, ConvBiasStrideByHand) {
  // 1x4x4 input 1..16, 1x1 kernel weight 2, bias 1, stride 2: picks (0,0),(0,2),(2,0),(2,2).
  Node n = conv_node(1, 1, 1, 1, {2});
  n.bias = {1};
  n.sh = n.sw = 2;
  auto y = run_one(n, {1, 4, 4}, {1, 2, 2}, iota(16));
  expect_near(y, {3, 7, 19, 23});
}

// Output-stationary conv straight from the definition.
std::vector<float> naive_conv(const Node& n, Shape is, Shape os, const std::vector<float>& x) {
  const int cin_g = is.c / n.groups, cout_g = os.c / n.groups;
  std::vector<float> y(size_t(os.size()));
  for (int oc = 0; oc < os.c; ++oc)
    for (int oy = 0; oy < os.h; ++oy)
      for (int ox = 0; ox < os.w; ++ox) {
        double s = n.bias.empty() ? 0.0 : n.bias[size_t(oc)];
        const int g = oc / cout_g;
        for (int i = 0; i < cin_g; ++i)
          for (int ky = 0; ky < n.kh; ++ky)
            for (int kx = 0; kx < n.kw; ++kx) {
              const int iy = oy * n.sh - n.pad_t + ky * n.dh;
              const int ix = ox * n.sw - n.pad_l + kx * n.dw;
              if (iy < 0 || iy >= is.h || ix < 0 || ix >= is.w) continue;
              const float w = n.weights[size_t(((oc * cin_g + i) * n.kh + ky) * n.kw + kx)];
              s += double(w) * x[size_t(((g * cin_g + i) * is.h + iy) * is.w + ix)];
            }
        y[size_t((oc * os.h + oy) * os.w + ox)] = float(s);
      }
  return y;
}

struct ConvCase {
  int cin, cout, groups, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

class ConvVsNaive : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvVsNaive, Matches) {
  const ConvCase c = GetParam();
  std::mt19937 rng(c.cin * 131 + c.cout * 17 + c.kh);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Node n = conv_node(c.cout, c.cin / c.groups, c.kh, c.kw, {});
  n.groups = c.groups;
  n.sh = c.sh;
  n.sw = c.sw;
  n.dh = c.dh;
  n.dw = c.dw;
  n.pad_t = c.pt;
  n.pad_l = c.pl;
  n.pad_b = c.pb;
  n.pad_r = c.pr;
  n.weights.resize(size_t(c.cout * (c.cin / c.groups) * c.kh * c.kw));
  for (float& v : n.weights) v = u(rng);
  n.bias.resize(size_t(c.cout));
  for (float& v : n.bias) v = u(rng);
  const Shape is{c.cin, c.h, c.w};
  const int oh = (c.h + c.pt + c.pb - (c.kh - 1) * c.dh - 1) / c.sh + 1;
  const int ow = (c.w + c.pl + c.pr - (c.kw - 1) * c.dw - 1) / c.sw + 1;
  const Shape os{c.cout, oh, ow};
  std::vector<float> x(size_t(is.size()));
  for (float& v : x) v = u(rng);
  expect_near(run_one(n, is, os, x), naive_conv(n, is, os, x), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvVsNaive,
    ::testing::Values(
        //        cin cout g  h  w  kh kw sh sw dh dw pt pl pb pr
        ConvCase{3, 8, 1, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // plain 3x3 same
        ConvCase{3, 4, 1, 9, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},   // stride 2, pad only at the end
        ConvCase{4, 6, 1, 10, 10, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}, // dilation 2
        ConvCase{4, 4, 1, 11, 9, 3, 2, 2, 1, 3, 1, 0, 2, 3, 0},  // everything asymmetric
        ConvCase{6, 6, 6, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // depthwise
        ConvCase{6, 12, 6, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // depthwise, multiplier 2, stride 2
        ConvCase{8, 12, 4, 7, 7, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},  // grouped, not depthwise
        ConvCase{16, 24, 1, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, // 1x1 (GEMM-like)
        ConvCase{5, 7, 1, 40, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, // 1x1, odd channels, > one pixel tile
        ConvCase{4, 6, 2, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1 grouped (general path)
        ConvCase{4, 6, 1, 5, 5, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1},   // 1x1 with padding
        ConvCase{5, 3, 1, 4, 4, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}    // kernel as large as the image
        ));

TEST(FloatExec, DepthwiseByHand) {
  // Two channels, 1x1 kernels 2 and -1, bias 0.5 and 0: per-channel scale.
  Node n = conv_node(2, 1, 1, 1, {2, -1});
  n.groups = 2;
  n.bias = {0.5f, 0.f};
  auto y = run_one(n, {2, 1, 2}, {2, 1, 2}, {1, 2, 3, 4});
  expect_near(y, {2.5f, 4.5f, -3, -4});
}

TEST(FloatExec, GroupedByHand) {
  // 4 input channels, 2 groups, 2 outputs: out0 = x0 + x1, out1 = x2 - x3.
  Node n = conv_node(2, 2, 1, 1, {1, 1, 1, -1});
  n.groups = 2;
  auto y = run_one(n, {4, 1, 1}, {2, 1, 1}, {1, 2, 5, 7});
  expect_near(y, {3, -2});
}

TEST(FloatExec, AvgPoolCountIncludePadBothWays) {
  Node n;
  n.op = Op::AvgPool;
  n.kh = n.kw = 2;
  n.pad_t = n.pad_l = n.pad_b = n.pad_r = 1;
  n.count_include_pad = true;
  const std::vector<float> x = {1, 2, 3, 4};
  expect_near(run_one(n, {1, 2, 2}, {1, 3, 3}, x), {0.25f, 0.75f, 0.5f, 1.f, 2.5f, 1.5f, 0.75f, 1.75f, 1.f});
  n.count_include_pad = false;
  expect_near(run_one(n, {1, 2, 2}, {1, 3, 3}, x), {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
}

TEST(FloatExec, AvgPoolEndPaddingStride2) {
  // 3x3 input 1..9, 2x2 window, stride 2, padding only bottom/right (as ceil mode makes it).
  Node n;
  n.op = Op::AvgPool;
  n.kh = n.kw = 2;
  n.sh = n.sw = 2;
  n.pad_b = n.pad_r = 1;
  n.count_include_pad = false;
  expect_near(run_one(n, {1, 3, 3}, {1, 2, 2}, iota(9)), {3, 4.5f, 7.5f, 9});
  n.count_include_pad = true;
  expect_near(run_one(n, {1, 3, 3}, {1, 2, 2}, iota(9)), {3, 2.25f, 3.75f, 2.25f});
}

TEST(FloatExec, MaxPoolPaddingNeverWins) {
  Node n;
  n.op = Op::MaxPool;
  n.kh = n.kw = 2;
  n.pad_t = n.pad_l = n.pad_b = n.pad_r = 1;
  auto y = run_one(n, {1, 2, 2}, {1, 3, 3}, {-1, -2, -3, -4});
  expect_near(y, {-1, -1, -2, -1, -1, -2, -3, -3, -4});
}

TEST(FloatExec, MaxPoolStride2) {
  Node n;
  n.op = Op::MaxPool;
  n.kh = n.kw = 3;
  n.sh = n.sw = 2;
  n.pad_t = n.pad_l = n.pad_b = n.pad_r = 1;
  // 4x4 input 1..16 -> 2x2: windows rows {-1..1},{1..3} cols likewise.
  expect_near(run_one(n, {1, 4, 4}, {1, 2, 2}, iota(16)), {6, 8, 14, 16});
}

TEST(FloatExec, GlobalAvgPool) {
  Node n;
  n.op = Op::GlobalAvgPool;
  expect_near(run_one(n, {2, 2, 2}, {2, 1, 1}, iota(8)), {2.5f, 6.5f});
}

TEST(FloatExec, GemmByHand) {
  Node n;
  n.op = Op::Gemm;
  n.weights = {1, 2, 3, 4, 5, 6};
  n.bias = {0.5f, -1.f};
  expect_near(run_one(n, {3, 1, 1}, {2, 1, 1}, {1, 0, -1}), {-1.5f, -3.f});
  // Input read in CHW order from a spatial tensor.
  expect_near(run_one(n, {1, 1, 3}, {2, 1, 1}, {1, 0, -1}), {-1.5f, -3.f});
}

TEST(FloatExec, MulBroadcastPerChannel) {
  Node n;
  n.op = Op::Mul;
  auto y = eval_multi(n, {{2, 1, 2}, {2, 1, 1}}, {2, 1, 2}, {{1, 2, 3, 4}, {10, -1}});
  expect_near(y, {10, 20, -3, -4});
  y = eval_multi(n, {{2, 1, 2}, {2, 1, 2}}, {2, 1, 2}, {{1, 2, 3, 4}, {2, 2, 0.5f, -1}});
  expect_near(y, {2, 4, 1.5f, -4});
}

TEST(FloatExec, AddAndFusedClip) {
  Node n;
  n.op = Op::Add;
  n.act = Act::Clip;
  n.act_lo = -1.f;
  n.act_hi = 1.f;
  auto y = eval_multi(n, {{4, 1, 1}, {4, 1, 1}}, {4, 1, 1}, {{1, 2, -3, 0.25f}, {-1.5f, 0, 1, 0.25f}});
  expect_near(y, {-0.5f, 1, -1, 0.5f});
}

TEST(FloatExec, ConcatChannels) {
  Node n;
  n.op = Op::Concat;
  auto y = eval_multi(n, {{1, 1, 2}, {2, 1, 2}}, {3, 1, 2}, {{1, 2}, {3, 4, 5, 6}});
  expect_near(y, {1, 2, 3, 4, 5, 6});
}

TEST(FloatExec, HardSwishHardSigmoid) {
  Node hs;
  hs.op = Op::HardSwish;
  expect_near(run_one(hs, {7, 1, 1}, {7, 1, 1}, {-4, -3, -1, 0, 1, 3, 4}),
              {0, 0, -1.f / 3.f, 0, 2.f / 3.f, 3, 4});
  Node hsig;
  hsig.op = Op::HardSigmoid;
  hsig.alpha = 0.2f;
  hsig.beta_hs = 0.5f;
  expect_near(run_one(hsig, {6, 1, 1}, {6, 1, 1}, {-3, -2.5f, 0, 1, 2.5f, 3}), {0, 0, 0.5f, 0.7f, 1, 1});
  hsig.alpha = 1.f / 6.f;  // torch's hardsigmoid
  expect_near(run_one(hsig, {3, 1, 1}, {3, 1, 1}, {-3, 0, 1.5f}), {0, 0.5f, 0.75f});
}

TEST(FloatExec, SigmoidReluClip) {
  Node s;
  s.op = Op::Sigmoid;
  expect_near(run_one(s, {2, 1, 1}, {2, 1, 1}, {0, std::log(3.f)}), {0.5f, 0.75f});
  Node r;
  r.op = Op::Relu;
  expect_near(run_one(r, {3, 1, 1}, {3, 1, 1}, {-1, 0, 2}), {0, 0, 2});
  Node c;
  c.op = Op::Clip;
  c.lo = 0;
  c.hi = 6;
  expect_near(run_one(c, {3, 1, 1}, {3, 1, 1}, {-1, 3, 7}), {0, 3, 6});
}

TEST(FloatExec, Softmax) {
  Node n;
  n.op = Op::Softmax;
  auto y = run_one(n, {3, 1, 1}, {3, 1, 1}, {1, 2, 3});
  expect_near(y, {0.09003057f, 0.24472847f, 0.66524096f});
  // Large logits must not overflow.
  y = run_one(n, {2, 1, 1}, {2, 1, 1}, {1000, 1000});
  expect_near(y, {0.5f, 0.5f});
}

TEST(FloatExec, BatchNormByHand) {
  Node n;
  n.op = Op::BatchNorm;
  n.gamma = {2, 1};
  n.beta = {1, 0};
  n.mean = {1, 0};
  n.var = {3, 1};
  n.eps = 1;
  // ch0: (x-1)/2*2+1 = x; ch1: x/sqrt(2)
  auto y = run_one(n, {2, 1, 2}, {2, 1, 2}, {2, 4, 1, -2});
  expect_near(y, {2, 4, 1 / std::sqrt(2.f), -2 / std::sqrt(2.f)});
}

TEST(FloatExec, PadFlattenIdentity) {
  Node p;
  p.op = Op::Pad;
  p.pad_t = 1;
  p.pad_r = 1;
  expect_near(run_one(p, {1, 2, 2}, {1, 3, 3}, {1, 2, 3, 4}), {0, 0, 0, 1, 2, 0, 3, 4, 0});
  Node f;
  f.op = Op::Flatten;
  expect_near(run_one(f, {2, 1, 2}, {4, 1, 1}, {1, 2, 3, 4}), {1, 2, 3, 4});
  Node i;
  i.op = Op::Identity;
  expect_near(run_one(i, {2, 1, 2}, {2, 1, 2}, {1, 2, 3, 4}), {1, 2, 3, 4});
}

TEST(FloatExec, FusedActivations) {
  Node n = conv_node(1, 1, 1, 1, {1});
  n.act = Act::Relu6;
  expect_near(run_one(n, {1, 1, 3}, {1, 1, 3}, {-2, 3, 9}), {0, 3, 6});
  n.act = Act::Relu;
  expect_near(run_one(n, {1, 1, 3}, {1, 1, 3}, {-2, 3, 9}), {0, 3, 9});
  Node gm;
  gm.op = Op::Gemm;
  gm.weights = {1, 1};
  gm.act = Act::Clip;
  gm.act_lo = -0.5f;
  gm.act_hi = 0.5f;
  expect_near(run_one(gm, {2, 1, 1}, {1, 1, 1}, {2, 3}), {0.5f});
}

TEST(FloatExec, ChainKeepsAllTensors) {
  // conv(1x1, 2->2) -> relu -> gap -> flatten -> gemm -> softmax
  Graph g;
  g.input = g.add_tensor("in", {2, 2, 2});
  Node c = conv_node(2, 2, 1, 1, {1, 0, 0, -1});
  c.name = "conv";
  c.inputs = {g.input};
  c.output = g.add_tensor("c", {2, 2, 2});
  g.add_node(c);
  Node r;
  r.op = Op::Relu;
  r.name = "relu";
  r.inputs = {c.output};
  r.output = g.add_tensor("r", {2, 2, 2});
  g.add_node(r);
  Node p;
  p.op = Op::GlobalAvgPool;
  p.name = "gap";
  p.inputs = {r.output};
  p.output = g.add_tensor("p", {2, 1, 1});
  g.add_node(p);
  Node f;
  f.op = Op::Flatten;
  f.name = "flat";
  f.inputs = {p.output};
  f.output = g.add_tensor("f", {2, 1, 1});
  g.add_node(f);
  Node m;
  m.op = Op::Gemm;
  m.name = "fc";
  m.weights = {1, 0, 0, 1, 1, 1};
  m.inputs = {f.output};
  m.output = g.add_tensor("m", {3, 1, 1});
  g.add_node(m);
  Node s;
  s.op = Op::Softmax;
  s.name = "sm";
  s.inputs = {m.output};
  s.output = g.add_tensor("s", {3, 1, 1});
  g.add_node(s);
  g.output = s.output;
  g.validate();
  // channel 0 = 1,2,3,4 ; channel 1 = -1,-2,5,-4 -> conv: ch0 same, ch1 negated.
  std::vector<std::vector<float>> all;
  auto y = run_float(g, {1, 2, 3, 4, -1, -2, 5, -4}, &all);
  ASSERT_EQ(all.size(), g.tensors.size());
  expect_near(all[size_t(c.output)], {1, 2, 3, 4, 1, 2, -5, 4});
  expect_near(all[size_t(r.output)], {1, 2, 3, 4, 1, 2, 0, 4});
  expect_near(all[size_t(p.output)], {2.5f, 1.75f});
  expect_near(all[size_t(m.output)], {2.5f, 1.75f, 4.25f});
  const double e0 = std::exp(2.5), e1 = std::exp(1.75), e2 = std::exp(4.25), z = e0 + e1 + e2;
  expect_near(y, {float(e0 / z), float(e1 / z), float(e2 / z)});
  EXPECT_EQ(y, all[size_t(s.output)]);
  // Without keeping intermediates the answer is the same.
  EXPECT_EQ(run_float(g, {1, 2, 3, 4, -1, -2, 5, -4}), y);
}

TEST(FloatExec, WrongInputSizeThrows) {
  Node n;
  n.op = Op::Relu;
  EXPECT_THROW(run_one(n, {2, 2, 2}, {2, 2, 2}, {1, 2, 3}), Error);
}

}  // namespace
}  // namespace ts
