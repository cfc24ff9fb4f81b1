// The decoded view of a fragment entry (core/fragment.h): its records read in
// place (regions, sends, runs), where an output sits in the output buffer
// (FragLayer::span and the indexed SpanFinder), and the run lookups of a
// board's per-frame checks (RunFinder). The reader that validates a fragment
// before any of this is used is fragment.cpp.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#include "core/fragment.h"

#include "core/bytes.h"
#include "core/partial.h"

namespace ts {
namespace core {

namespace {

inline uint32_t rd32(const uint8_t* p) { return le::get_u32(p); }
inline int32_t rdi32(const uint8_t* p) { return le::get_i32(p); }

Region read_region(const uint8_t* p) {
  Region r;
  r.kind = RegionKind(rd32(p));
  for (int k = 0; k < 6; ++k) r.v[k] = rdi32(p + 4 + 4 * k);
  return r;
}



// Whether [off, off+n) lies inside one segment of the layer's regions; if so
// *pos is the position of `off` in the output buffer.
bool out_span(const FragLayer& L, uint32_t off, uint32_t n, uint32_t* pos) {
  // Closed form per region (a box's segments are its channels, or its rows
  // when narrower than the plane): no walk over the segments, so a layer's
  // local runs and sends cost O(regions) each, not O(channels).
  // A checked descriptor's tensors hold at most 2^28 elements (kernels.cpp):
  // the divisions in 32 bits (a board has no 64-bit divide), the sums in 64.
  const Dims& d = L.desc.out;
  const int64_t hw = int64_t(d.h) * d.w;
  if (hw <= 0) return false;
  const uint32_t hw32 = uint32_t(hw), w32 = uint32_t(d.w);
  const int64_t o = off;
  if (L.out_pitch) {  // in place: one region of whole rows, channels out_pitch apart
    int32_t c0, c1, y0, y1;
    if (!L.whole_rows(&c0, &c1, &y0, &y1)) return false;
    const int64_t c = off / hw32, y = (off % hw32) / w32;
    if (c < c0 || c >= c1 || y < y0 || y >= y1) return false;
    // Whole planes at a pitch of one plane are dense: spans may cross
    // channels. Otherwise a span stays in its channel's rows.
    const bool dense = y0 == 0 && y1 == d.h && int64_t(L.out_pitch) == hw;
    if (o + n > (dense ? int64_t(c1) * hw : c * hw + int64_t(y1) * d.w)) return false;
    *pos = uint32_t((c - c0) * L.out_pitch + (o - c * hw - int64_t(y0) * d.w));
    return true;
  }
  uint32_t base = 0;
  for (uint32_t i = 0; i < L.n_regions; ++i) {
    const Region r = L.region(i);
    if (r.kind == RegionKind::Run) {
      if (o >= r.v[0] && o < r.v[1]) {
        if (o + n > r.v[1]) return false;
        *pos = base + uint32_t(o - r.v[0]);
        return true;
      }
    } else {
      const int64_t c = off / hw32, y = (off % hw32) / w32, x = off % w32;
      if (c >= r.v[0] && c < r.v[1] && y >= r.v[2] && y < r.v[3] && x >= r.v[4] && x < r.v[5]) {
        const bool full = r.v[4] == 0 && r.v[5] == d.w;
        // End of the segment holding off: the channel's rows, or the row.
        const int64_t seg_end = full ? c * hw + int64_t(r.v[3]) * d.w : c * hw + y * d.w + r.v[5];
        if (o + n > seg_end) return false;
        const int64_t bw = r.v[5] - r.v[4];
        *pos = base + uint32_t(((c - r.v[0]) * (r.v[3] - r.v[2]) + (y - r.v[2])) * bw + (x - r.v[4]));
        return true;
      }
    }
    base += uint32_t(r.elems());
  }
  return false;
}

// Sorted, disjoint, non-empty runs inside box b of a tensor of shape X (and
// not even touching each other when `merged`); sets *sum to their elements.
}  // namespace

bool Region::valid(const Dims& d) const {
  if (kind == RegionKind::Run) {
    return v[0] >= 0 && v[1] > v[0] && int64_t(v[1]) <= int64_t(d.c) * d.h * d.w && !v[2] && !v[3] && !v[4] && !v[5];
  }
  if (kind != RegionKind::Box) return false;
  return v[0] >= 0 && v[1] > v[0] && v[1] <= d.c && v[2] >= 0 && v[3] > v[2] && v[3] <= d.h && v[4] >= 0 &&
         v[5] > v[4] && v[5] <= d.w;
}

int64_t Region::elems() const {
  if (kind == RegionKind::Run) return int64_t(v[1]) - v[0];
  return int64_t(v[1] - v[0]) * (v[3] - v[2]) * (v[5] - v[4]);
}

namespace {
InputRun read_run(const uint8_t* base, uint32_t n, uint32_t i) {
  InputRun r{0, 0};
  if (base == nullptr || i >= n) return r;
  const uint8_t* p = base + frag::kRunBytes * size_t(i);
  r.offset = rd32(p);
  r.count = rd32(p + 4);
  return r;
}
}  // namespace

InputRun FragLayer::run(int input, uint32_t i) const {
  if (input < 0 || input >= kMaxInputs) return InputRun{0, 0};
  return read_run(runs[input], n_runs[input], i);
}

InputRun FragLayer::local_run(int input, uint32_t i) const {
  if (input < 0 || input >= kMaxInputs) return InputRun{0, 0};
  return read_run(local[input], n_local[input], i);
}

Region FragLayer::region(uint32_t i) const {
  if (regions == nullptr || i >= n_regions) return Region();
  return read_region(regions + frag::kRegionBytes * size_t(i));
}

Send FragLayer::ps_send(uint32_t i) const {
  if (ps_sends == nullptr || i >= n_ps_sends) return Send();
  return send_record(ps_sends, i);
}

uint32_t FragLayer::ps_bytes() const {
  if (!partial()) return 0;
  return uint32_t(desc.out.c) * uint32_t(partial_positions(desc)) * 4u;
}

Send FragLayer::send(uint32_t i) const {
  if (sends == nullptr || i >= n_sends) return Send();
  return send_record(sends, i);
}

bool FragLayer::whole_rows(int32_t* c0, int32_t* c1, int32_t* y0, int32_t* y1) const {
  if (n_regions != 1) return false;
  const Region g = region(0);
  const Dims& d = desc.out;
  const int32_t hw = d.h * d.w;
  if (g.kind == RegionKind::Box) {
    if (g.v[4] != 0 || g.v[5] != d.w) return false;
    *c0 = g.v[0]; *c1 = g.v[1]; *y0 = g.v[2]; *y1 = g.v[3];
    return true;
  }
  if (hw <= 0 || g.v[0] % hw || g.v[1] % hw) return false;
  *c0 = g.v[0] / hw; *c1 = g.v[1] / hw; *y0 = 0; *y1 = d.h;
  return true;
}

uint32_t FragLayer::out_span_bytes() const {
  int32_t c0, c1, y0, y1;
  if (!out_pitch || !whole_rows(&c0, &c1, &y0, &y1)) return out_elems;
  return uint32_t(c1 - c0 - 1) * out_pitch + uint32_t(y1 - y0) * uint32_t(desc.out.w);
}

bool FragLayer::span(uint32_t off, uint32_t n, uint32_t* pos) const { return out_span(*this, off, n, pos); }

uint32_t RunFinder::seek(uint32_t e0) const {
  constexpr uint32_t kSteps = 5;
  uint32_t i = at_;
  if (i >= n_ || off(i) > e0) return first_ending_after(0, n_, e0);
  const uint32_t end = n_ - i > kSteps ? i + kSteps : n_;
  for (; i < end; ++i)  // 32 bits: off + count may not fit
    if (e0 < off(i) || e0 - off(i) < count(i)) return i;
  return first_ending_after(i, n_, e0);
}

uint32_t RunFinder::first_ending_after(uint32_t lo, uint32_t hi, uint32_t e0) const {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const uint8_t* p = runs_ + frag::kRunBytes * size_t(mid);
    if (uint64_t(rd32(p)) + rd32(p + 4) <= e0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

SpanFinder::SpanFinder(const FragLayer& L) : L_(&L) {
  const Dims& d = L.desc.out;
  if (int64_t(d.h) * d.w <= 0) return;
  hw_ = uint32_t(d.h) * uint32_t(d.w);
  if (L.out_pitch) {
    pitched_ = true;
    whole_ = L.whole_rows(&c0_, &c1_, &y0_, &y1_);
    return;
  }
  if (L.n_regions > kRegions) return;
  uint32_t base = 0;
  for (uint32_t i = 0; i < L.n_regions; ++i) {
    r_[i] = L.region(i);
    base_[i] = base;
    base += uint32_t(r_[i].elems());
  }
  indexed_ = true;
}

bool SpanFinder::find(uint32_t off, uint32_t n, uint32_t* pos) {
  const FragLayer& L = *L_;
  if (!pitched_ && !indexed_) return L.span(off, n, pos);
  const Dims& d = L.desc.out;
  // Output tensors hold at most 2^28 elements (kernels.cpp): the position of
  // `off` in 32-bit arithmetic, two divisions, once per query.
  const uint32_t w = uint32_t(d.w), hw = uint32_t(d.h) * w;
  if (hw == 0 || off >= uint32_t(d.c) * hw) return false;
  const int32_t c = int32_t(off / hw);
  const uint32_t in_plane = off - uint32_t(c) * hw;
  const int32_t y = int32_t(in_plane / w), x = int32_t(in_plane - uint32_t(y) * w);
  return find_at(off, n, c, y, x, pos);
}

bool SpanFinder::find_at(uint32_t off, uint32_t n, int32_t c, int32_t y, int32_t x, uint32_t* pos) {
  const FragLayer& L = *L_;
  if (!pitched_ && !indexed_) return L.span(off, n, pos);
  const Dims& d = L.desc.out;
  const uint32_t w = uint32_t(d.w), hw = uint32_t(d.h) * w;
  if (hw == 0 || off >= uint32_t(d.c) * hw) return false;
  const uint32_t in_plane = off - uint32_t(c) * hw;
  const uint64_t end = uint64_t(off) + n;
  if (pitched_) {  // out_span's in-place case, its geometry decoded once
    if (!whole_ || c < c0_ || c >= c1_ || y < y0_ || y >= y1_) return false;
    const bool dense = y0_ == 0 && y1_ == d.h && L.out_pitch == hw;
    if (end > (dense ? uint64_t(c1_) * hw : uint64_t(c) * hw + uint64_t(y1_) * w)) return false;
    const Next after{off + hw, n, 0, L.out_pitch, c + 1, c1_ < d.c ? c1_ : d.c, y, x,
                     dense ? uint64_t(c1_) * hw : UINT64_MAX};
    return found(after, uint32_t(c - c0_) * L.out_pitch + (in_plane - uint32_t(y0_) * w), pos);
  }
  // Regions are disjoint: the one holding `off` is the answer; try the one
  // of the last query first, then the others in order.
  uint32_t i = hint_;
  for (uint32_t t = 0; t < L.n_regions; ++t, i = i + 1 == L.n_regions ? 0 : i + 1) {
    const Region& r = r_[i];
    if (r.kind == RegionKind::Run) {
      if (int64_t(off) < r.v[0] || int64_t(off) >= r.v[1]) continue;
      hint_ = i;
      if (end > uint64_t(r.v[1])) return false;
      const Next after{off + hw, n, 0, hw, c + 1, d.c, y, x, uint64_t(r.v[1])};
      return found(after, base_[i] + (off - uint32_t(r.v[0])), pos);
    }
    if (c < r.v[0] || c >= r.v[1] || y < r.v[2] || y >= r.v[3] || x < r.v[4] || x >= r.v[5]) continue;
    hint_ = i;
    const bool full = r.v[4] == 0 && r.v[5] == d.w;
    // End of the segment holding off: the channel's rows, or the row.
    const uint64_t seg_end =
        full ? uint64_t(c) * hw + uint64_t(r.v[3]) * w : uint64_t(c) * hw + uint64_t(y) * w + uint32_t(r.v[5]);
    if (end > seg_end) return false;
    const uint32_t bw = uint32_t(r.v[5] - r.v[4]);
    const uint32_t rows = uint32_t(r.v[3] - r.v[2]);
    const uint32_t at = base_[i] + (uint32_t(c - r.v[0]) * rows + uint32_t(y - r.v[2])) * bw + uint32_t(x - r.v[4]);
    const Next after{off + hw, n, 0, rows * bw, c + 1, r.v[1] < d.c ? r.v[1] : d.c, y, x, UINT64_MAX};
    return found(after, at, pos);
  }
  return false;
}

bool SpanFinder::found(const Next& after, uint32_t at, uint32_t* pos) {
  if (after.n > 0) {  // (a span of no elements has no successor to follow)
    Next& s = next_[slot_];  // the slots fill from 0, then the oldest goes
    s = after;
    s.pos = at + after.stride;
    slot_ = (slot_ + 1) % kFollow;
    if (n_next_ < kFollow) ++n_next_;
  }
  *pos = at;
  return true;
}

int64_t FragLayer::position(int32_t e) const {
  uint32_t pos = 0;
  if (e < 0 || !out_span(*this, uint32_t(e), 1, &pos)) return -1;
  return pos;
}

}  // namespace core
}  // namespace ts
