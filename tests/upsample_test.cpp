// Upsampling ops (Resize nearest/bilinear in every coordinate mode,
// ConvTranspose, an Add reading its second operand upsampled): the planner's
// exact input needs against brute force from the definitions (docs/int8.md),
// the input box holding them; the fold of a nearest Resize into the Add that
// reads it (the same float function, the same int8 values); and real runs
// of the FPN/U-Net test model (tests/data/onnx/unet_small*.onnx) on 1, 3 and
// 8 host boards with every strategy family, bit-exact against the int8
// reference; a symbolic input size the model cannot take is one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "core/layer.h"
#include "core/op.h"
#include "core/requant.h"
#include "core/ops/resize.h"
#include "model/fold.h"
#include "plan/needs.h"
#include "plan/plan.h"
#include "support/run_json.h"
#include "support/small_graph.h"
#include "support/shell.h"

namespace {

using namespace ts;
using core::QOp;
using ts::testing::expect_exact;
using ts::testing::run_json;
using ts::testing::tinysplit;
namespace rs = core::resize;

const std::string kOnnx = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";

// One-node graph: input (c, h, w) -> the op with geometry g, output (oc, oh, ow).
QGraph one_node(QOp op, const core::LayerDesc& g, Shape in, Shape out) {
  QGraph q;
  q.tensors.resize(2);
  q.tensors[0].name = "x";
  q.tensors[0].shape = in;
  q.tensors[1].name = "y";
  q.tensors[1].shape = out;
  q.input = 0;
  q.output = 1;
  QNode n;
  n.name = "up";
  n.op = op;
  n.inputs = {0};
  n.output = 1;
  n.geo = g;
  n.geo.op = op;
  n.geo.in[0] = core::Dims{in.c, in.h, in.w};
  n.geo.out = core::Dims{out.c, out.h, out.w};
  if (op == QOp::ConvTranspose) {
    const int per = in.c / g.groups * g.kh * g.kw;
    n.weights.assign(size_t(out.c * per), 1);
    n.bias.assign(size_t(out.c), 0);
    n.mult.assign(size_t(out.c), 1 << 30);
    n.shift.assign(size_t(out.c), 0);
  }
  q.nodes.push_back(n);
  q.link();
  return q;
}

// Input rows (axis 0) or columns (axis 1) output index o reads, from the
// definitions: ConvTranspose o = i*s - p + k for a tap k; Resize the nearest
// index or the two blended ones.
std::vector<int> brute_axis(const core::LayerDesc& d, int axis, int o) {
  const int n = axis ? d.in[0].w : d.in[0].h, m = axis ? d.out.w : d.out.h;
  std::vector<int> r;
  if (d.op == QOp::ConvTranspose) {
    const int k = axis ? d.kw : d.kh, s = axis ? d.sw : d.sh, p = axis ? d.pad_l : d.pad_t;
    for (int i = 0; i < n; ++i)
      for (int t = 0; t < k; ++t)
        if (i * s - p + t == o) r.push_back(i);
  } else if (d.kh == rs::kNearest) {
    r.push_back(rs::nearest(d.kw, d.dh, n, m, o));
  } else {
    int i0, i1, w;
    rs::linear(d.kw, n, m, o, &i0, &i1, &w);
    r = {i0, i1};
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

std::vector<int64_t> brute(const QGraph& q, int64_t b, int64_t e) {
  const core::LayerDesc d = q.desc(0);
  const int64_t hw = int64_t(d.out.h) * d.out.w;
  const int cin_g = d.op == QOp::ConvTranspose ? d.in[0].c / d.groups : 1;
  const int cout_g = d.op == QOp::ConvTranspose ? d.out.c / d.groups : 1;
  std::vector<int64_t> v;
  for (int64_t o = b; o < e; ++o) {
    const int c = int(o / hw), y = int(o % hw / d.out.w), x = int(o % d.out.w);
    for (int ci = c / cout_g * cin_g; ci < (c / cout_g + 1) * cin_g; ++ci)
      for (int iy : brute_axis(d, 0, y))
        for (int ix : brute_axis(d, 1, x)) v.push_back((int64_t(ci) * d.in[0].h + iy) * d.in[0].w + ix);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void check_needs(const QGraph& q, std::mt19937& rng, const std::string& what) {
  const core::LayerDesc d = q.desc(0);
  ASSERT_FALSE(core::check_desc(d).refused()) << what << ": " << core::check_desc(d).field;
  ASSERT_FALSE(core::op_def(d.op)->model_check(d).refused()) << what;
  const int64_t total = d.out.size();
  for (int r = 0; r < 30; ++r) {
    int64_t b = int64_t(rng() % uint64_t(total)), e = int64_t(rng() % uint64_t(total + 1));
    if (b > e) std::swap(b, e);
    if (r == 0) b = 0, e = total;
    std::vector<int64_t> got;
    for (const auto& run : plan::exact_input_runs(q, 0, 0, b, e))
      for (uint32_t i = 0; i < run.count; ++i) got.push_back(int64_t(run.offset) + i);
    const std::vector<int64_t> want = brute(q, b, e);
    ASSERT_EQ(got, want) << what << " run [" << b << "," << e << ")";
    if (b == e) continue;
    const core::Box box = core::input_box(d, 0, int32_t(b), int32_t(e));
    for (int64_t el : want) {
      const int64_t c = el / (int64_t(d.in[0].h) * d.in[0].w), y = el / d.in[0].w % d.in[0].h;
      ASSERT_TRUE(c >= box.c0 && c < box.c1 && y >= box.h0 && y < box.h1) << what << " element " << el;
    }
  }
}

TEST(UpsampleNeeds, ResizeEveryModeMatchesBruteForce) {
  std::mt19937 rng(3);
  const std::pair<int, int> sizes[] = {{4, 8}, {3, 9}, {5, 7}, {8, 4}, {4, 32}, {1, 3}, {6, 6}};
  for (int interp : {rs::kNearest, rs::kLinear})
    for (int coord = rs::kAsymmetric; coord <= rs::kPytorchHalfPixel; ++coord)
      for (int round = rs::kFloor; round <= rs::kRoundPreferCeil; ++round) {
        if (interp == rs::kLinear && round != rs::kFloor) continue;
        for (auto [n, m] : sizes) {
          core::LayerDesc g;
          g.kh = interp; g.kw = coord; g.dh = round;
          const QGraph q = one_node(QOp::Resize, g, Shape{3, n, n + 1}, Shape{3, m, m + 2});
          check_needs(q, rng, "Resize " + std::to_string(interp) + "/" + std::to_string(coord) + "/" +
                                  std::to_string(round) + " " + std::to_string(n) + "->" + std::to_string(m));
        }
      }
}

TEST(UpsampleNeeds, ConvTransposeMatchesBruteForce) {
  std::mt19937 rng(4);
  struct G { int k, s, pt, pb, groups; };
  for (const G& t : {G{2, 2, 0, 0, 1}, G{3, 2, 1, 0, 2}, G{3, 2, 1, 1, 1}, G{4, 2, 1, 1, 4}, G{3, 1, 1, 1, 1},
                     G{1, 3, 0, 0, 1}, G{5, 3, 2, 0, 2}}) {
    core::LayerDesc g;
    g.kh = g.kw = t.k; g.sh = g.sw = t.s;
    g.pad_t = g.pad_l = t.pt; g.pad_b = g.pad_r = t.pb;
    g.groups = t.groups;
    const int H = 5, W = 4;
    const Shape out{8, (H - 1) * t.s + t.k - t.pt - t.pb, (W - 1) * t.s + t.k - t.pt - t.pb};
    const QGraph q = one_node(QOp::ConvTranspose, g, Shape{4, H, W}, out);
    check_needs(q, rng, "ConvTranspose k" + std::to_string(t.k) + " s" + std::to_string(t.s) + " p" +
                            std::to_string(t.pt) + "," + std::to_string(t.pb) + " g" + std::to_string(t.groups));
  }
}

// An Add of (c, h, w) and (c, h / sh, w / sw) read upsampled.
QGraph upsampled_add(int sh, int sw) {
  QGraph q;
  const Shape out{3, 6, 8}, up{3, 6 / sh, 8 / sw};
  q.tensors.resize(4);
  q.tensors[0].shape = out;  // the graph's input (unused here)
  q.tensors[1].shape = out;
  q.tensors[2].shape = up;
  q.tensors[3].shape = out;
  for (int t = 0; t < 4; ++t) q.tensors[size_t(t)].name = "t" + std::to_string(t);
  q.input = 0;
  q.output = 3;
  QNode n;
  n.name = "add";
  n.op = QOp::Add;
  n.inputs = {1, 2};
  n.output = 3;
  n.geo.op = QOp::Add;
  n.geo.n_inputs = 2;
  n.geo.in[0] = core::Dims{out.c, out.h, out.w};
  n.geo.in[1] = core::Dims{up.c, up.h, up.w};
  n.geo.out = n.geo.in[0];
  n.geo.sh = sh;
  n.geo.sw = sw;
  n.geo.left_shift = 20;
  n.geo.in_mult[0] = n.geo.in_mult[1] = 1 << 30;
  n.geo.in_shift[0] = n.geo.in_shift[1] = -1;
  n.geo.out_mult = 1 << 30;
  n.geo.out_shift = -19;
  n.geo.in_zp[0] = 3;
  n.geo.in_zp[1] = -5;
  n.geo.out_zp = 1;
  q.nodes.push_back(n);
  return q;
}

TEST(UpsampleNeeds, AddReadsItsSecondOperandUpsampled) {
  std::mt19937 rng(5);
  for (auto [sh, sw] : {std::pair{2, 2}, std::pair{3, 4}, std::pair{1, 2}, std::pair{6, 1}}) {
    const QGraph q = upsampled_add(sh, sw);
    const core::LayerDesc d = q.desc(0);
    ASSERT_FALSE(core::check_desc(d).refused()) << core::check_desc(d).field;
    const int64_t total = d.out.size(), hw = int64_t(d.out.h) * d.out.w;
    for (int r = 0; r < 30; ++r) {
      int64_t b = int64_t(rng() % uint64_t(total)), e = int64_t(rng() % uint64_t(total + 1));
      if (b > e) std::swap(b, e);
      for (int k = 0; k < 2; ++k) {
        std::vector<int64_t> want;
        for (int64_t o = b; o < e; ++o) {
          const int64_t c = o / hw, y = o % hw / d.out.w, x = o % d.out.w;
          want.push_back(k == 0 ? o : (c * d.in[1].h + y / sh) * d.in[1].w + x / sw);
        }
        std::sort(want.begin(), want.end());
        want.erase(std::unique(want.begin(), want.end()), want.end());
        std::vector<int64_t> got;
        for (const auto& run : plan::exact_input_runs(q, 0, k, b, e))
          for (uint32_t i = 0; i < run.count; ++i) got.push_back(int64_t(run.offset) + i);
        ASSERT_EQ(got, want) << sh << "x" << sw << " operand " << k << " run [" << b << "," << e << ")";
        if (b == e) continue;
        const core::Box box = core::input_box(d, k, int32_t(b), int32_t(e));
        const int64_t plane = int64_t(d.in[k].h) * d.in[k].w;
        for (int64_t el : want) {
          const int64_t c = el / plane, y = el / d.in[k].w % d.in[k].h;
          ASSERT_TRUE(c >= box.c0 && c < box.c1 && y >= box.h0 && y < box.h1) << "operand " << k << " element " << el;
        }
      }
    }
    // Not a whole factor of the output: refused on the factor.
    core::LayerDesc bad = d;
    bad.sh = sh + 1;
    EXPECT_TRUE(core::check_desc(bad).refused());
    EXPECT_STREQ(core::check_desc(bad).field, "sh");
  }
}

// ConvTranspose's values against the definition, summed tap by tap: kernels
// as large as the stride (the kernel's row-at-a-time path: PP-OCRv4's 2x2
// stride 2) and others (the general path), groups, pads, output padding,
// computed whole and in random runs of outputs as boards do.
TEST(UpsampleKernel, ConvTransposeEqualsItsDefinition) {
  std::mt19937 rng(29);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int tiled = 0;
  for (int trial = 0; trial < 120; ++trial) {
    core::LayerDesc d;
    d.op = QOp::ConvTranspose;
    d.groups = rnd(1, 2);
    const int cin = d.groups * rnd(1, 9), cout = d.groups * rnd(1, 6);
    d.sh = rnd(1, 3), d.sw = rnd(1, 3);
    const bool as_stride = trial % 2 == 0;
    d.kh = as_stride ? d.sh : rnd(1, 4), d.kw = as_stride ? d.sw : rnd(1, 4);
    d.pad_t = as_stride ? 0 : rnd(0, d.kh - 1), d.pad_l = as_stride ? 0 : rnd(0, d.kw - 1);
    d.pad_b = rnd(-1, 0), d.pad_r = rnd(-1, 0);  // -1: an output padding row or column
    d.in[0] = core::Dims{cin, rnd(1, 7), rnd(1, 9)};
    d.out = core::Dims{cout, (d.in[0].h - 1) * d.sh + d.kh - d.pad_t - d.pad_b,
                       (d.in[0].w - 1) * d.sw + d.kw - d.pad_l - d.pad_r};
    if (d.out.h < 1 || d.out.w < 1) continue;
    d.in_zp[0] = rnd(-128, 127);
    d.out_zp = rnd(-20, 20);
    const int cin_g = cin / d.groups, cout_g = cout / d.groups, taps = d.kh * d.kw;
    std::vector<int8_t> x(size_t(d.in[0].size())), w(size_t(cout) * cin_g * taps);
    std::vector<int32_t> bias(static_cast<size_t>(cout)), mult(bias), shift(bias);
    for (auto& v : x) v = int8_t(rnd(-128, 127));
    for (auto& v : w) v = int8_t(rnd(-128, 127));
    for (int o = 0; o < cout; ++o)
      bias[size_t(o)] = rnd(-5000, 5000), mult[size_t(o)] = (1 << 30) + rnd(0, 1 << 29), shift[size_t(o)] = -rnd(6, 12);
    d.weights = w.data(), d.bias = bias.data(), d.mult = mult.data(), d.shift = shift.data();
    ASSERT_TRUE(core::layer_valid(d)) << trial;
    tiled += as_stride;
    // The definition: every (ci, iy, ix, ky, kx) with oy = iy * sh - pad_t + ky.
    std::vector<int32_t> acc(size_t(d.out.size()));
    for (int o = 0; o < cout; ++o)
      for (int p = 0; p < d.out.h * d.out.w; ++p) acc[size_t(o * d.out.h * d.out.w + p)] = bias[size_t(o)];
    for (int o = 0; o < cout; ++o)
      for (int ci = 0; ci < cin_g; ++ci)
        for (int iy = 0; iy < d.in[0].h; ++iy)
          for (int ix = 0; ix < d.in[0].w; ++ix)
            for (int ky = 0; ky < d.kh; ++ky)
              for (int kx = 0; kx < d.kw; ++kx) {
                const int oy = iy * d.sh - d.pad_t + ky, ox = ix * d.sw - d.pad_l + kx;
                if (oy < 0 || oy >= d.out.h || ox < 0 || ox >= d.out.w) continue;
                const int c = (o / cout_g) * cin_g + ci;
                acc[size_t((o * d.out.h + oy) * d.out.w + ox)] +=
                    int32_t(w[size_t(((o * cin_g + ci) * d.kh + ky) * d.kw + kx)]) *
                    (int32_t(x[size_t((c * d.in[0].h + iy) * d.in[0].w + ix)]) - d.in_zp[0]);
              }
    std::vector<int8_t> want(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) {
      const int o = int(i) / (d.out.h * d.out.w);
      want[i] = core::requant(acc[i], mult[size_t(o)], shift[size_t(o)], d.out_zp, d.act_min, d.act_max);
    }
    const core::View v{x.data(), 0, cin, 0, d.in[0].h};
    std::vector<int8_t> got(want.size());
    const int32_t n = d.out.size();
    for (int32_t b = 0; b < n;) {
      const int32_t e = trial % 3 == 0 ? n : std::min(n, b + rnd(1, 2 * d.out.w + 3));
      ASSERT_EQ(core::compute_range(d, &v, b, e, got.data() + b, cout), core::KernelStatus::Ok) << trial;
      b = e;
    }
    ASSERT_EQ(got, want) << "trial " << trial << (as_stride ? " (kernel as large as the stride)" : "");
  }
  EXPECT_GT(tiled, 40);
}

// The kernel: any run of outputs equals the plain Add over the operand
// upsampled by hand.
TEST(UpsampleNeeds, AddUpsampledEqualsTheAddOfTheUpsampledOperand) {
  std::mt19937 rng(6);
  for (auto [sh, sw] : {std::pair{2, 2}, std::pair{3, 4}, std::pair{1, 8}}) {
    const core::LayerDesc d = upsampled_add(sh, sw).desc(0);
    core::LayerDesc plain = d;
    plain.sh = plain.sw = 1;
    plain.in[1] = d.out;
    std::vector<int8_t> a(size_t(d.in[0].size())), b(size_t(d.in[1].size())), big(a.size());
    for (auto& v : a) v = int8_t(rng());
    for (auto& v : b) v = int8_t(rng());
    for (int c = 0; c < d.out.c; ++c)
      for (int y = 0; y < d.out.h; ++y)
        for (int x = 0; x < d.out.w; ++x)
          big[size_t((c * d.out.h + y) * d.out.w + x)] = b[size_t((c * d.in[1].h + y / sh) * d.in[1].w + x / sw)];
    const core::View v[2] = {{a.data(), 0, d.out.c, 0, d.out.h}, {b.data(), 0, d.out.c, 0, d.in[1].h}};
    const core::View pv[2] = {v[0], {big.data(), 0, d.out.c, 0, d.out.h}};
    const int32_t total = int32_t(d.out.size());
    for (int r = 0; r < 40; ++r) {
      int32_t s = int32_t(rng() % uint32_t(total)), e = int32_t(rng() % uint32_t(total + 1));
      if (s > e) std::swap(s, e);
      if (r == 0) s = 0, e = total;
      std::vector<int8_t> got(size_t(e - s)), want(size_t(e - s));
      ASSERT_EQ(core::compute_range(d, v, s, e, got.data(), 0), core::KernelStatus::Ok);
      ASSERT_EQ(core::compute_range(plain, pv, s, e, want.data(), 0), core::KernelStatus::Ok);
      ASSERT_EQ(got, want) << sh << "x" << sw << " [" << s << "," << e << ")";
    }
  }
}

// x + Resize(y) by hand: folded into an Add reading y upsampled when the
// Resize is nearest with whole factors and o -> o / f on both axes (the
// same float result), left alone when the Resize has another reader, is
// bilinear, rounds another way or scales by a fraction.
Graph resize_add_graph(int variant) {
  Graph g;
  g.input = g.add_tensor("x", {2, 8, 8});
  auto node = [&](Op op, std::vector<int> in, Shape out, const char* name) {
    return ts::testing::add_op(g, op, std::move(in), out, name, [&](Node& n) {
      n.kh = n.kw = n.sh = n.sw = op == Op::AvgPool ? 2 : 1;
      if (op != Op::Resize) return;
      n.out_h = out.h, n.out_w = out.w;
      n.interp = variant == 2 ? rs::kLinear : rs::kNearest;
      n.coord = variant == 1 ? rs::kHalfPixel : rs::kAsymmetric;
      n.rounding = variant == 1 ? rs::kRoundPreferFloor : variant == 3 ? rs::kRoundPreferCeil : rs::kFloor;
    });
  };
  const int small = node(Op::AvgPool, {g.input}, {2, 4, 4}, "pool");
  const int up = node(Op::Resize, {small}, variant == 5 ? Shape{2, 8, 6} : Shape{2, 8, 8}, "up");
  const int other = variant == 5 ? node(Op::Resize, {g.input}, {2, 8, 6}, "other") : g.input;
  int y = node(Op::Add, {up, other}, variant == 5 ? Shape{2, 8, 6} : Shape{2, 8, 8}, "add");
  if (variant == 4) y = node(Op::Add, {y, up}, {2, 8, 8}, "again");
  g.output = y;
  g.validate();
  return g;
}

TEST(UpsampleFold, ANearestResizeByWholeFactorsFoldsIntoItsAdd) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> in(128);
  for (float& v : in) v = u(rng);
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    const Graph g = resize_add_graph(variant);
    FoldStats st;
    const Graph f = fold(g, &st);
    const bool folds = variant <= 1;
    EXPECT_EQ(st.upsamples_into_add, folds ? 1 : 0);
    int resizes = 0;
    for (const Node& n : f.nodes) {
      resizes += n.op == Op::Resize;
      if (n.op == Op::Add && n.name == "add") {
        EXPECT_EQ(n.sh, folds ? 2 : 1);
        EXPECT_EQ(n.sw, folds ? 2 : 1);
        // The upsampled operand is the second.
        if (folds) {
          EXPECT_EQ(f.shape(n.inputs[1]), (Shape{2, 4, 4}));
        }
      }
    }
    EXPECT_EQ(resizes, (folds ? 0 : 1) + (variant == 5 ? 1 : 0));
    ts::testing::expect_same_function(g, f, in);
  }
}

TEST(UpsampleRuns, UnetBitExactOnOneThreeAndEightBoards) {
  for (int n : {1, 3, 8})
    for (const char* s : {"--strategy auto", "--strategy spatial", "--strategy neuron --route relay"}) {
      const std::string args = "--model " + kOnnx + "unet_small.onnx --workers " + std::to_string(n) + " " + s;
      expect_exact(run_json(args), args);
    }
}

TEST(UpsampleRuns, SymbolicSizesRunAndAWrongSizeIsOneLine) {
  const std::string m = std::string(TS_SOURCE_DIR) + "/tests/data/onnx_dyn/unet_small_dyn.onnx";
  const auto j = run_json("--model " + m + " --size 64 --workers 3 --strategy spatial");
  expect_exact(j, "size 64");
  const auto r = tinysplit("run --model " + m + " --size 36 --workers 3");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("multiples of 8; 36 is not (try 32 or 40)"), std::string::npos) << r.err;
}

TEST(UpsampleRuns, TooLittleRamNamesABoardCountThatHoldsIt) {
  // 20 KiB boards: one cannot hold the 3x3 ConvTranspose's share; the line
  // names a count, and a plan on that many such boards passes.
  const std::string m = "--model " + kOnnx + "unet_small.onnx --ram 20K";
  const auto r = tinysplit("plan " + m + " --workers 1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const size_t at = r.err.find(" such boards hold it (--workers ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t from = r.err.rfind("; ", at);
  ASSERT_NE(from, std::string::npos) << r.err;
  const int n = std::stoi(r.err.substr(from + 2, at - from - 2));
  EXPECT_GT(n, 1);
  const auto ok = tinysplit("plan " + m + " --workers " + std::to_string(n));
  EXPECT_EQ(ok.code, 0) << ok.err;
}

}  // namespace
