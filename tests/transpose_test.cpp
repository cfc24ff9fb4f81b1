// Transpose (a permutation of C, H, W; core/ops/transpose.cpp): the ONNX
// perms of the test model as IR nodes; for all six permutations, the kernel against the definition (docs/int8.md) over runs
// and narrow boxes read from the exact input window, the planner's exact
// needs against brute force, the checks' refusals; and the test model of
// Transposes between convolutions (tests/data/onnx/transpose.onnx: H<->W,
// C<->H and both 3-cycles) on 1, 3 and 8 host boards with the default
// strategy, bands of rows and the paper's mode, bit-exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>

#include <nlohmann/json.hpp>

#include "core/op.h"
#include "model/import_onnx.h"
#include "plan/needs.h"
#include "plan/plan.h"
#include "support/shell.h"

namespace {

using namespace ts;
using core::QOp;
using ts::testing::tinysplit;

const int kPerms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
const core::Dims kIn{3, 5, 4};

core::LayerDesc transpose_desc(const int* perm) {
  core::LayerDesc d;
  d.op = QOp::Transpose;
  d.in[0] = kIn;
  const int32_t ext[3] = {kIn.c, kIn.h, kIn.w};
  d.out = core::Dims{ext[perm[0]], ext[perm[1]], ext[perm[2]]};
  core::set_transpose_perm(d, perm);
  return d;
}

std::string name_of(const int* p) {
  return "perm (" + std::to_string(p[0]) + "," + std::to_string(p[1]) + "," + std::to_string(p[2]) + ")";
}

// The input element (flat C-H-W) that output element o reads, from the
// definition: i[perm[a]] = o[a].
int64_t source(const core::LayerDesc& d, const int* perm, int64_t o) {
  const int64_t oc = o / (int64_t(d.out.h) * d.out.w), oy = o / d.out.w % d.out.h, ox = o % d.out.w;
  int64_t i[3];
  i[perm[0]] = oc, i[perm[1]] = oy, i[perm[2]] = ox;
  return (i[0] * kIn.h + i[1]) * kIn.w + i[2];
}

QGraph one_node(const core::LayerDesc& d) {
  QGraph q;
  q.tensors.resize(2);
  q.tensors[0].name = "x";
  q.tensors[0].shape = Shape{d.in[0].c, d.in[0].h, d.in[0].w};
  q.tensors[1].name = "y";
  q.tensors[1].shape = Shape{d.out.c, d.out.h, d.out.w};
  q.input = 0;
  q.output = 1;
  QNode n;
  n.name = "t";
  n.op = QOp::Transpose;
  n.inputs = {0};
  n.output = 1;
  n.geo = d;
  q.nodes.push_back(n);
  q.link();
  return q;
}

// The test model's four ONNX Transposes import as Transpose nodes with the
// perm of C, H, W (torch's x.transpose(2, 3), permute(0, 2, 1, 3),
// permute(0, 3, 1, 2), permute(0, 2, 3, 1)); onnx_import_test checks its
// float output against torch and the refusals.
TEST(Transpose, OnnxPermsBecomeTransposeNodes) {
  const Graph g = import_onnx(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/transpose.onnx");
  std::vector<std::array<int, 3>> perms;
  std::vector<Shape> shapes;
  for (const Node& n : g.nodes)
    if (n.op == Op::Transpose) perms.push_back({n.perm[0], n.perm[1], n.perm[2]}), shapes.push_back(g.shape(n.output));
  const std::vector<std::array<int, 3>> want{{0, 2, 1}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}};
  EXPECT_EQ(perms, want);
  const std::vector<Shape> want_shapes{{8, 12, 24}, {12, 16, 24}, {24, 8, 16}, {4, 8, 16}};
  EXPECT_EQ(shapes, want_shapes);
}

TEST(Transpose, KernelMatchesTheDefinitionFromTheExactWindow) {
  std::vector<int8_t> x(size_t(kIn.size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = int8_t(i * 37 % 251 - 125);
  std::mt19937 rng(7);
  for (const auto& perm : kPerms) {
    const core::LayerDesc d = transpose_desc(perm);
    ASSERT_FALSE(core::check_desc(d).refused()) << name_of(perm);
    ASSERT_EQ(core::range_macs(d, 0, d.out.size()), uint64_t(d.out.size())) << name_of(perm);  // one per output
    for (int t = 0; t < 40; ++t) {
      // A random box (narrow ones go row by row), read from exactly the
      // window input_box names.
      core::OutBox b;
      b.c0 = int32_t(rng() % uint32_t(d.out.c)), b.c1 = b.c0 + 1 + int32_t(rng() % uint32_t(d.out.c - b.c0));
      b.y0 = int32_t(rng() % uint32_t(d.out.h)), b.y1 = b.y0 + 1 + int32_t(rng() % uint32_t(d.out.h - b.y0));
      b.x0 = int32_t(rng() % uint32_t(d.out.w)), b.x1 = b.x0 + 1 + int32_t(rng() % uint32_t(d.out.w - b.x0));
      const core::Box in = core::input_box(d, 0, b);
      std::vector<int8_t> win;
      for (int c = in.c0; c < in.c1; ++c)
        for (int y = in.h0; y < in.h1; ++y)
          for (int xx = 0; xx < kIn.w; ++xx) win.push_back(x[size_t((c * kIn.h + y) * kIn.w + xx)]);
      core::View v;
      v.data = win.data(), v.c0 = in.c0, v.nc = in.c1 - in.c0, v.h0 = in.h0, v.nh = in.h1 - in.h0;
      std::vector<int8_t> out(size_t(b.elems()));
      ASSERT_EQ(core::compute_box(d, &v, b, out.data(), 0), core::KernelStatus::Ok) << name_of(perm);
      size_t k = 0;
      for (int c = b.c0; c < b.c1; ++c)
        for (int y = b.y0; y < b.y1; ++y)
          for (int xx = b.x0; xx < b.x1; ++xx, ++k)
            ASSERT_EQ(out[k], x[size_t(source(d, perm, (int64_t(c) * d.out.h + y) * d.out.w + xx))])
                << name_of(perm) << " at " << c << "," << y << "," << xx;
      // One row fewer than the window needs is refused, not read past.
      if (v.nh > 1) {
        v.nh -= 1;
        EXPECT_EQ(core::compute_box(d, &v, b, out.data(), 0), core::KernelStatus::ViewTooSmall) << name_of(perm);
      }
    }
  }
}

TEST(Transpose, ExactNeedsMatchBruteForce) {
  std::mt19937 rng(11);
  for (const auto& perm : kPerms) {
    const core::LayerDesc d = transpose_desc(perm);
    const QGraph q = one_node(d);
    const int64_t total = d.out.size();
    for (int r = 0; r < 40; ++r) {
      int64_t b = int64_t(rng() % uint64_t(total)), e = int64_t(rng() % uint64_t(total + 1));
      if (b > e) std::swap(b, e);
      if (r == 0) b = 0, e = total;
      std::vector<int64_t> got, want;
      for (const auto& run : plan::exact_input_runs(q, 0, 0, b, e)) {
        ASSERT_GT(run.count, 0u);
        for (uint32_t i = 0; i < run.count; ++i) got.push_back(int64_t(run.offset) + i);
      }
      for (int64_t o = b; o < e; ++o) want.push_back(source(d, perm, o));
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << name_of(perm) << " run [" << b << "," << e << ")";
      if (b == e) continue;
      const core::Box box = core::input_box(d, 0, int32_t(b), int32_t(e));
      for (int64_t el : want) {
        const int64_t c = el / (int64_t(kIn.h) * kIn.w), y = el / kIn.w % kIn.h;
        ASSERT_TRUE(c >= box.c0 && c < box.c1 && y >= box.h0 && y < box.h1) << name_of(perm) << " element " << el;
      }
    }
  }
}

TEST(Transpose, ChecksNameTheField) {
  const int swap[3] = {0, 2, 1};
  core::LayerDesc d = transpose_desc(swap);
  d.dh = 3;  // (0, 2, 2): the columns axis twice
  core::Why w = core::check_desc(d);
  ASSERT_TRUE(w.refused());
  EXPECT_STREQ(w.field, "dh");
  d = transpose_desc(swap);
  d.out.h = kIn.h;  // not the permuted shape
  w = core::check_desc(d);
  ASSERT_TRUE(w.refused());
  EXPECT_STREQ(w.field, "out.h");
  d = transpose_desc(swap);
  d.sh = 2;
  EXPECT_TRUE(core::check_desc(d).refused());
  d = transpose_desc(swap);
  d.out_zp = 3;  // the quantiser keeps the input's zero point
  EXPECT_TRUE(core::op_def(QOp::Transpose)->model_check(d).refused());
}

nlohmann::json run_json(const std::string& args) {
  const auto r = tinysplit("run --json " + args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0 || r.out.empty()) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

TEST(TransposeRuns, ModelBitExactOnOneThreeAndEightBoards) {
  const std::string model = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/transpose.onnx";
  for (int n : {1, 3, 8})
    for (const char* s : {"--strategy auto", "--strategy spatial", "--strategy neuron --route relay"}) {
      const std::string args = "--model " + model + " --size 0 --workers " + std::to_string(n) + " " + s;
      const auto j = run_json(args);
      ASSERT_TRUE(j.contains("match_reference")) << args;
      EXPECT_TRUE(j.at("match_reference").get<bool>()) << args;
      EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>()) << args;
    }
}

}  // namespace
