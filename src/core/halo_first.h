// Halos first (docs/execution.md, "Halos first"): overlap inside a layer on
// the direct route. A board whose share of a layer is a band of plane
// positions [p0, p1) of some channels (whole rows, or whole rows with a
// partial row at either end: a spatial split), and whose sends to other
// boards read only rows near the band's ends (the halos its neighbours
// need), computes those end positions first, hands those sends to its
// link, and only then computes the positions between: its neighbours'
// inputs travel while it computes. The values, the output buffer and
// everything sent are those of one compute of the whole share.
//
// One rule, read by the board (core/worker_schedule.cpp, on its fragment
// entry), the simulator (sim/sim_direct.cpp) and the planner's estimate
// (plan/estimate.cpp), on the plan's shares and sends.
//
// Portable C++17 shared with the boards: no heap, no exceptions.
#pragma once

#include <stdint.h>

#include "core/fragment.h"
#include "core/layer.h"

namespace ts {
namespace core {

// Region g of a tensor of shape d as channels [c0, c1) x plane positions
// [p0, p1): a box of one row or of whole rows, or a run of whole channels.
bool region_positions(const Dims& d, const Region& g, int32_t* c0, int32_t* c1, int32_t* p0, int32_t* p1);

// A share that is one band: channels [c0, c1) x positions [p0, p1), its
// regions consecutive bands of the same channels.
struct HaloBand {
  int32_t c0 = 0, c1 = 0, p0 = 0, p1 = 0;
};

// A band split for halos first: positions [q0, q1) are computed after the
// sends to other boards, [p0, q0) and [q1, p1) before them. on() false: one
// compute.
struct HaloSplit {
  HaloBand band;
  int32_t q0 = 0, q1 = 0;
  bool on() const { return q1 > q0 && (q0 > band.p0 || q1 < band.p1); }
};

// Bands of more rows than this are computed at once (the row marks are on
// the stack).
constexpr int32_t kHaloSplitMaxRows = 1024;

// Marks, over the band's rows, the rows that sends to other boards read (one
// call per send); split() then takes the longest run of rows none reads as
// the positions computed after them. A send of a whole plane or more reads
// every row: no split.
class HaloRows {
 public:
  // False if the band has too few or too many rows to split.
  bool begin(const Dims& d, const HaloBand& band);
  void add(const Send& s);
  HaloSplit split() const;

 private:
  bool marked(int32_t r) const { return marks_[uint32_t(r - y0_) >> 5] >> (uint32_t(r - y0_) & 31u) & 1u; }
  void mark(int32_t r0, int32_t r1);  // rows [r0, r1] of the plane
  HaloBand band_;
  int32_t h_ = 0, w_ = 0, y0_ = 0, y1_ = 0;  // the band's rows [y0, y1)
  bool any_ = false, all_ = false;
  uint32_t marks_[kHaloSplitMaxRows / 32] = {};
};

// The band of a share of n regions (region_at(i) the i-th), or false.
template <class RegionAt>
bool share_band(const Dims& d, uint32_t n, RegionAt region_at, HaloBand* band) {
  if (n == 0) return false;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t c0, c1, p0, p1;
    if (!region_positions(d, region_at(i), &c0, &c1, &p0, &p1)) return false;
    if (i == 0) {
      *band = HaloBand{c0, c1, p0, p1};
      continue;
    }
    if (c0 != band->c0 || c1 != band->c1 || p0 != band->p1) return false;
    band->p1 = p1;
  }
  return true;
}

// The split of a share of n_regions regions and n_sends sends (send_at(i)).
template <class RegionAt, class SendAt>
HaloSplit halo_split(const Dims& d, uint32_t n_regions, RegionAt region_at, uint32_t n_sends, SendAt send_at) {
  HaloBand band;
  HaloRows rows;
  if (!share_band(d, n_regions, region_at, &band) || !rows.begin(d, band)) return HaloSplit();
  for (uint32_t i = 0; i < n_sends; ++i) rows.add(send_at(i));
  return rows.split();
}

// For positions [u, v) of the band of a share of n regions: f(lo, hi, at,
// cstride) for each region's part [lo, hi), whose outputs sit at `at` in
// the share's buffer (regions one after the other, each channel-major),
// channel planes cstride apart.
template <class RegionAt, class F>
void for_each_band_part(const Dims& d, uint32_t n, RegionAt region_at, int32_t u, int32_t v, F f) {
  int64_t base = 0;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t c0, c1, p0, p1;
    if (!region_positions(d, region_at(i), &c0, &c1, &p0, &p1)) return;
    const int32_t lo = u > p0 ? u : p0, hi = v < p1 ? v : p1;
    if (lo < hi) f(lo, hi, base + (lo - p0), int64_t(p1 - p0));
    base += int64_t(c1 - c0) * (p1 - p0);
  }
}

