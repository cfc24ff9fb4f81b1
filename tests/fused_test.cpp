// Fused tiles (strategy `fused`, plan/fuse.h, docs/planner.md "Fused
// tiles"): the widened share's geometry against brute force; the plan of
// MobileNetV2 at 112 on 3 boards (owned regions tile every layer, each
// widened share holds what it owns, a fused reader receives nothing of the
// layer that was widened for it, fewer bytes than bands of rows); the relay
// route refused; and real runs on host boards, bit-exact layer by layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/pipeline.h"
#include "plan/fragment_writer.h"
#include "plan/fuse.h"
#include "plan/plan.h"
#include "support/run_json.h"
#include "support/shell.h"
#include "support/test_models.h"

namespace {

namespace fs = std::filesystem;
using namespace ts;
using ts::testing::expect_exact;
using ts::testing::run_json;
using ts::testing::tinysplit;

std::set<int64_t> elements(const core::Dims& d, const std::vector<core::Region>& rs) {
  std::set<int64_t> s;
  for (const core::Region& r : rs)
    r.segments(d, [&](int32_t b, int32_t e) {
      for (int32_t i = b; i < e; ++i) EXPECT_TRUE(s.insert(i).second) << "element " << i << " twice";
      return true;
    });
  return s;
}

// Random owned regions (a band of plane positions over a channel range, or
// of whole rows) and needs (runs): the widened regions hold exactly their
// union, rounded out to whole rows when the band is whole rows (then as
// boxes of whole rows), each element once.
TEST(FusedGeometry, WidenedRegionsAreExactlyTheUnion) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const core::Dims d{1 + int32_t(rng() % 5), 1 + int32_t(rng() % 7), 1 + int32_t(rng() % 6)};
    const int32_t plane = d.h * d.w;
    const int32_t a = int32_t(rng() % plane), b = a + 1 + int32_t(rng() % (plane - a));
    std::vector<core::Region> owned;
    const int32_t c0 = int32_t(rng() % d.c), c1 = c0 + 1 + int32_t(rng() % (d.c - c0));
    const bool rows = trial % 2;
    if (rows) owned.push_back(core::Region::box(c0, c1, a / d.w, a / d.w + 1, 0, d.w));
    else
      for (int32_t c = c0; c < c1; ++c) owned.push_back(core::Region::run(c * plane + a, c * plane + b));
    std::vector<core::InputRun> need;
    int64_t at = 0;
    while (at < d.size()) {
      const int64_t gap = rng() % 9, len = 1 + rng() % 6;
      if (at + gap >= d.size()) break;
      const int64_t n = std::min<int64_t>(len, d.size() - at - gap);
      need.push_back(core::InputRun{uint32_t(at + gap), uint32_t(n)});
      at += gap + n + 1;
    }
    std::set<int64_t> want;
    const auto add_row = [&](int64_t i) {
      if (!rows) want.insert(i);
      else
        for (int64_t x = i / d.w * d.w; x < (i / d.w + 1) * d.w; ++x) want.insert(x);
    };
    for (int64_t i : elements(d, owned)) add_row(i);
    for (const core::InputRun& r : need)
      for (uint32_t i = 0; i < r.count; ++i) add_row(r.offset + i);
    std::vector<core::Region> wide = plan::fuse::widened(d, owned, need);
    std::set<int64_t> exact = elements(d, owned);
    for (const core::InputRun& r : need)
      for (uint32_t i = 0; i < r.count; ++i) exact.insert(r.offset + i);
    if (exact.size() == elements(d, owned).size()) {
      EXPECT_TRUE(wide.empty()) << "trial " << trial << ": nothing to widen";
      continue;
    }
    for (const core::Region& r : wide) {
      ASSERT_TRUE(r.valid(d));
      ASSERT_EQ(r.kind, core::RegionKind::Box);
      if (!rows) continue;
      EXPECT_EQ(r.v[4], 0);
      EXPECT_EQ(r.v[5], d.w);
    }
    EXPECT_EQ(elements(d, wide), want) << "trial " << trial;
  }
}

// A band of whole rows and its reader's halo rows: one box, which the
// board can compute in place into its reader's window.
TEST(FusedGeometry, ABandOfRowsAndItsHaloAreOneBox) {
  const core::Dims d{6, 10, 4};
  const std::vector<core::Region> owned = {core::Region::box(0, 6, 3, 6, 0, 4)};
  std::vector<core::InputRun> need;
  for (int32_t c = 0; c < 6; ++c) need.push_back(core::InputRun{uint32_t(c * 40 + 2 * 4), uint32_t(6 * 4)});
  const std::vector<core::Region> wide = plan::fuse::widened(d, owned, need);
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_EQ(wide[0].kind, core::RegionKind::Box);
  EXPECT_EQ(std::vector<int32_t>(wide[0].v, wide[0].v + 6), (std::vector<int32_t>{0, 6, 2, 8, 0, 4}));
}

