// Halos first (core/halo_first.h): which shares split and where, and that a
// share computed in its parts, in the boards' order, holds exactly the
// values of the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/halo_first.h"
#include "core/layer.h"
#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/qgraph.h"
#include "model/quantize.h"
#include "plan/plan.h"
#include "plan/testbed.h"
#include "support/boards.h"
#include "support/test_models.h"

namespace {

using namespace ts;
using core::Dims;
using core::HaloSplit;
using core::Region;
using core::Send;

Send to_peer(uint32_t offset, uint32_t count, uint16_t peer = 1) {
  Send s;
  s.peer = peer;
  s.offset = offset;
  s.count = count;
  return s;
}

HaloSplit split_of(const Dims& d, const std::vector<Region>& regions, const std::vector<Send>& sends) {
  return core::halo_split(d, uint32_t(regions.size()), [&](uint32_t i) { return regions[i]; }, uint32_t(sends.size()),
                          [&](uint32_t i) { return sends[i]; });
}

// Every active share of the spatial and fused plans (direct route) of
// `q` on 2..max_boards boards: fn(where, layer, share), `where` naming the
// plan, the board and the layer for a trace.
template <class Fn>
void for_each_share(const QGraph& q, int max_boards, Fn fn) {
  for (int n = 2; n <= max_boards; ++n)
    for (const char* strategy : {"spatial", "fused"}) {
      plan::PlanOptions po;
      po.strategy = strategy;
      po.route = plan::Route::Direct;
      const plan::Plan p = plan::make_plan(q, plan::default_testbed(n), po);
      for (int w = 0; w < n; ++w)
        for (const plan::LayerShare& ls : p.workers[size_t(w)].layers)
          if (ls.active())
            fn(std::string(strategy) + ", " + std::to_string(n) + " boards, board " + std::to_string(w) + ", layer " +
                   q.nodes[size_t(ls.node)].name,
               q.desc(ls.node), ls);
    }
}

// A band of whole rows [4, 12) of 8 channels of a 16 x 10 plane: its
// neighbours read its first row and its last two; the rows between wait.
TEST(HaloFirst, WholeRowsSplitBetweenTheRowsOthersRead) {
  const Dims d{8, 16, 10};
  const std::vector<Region> band = {Region::box(0, 8, 4, 12, 0, 10)};
  std::vector<Send> sends;
  for (uint32_t c = 0; c < 8; ++c) {
    sends.push_back(to_peer(c * 160 + 4 * 10, 10, 0));      // row 4 to the board above
    sends.push_back(to_peer(c * 160 + 10 * 10, 20, 2));     // rows 10-11 to the board below
  }
  const HaloSplit s = split_of(d, band, sends);
  ASSERT_TRUE(s.on());
  EXPECT_EQ(s.band.c0, 0);
  EXPECT_EQ(s.band.c1, 8);
  EXPECT_EQ(s.band.p0, 40);
  EXPECT_EQ(s.band.p1, 120);
  EXPECT_EQ(s.q0, 50);   // row 5
  EXPECT_EQ(s.q1, 100);  // up to row 10
  // MACs before the sends: 3 of the 8 rows (a 3x3 convolution of 4 input
  // channels, same padding).
  core::LayerDesc L;
  L.op = core::QOp::Conv;
  L.in[0] = Dims{4, 16, 10};
  L.out = d;
  L.kh = L.kw = 3;
  L.pad_t = L.pad_l = L.pad_b = L.pad_r = 1;
  ASSERT_GT(core::range_macs(L, 0, 1), 0u);
  EXPECT_EQ(core::halo_macs(L, s) * 8, core::range_macs(L, 0, 8 * 80) * 3);
}

// Nothing to send early, everything read, a band too short, whole planes
// sent, sends to the coordinator only, or a share that is no band: one
// compute.
TEST(HaloFirst, SharesThatDoNotSplit) {
  const Dims d{4, 12, 6};
  const std::vector<Region> band = {Region::box(0, 4, 2, 10, 0, 6)};
  EXPECT_FALSE(split_of(d, band, {}).on());
  Send coord = to_peer(2 * 6, 6);
  coord.peer = core::kPeerCoordinator;
  EXPECT_FALSE(split_of(d, band, {coord}).on());
  EXPECT_FALSE(split_of(d, band, {to_peer(72, 72)}).on());   // a whole plane
  EXPECT_FALSE(split_of(d, band, {to_peer(12, 48)}).on());   // rows 2-9: all of them
  EXPECT_FALSE(split_of(d, {Region::box(0, 4, 2, 4, 0, 6)}, {to_peer(12, 6)}).on());  // 2 rows
  // Two bands of different channels, or not consecutive, or a narrow box.
  EXPECT_FALSE(split_of(d, {Region::box(0, 2, 2, 10, 0, 6), Region::box(2, 4, 10, 12, 0, 6)}, {to_peer(12, 6)}).on());
  EXPECT_FALSE(split_of(d, {Region::box(0, 4, 0, 3, 0, 6), Region::box(0, 4, 4, 12, 0, 6)}, {to_peer(0, 6)}).on());
  EXPECT_FALSE(split_of(d, {Region::box(0, 4, 2, 10, 1, 6)}, {to_peer(12, 5)}).on());
  // The same band splits with a send of its first row.
  EXPECT_TRUE(split_of(d, band, {to_peer(12, 6)}).on());
}

// A band of plane positions with a partial row at each end (three boxes, as
// the spatial split cuts small maps): its parts are placed region by region.
TEST(HaloFirst, PositionBandsSplitAndTheirPartsArePlacedRegionByRegion) {
  const Dims d{3, 10, 8};
  // Positions [13, 61): row 1 from column 5, rows 2-6, row 7 up to column 5.
  const std::vector<Region> band = {Region::box(0, 3, 1, 2, 5, 8), Region::box(0, 3, 2, 7, 0, 8),
                                    Region::box(0, 3, 7, 8, 0, 5)};
  std::vector<Send> sends;
  for (uint32_t c = 0; c < 3; ++c) {
    sends.push_back(to_peer(c * 80 + 13, 11));  // row 1's part and row 2
    sends.push_back(to_peer(c * 80 + 56, 5));   // row 7's part
  }
  const HaloSplit s = split_of(d, band, sends);
  ASSERT_TRUE(s.on());
  EXPECT_EQ(s.band.p0, 13);
  EXPECT_EQ(s.band.p1, 61);
  EXPECT_EQ(s.q0, 24);  // row 3
  EXPECT_EQ(s.q1, 56);  // up to row 7
  // Positions [14, 58): the end of the first box (3 positions a channel,
  // [13, 16)), the whole second ([16, 56), after 3 x 3), the start of the
  // third ([56, 61), after 9 + 3 x 40).
  std::vector<std::array<int64_t, 4>> parts;
  core::for_each_band_part(d, 3, [&](uint32_t i) { return band[i]; }, 14, 58,
                           [&](int32_t lo, int32_t hi, int64_t at, int64_t cs) { parts.push_back({lo, hi, at, cs}); });
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], (std::array<int64_t, 4>{14, 16, 1, 3}));
  EXPECT_EQ(parts[1], (std::array<int64_t, 4>{16, 56, 9, 40}));
  EXPECT_EQ(parts[2], (std::array<int64_t, 4>{56, 58, 129, 5}));
}