// MACs of a split's positions computed before the sends.
uint64_t halo_macs(const LayerDesc& L, const HaloSplit& s);

// Inner rows first (docs/execution.md, "Inner rows first"): the receiving
// half of overlap on the direct route. A board whose share of a layer is one
// band, and some of whose inputs arrive over the network, computes the
// band's positions that read none of the received inputs while those
// travel, and the others once everything arrived. The split's [q0, q1) is
// the part computed first here (the rows halos first computes last); the
// values and the buffers are those of one compute of the whole share.
//
// Marks the band's output rows that read a received input row (rows of any
// channel: a received element marks its whole row), input by input; split()
// takes the longest run of unmarked rows. Windows or bands of more than
// kHaloSplitMaxRows rows, and bands of fewer than kInnerMinRows, are not
// split: every part is one more kernel call per channel, and on a thin band
// the Cortex-M7's depthwise kernel spends more on the calls' set-up than
// hiding the inputs' time saves (docs/execution.md, "Inner rows first").
constexpr int32_t kInnerMinRows = 8;

class InnerRows {
 public:
  bool begin(const LayerDesc& d, const HaloBand& band);
  // Input k's received elements, as InputRun records (flat C-H-W, sorted):
  // run_at(i) for i < n. Call once per input that receives.
  template <class RunAt>
  void input(int k, uint32_t n, RunAt run_at) {
    if (n == 0 || all_ || !open_input(k)) return;
    for (uint32_t i = 0; i < n && !all_; ++i) add_run(run_at(i));
    close_input(k);
  }
  HaloSplit split() const;

 private:
  bool open_input(int k);
  void add_run(const InputRun& r);
  void close_input(int k);
  static bool test(const uint32_t* m, int32_t i) { return m[uint32_t(i) >> 5] >> (uint32_t(i) & 31u) & 1u; }
  static void set(uint32_t* m, int32_t i) { m[uint32_t(i) >> 5] |= 1u << (uint32_t(i) & 31u); }
  const LayerDesc* d_ = nullptr;
  HaloBand band_;
  int32_t y0_ = 0, y1_ = 0;          // the band's output rows
  int32_t ih_ = 0, iw_ = 0, r0_ = 0;  // the open input's rows and width, its window's first row
  bool any_ = false, all_ = false;
  uint32_t rows_[kHaloSplitMaxRows / 32] = {};  // received rows of the open input, from r0_
  uint32_t out_[kHaloSplitMaxRows / 32] = {};   // output rows that read one
};

// The inner split of a share of n_regions regions whose input k receives
// n_runs[k] runs (run_at(k, i)), k < d.n_inputs.
template <class RegionAt, class RunAt>
HaloSplit inner_split(const LayerDesc& d, uint32_t n_regions, RegionAt region_at, const uint32_t* n_runs, RunAt run_at) {
  HaloBand band;
  InnerRows rows;
  if (!share_band(d.out, n_regions, region_at, &band) || !rows.begin(d, band)) return HaloSplit();
  for (int k = 0; k < d.n_inputs; ++k) rows.input(k, n_runs[k], [&](uint32_t i) { return run_at(k, i); });
  return rows.split();
}

}  // namespace core
}  // namespace ts
