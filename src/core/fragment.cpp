// Fragment reader: validates a fragment once, then decodes entries in place.
//
// The byte layout is declared once, in core/fragment.h (namespace frag); the
// writer is src/plan/fragment_writer.cpp and docs/planner.md has the table.
//
// Nothing is trusted: every offset, count and geometry field is checked with
// 64-bit arithmetic before it is used, so truncated, corrupted or hostile
// input yields a status and never an out-of-bounds read. A layer that passes
// is also safe to hand to compute_range() with windows built from its boxes:
// shapes agree with the op, per-channel arrays have the sizes the kernels
// index, shifts are in the range the fixed-point helpers accept, every input
// and local run lies inside its box, every send and local run is a span of
// one region segment of its layer, and the planned arena buffers that are in
// use at the same time never overlap.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#include "core/fragment.h"

#include "core/bytes.h"
#include "core/crc32.h"
#include "core/op.h"
#include "core/partial.h"

namespace ts {
namespace core {

namespace {

// Bounds that keep every kernel computation inside int32 and every size
// inside a 32-bit board's address space.
constexpr int64_t kMaxDim = 1 << 15;        // c, h, w each
constexpr int64_t kMaxTensor = 1 << 28;     // elements of one tensor
constexpr int32_t kMaxGeom = 1 << 10;       // kernel, stride, dilation, pad
// Conv/Gemm fan-in: kMaxFanIn (core/op.h), checked by each op's validate.
constexpr int32_t kMaxBias = 1 << 30;

using le::get_i32;
using le::get_u16;
using le::get_u32;
inline uint16_t rd16(const uint8_t* p) { return get_u16(p); }
inline uint32_t rd32(const uint8_t* p) { return get_u32(p); }
inline int32_t rdi32(const uint8_t* p) { return get_i32(p); }

inline bool in_i8(int32_t v) { return v >= -128 && v <= 127; }
inline bool shift_ok(int32_t s) { return s >= -31 && s <= 30; }

bool dims_ok(const Dims& d) {
  if (d.c < 1 || d.h < 1 || d.w < 1) return false;
  if (d.c > kMaxDim || d.h > kMaxDim || d.w > kMaxDim) return false;
  return int64_t(d.c) * d.h * d.w <= kMaxTensor;
}


// Everything decoded from one entry, before validation.
struct RawLayer {
  FragLayer L;
  uint32_t off[5];  // weights, bias, mult, shift, lut
  uint32_t cnt[5];
  uint32_t runs_off[kMaxInputs];
  uint32_t local_off[kMaxInputs];
  uint32_t regions_off, sends_off;
  uint32_t reserved;  // v4: offset of the partial-sum record
};

// Reads entry i (the caller has checked it lies inside the fragment).
void decode_entry(const uint8_t* e, RawLayer* r) {
  using namespace frag;
  FragLayer& L = r->L;
  L = FragLayer();
  LayerDesc& d = L.desc;
  d.op = QOp(e[kOp]);
  d.n_inputs = e[kNInputs];
  d.count_include_pad = e[kIncludePad];
  L.flags = e[kFlags];
  L.node = rd32(e + kNode);
  L.run_begin = rdi32(e + kOutBegin);
  L.run_end = rdi32(e + kOutEnd);
  d.oc_base = rdi32(e + kOcBase);
  L.oc_count = rdi32(e + kOcCount);
  int32_t* f[] = {&d.out.c, &d.out.h, &d.out.w, &d.out_zp, &d.act_min, &d.act_max, &d.kh,    &d.kw,     &d.sh,      &d.sw,
                  &d.dh,    &d.dw,    &d.pad_t, &d.pad_l,  &d.pad_b,   &d.pad_r,   &d.groups, &d.left_shift, &d.out_mult, &d.out_shift};
  for (int k = 0; k < 20; ++k) *f[k] = rdi32(e + kScalars + 4 * k);
  L.out_elems = rd32(e + kOutElems);
  L.out_at = rd32(e + kOutAt);
  L.out_until = rd32(e + kOutUntil);
  L.out_pitch = rd32(e + kOutPitch);
  r->reserved = rd32(e + kEntryReserved);
  L.ram_bytes = rd32(e + kRamBytes);
  for (int k = 0; k < 5; ++k) {
    r->off[k] = rd32(e + kArrays + 8 * k);
    r->cnt[k] = rd32(e + kArrays + 8 * k + 4);
  }
  r->regions_off = rd32(e + kRegions);
  L.n_regions = rd32(e + kRegions + 4);
  r->sends_off = rd32(e + kSends);
  L.n_sends = rd32(e + kSends + 4);
  const int n = d.n_inputs <= kMaxInputs ? d.n_inputs : kMaxInputs;
  for (int k = 0; k < kMaxInputs; ++k) {
    r->runs_off[k] = 0;
    r->local_off[k] = 0;
  }
  for (int k = 0; k < n; ++k) {
    const uint8_t* s = e + kSlots + k * kSlotBytes;
    d.in[k].c = rdi32(s + kInDims);
    d.in[k].h = rdi32(s + kInDims + 4);
    d.in[k].w = rdi32(s + kInDims + 8);
    d.in_zp[k] = rdi32(s + kInZp);
    d.in_mult[k] = rdi32(s + kInMult);
    d.in_shift[k] = rdi32(s + kInShift);
    L.box[k].c0 = rdi32(s + kBox);
    L.box[k].c1 = rdi32(s + kBox + 4);
    L.box[k].h0 = rdi32(s + kBox + 8);
    L.box[k].h1 = rdi32(s + kBox + 12);
    r->runs_off[k] = rd32(s + kRuns);
    L.n_runs[k] = rd32(s + kRuns + 4);
    L.expected[k] = rd32(s + kExpected);
    r->local_off[k] = rd32(s + kLocal);
    L.n_local[k] = rd32(s + kLocal + 4);
    L.local_layer[k] = rd32(s + kLocalLayer);
    L.box_at[k] = rd32(s + kBoxAt);
    L.avail_from[k] = rd32(s + kAvailFrom);
  }
}

// Shapes each op's kernel relies on: the op's own validate (core/op.h).
bool shapes_ok(const LayerDesc& d) {
  const OpDef* op = op_def(d.op);
  return op && op->validate(d);
}

// True if every element of run [off, off+n) of a (C,H,W) tensor lies in box b.
bool run_in_box(uint32_t off, uint32_t n, const Dims& X, const Box& b) {
  const int64_t hw = int64_t(X.h) * X.w;
  const int64_t first = off, last = int64_t(off) + n - 1;
  const int64_t c0 = first / hw, c1 = last / hw;
  const int64_t y0 = (first % hw) / X.w, y1 = (last % hw) / X.w;
  if (c0 < b.c0 || c1 >= b.c1) return false;
  if (c0 == c1) return y0 >= b.h0 && y1 < b.h1;
  // Spanning channels: the run covers the last row of c0's plane and the
  // first row of c1's, so the box must hold every row.
  return b.h0 == 0 && b.h1 == X.h;
}

Region read_region(const uint8_t* p) {
  Region r;
  r.kind = RegionKind(rd32(p));
  for (int k = 0; k < 6; ++k) r.v[k] = rdi32(p + 4 + 4 * k);
  return r;
}

Send read_send(const uint8_t* p) {
  Send s;
  s.peer = rd16(p);
  s.layer = rd16(p + 2);
  s.operand = p[4];
  s.offset = rd32(p + 8);
  s.count = rd32(p + 12);
  s.pos = rd32(p + 16);
  return s;
}

// Channel range [first, last] a region touches (Gemm: output index).
void region_channels(const Region& r, const Dims& out, int32_t* first, int32_t* last) {
  if (r.kind == RegionKind::Box) {
    *first = r.v[0];
    *last = r.v[1] - 1;
    return;
  }
  const int32_t hw = out.h * out.w;
  *first = r.v[0] / hw;
  *last = (r.v[1] - 1) / hw;
}

bool regions_intersect(const Region& a, const Region& b, const Dims& d) {
  if (a.kind == RegionKind::Box && b.kind == RegionKind::Box) {
    return a.v[0] < b.v[1] && b.v[0] < a.v[1] && a.v[2] < b.v[3] && b.v[2] < a.v[3] && a.v[4] < b.v[5] &&
           b.v[4] < a.v[5];
  }
  // Compare segment by segment (runs are one segment).
  bool hit = false;
  a.segments(d, [&](int32_t a0, int32_t a1) {
    b.segments(d, [&](int32_t b0, int32_t b1) {
      if (a0 < b1 && b0 < a1) hit = true;
      return !hit;
    });
    return !hit;
  });
  return hit;
}

// Whether [off, off+n) lies inside one segment of the layer's regions; if so
// *pos is the position of `off` in the output buffer.
bool out_span(const FragLayer& L, uint32_t off, uint32_t n, uint32_t* pos) {
  // Closed form per region (a box's segments are its channels, or its rows
  // when narrower than the plane): no walk over the segments, so a layer's
  // local runs and sends cost O(regions) each, not O(channels).
  const Dims& d = L.desc.out;
  const int64_t hw = int64_t(d.h) * d.w;
  if (hw <= 0) return false;
  const int64_t o = off;
  if (L.out_pitch) {  // in place: one region of whole rows, channels out_pitch apart
    int32_t c0, c1, y0, y1;
    if (!L.whole_rows(&c0, &c1, &y0, &y1)) return false;
    const int64_t c = o / hw, y = (o % hw) / d.w;
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
      const int64_t c = o / hw, y = (o % hw) / d.w, x = o % d.w;
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
bool runs_ok(const uint8_t* p, uint32_t n, const Dims& X, const Box& b, int64_t* sum, bool merged = true) {
  const int64_t size = int64_t(X.c) * X.h * X.w;
  int64_t prev_end = -1;
  *sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t off = rd32(p + frag::kRunBytes * uint64_t(i));
    const uint32_t cnt = rd32(p + frag::kRunBytes * uint64_t(i) + 4);
    if (cnt == 0 || int64_t(off) + cnt > size) return false;
    if (prev_end >= 0 && (merged ? int64_t(off) <= prev_end : int64_t(off) < prev_end)) return false;
    if (!run_in_box(off, cnt, X, b)) return false;
    prev_end = int64_t(off) + cnt;
    *sum += cnt;
  }
  return true;
}

// A record array [off, off + n * size) inside the data section, aligned.
bool array_ok(uint32_t off, uint32_t n, uint32_t size, uint32_t data_begin, uint32_t data_end) {
  if (n == 0) return off == 0;
  return off >= data_begin && off % 4 == 0 && uint64_t(off) + uint64_t(n) * size <= data_end;
}

// The partial-sum record's fields into L (its sends' pointer is the
// caller's: checked or not); returns the sends' offset.
uint32_t read_ps_record(const uint8_t* ps, FragLayer* L) {
  L->ps_ci0 = rdi32(ps + frag::kPsCi0);
  L->ps_ci1 = rdi32(ps + frag::kPsCi1);
  L->ps_at = rd32(ps + frag::kPsAt);
  L->ps_acc_at = rd32(ps + frag::kPsAccAt);
  L->ps_expected = rd32(ps + frag::kPsExpected);
  L->n_ps_sends = rd32(ps + frag::kPsSends + 4);
  return rd32(ps + frag::kPsSends);
}

// `deep` also walks the arrays (shift values, regions, sends, runs); open()
// does, the per-layer decode after it does not need to.
FragStatus check_layer(const uint8_t* base, uint32_t data_begin, uint32_t data_end, uint32_t index,
                       const FragHeader& hdr, bool deep, RawLayer* r) {
  FragLayer& L = r->L;
  LayerDesc& d = L.desc;
  if (uint8_t(d.op) < 1 || uint8_t(d.op) > 10) return FragStatus::BadLayer;
  if (d.n_inputs < 1 || d.n_inputs > kMaxInputs) return FragStatus::BadLayer;
  if (d.count_include_pad > 1 || (L.flags & ~kKnownEntryFlags)) return FragStatus::BadLayer;
  if (L.node != index || index >= hdr.n_layers) return FragStatus::BadLayer;
  if (!dims_ok(d.out)) return FragStatus::BadLayer;
  for (int k = 0; k < d.n_inputs; ++k)
    if (!dims_ok(d.in[k]) || !in_i8(d.in_zp[k]) || !shift_ok(d.in_shift[k])) return FragStatus::BadLayer;
  if (!in_i8(d.out_zp) || !in_i8(d.act_min) || !in_i8(d.act_max) || d.act_min > d.act_max) return FragStatus::BadLayer;
  const int32_t g1[] = {d.kh, d.kw, d.sh, d.sw, d.dh, d.dw};
  for (int32_t v : g1)
    if (v < 1 || v > kMaxGeom) return FragStatus::BadLayer;
  const int32_t g0[] = {d.pad_t, d.pad_l, d.pad_b, d.pad_r};
  for (int32_t v : g0)
    if (v < 0 || v > kMaxGeom) return FragStatus::BadLayer;
  if (d.groups < 1 || d.groups > kMaxDim) return FragStatus::BadLayer;
  if (d.left_shift < 0 || d.left_shift > 22 || !shift_ok(d.out_shift)) return FragStatus::BadLayer;
  if (!shapes_ok(d)) return FragStatus::BadLayer;
  // Add sums two rescaled operands in int32: each rescale must not grow.
  if (d.op == QOp::Add && (d.in_shift[0] > 0 || d.in_shift[1] > 0)) return FragStatus::BadLayer;

  // Regions and their bounds.
  const int32_t total = d.out.c * d.out.h * d.out.w;  // <= kMaxTensor
  const bool idle = L.n_regions == 0;
  if (!array_ok(r->regions_off, L.n_regions, frag::kRegionBytes, data_begin, data_end)) return FragStatus::BadLayer;
  if (!array_ok(r->sends_off, L.n_sends, frag::kSendBytes, data_begin, data_end)) return FragStatus::BadLayer;
  L.regions = L.n_regions ? base + r->regions_off : nullptr;
  L.sends = L.n_sends ? base + r->sends_off : nullptr;
  const bool partial = (L.flags & kEntryPartial) != 0;
  if (partial != (r->reserved != 0) || (partial && hdr.version < 4)) return FragStatus::BadLayer;
  if (partial) {
    // The record, then its sends: whole int32 values of the own sums.
    if (idle || !array_ok(r->reserved, 1, frag::kPsBytes, data_begin, data_end)) return FragStatus::BadLayer;
    const uint32_t so = read_ps_record(base + r->reserved, &L);
    if (!array_ok(so, L.n_ps_sends, frag::kSendBytes, data_begin, data_end)) return FragStatus::BadLayer;
    L.ps_sends = L.n_ps_sends ? base + so : nullptr;
    if (!partial_ok(d) || (L.flags & kEntryRunTrigger) || L.out_pitch || L.n_regions != 1) return FragStatus::BadLayer;
    if (L.ps_ci0 < 0 || L.ps_ci1 < L.ps_ci0 || L.ps_ci1 > d.in[0].c) return FragStatus::BadLayer;
    if (L.ps_expected % 4 || uint64_t(L.ps_expected) > uint64_t(L.out_elems) * 4u * hdr.n_workers) return FragStatus::BadLayer;
    if (L.ps_at % 8 || L.ps_acc_at % 8) return FragStatus::BadLayer;
    for (uint32_t i = 0; i < L.n_ps_sends && deep; ++i) {
      const uint8_t* p = L.ps_sends + frag::kSendBytes * uint64_t(i);
      if (p[5] || p[6] || p[7]) return FragStatus::BadLayer;
      const Send s = read_send(p);
      if (s.peer >= hdr.n_workers || s.peer == hdr.worker || s.layer != index || s.operand != kPsumOperand)
        return FragStatus::BadLayer;
      if (s.count == 0 || (s.count | s.offset | s.pos) % 4 || uint64_t(s.pos) + s.count > L.ps_bytes())
        return FragStatus::BadLayer;
    }
  } else if (r->reserved != 0) {
    return FragStatus::BadLayer;
  }
  if (idle) {
    if (L.out_elems || L.n_sends || L.flags || L.run_begin != L.run_end || L.run_begin < 0 || L.run_begin > total ||
        L.out_pitch)
      return FragStatus::BadLayer;
  } else {
    if (L.run_begin < 0 || L.run_end <= L.run_begin || L.run_end > total) return FragStatus::BadLayer;
    if (L.out_elems == 0 || L.out_elems > uint32_t(total)) return FragStatus::BadLayer;
  }
  int32_t ch_first = 0x7FFFFFFF, ch_last = -1;
  if (deep && !idle) {
    int64_t sum = 0, lo = total, hi = 0;
    for (uint32_t i = 0; i < L.n_regions; ++i) {
      const Region a = L.region(i);
      if (!a.valid(d.out)) return FragStatus::BadLayer;
      for (uint32_t j = 0; j < i; ++j)
        if (regions_intersect(a, L.region(j), d.out)) return FragStatus::BadLayer;
      sum += a.elems();
      a.segments(d.out, [&](int32_t b, int32_t e) {
        lo = lo < b ? lo : b;
        hi = hi > e ? hi : e;
        return true;
      });
    }
    if (sum != int64_t(L.out_elems) || lo != L.run_begin || hi != L.run_end) return FragStatus::BadLayer;
  }
  if (!idle) {
    for (uint32_t i = 0; i < L.n_regions; ++i) {
      int32_t f, l;
      const Region a = L.region(i);
      if (!deep && !a.valid(d.out)) return FragStatus::BadLayer;
      region_channels(a, d.out, &f, &l);
      ch_first = f < ch_first ? f : ch_first;
      ch_last = l > ch_last ? l : ch_last;
    }
  }

  // Data arrays: inside the data section, aligned, sized for the op.
  for (int k = 0; k < 5; ++k) {
    const uint64_t elem = (k >= 1 && k <= 3) ? 4 : 1;
    const uint64_t bytes = uint64_t(r->cnt[k]) * elem;
    if (r->cnt[k] == 0) continue;
    if (r->off[k] < data_begin || uint64_t(r->off[k]) + bytes > data_end) return FragStatus::BadLayer;
    if (r->off[k] % 4) return FragStatus::BadLayer;
  }
  const uint32_t wn = r->cnt[0], bn = r->cnt[1], mn = r->cnt[2], sn = r->cnt[3], ln = r->cnt[4];
  int64_t per = 0;  // weights per output channel
  if (d.op == QOp::Conv) per = int64_t(d.in[0].c / d.groups) * d.kh * d.kw;
  if (d.op == QOp::Gemm) per = int64_t(d.in[0].c) * d.in[0].h * d.in[0].w;
  if (partial) {
    // Weights of the share's input channels for every output channel; bias,
    // multipliers and shifts of its own output channels.
    if (L.oc_count < 0 || d.oc_base < 0 || int64_t(d.oc_base) + L.oc_count > d.out.c) return FragStatus::BadLayer;
    const int64_t k = int64_t(L.ps_ci1 - L.ps_ci0) * partial_k_per_channel(d);
    if (int64_t(wn) != k * d.out.c || int64_t(mn) != L.oc_count || int64_t(sn) != L.oc_count) return FragStatus::BadLayer;
    if ((bn != 0 && int64_t(bn) != L.oc_count) || ln != 0) return FragStatus::BadLayer;
    // Its one region: whole output channels, the ones it holds data for.
    const Region g = L.region(0);
    const int32_t P = partial_positions(d);
    if (g.kind != RegionKind::Run || g.v[0] % P || g.v[1] % P || g.v[0] / P != d.oc_base ||
        g.v[1] / P != d.oc_base + L.oc_count)
      return FragStatus::BadLayer;
  } else if (per > 0) {
    if (L.oc_count < 0 || d.oc_base < 0 || int64_t(d.oc_base) + L.oc_count > d.out.c) return FragStatus::BadLayer;
    if (int64_t(wn) != per * L.oc_count || int64_t(mn) != L.oc_count || int64_t(sn) != L.oc_count) return FragStatus::BadLayer;
    if (bn != 0 && int64_t(bn) != L.oc_count) return FragStatus::BadLayer;
    if (ln != 0) return FragStatus::BadLayer;
    // The regions' channels (Conv) or columns (Gemm) must be held.
    if (!idle && (ch_first < d.oc_base || ch_last >= d.oc_base + L.oc_count)) return FragStatus::BadLayer;
  } else {
    if (L.oc_count != 0 || d.oc_base != 0 || wn != 0 || bn != 0) return FragStatus::BadLayer;
    if (d.op == QOp::AvgPool) {
      if (!idle && (int64_t(mn) != int64_t(d.kh) * d.kw || sn != mn)) return FragStatus::BadLayer;
      if (idle && (mn != 0 || sn != 0)) return FragStatus::BadLayer;
    } else if (mn != 0 || sn != 0) {
      return FragStatus::BadLayer;
    }
    if (d.op == QOp::Lut) {
      if (ln != (idle ? 0u : 256u)) return FragStatus::BadLayer;
    } else if (ln != 0) {
      return FragStatus::BadLayer;
    }
  }
  // Per-channel shifts must be in the range the fixed-point helpers accept,
  // biases within the bound that keeps accumulators inside int32.
  if (sn && deep) {
    const uint8_t* s = base + r->off[3];
    for (uint32_t k = 0; k < sn; ++k)
      if (!shift_ok(rdi32(s + 4 * k))) return FragStatus::BadLayer;
  }
  if (bn && deep) {
    const uint8_t* b = base + r->off[1];
    for (uint32_t k = 0; k < bn; ++k) {
      const int32_t v = rdi32(b + 4 * k);
      if (v > kMaxBias || v < -kMaxBias) return FragStatus::BadLayer;
    }
  }

  // Sends: to the coordinator (this layer's OUTPUT) or to another board's
  // operand of a later layer; each a span of one region segment.
  if (deep) {
    for (uint32_t i = 0; i < L.n_sends; ++i) {
      const uint8_t* p = L.sends + frag::kSendBytes * uint64_t(i);
      if (p[5] || p[6] || p[7]) return FragStatus::BadLayer;
      const Send s = read_send(p);
      if (s.count == 0 || uint64_t(s.pos) + s.count > L.out_span_bytes()) return FragStatus::BadLayer;
      if (s.peer == kPeerCoordinator) {
        if (s.layer != index || s.operand != 0) return FragStatus::BadLayer;
      } else {
        if (s.peer >= hdr.n_workers || s.peer == hdr.worker) return FragStatus::BadLayer;
        if (s.layer <= index || s.layer >= hdr.n_layers || s.operand >= kMaxInputs) return FragStatus::BadLayer;
      }
      uint32_t pos = 0;
      if (!out_span(L, s.offset, s.count, &pos) || pos != s.pos) return FragStatus::BadLayer;
    }
  }

  // Inputs: windows inside the tensor and covering what the kernel reads;
  // received and local runs sorted, disjoint, inside the window.
  for (int k = 0; k < d.n_inputs; ++k) {
    const Dims& X = d.in[k];
    const Box& b = L.box[k];
    if (idle) {
      if (b.c0 || b.c1 || b.h0 || b.h1 || L.n_runs[k] || L.expected[k] || r->runs_off[k] || L.n_local[k] ||
          r->local_off[k] || L.box_at[k] || L.avail_from[k] || L.local_layer[k] != frag::kNoLayer)
        return FragStatus::BadLayer;
      continue;
    }
    if (b.c0 < 0 || b.c1 < b.c0 || b.c1 > X.c || b.h0 < 0 || b.h1 < b.h0 || b.h1 > X.h) return FragStatus::BadLayer;
    if (L.avail_from[k] > index) return FragStatus::BadLayer;
    if (partial) {
      // The window is the share's input channels, whole planes (or nothing).
      const bool none = L.ps_ci1 == L.ps_ci0;
      if (none ? !(b.c0 == b.c1 && b.h0 == b.h1 && b.c0 == 0 && b.h0 == 0)
               : (b.c0 != L.ps_ci0 || b.c1 != L.ps_ci1 || b.h0 != 0 || b.h1 != X.h))
        return FragStatus::BadLayer;
    } else if (deep) {
      bool inside = true;
      for (uint32_t i = 0; i < L.n_regions && inside; ++i)
        L.region(i).segments(d.out, [&](int32_t s0, int32_t s1) {
          const Box need = input_box(d, k, s0, s1);
          if (!need.empty() && (b.c0 > need.c0 || b.c1 < need.c1 || b.h0 > need.h0 || b.h1 < need.h1)) inside = false;
          return inside;
        });
      if (!inside) return FragStatus::BadLayer;
    }
    if (!array_ok(r->runs_off[k], L.n_runs[k], frag::kRunBytes, data_begin, data_end)) return FragStatus::BadLayer;
    if (!array_ok(r->local_off[k], L.n_local[k], frag::kRunBytes, data_begin, data_end)) return FragStatus::BadLayer;
    if (L.n_runs[k] == 0 && L.expected[k] != 0) return FragStatus::BadLayer;
    L.runs[k] = L.n_runs[k] ? base + r->runs_off[k] : nullptr;
    L.local[k] = L.n_local[k] ? base + r->local_off[k] : nullptr;
    if (L.n_local[k] == 0) {
      if (L.local_layer[k] != frag::kNoLayer) return FragStatus::BadLayer;
    } else if (L.local_layer[k] >= index) {
      return FragStatus::BadLayer;
    }
    if (deep) {
      int64_t sum = 0, lsum = 0;
      if (!runs_ok(L.runs[k], L.n_runs[k], X, b, &sum) || sum != int64_t(L.expected[k])) return FragStatus::BadLayer;
      if (!runs_ok(L.local[k], L.n_local[k], X, b, &lsum, false)) return FragStatus::BadLayer;
    }
  }
  // Pointers into the data section.
  d.weights = wn ? reinterpret_cast<const int8_t*>(base + r->off[0]) : nullptr;
  d.bias = bn ? reinterpret_cast<const int32_t*>(base + r->off[1]) : nullptr;
  d.mult = mn ? reinterpret_cast<const int32_t*>(base + r->off[2]) : nullptr;
  d.shift = sn ? reinterpret_cast<const int32_t*>(base + r->off[3]) : nullptr;
  d.lut = ln ? reinterpret_cast<const int8_t*>(base + r->off[4]) : nullptr;
  return FragStatus::Ok;
}

// One planned arena buffer: [at, at + bytes) in use during layers [from, to].
struct Buffer {
  uint32_t at, bytes, from, to;
};

// Calls fn(buffer) for every buffer of an active entry; false stops.
template <class F>
bool each_buffer(const FragLayer& L, F&& fn) {
  if (!L.active()) return true;
  // Partial sums: the own sums and the accumulator, used in this layer only.
  if (L.partial() && !(fn(Buffer{L.ps_at, arena_block(L.ps_bytes()), L.node, L.node}) &&
                       fn(Buffer{L.ps_acc_at, arena_block(L.out_elems * 4u), L.node, L.node})))
    return false;
  // An output computed in place lives inside a later layer's window (open()
  // checks that): no buffer of its own.
  if (!L.out_pitch && !fn(Buffer{L.out_at, arena_block(L.out_elems), L.node, L.out_until})) return false;
  for (int k = 0; k < L.desc.n_inputs; ++k) {
    const uint32_t n = uint32_t(L.box[k].elems(L.desc.in[k].w));
    if (n && !fn(Buffer{L.box_at[k], arena_block(n), L.avail_from[k], L.node})) return false;
  }
  return true;
}

// What check_layer sets besides the decoded fields (pointers into the data
// section, the partial-sum record), for an entry open() already validated:
// the same values check_layer gives it, without the checks.
void attach(const uint8_t* base, RawLayer* r) {
  FragLayer& L = r->L;
  LayerDesc& d = L.desc;
  L.regions = L.n_regions ? base + r->regions_off : nullptr;
  L.sends = L.n_sends ? base + r->sends_off : nullptr;
  if ((L.flags & kEntryPartial) && r->reserved) {
    const uint32_t so = read_ps_record(base + r->reserved, &L);
    L.ps_sends = L.n_ps_sends ? base + so : nullptr;
  }
  if (L.n_regions) {
    const int n = d.n_inputs <= kMaxInputs ? d.n_inputs : kMaxInputs;
    for (int k = 0; k < n; ++k) {
      L.runs[k] = L.n_runs[k] ? base + r->runs_off[k] : nullptr;
      L.local[k] = L.n_local[k] ? base + r->local_off[k] : nullptr;
    }
  }
  d.weights = r->cnt[0] ? reinterpret_cast<const int8_t*>(base + r->off[0]) : nullptr;
  d.bias = r->cnt[1] ? reinterpret_cast<const int32_t*>(base + r->off[1]) : nullptr;
  d.mult = r->cnt[2] ? reinterpret_cast<const int32_t*>(base + r->off[2]) : nullptr;
  d.shift = r->cnt[3] ? reinterpret_cast<const int32_t*>(base + r->off[3]) : nullptr;
  d.lut = r->cnt[4] ? reinterpret_cast<const int8_t*>(base + r->off[4]) : nullptr;
}

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

const char* frag_status_name(FragStatus s) {
  switch (s) {
    case FragStatus::Ok: return "ok";
    case FragStatus::TooShort: return "too short";
    case FragStatus::BadMagic: return "bad magic";
    case FragStatus::BadVersion: return "unsupported version";
    case FragStatus::BadSize: return "bad size";
    case FragStatus::BadChecksum: return "checksum mismatch";
    case FragStatus::BadLayer: return "bad layer entry";
  }
  return "?";
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
  return read_send(ps_sends + frag::kSendBytes * size_t(i));
}

uint32_t FragLayer::ps_bytes() const {
  if (!partial()) return 0;
  return uint32_t(desc.out.c) * uint32_t(partial_positions(desc)) * 4u;
}

Send FragLayer::send(uint32_t i) const {
  if (sends == nullptr || i >= n_sends) return Send();
  return read_send(sends + frag::kSendBytes * size_t(i));
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

uint32_t RunFinder::first_ending_after(uint32_t lo, uint32_t hi, uint32_t e0) const {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const uint8_t* p = runs_ + frag::kRunBytes * size_t(mid);
    if (uint64_t(rd32(p)) + rd32(p + 4) <= e0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

bool RunFinder::covers(uint32_t e0, uint32_t len) {
  if (n_ == 0) return false;
  // The first run that ends after e0: forward from the last one found when
  // e0 is not before it (a few steps, then a search of the rest), else a
  // search from the start.
  uint32_t i = at_;
  if (i < n_ && rd32(runs_ + frag::kRunBytes * size_t(i)) <= e0) {
    for (int step = 0; i < n_ && step < 4; ++step, ++i) {
      const uint8_t* p = runs_ + frag::kRunBytes * size_t(i);
      if (uint64_t(rd32(p)) + rd32(p + 4) > e0) break;
    }
    if (i < n_) {
      const uint8_t* p = runs_ + frag::kRunBytes * size_t(i);
      if (uint64_t(rd32(p)) + rd32(p + 4) <= e0) i = first_ending_after(i + 1, n_, e0);
    }
  } else {
    i = first_ending_after(0, n_, e0);
  }
  if (i >= n_) return false;
  at_ = i;
  const uint8_t* p = runs_ + frag::kRunBytes * size_t(i);
  const uint32_t off = rd32(p);
  return e0 >= off && uint64_t(e0) + len <= uint64_t(off) + rd32(p + 4);
}

SpanFinder::SpanFinder(const FragLayer& L) : L_(&L) {
  const Dims& d = L.desc.out;
  if (int64_t(d.h) * d.w <= 0) return;
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
  // Output tensors hold at most kMaxTensor (2^28) elements: the position of
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
    *pos = uint32_t(c - c0_) * L.out_pitch + (in_plane - uint32_t(y0_) * w);
    return true;
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
      *pos = base_[i] + (off - uint32_t(r.v[0]));
      return true;
    }
    if (c < r.v[0] || c >= r.v[1] || y < r.v[2] || y >= r.v[3] || x < r.v[4] || x >= r.v[5]) continue;
    hint_ = i;
    const bool full = r.v[4] == 0 && r.v[5] == d.w;
    // End of the segment holding off: the channel's rows, or the row.
    const uint64_t seg_end =
        full ? uint64_t(c) * hw + uint64_t(r.v[3]) * w : uint64_t(c) * hw + uint64_t(y) * w + uint32_t(r.v[5]);
    if (end > seg_end) return false;
    const uint32_t bw = uint32_t(r.v[5] - r.v[4]);
    *pos = base_[i] + (uint32_t(c - r.v[0]) * uint32_t(r.v[3] - r.v[2]) + uint32_t(y - r.v[2])) * bw +
           uint32_t(x - r.v[4]);
    return true;
  }
  return false;
}

int64_t FragLayer::position(int32_t e) const {
  uint32_t pos = 0;
  if (e < 0 || !out_span(*this, uint32_t(e), 1, &pos)) return -1;
  return pos;
}

FragStatus FragmentReader::open(const uint8_t* data, size_t size) {
  using namespace frag;
  data_ = nullptr;
  size_ = 0;
  hdr_ = FragHeader();
  if (data == nullptr || size < kHeaderBytes + 4) return FragStatus::TooShort;
  // int32 arrays are read in place: the fragment must be 4-byte aligned.
  if (reinterpret_cast<uintptr_t>(data) % 4) return FragStatus::BadSize;
  FragHeader h;
  h.magic = rd32(data + kMagic);
  if (h.magic != kFragMagic) return FragStatus::BadMagic;
  h.version = rd16(data + kVersion);
  if (h.version < kFragMinVersion || h.version > kFragVersion) return FragStatus::BadVersion;
  h.worker = rd16(data + kWorker);
  h.n_workers = rd16(data + kNWorkers);
  const uint16_t reserved = rd16(data + kReserved);
  h.plan_id = rd32(data + kPlanId);
  h.n_layers = rd32(data + kNLayers);
  h.total_bytes = rd32(data + kTotalBytes);
  h.arena_bytes = rd32(data + kArenaBytes);
  const uint32_t entry = rd32(data + kEntrySize);
  // A flash region may be larger than the fragment; never smaller.
  if (h.total_bytes < kHeaderBytes + 4 || h.total_bytes > size || h.total_bytes % 4) return FragStatus::BadSize;
  if (entry != kEntryBytes || reserved != 0) return FragStatus::BadSize;
  const uint64_t entries_end = uint64_t(kHeaderBytes) + uint64_t(h.n_layers) * kEntryBytes;
  if (entries_end + 4 > h.total_bytes) return FragStatus::BadSize;
  const uint32_t body = h.total_bytes - 4;
  if (crc32(data, body) != rd32(data + body)) return FragStatus::BadChecksum;
  if (h.n_workers == 0 || h.worker >= h.n_workers) return FragStatus::BadLayer;
  if (h.arena_bytes < kWorkerFixedArena) return FragStatus::BadLayer;
  const uint32_t space = h.arena_bytes - kWorkerFixedArena;

  RawLayer r, s;
  for (uint32_t i = 0; i < h.n_layers; ++i) {
    decode_entry(data + kHeaderBytes + uint64_t(i) * kEntryBytes, &r);
    const FragStatus st = check_layer(data, uint32_t(entries_end), body, i, h, true, &r);
    if (st != FragStatus::Ok) return st;
    const FragLayer& L = r.L;
    if (!L.active()) continue;
    if (L.out_until < i || L.out_until >= h.n_layers) return FragStatus::BadLayer;
    if (L.out_pitch) {
      // In place: one region of whole rows, and the outputs sit in the
      // window of an operand of layer out_until, each element where that
      // window holds it, the window in use from this layer on.
      int32_t c0, c1, y0, y1;
      const Dims& o = L.desc.out;
      if (L.out_until == i || !L.whole_rows(&c0, &c1, &y0, &y1)) return FragStatus::BadLayer;
      decode_entry(data + kHeaderBytes + uint64_t(L.out_until) * kEntryBytes, &s);
      if (check_layer(data, uint32_t(entries_end), body, L.out_until, h, false, &s) != FragStatus::Ok || !s.L.active())
        return FragStatus::BadLayer;
      bool home = false;
      for (int k = 0; k < s.L.desc.n_inputs && !home; ++k) {
        const Dims& x = s.L.desc.in[k];
        const Box& b = s.L.box[k];
        if (x.c != o.c || x.h != o.h || x.w != o.w || s.L.avail_from[k] > i) continue;
        if (b.c0 > c0 || b.c1 < c1 || b.h0 > y0 || b.h1 < y1) continue;
        const uint64_t pitch = uint64_t(b.h1 - b.h0) * uint32_t(o.w);
        const uint64_t at = s.L.box_at[k] + (uint64_t(c0 - b.c0) * uint32_t(b.h1 - b.h0) + uint32_t(y0 - b.h0)) * uint32_t(o.w);
        home = pitch == L.out_pitch && at == L.out_at;
      }
      if (!home) return FragStatus::BadLayer;
    }
    // Local runs come from an earlier active layer whose output is still
    // held, and each lies in one segment of its regions.
    for (int k = 0; k < L.desc.n_inputs; ++k) {
      if (L.n_local[k] == 0) continue;
      decode_entry(data + kHeaderBytes + uint64_t(L.local_layer[k]) * kEntryBytes, &s);
      if (check_layer(data, uint32_t(entries_end), body, L.local_layer[k], h, false, &s) != FragStatus::Ok)
        return FragStatus::BadLayer;
      const Dims& o = s.L.desc.out;
      const Dims& x = L.desc.in[k];
      if (!s.L.active() || s.L.out_until < i || o.c != x.c || o.h != x.h || o.w != x.w) return FragStatus::BadLayer;
      uint32_t pos = 0;
      for (uint32_t j = 0; j < L.n_local[k]; ++j) {
        const InputRun lr = L.local_run(k, j);
        if (!out_span(s.L, lr.offset, lr.count, &pos)) return FragStatus::BadLayer;
      }
    }
  }
  // The arena plan: every buffer inside the arena; buffers in use at the same
  // time never overlap; each entry's ram_bytes is the top of what is in use
  // at its layer; the header's arena is the fixed part plus the largest.
  uint32_t top = 0;
  for (uint32_t i = 0; i < h.n_layers; ++i) {
    decode_entry(data + kHeaderBytes + uint64_t(i) * kEntryBytes, &r);
    check_layer(data, uint32_t(entries_end), body, i, h, false, &r);
    bool ok = each_buffer(r.L, [&](const Buffer& a) {
      if (uint64_t(a.at) + a.bytes > space || a.at % 8 || a.from > a.to) return false;
      for (uint32_t j = i; j < h.n_layers; ++j) {
        decode_entry(data + kHeaderBytes + uint64_t(j) * kEntryBytes, &s);
        check_layer(data, uint32_t(entries_end), body, j, h, false, &s);
        bool self = j == i;
        bool clear = each_buffer(s.L, [&](const Buffer& b) {
          if (self) {  // skip a itself and the buffers before it in entry i
            self = !(b.at == a.at && b.bytes == a.bytes && b.from == a.from && b.to == a.to);
            return true;
          }
          const bool together = a.from <= b.to && b.from <= a.to;
          const bool apart = uint64_t(a.at) + a.bytes <= b.at || uint64_t(b.at) + b.bytes <= a.at;
          return !together || apart;
        });
        if (!clear) return false;
      }
      return true;
    });
    if (!ok) return FragStatus::BadLayer;
    // Top of the buffers in use at layer i, over every entry.
    uint32_t used = 0;
    for (uint32_t j = 0; j < h.n_layers; ++j) {
      decode_entry(data + kHeaderBytes + uint64_t(j) * kEntryBytes, &s);
      check_layer(data, uint32_t(entries_end), body, j, h, false, &s);
      each_buffer(s.L, [&](const Buffer& b) {
        if (b.from <= i && i <= b.to && b.at + b.bytes > used) used = b.at + b.bytes;
        return true;
      });
    }
    if (used != r.L.ram_bytes) return FragStatus::BadLayer;
    if (used > top) top = used;
  }
  if (uint64_t(h.arena_bytes) != uint64_t(kWorkerFixedArena) + top) return FragStatus::BadLayer;
  data_ = data;
  size_ = h.total_bytes;
  hdr_ = h;
  return FragStatus::Ok;
}

FragStatus FragmentReader::layer(uint32_t i, FragLayer* out) const {
  if (data_ == nullptr || out == nullptr || i >= hdr_.n_layers) return FragStatus::BadLayer;
  // open() validated every entry, including its arrays: decode and point
  // into the data section, without checking it all again per call (this is
  // on the board's per-frame path). layer_checked() is the checked form.
  RawLayer r;
  decode_entry(data_ + frag::kHeaderBytes + uint64_t(i) * frag::kEntryBytes, &r);
  attach(data_, &r);
  *out = r.L;
  return FragStatus::Ok;
}

FragStatus FragmentReader::layer_checked(uint32_t i, FragLayer* out) const {
  if (data_ == nullptr || out == nullptr || i >= hdr_.n_layers) return FragStatus::BadLayer;
  RawLayer r;
  decode_entry(data_ + frag::kHeaderBytes + uint64_t(i) * frag::kEntryBytes, &r);
  // The shallow checks again fill the pointers exactly as open() checked them.
  const uint32_t entries_end = frag::kHeaderBytes + hdr_.n_layers * frag::kEntryBytes;
  const FragStatus st = check_layer(data_, entries_end, uint32_t(size_ - 4), i, hdr_, false, &r);
  if (st != FragStatus::Ok) return st;
  *out = r.L;
  return FragStatus::Ok;
}

}  // namespace core
}  // namespace ts
