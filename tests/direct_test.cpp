// The direct route on real host boards (tinysplit worker processes on
// loopback): halos travel as few INPUTS frames, shares of whole rows are
// computed in place into the window that reads them, and both stay bit-exact
// with the single-process int8 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "coord/boards.h"
#include "coord/coordinator.h"
#include "support/boards.h"
#include "support/fragment_edit.h"
#include "core/fragment.h"
#include "core/wire.h"
#include "model/pipeline.h"
#include "model/qgraph.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using namespace ts;

const std::string kModel = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v2.onnx";

std::vector<int8_t> some_input(const QGraph& q) { return ts::testing::random_int8_input(q, 777); }

coord::InferenceResult run_on_boards(const QGraph& q, const plan::Plan& p, const plan::Testbed& tb,
                                     const std::vector<int8_t>& x) {
  return ts::testing::infer_on_host_boards(q, p, tb, x);
}

class DirectTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fs::exists(kModel)) << kModel; }
};

// Bands of rows on 3 boards: every halo row of every channel is one send
// record in the plan; on the wire the records of one producer layer for one
// peer, consumer layer and operand go as INPUTS frames filled with strided
// blocks. The boards report the frames their results took in DONE.
TEST_F(DirectTest, HalosGoAsFewFrames) {
  const QGraph q = quantized_model(kModel, 0, QuantizeOptions{});
  const plan::Testbed tb = plan::default_testbed(3, "local", 512 * 1024, 8 << 20);
  const auto spatial = plan::make_strategy("spatial");
  const plan::Plan p = plan::plan_with_shares(q, tb, {1.0, 1.0, 1.0}, *spatial, false, plan::Route::Direct);
  int64_t records = 0, bytes = 0, coord_frames = 0;
  std::set<std::tuple<int, int, int, int, int>> groups;  // producer board, layer, peer, consumer, operand
  for (int w = 0; w < p.n_workers(); ++w)
    for (const auto& ls : p.workers[size_t(w)].layers)
      for (const auto& s : ls.sends) {
        if (s.peer == core::kPeerCoordinator) {
          coord_frames += (s.count + int64_t(wire::kMaxPayload) - 1) / int64_t(wire::kMaxPayload);
          continue;
        }
        ++records;
        bytes += s.count;
        groups.emplace(w, ls.node, s.peer, s.layer, s.operand);
      }
  ASSERT_GT(records, 1000) << "the plan should have many halo runs";
  const auto x = some_input(q);
  const coord::InferenceResult r = run_on_boards(q, p, tb, x);
  EXPECT_EQ(r.output, run_int8(q, x));
  const int64_t board_frames = r.result_frames - coord_frames;
  ASSERT_GT(board_frames, 0);
  // Every group but its last frame fills a frame at least half: at most one
  // partly filled frame per group plus one per 684 bytes.
  EXPECT_LE(board_frames, int64_t(groups.size()) + bytes / 684 + 1);
  // One frame per run (what the boards sent before) is far more.
  EXPECT_LT(board_frames * 10, records) << records << " runs went as " << board_frames << " frames";
}

// Shares of whole rows are computed into the window of the last layer that
// reads them: that window copies nothing, the board holds no separate output
// buffer, the reader accepts the fragments (and refuses a wrong pitch), and
// the boards stay bit-exact with their measured arena within the plan.
TEST_F(DirectTest, OutputsComputedInPlaceAreExact) {
  const QGraph q = quantized_model(kModel, 0, QuantizeOptions{});
  for (const char* name : {"spatial", "rows", "neuron"})
    for (int n : {1, 3}) {
      SCOPED_TRACE(std::string(name) + " on " + std::to_string(n));
      const plan::Testbed tb = plan::default_testbed(n, "local", 4 << 20, 8 << 20);
      const auto strategy = plan::make_strategy(name);
      const std::vector<double> shares(size_t(n), 1.0);
      const plan::Plan p = plan::plan_with_shares(q, tb, shares, *strategy, false, plan::Route::Direct);
      const plan::Plan relay = plan::plan_with_shares(q, tb, shares, *strategy, false, plan::Route::Relay);
      int in_place = 0;
      for (const auto& wp : p.workers)
        for (const auto& ls : wp.layers) {
          if (!ls.out_pitch) continue;
          ++in_place;
          // The home window takes nothing from this layer by copy.
          for (const auto& in : wp.layers[size_t(ls.out_until)].inputs) EXPECT_NE(in.local_layer, ls.node);
        }
      for (const auto& wp : relay.workers)
        for (const auto& ls : wp.layers) EXPECT_EQ(ls.out_pitch, 0u) << "the relay keeps nothing local";
      if (std::string(name) != "neuron" || n == 1) {
        EXPECT_GT(in_place, 10);
      }
      for (int w = 0; w < n; ++w) {
        std::vector<uint8_t> bytes = plan::write_fragment(q, p, w);
        core::FragmentReader rd;
        ASSERT_EQ(rd.open(bytes.data(), bytes.size()), core::FragStatus::Ok) << "worker " << w;
        // A pitch that does not match the home window is refused.
        for (uint32_t i = 0; i < rd.layer_count(); ++i) {
          core::FragLayer e;
          ASSERT_EQ(rd.layer(i, &e), core::FragStatus::Ok);
          if (!e.out_pitch) continue;
          const size_t at = core::frag::kHeaderBytes + size_t(i) * core::frag::kEntryBytes + core::frag::kOutPitch;
          const std::vector<uint8_t> bad = ts::testing::with_u32(bytes, at, e.out_pitch + uint32_t(e.desc.out.w));
          core::FragmentReader rb;
          EXPECT_EQ(rb.open(bad.data(), bad.size()), core::FragStatus::BadLayer) << "layer " << i;
          break;
        }
      }
      const auto x = some_input(q);
      const coord::InferenceResult r = run_on_boards(q, p, tb, x);
      EXPECT_EQ(r.output, run_int8(q, x));
      // The arena the boards measured stays within the plan, layer by layer.
      for (int w = 0; w < n; ++w) {
        const auto& b = r.boards[size_t(w)];
        EXPECT_LE(int64_t(b.peak_ram_bytes), p.workers[size_t(w)].peak_ram_bytes);
        for (size_t i = 0; i < q.nodes.size(); ++i) {
          const auto& ls = p.workers[size_t(w)].layers[i];
          if (ls.active()) {
            EXPECT_LE(int64_t(b.layer_peak[i]), int64_t(core::kWorkerFixedArena) + ls.ram_bytes) << i;
          }
        }
      }
    }
}

}  // namespace
