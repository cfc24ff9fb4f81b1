// Shares as sets of regions, fused steps and board-to-board transfer, run on
// real host boards (tinysplit worker processes on loopback): every result must
// equal the single-process int8 reference bit for bit.
//
// The plans here come from a test strategy that gives each worker two
// disjoint bands of rows of every channel (rows [0, H/4) and [H/2, 3H/4) to
// worker 0, the rest to worker 1), and the first two layers wholly to worker
// 0, so that worker 0 runs layer 1 from its own layer-0 outputs (a fused
// two-layer step) and then sends activations straight to worker 1.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "coord/boards.h"
#include "coord/coordinator.h"
#include "support/boards.h"
#include "coord/verify.h"
#include "core/fragment.h"
#include "model/pipeline.h"
#include "model/qgraph.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"

namespace {

namespace fs = std::filesystem;
using namespace ts;
using core::Region;

class BandsStrategy final : public plan::SplitStrategy {
 public:
  std::string name() const override { return "test-bands"; }
  std::vector<plan::Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override {
    return plan::split_runs(q.shape(q.nodes[size_t(node)].output).size(), shares);
  }
  std::vector<std::vector<Region>> split_regions(const QGraph& q, int node,
                                                 const std::vector<double>& shares) const override {
    const core::Dims d = q.desc(node).out;
    std::vector<std::vector<Region>> out(shares.size());
    if (node < 2) {  // a fused step: both layers on worker 0
      out[0].push_back(Region::run(0, d.size()));
      return out;
    }
    if (d.h < 4 || shares.size() != 2) {
      for (size_t w = 0; w < shares.size(); ++w) {
        const auto runs = plan::split_runs(d.size(), shares);
        if (!runs[w].empty()) out[w].push_back(Region::run(int32_t(runs[w].begin), int32_t(runs[w].end)));
      }
      return out;
    }
    const int32_t a = d.h / 4, b = d.h / 2, c = 3 * d.h / 4;
    out[0].push_back(Region::box(0, d.c, 0, a, 0, d.w));
    out[0].push_back(Region::box(0, d.c, b, c, 0, d.w));
    out[1].push_back(Region::box(0, d.c, a, b, 0, d.w));
    out[1].push_back(Region::box(0, d.c, c, d.h, 0, d.w));
    return out;
  }
};

const std::string kModel = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v2.onnx";

QGraph model() { return quantized_model(kModel, 0, QuantizeOptions{}); }

std::vector<int8_t> some_input(const QGraph& q) { return ts::testing::random_int8_input(q, 12345); }

std::vector<int8_t> run_on_boards(const QGraph& q, const plan::Plan& p, const plan::Testbed& tb,
                                  const std::vector<int8_t>& x) {
  // Each board's digest of its regions (several per board here, in fragment
  // order) equals the reference's, in every layer; a second inference
  // reuses the deployment.
  const auto expected = coord::reference_digests(q, p, run_int8_all(q, x));
  return ts::testing::infer_on_host_boards(q, p, tb, x, 2, [&](const coord::InferenceResult& r) {
           const coord::Verification v = coord::verify_layers(expected, r);
           EXPECT_TRUE(v.ok()) << "board " << v.board << " layer " << v.node;
           EXPECT_EQ(v.verified_layers, int(q.nodes.size()));
         }).output;
}

class RegionsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fs::exists(kModel)) << kModel; }
};

TEST_F(RegionsTest, TwoDisjointBandsPerWorkerAndAFusedStepAreExact) {
  const QGraph q = model();
  const plan::Testbed tb = plan::default_testbed(2, "local", 512 * 1024, 8 << 20);
  const BandsStrategy bands;
  const std::vector<double> shares{1.0, 1.0};
  for (plan::Route route : {plan::Route::Relay, plan::Route::Direct}) {
    SCOPED_TRACE(plan::route_name(route));
    const plan::Plan p = plan::plan_with_shares(q, tb, shares, bands, false, route);
    // The plan really has two disjoint boxes per worker somewhere.
    int two_boxes = 0;
    for (const auto& ls : p.workers[0].layers)
      if (ls.regions.size() == 2 && ls.regions[0].kind == core::RegionKind::Box) ++two_boxes;
    EXPECT_GT(two_boxes, 5);
    // Every fragment passes the board's reader.
    for (int w = 0; w < 2; ++w) {
      const auto bytes = plan::write_fragment(q, p, w);
      core::FragmentReader r;
      ASSERT_EQ(r.open(bytes.data(), bytes.size()), core::FragStatus::Ok) << "worker " << w;
    }
    if (route == plan::Route::Direct) {
      // Layer 1 runs on worker 0 from its own layer-0 outputs only: fused.
      const auto& l1 = p.workers[0].layers[1];
      ASSERT_TRUE(l1.active());
      EXPECT_EQ(l1.inputs[0].recv_elems, 0);
      // Layer 0 (the whole tensor on worker 0) is computed in place into
      // layer 1's window: no copy, no output buffer of its own.
      const auto& l0 = p.workers[0].layers[0];
      EXPECT_EQ(l0.out_until, 1);
      EXPECT_NE(l0.out_pitch, 0u);
      EXPECT_EQ(l1.inputs[0].local_layer, -1);
      EXPECT_TRUE(l1.inputs[0].local.empty());
      EXPECT_FALSE(l1.run_trigger);
      // Nothing of layer 0 goes to the coordinator.
      for (const auto& s : p.workers[0].layers[0].sends) EXPECT_NE(s.peer, core::kPeerCoordinator);
    }
    const auto x = some_input(q);
    EXPECT_EQ(run_on_boards(q, p, tb, x), run_int8(q, x));
  }
}

TEST_F(RegionsTest, BoardsSendActivationsToEachOtherDirectly) {
  const QGraph q = model();
  const plan::Testbed tb = plan::default_testbed(3, "local", 512 * 1024, 8 << 20);
  const plan::NeuronStrategy neuron;
  const plan::Plan relay = plan::plan_with_shares(q, tb, {1.0, 1.0, 1.0}, neuron, false, plan::Route::Relay);
  const plan::Plan direct = plan::plan_with_shares(q, tb, {1.0, 1.0, 1.0}, neuron, false, plan::Route::Direct);
  // In direct mode the coordinator sends the graph's input only and receives
  // the output only; every other activation goes board to board.
  int64_t to_boards = 0, coord_in = 0, coord_out = 0;
  for (const auto& wp : direct.workers)
    for (const auto& ls : wp.layers) {
      for (const auto& s : ls.sends) {
        if (s.peer == core::kPeerCoordinator) {
          EXPECT_EQ(q.nodes[size_t(ls.node)].output, q.output) << "layer " << ls.node << " returns to the coordinator";
          coord_out += s.count;
        } else {
          to_boards += s.count;
        }
      }
      for (const auto& in : ls.inputs) {
        int64_t n = 0;
        for (const auto& r : in.coord_runs) n += r.count;
        if (n) {
          EXPECT_EQ(in.tensor, q.input);
        }
        coord_in += n;
      }
    }
  EXPECT_GT(to_boards, 0);
  EXPECT_EQ(coord_out, q.shape(q.output).size());
  // Direct routing moves fewer bytes than the relay: no second hop.
  EXPECT_LT(direct.total_wire_bytes, relay.total_wire_bytes);
  const auto x = some_input(q);
  EXPECT_EQ(run_on_boards(q, direct, tb, x), run_int8(q, x));
}

}  // namespace
