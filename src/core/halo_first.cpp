#include "core/halo_first.h"

namespace ts {
namespace core {

bool region_positions(const Dims& d, const Region& g, int32_t* c0, int32_t* c1, int32_t* p0, int32_t* p1) {
  const int32_t hw = d.h * d.w;
  if (g.kind == RegionKind::Box) {
    const bool one_row = g.v[3] - g.v[2] == 1, whole = g.v[4] == 0 && g.v[5] == d.w;
    if (!(one_row || whole) || g.v[4] >= g.v[5] || g.v[2] >= g.v[3]) return false;
    *c0 = g.v[0];
    *c1 = g.v[1];
    *p0 = g.v[2] * d.w + g.v[4];
    *p1 = (g.v[3] - 1) * d.w + g.v[5];
    return true;
  }
  if (hw <= 0 || g.v[0] % hw || g.v[1] % hw || g.v[1] <= g.v[0]) return false;
  *c0 = g.v[0] / hw;
  *c1 = g.v[1] / hw;
  *p0 = 0;
  *p1 = hw;
  return true;
}

bool HaloRows::begin(const Dims& d, const HaloBand& band) {
  if (d.w <= 0 || band.c1 <= band.c0 || band.p1 <= band.p0) return false;
  band_ = band;
  h_ = d.h;
  w_ = d.w;
  y0_ = band.p0 / d.w;
  y1_ = (band.p1 - 1) / d.w + 1;
  if (y1_ - y0_ < 3 || y1_ - y0_ > kHaloSplitMaxRows) return false;
  for (uint32_t& m : marks_) m = 0;
  any_ = all_ = false;
  return true;
}

void HaloRows::mark(int32_t r0, int32_t r1) {
  if (r0 < y0_) r0 = y0_;
  if (r1 > y1_ - 1) r1 = y1_ - 1;
  for (int32_t r = r0; r <= r1; ++r) marks_[uint32_t(r - y0_) >> 5] |= 1u << (uint32_t(r - y0_) & 31u);
}

void HaloRows::add(const Send& s) {
  if (s.peer == kPeerCoordinator || h_ == 0) return;
  any_ = true;
  if (s.count == 0 || all_) return;
  // A checked descriptor's tensors hold at most 2^28 elements (kernels.cpp),
  // so a send's offset and end fit 32 bits: no 64-bit division on a board.
  const uint32_t hw = uint32_t(h_) * uint32_t(w_);
  if (s.count >= hw) {
    all_ = true;
    return;
  }
  // Plane positions of its first and last element: within one channel, or
  // the end of one channel and the start of the next.
  const uint32_t p = s.offset % hw, q = (s.offset + s.count - 1) % hw, w = uint32_t(w_);
  if (p <= q) {
    mark(int32_t(p / w), int32_t(q / w));
  } else {
    mark(int32_t(p / w), h_ - 1);
    mark(0, int32_t(q / w));
  }
}

HaloSplit HaloRows::split() const {
  if (!any_ || all_) return HaloSplit();
  int32_t best_a = 0, best_b = 0;
  for (int32_t r = y0_; r < y1_;) {
    if (marked(r)) {
      ++r;
      continue;
    }
    int32_t e = r;
    while (e < y1_ && !marked(e)) ++e;
    if (e - r > best_b - best_a) best_a = r, best_b = e;
    r = e;
  }
  HaloSplit s;
  s.band = band_;
  s.q0 = best_a * w_ > band_.p0 ? best_a * w_ : band_.p0;
  s.q1 = best_b * w_ < band_.p1 ? best_b * w_ : band_.p1;
  if (!s.on()) return HaloSplit();
  return s;
}

uint64_t halo_macs(const LayerDesc& L, const HaloSplit& s) {
  // Every output of a layer has the same MACs (core/op.h): one channel's
  // parts, times the channels.
  const int64_t hw = int64_t(L.out.h) * L.out.w, at = int64_t(s.band.c0) * hw;
  const uint64_t one = range_macs(L, int32_t(at + s.band.p0), int32_t(at + s.q0)) +
                       range_macs(L, int32_t(at + s.q1), int32_t(at + s.band.p1));
  return one * uint64_t(s.band.c1 - s.band.c0);
}

bool InnerRows::begin(const LayerDesc& d, const HaloBand& band) {
  if (d.out.w <= 0 || band.c1 <= band.c0 || band.p1 <= band.p0) return false;
  d_ = &d;
  band_ = band;
  y0_ = band.p0 / d.out.w;
  y1_ = (band.p1 - 1) / d.out.w + 1;
  if (y1_ - y0_ < kInnerMinRows || y1_ - y0_ > kHaloSplitMaxRows) return false;
  for (uint32_t& m : out_) m = 0;
  any_ = all_ = false;
  return true;
}

bool InnerRows::open_input(int k) {
  // The rows of input k the band reads.
  const Box b = input_box(*d_, k, OutBox{band_.c0, band_.c1, y0_, y1_, 0, d_->out.w});
  if (b.empty()) return false;
  any_ = true;
  ih_ = d_->in[k].h;
  iw_ = d_->in[k].w;
  r0_ = b.h0;
  if (iw_ <= 0 || b.h1 - b.h0 > kHaloSplitMaxRows) {
    all_ = true;
    return false;
  }
  for (uint32_t& m : rows_) m = 0;
  return true;
}

void InnerRows::add_run(const InputRun& r) {
  const uint32_t hw = uint32_t(ih_) * uint32_t(iw_), w = uint32_t(iw_);  // 32 bits, as HaloRows::add
  if (r.count == 0) return;
  if (r.count >= hw) {
    all_ = true;
    return;
  }
  const uint32_t p = r.offset % hw, q = (r.offset + r.count - 1) % hw;
  const auto mark = [&](int32_t a, int32_t b) {  // input rows [a, b]
    for (int32_t y = a < r0_ ? r0_ : a; y <= b && y - r0_ < kHaloSplitMaxRows; ++y) set(rows_, y - r0_);
  };
  if (p <= q) {
    mark(int32_t(p / w), int32_t(q / w));
  } else {
    mark(int32_t(p / w), ih_ - 1);
    mark(0, int32_t(q / w));
  }
}

void InnerRows::close_input(int k) {
  if (all_) return;
  for (int32_t y = y0_; y < y1_; ++y) {
    if (test(out_, y - y0_)) continue;
    const Box b = input_box(*d_, k, OutBox{band_.c0, band_.c1, y, y + 1, 0, d_->out.w});
    for (int32_t r = b.h0; r < b.h1; ++r)
      if (r >= r0_ && r - r0_ < kHaloSplitMaxRows && test(rows_, r - r0_)) {
        set(out_, y - y0_);
        break;
      }
  }
}

HaloSplit InnerRows::split() const {
  if (!any_ || all_) return HaloSplit();
  int32_t best_a = 0, best_b = 0;
  for (int32_t y = y0_; y < y1_;) {
    if (test(out_, y - y0_)) {
      ++y;
      continue;
    }
    int32_t e = y;
    while (e < y1_ && !test(out_, e - y0_)) ++e;
    if (e - y > best_b - best_a) best_a = y, best_b = e;
    y = e;
  }
  HaloSplit s;
  s.band = band_;
  const int32_t w = d_->out.w;
  s.q0 = best_a * w > band_.p0 ? best_a * w : band_.p0;
  s.q1 = best_b * w < band_.p1 ? best_b * w : band_.p1;
  // Nothing received, or nothing to compute before it: one compute.
  if (s.q1 <= s.q0 || (s.q0 == band_.p0 && s.q1 == band_.p1)) return HaloSplit();
  return s;
}

}  // namespace core
}  // namespace ts