// Every share of every layer that splits, on spatial and fused plans of a
// real model for 2 to 6 boards, computed in the boards' order (halos first:
// the ends, then the middle; inner rows first: the middle, then the ends)
// with compute_positions into the share's buffer: every value equals the
// single-process reference's.
TEST(HaloFirst, SharesComputedInPartsEqualTheReference) {
  const QGraph q = ts::testing::quantised_test_model("mobilenet_v2");
  const auto x = ts::testing::random_int8_input(q, 11);
  const auto tensors = run_int8_all(q, x);
  int checked = 0, inner = 0;
  for_each_share(q, 6, [&](const std::string& where, const core::LayerDesc& L, const plan::LayerShare& ls) {
    const auto region = [&](uint32_t i) { return ls.regions[i]; };
    const HaloSplit hs = plan::halo_split_of(L, ls), is = plan::inner_split_of(L, ls);
    if (!hs.on() && !is.on()) return;
    ASSERT_FALSE(hs.on() && is.on());
    const HaloSplit s = hs.on() ? hs : is;
    inner += is.on();
    SCOPED_TRACE(where + (is.on() ? " (inner rows first)" : ""));
    core::View views[core::kMaxInputs];
    for (int k = 0; k < L.n_inputs; ++k) {
      const auto& in = tensors[size_t(q.nodes[size_t(ls.node)].inputs[size_t(k)])];
      views[k] = core::View{in.data(), 0, L.in[k].c, 0, L.in[k].h};
    }
    std::vector<int8_t> buf(size_t(ls.out_elems), int8_t(0x5A));
    std::vector<std::pair<int32_t, int32_t>> order = {{s.band.p0, s.q0}, {s.q1, s.band.p1}, {s.q0, s.q1}};
    if (is.on()) std::rotate(order.begin(), order.begin() + 2, order.end());
    for (const auto& [u0, u1] : order)
      core::for_each_band_part(L.out, uint32_t(ls.regions.size()), region, u0, u1,
                               [&](int32_t lo, int32_t hi, int64_t at, int64_t cs) {
                                 ASSERT_EQ(core::compute_positions(L, views, s.band.c0, s.band.c1, lo, hi,
                                                                   buf.data() + at, ls.oc_count, cs),
                                           core::KernelStatus::Ok);
                               });
    // The share's buffer holds its regions one after the other, each
    // channel-major: compare with the reference, element by element.
    const auto& ref = tensors[size_t(q.nodes[size_t(ls.node)].output)];
    size_t at = 0;
    for (const Region& r : ls.regions)
      r.segments(L.out, [&](int32_t b, int32_t e) {
        for (int32_t i = b; i < e; ++i, ++at) EXPECT_EQ(buf[at], ref[size_t(i)]) << "element " << i;
        return true;
      });
    EXPECT_EQ(at, buf.size());
    ++checked;
  });
  EXPECT_GT(checked, 10);
  EXPECT_GT(inner, 10);
}