const QGraph& mobilenet112() {
  static const QGraph q = quantized_model("mobilenetv2", 112, QuantizeOptions{});
  return q;
}

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

plan::Plan plan_with(const QGraph& q, int n, const char* strategy, plan::Route route = plan::Route::Direct) {
  const plan::Testbed tb = plan::default_testbed(n);
  return plan::plan_with_shares(q, tb, std::vector<double>(size_t(n), 1.0), *plan::make_strategy(strategy), false,
                                route);
}

// The fused plan's own checks: owned regions tile every layer, a widened
// share holds what it owns and more, a fused reader receives nothing of the
// layer widened for it. Returns the layers widened.
int expect_fused_tiles(const QGraph& q, const plan::Plan& p) {
  int widened = 0;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const core::Dims d = q.desc(int(n)).out;
    std::set<int64_t> tiled;
    bool any = false;
    for (const plan::WorkerPlan& wp : p.workers) {
      const plan::LayerShare& ls = wp.layers[n];
      const std::set<int64_t> own = elements(d, ls.tiles());
      for (int64_t i : own) EXPECT_TRUE(tiled.insert(i).second) << q.nodes[n].name << ": owned twice";
      if (ls.owned.empty()) continue;
      any = true;
      const std::set<int64_t> all = elements(d, ls.regions);
      EXPECT_TRUE(std::includes(all.begin(), all.end(), own.begin(), own.end())) << q.nodes[n].name;
      EXPECT_GT(all.size(), own.size()) << q.nodes[n].name;
    }
    EXPECT_EQ(int64_t(tiled.size()), d.size()) << q.nodes[n].name;
    if (!any) continue;
    ++widened;
    // Its one reader takes all of it from the board's own outputs.
    const int c = plan::fuse::sole_reader(q, int(n));
    if (c < 0) {
      ADD_FAILURE() << q.nodes[n].name << ": widened without a sole reader";
      continue;
    }
    for (const plan::WorkerPlan& wp : p.workers)
      for (const plan::InputNeed& in : wp.layers[size_t(c)].inputs)
        if (in.tensor == q.nodes[n].output) {
          EXPECT_EQ(in.recv_elems, 0) << q.nodes[size_t(c)].name;
          // Copied from the widened outputs, or computed in place into this window.
          EXPECT_TRUE(in.local_layer == int(n) || wp.layers[n].out_pitch > 0) << q.nodes[size_t(c)].name;
        }
    EXPECT_GT(p.layers[n].recomputed, 0);
  }
  return widened;
}

TEST(FusedPlan, OwnedRegionsTileAndFusedReadersReceiveNothingOfTheirWidenedLayer) {
  if (!have_model()) GTEST_SKIP() << "bundled model missing (scripts/setup.sh)";
  const QGraph& q = mobilenet112();
  const plan::Plan p = plan_with(q, 3, "fused");
  // Conv1 and the 16 expansions that feed a 3x3 depthwise layer.
  EXPECT_GE(expect_fused_tiles(q, p), 10);
  const plan::Plan bands = plan_with(q, 3, "spatial");
  EXPECT_LT(p.total_wire_bytes, bands.total_wire_bytes * 6 / 10);
  EXPECT_LE(p.total_wire_bytes, 150000);  // issue 25's bar for 3 boards at 112
}

// `fused-rows`: the fused tiles over bands of whole rows on every banded map
// (short maps too): the same tiling, every owned band one box of whole rows
// over all channels, and on 8 boards, where `fused` cuts the short maps into
// plane positions, fewer bytes than `fused` (the halo of a band of whole rows
// is whole rows, one piece per channel).
TEST(FusedPlan, FusedRowsTilesInWholeRowsAndMovesLessThanFusedOnEightBoards) {
  if (!have_model()) GTEST_SKIP() << "bundled model missing (scripts/setup.sh)";
  const QGraph& q = mobilenet112();
  for (int n : {3, 8}) {
    SCOPED_TRACE(std::to_string(n) + " boards");
    const plan::Plan p = plan_with(q, n, "fused-rows");
    EXPECT_GE(expect_fused_tiles(q, p), n == 3 ? 10 : 1);  // on 8 boards more halos outgrow a band
    for (size_t k = 0; k < q.nodes.size(); ++k) {
      if (p.layer_strategy[k] != "fused-rows" || !plan::SpatialStrategy::uses_bands(q, int(k))) continue;
      const core::Dims d = q.desc(int(k)).out;
      for (const plan::WorkerPlan& wp : p.workers)
        for (const core::Region& r : wp.layers[k].tiles())
          EXPECT_TRUE(r.kind == core::RegionKind::Box && r.v[0] == 0 && r.v[1] == d.c && r.v[4] == 0 && r.v[5] == d.w)
              << q.nodes[k].name;
    }
    if (n == 8) EXPECT_LT(p.total_wire_bytes, plan_with(q, n, "fused").total_wire_bytes);
  }
}