// Inner rows first: every position of the inner part reads no received
// element of any input (brute force over its rows' input boxes and the
// received runs), and each row of the band just outside it reads one.
TEST(InnerRows, TheInnerPartReadsNothingReceivedAndTheRowsBesideItDo) {
  const QGraph q = ts::testing::quantised_test_model("mobilenet_v2");
  int checked = 0;
  for_each_share(q, 5, [&](const std::string& where, const core::LayerDesc& L, const plan::LayerShare& ls) {
    const HaloSplit s = plan::inner_split_of(L, ls);
    if (!s.on()) return;
    SCOPED_TRACE(where);
    const int32_t W = L.out.w;
    // Whether output row y (of the band's channels) reads an element received.
    const auto reads_received = [&](int32_t y) {
      for (int k = 0; k < L.n_inputs; ++k) {
        const core::Box b = core::input_box(L, k, core::OutBox{s.band.c0, s.band.c1, y, y + 1, 0, W});
        if (b.empty()) continue;
        const int64_t hw = int64_t(L.in[k].h) * L.in[k].w;
        for (const core::InputRun& r : ls.inputs[size_t(k)].recv)
          for (int64_t e = r.offset; e < int64_t(r.offset) + r.count; ++e) {
            const int32_t c = int32_t(e / hw), row = int32_t(e % hw / L.in[k].w);
            if (row >= b.h0 && row < b.h1 && c >= b.c0 && c < b.c1) return true;
          }
      }
      return false;
    };
    for (int32_t y = s.q0 / W; y <= (s.q1 - 1) / W; ++y) EXPECT_FALSE(reads_received(y)) << "row " << y;
    if (s.q0 > s.band.p0) {
      EXPECT_TRUE(reads_received(s.q0 / W - 1)) << "row before " << s.q0 / W;
    }
    if (s.q1 < s.band.p1) {
      EXPECT_TRUE(reads_received(s.q1 / W)) << "row " << s.q1 / W;
    }
    ++checked;
  });
  EXPECT_GT(checked, 10);
}

}  // namespace