// Every ONNX test model (upsampling, concatenation, shuffles, residuals) on
// 2 to 5 boards with random shares, one board idle from 3 on: owned regions
// tile every layer, widened shares hold what they own, and every board's
// fragment is accepted by the board's own reader.
TEST(FusedPlan, TestModelsWithRandomSharesTileAndTheirFragmentsRead) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.2, 3.0);
  int models = 0, widened = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx")) {
    if (e.path().extension() != ".onnx") continue;
    ++models;
    const QGraph q = quantized_model(e.path().string(), 0, QuantizeOptions{});
    for (int n = 2; n <= 5; ++n) {
      SCOPED_TRACE(e.path().filename().string() + " on " + std::to_string(n));
      std::vector<double> shares(static_cast<size_t>(n));
      for (double& x : shares) x = u(rng);
      if (n >= 3) shares[1] = 0;
      const plan::Plan p = plan::plan_with_shares(q, plan::default_testbed(n, "local", 64 << 20, 64 << 20), shares,
                                                  *plan::make_strategy(n % 2 ? "fused-rows" : "fused"), false,
                                                  plan::Route::Direct);
      for (size_t k = 0; k < q.nodes.size(); ++k) {
        const core::Dims d = q.desc(int(k)).out;
        int64_t tiled = 0;
        for (const plan::WorkerPlan& wp : p.workers) {
          const plan::LayerShare& ls = wp.layers[k];
          const std::set<int64_t> own = elements(d, ls.tiles());
          tiled += int64_t(own.size());
          if (ls.owned.empty()) continue;
          ++widened;
          const std::set<int64_t> all = elements(d, ls.regions);
          EXPECT_TRUE(std::includes(all.begin(), all.end(), own.begin(), own.end())) << q.nodes[k].name;
        }
        EXPECT_EQ(tiled, d.size()) << q.nodes[k].name;
      }
      for (int w = 0; w < n; ++w) {
        const std::vector<uint8_t> bytes = plan::write_fragment(q, p, w);
        core::FragmentReader r;
        EXPECT_EQ(r.open(bytes.data(), bytes.size()), core::FragStatus::Ok) << "board " << w;
      }
    }
  }
  EXPECT_GE(models, 10);
  EXPECT_GT(widened, 0);
}

TEST(FusedPlan, TheRelayRouteIsRefusedWithOneLine) {
  const auto r = tinysplit("plan --size 112 --workers 3 --strategy fused --route relay");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("strategy 'fused'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs --route direct"), std::string::npos) << r.err;
  // Past the boards' link limit the direct plan is not made on the relay
  // route instead (as it is for a strategy the relay can carry): one line says why.
  const auto many = tinysplit("plan --size 112 --workers 30 --strategy fused");
  EXPECT_EQ(many.code, 1);
  EXPECT_NE(many.err.find("strategy 'fused' needs the direct route, which needs 59 links on board 0; it holds at most"),
            std::string::npos)
      << many.err;
  EXPECT_EQ(std::count(many.err.begin(), many.err.end(), '\n'), 1) << many.err;
}

TEST(FusedRuns, MobileNetV2BitExactOnOneThreeEightAndSixteenBoards) {
  if (!have_model()) GTEST_SKIP() << "bundled model missing (scripts/setup.sh)";
  for (const char* args : {"--size 112 --workers 1", "--size 112 --workers 3", "--size 112 --workers 8",
                           "--size 112 --workers 16", "--size 224 --workers 3"}) {
    const std::string a = std::string(args) + " --strategy fused";
    expect_exact(run_json(a), a);
  }
}

TEST(FusedRuns, FusedRowsMobileNetV2BitExactOnThreeAndEightBoards) {
  if (!have_model()) GTEST_SKIP() << "bundled model missing (scripts/setup.sh)";
  for (const char* args : {"--size 112 --workers 3", "--size 112 --workers 8", "--size 224 --workers 3"}) {
    const std::string a = std::string(args) + " --strategy fused-rows";
    expect_exact(run_json(a), a);
  }
}

TEST(FusedRuns, OnnxTestModelsAndAHeterogeneousTestbedAreBitExact) {
  ts::testing::expect_exact_on_test_models_and_unequal_boards("--strategy fused", "fused_test");
}

TEST(FusedRuns, FusedRowsOnnxTestModelsAndAHeterogeneousTestbedAreBitExact) {
  ts::testing::expect_exact_on_test_models_and_unequal_boards("--strategy fused-rows", "fused_rows_test");
}

}  // namespace
