// Fragment reader: validates a fragment once, then decodes entries in place.
// A refusal names the entry, the field and the value (FragRefusal). The
// decoded view's accessors (records, spans, run lookups) are fragment_view.cpp.
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
// The rest (tensor size, geometry, shifts, fan-in) are core/op.h's
// desc_bounds and each op's check, shared with the quantised model's loader.
constexpr int64_t kMaxDim = 1 << 15;        // c, h, w each
constexpr int32_t kMaxBias = 1 << 30;

using le::get_i32;
using le::get_u16;
using le::get_u32;
inline uint16_t rd16(const uint8_t* p) { return get_u16(p); }
inline uint32_t rd32(const uint8_t* p) { return get_u32(p); }
inline int32_t rdi32(const uint8_t* p) { return get_i32(p); }



// What an entry holds besides its FragLayer fields: where its arrays and
// records lie in the fragment (attach and check_layer make pointers of them).
struct EntryOffsets {
  uint32_t off[5];  // weights, bias, mult, shift, lut
  uint32_t cnt[5];
  uint32_t runs_off[kMaxInputs];
  uint32_t local_off[kMaxInputs];
  uint32_t regions_off, sends_off;
  uint32_t reserved;  // v4: offset of the partial-sum record
};

// Input slot k from its bytes s.
void read_slot(const uint8_t* s, int k, FragLayer* out, EntryOffsets* at) {
  using namespace frag;
  FragLayer& L = *out;
  LayerDesc& d = L.desc;
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
  at->runs_off[k] = rd32(s + kRuns);
  L.n_runs[k] = rd32(s + kRuns + 4);
  L.expected[k] = rd32(s + kExpected);
  at->local_off[k] = rd32(s + kLocal);
  L.n_local[k] = rd32(s + kLocal + 4);
  L.local_layer[k] = rd32(s + kLocalLayer);
  L.box_at[k] = rd32(s + kBoxAt);
  L.avail_from[k] = rd32(s + kAvailFrom);
  L.runs[k] = nullptr;  // attach or check_layer points them
  L.local[k] = nullptr;
}

// Input slot k past the entry's operands: FragLayer's defaults.
void clear_slot(int k, FragLayer* out, EntryOffsets* at) {
  FragLayer& L = *out;
  LayerDesc& d = L.desc;
  d.in[k] = Dims();
  d.in_zp[k] = d.in_mult[k] = d.in_shift[k] = 0;
  L.box[k] = Box();
  at->runs_off[k] = at->local_off[k] = 0;
  L.n_runs[k] = L.expected[k] = L.n_local[k] = L.local_layer[k] = L.box_at[k] = L.avail_from[k] = 0;
  L.runs[k] = L.local[k] = nullptr;
}

// Reads the entry at e (the caller has checked it lies inside the fragment)
// into *out, every field of it, so that *out may hold anything before (no
// FragLayer is built or copied: on a board this runs per layer); the
// pointers into the data section are attach's or check_layer's.
void decode_entry(const uint8_t* e, FragLayer* out, EntryOffsets* at) {
  using namespace frag;
  FragLayer& L = *out;
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
  at->reserved = rd32(e + kEntryReserved);
  L.stream_step = (L.flags & kEntryStreamed) ? at->reserved : 0;
  L.ram_bytes = rd32(e + kRamBytes);
  for (int k = 0; k < 5; ++k) {
    at->off[k] = rd32(e + kArrays + 8 * k);
    at->cnt[k] = rd32(e + kArrays + 8 * k + 4);
  }
  at->regions_off = rd32(e + kRegions);
  L.n_regions = rd32(e + kRegions + 4);
  at->sends_off = rd32(e + kSends);
  L.n_sends = rd32(e + kSends + 4);
  L.regions = L.sends = L.ps_sends = nullptr;
  L.ps_ci0 = L.ps_ci1 = 0;
  L.ps_at = L.ps_acc_at = L.ps_expected = L.n_ps_sends = 0;
  d.weights = d.lut = nullptr;
  d.bias = d.mult = d.shift = nullptr;
  const int n = d.n_inputs <= kMaxInputs ? d.n_inputs : kMaxInputs;
  for (int k = 0; k < kMaxInputs; ++k) {
    if (k < n) read_slot(e + kSlots + k * kSlotBytes, k, out, at);
    else clear_slot(k, out, at);
  }
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

// A refusal naming the field at fault and the value found there.
inline Why bad(const char* field, int64_t value, const char* what = nullptr) { return Why{field, value, what}; }

// What check_layer's parts share: the fragment, its data section, the entry.
// Whether entry j of the fragment at `data` (its header read) is streamed
// (kEntryStreamed), read from its flags byte before the entry is decoded.
bool entry_streamed(const uint8_t* data, uint32_t j) {
  return (data[frag::kHeaderBytes + uint64_t(j) * frag::kEntryBytes + frag::kFlags] & kEntryStreamed) != 0;
}

struct EntryCheck {
  const uint8_t* base;
  uint32_t data_begin, data_end;  // the data section
  uint32_t index;                 // this entry's layer
  const FragHeader& hdr;
  bool deep;                      // also walk the arrays (values, records)
  FragLayer& L;                   // the entry decoded
  const EntryOffsets& at;
  bool array_ok(uint32_t off, uint32_t n, uint32_t size) const {
    return core::array_ok(off, n, size, data_begin, data_end);
  }
  // The entry before this one streams into its window (kEntryStreamed): the
  // window is a line buffer of a few rows (the cross-checks and the chain's
  // walk check it).
  bool line_buffer() const { return index > 0 && entry_streamed(base, index - 1); }
};

// Entry scalars and the descriptor: the common bounds (core/op.h
// desc_bounds), the fragment's own (every dimension within kMaxDim), and the
// op's own checks.
Why check_desc_fields(const EntryCheck& c) {
  const FragLayer& L = c.L;
  const LayerDesc& d = L.desc;
  if (!qop_known(uint8_t(d.op))) return bad("op", uint8_t(d.op), "unknown op");
  if (d.n_inputs < 1 || d.n_inputs > kMaxInputs) return bad("n_inputs", d.n_inputs);
  if (L.flags & ~kKnownEntryFlags) return bad("flags", L.flags, "unknown flag");
  if (L.node != c.index || c.index >= c.hdr.n_layers) return bad("node", L.node, "not the entry's index");
  auto within = [](const Dims& x) { return x.c <= kMaxDim && x.h <= kMaxDim && x.w <= kMaxDim; };
  static const char* const kIn[kMaxInputs] = {"in[0]", "in[1]", "in[2]", "in[3]", "in[4]", "in[5]", "in[6]", "in[7]"};
  if (!within(d.out)) return bad("out", d.out.c, "a dimension over 2^15");
  for (int k = 0; k < d.n_inputs; ++k)
    if (!within(d.in[k])) return bad(kIn[k], d.in[k].c, "a dimension over 2^15");
  const Why w = check_desc(d);
  if (w.refused()) return w;
  const OpDef* op = op_def(d.op);
  return op->model_check ? op->model_check(d) : Why{};
}

// The partial-sum record (kEntryPartial) and its sends: whole int32 values
// of the own sums.
Why check_partial_record(const EntryCheck& c) {
  FragLayer& L = c.L;
  const LayerDesc& d = L.desc;
  const uint32_t rec = c.at.reserved;
  if (L.n_regions == 0) return bad("partial", rec, "an idle entry with partial sums");
  if (!c.array_ok(rec, 1, frag::kPsBytes)) return bad("partial", rec, "outside the data section");
  const uint32_t so = read_ps_record(c.base + rec, &L);
  if (!c.array_ok(so, L.n_ps_sends, frag::kSendBytes)) return bad("ps_sends", so, "outside the data section");
  L.ps_sends = L.n_ps_sends ? c.base + so : nullptr;
  if (!partial_ok(d)) return bad("op", uint8_t(d.op), "a layer that cannot take partial sums");
  if (L.flags & kEntryRunTrigger) return bad("flags", L.flags, "a partial share waits for no RUN");
  if (L.out_pitch) return bad("out_pitch", L.out_pitch, "a partial share is not computed in place");
  if (L.n_regions != 1) return bad("n_regions", L.n_regions, "a partial share has one region");
  if (L.ps_ci0 < 0 || L.ps_ci1 < L.ps_ci0) return bad("ps_ci0", L.ps_ci0);
  if (L.ps_ci1 > partial_extent(d)) return bad("ps_ci1", L.ps_ci1);
  if (L.ps_expected % 4 || uint64_t(L.ps_expected) > uint64_t(L.out_elems) * 4u * c.hdr.n_workers)
    return bad("ps_expected", L.ps_expected);
  if (L.ps_at % 8) return bad("ps_at", L.ps_at, "not 8-byte aligned");
  if (L.ps_acc_at % 8) return bad("ps_acc_at", L.ps_acc_at, "not 8-byte aligned");
  for (uint32_t i = 0; i < L.n_ps_sends && c.deep; ++i) {
    const uint8_t* p = L.ps_sends + frag::kSendBytes * uint64_t(i);
    if (p[5] || p[6] || p[7]) return bad("ps_send.reserved", i);
    const Send s = L.ps_send(i);
    if (s.peer >= c.hdr.n_workers || s.peer == c.hdr.worker) return bad("ps_send.peer", s.peer);
    if (s.layer != c.index) return bad("ps_send.layer", s.layer);
    if (s.operand != kPsumOperand) return bad("ps_send.operand", s.operand);
    if (s.count == 0 || (s.count | s.offset | s.pos) % 4) return bad("ps_send.count", s.count, "not whole int32 values");
    if (uint64_t(s.pos) + s.count > L.ps_bytes()) return bad("ps_send.pos", s.pos, "past the own sums");
  }
  return Why{};
}

// The regions: their bounds, and (deep) that they are disjoint and add up
// to out_elems within [run_begin, run_end). Sets the channels they touch.
Why check_regions(const EntryCheck& c, int32_t* ch_first, int32_t* ch_last) {
  const FragLayer& L = c.L;
  const Dims& out = L.desc.out;
  const int32_t total = out.c * out.h * out.w;  // <= 2^28
  *ch_first = 0x7FFFFFFF;
  *ch_last = -1;
  if (L.n_regions == 0) {  // idle
    if (L.out_elems) return bad("out_elems", L.out_elems, "an idle entry computes nothing");
    if (L.n_sends) return bad("n_sends", L.n_sends, "an idle entry sends nothing");
    if (L.flags) return bad("flags", L.flags, "an idle entry has no flags");
    if (L.run_begin != L.run_end || L.run_begin < 0 || L.run_begin > total) return bad("run_begin", L.run_begin);
    if (L.out_pitch) return bad("out_pitch", L.out_pitch, "an idle entry has no output");
    return Why{};
  }
  if (L.run_begin < 0 || L.run_end <= L.run_begin || L.run_end > total) return bad("run_begin", L.run_begin);
  if (L.out_elems == 0 || L.out_elems > uint32_t(total)) return bad("out_elems", L.out_elems);
  if (c.deep) {
    int64_t sum = 0, lo = total, hi = 0;
    for (uint32_t i = 0; i < L.n_regions; ++i) {
      const Region a = L.region(i);
      if (!a.valid(out)) return bad("region", i, "outside the output or empty");
      for (uint32_t j = 0; j < i; ++j)
        if (regions_intersect(a, L.region(j), out)) return bad("region", i, "overlaps an earlier region");
      sum += a.elems();
      a.segments(out, [&](int32_t b, int32_t e) {
        lo = lo < b ? lo : b;
        hi = hi > e ? hi : e;
        return true;
      });
    }
    if (sum != int64_t(L.out_elems)) return bad("out_elems", L.out_elems, "not the regions' elements");
    if (lo != L.run_begin) return bad("run_begin", L.run_begin, "not the regions' first element");
    if (hi != L.run_end) return bad("run_end", L.run_end, "not the regions' end");
  }
  for (uint32_t i = 0; i < L.n_regions; ++i) {
    int32_t f, l;
    const Region a = L.region(i);
    if (!c.deep && !a.valid(out)) return bad("region", i, "outside the output or empty");
    region_channels(a, out, &f, &l);
    *ch_first = f < *ch_first ? f : *ch_first;
    *ch_last = l > *ch_last ? l : *ch_last;
  }
  return Why{};
}

// The names of the data arrays, as the entry's kArrays lists them.
const char* const kArrayNames[kNumArrays] = {"weights", "bias", "mult", "shift", "lut"};

// Data arrays: inside the data section, aligned, sized as the op lays them
// out (OpDef::layout) for the channels held; a partial share holds the
// weights of its input channels for every output channel. Shifts and biases
// (deep) within what the fixed-point helpers accept.
Why check_data_arrays(const EntryCheck& c, int32_t ch_first, int32_t ch_last) {
  const EntryOffsets& r = c.at;
  const FragLayer& L = c.L;
  const LayerDesc& d = L.desc;
  const bool idle = L.n_regions == 0;
  for (int k = 0; k < kNumArrays; ++k) {
    const uint64_t elem = (k == kBias || k == kMult || k == kShift) ? 4 : 1;
    if (r.cnt[k] == 0) continue;
    if (r.off[k] < c.data_begin || uint64_t(r.off[k]) + uint64_t(r.cnt[k]) * elem > c.data_end)
      return bad(kArrayNames[k], r.off[k], "outside the data section");
    if (r.off[k] % 4) return bad(kArrayNames[k], r.off[k], "not 4-byte aligned");
  }
  const OpDef* op = op_def(d.op);
  const bool partial = (L.flags & kEntryPartial) != 0;
  DataLayout want;
  if (op->per_channel_data || partial) {
    if (d.oc_base < 0 || d.oc_base > d.out.c) return bad("oc_base", d.oc_base, "outside the output channels");
    if (L.oc_count < 0 || int64_t(d.oc_base) + L.oc_count > d.out.c) return bad("oc_count", L.oc_count, "past the output channels");
    want = op->layout(d, L.oc_count);
  } else {
    if (L.oc_count != 0) return bad("oc_count", L.oc_count, "the op has no per-channel data");
    if (d.oc_base != 0) return bad("oc_base", d.oc_base, "the op has no per-channel data");
    if (!idle) want = op->layout(d, 0);
  }
  if (partial) want.n[kWeights] = partial_weights(d, L.ps_ci0, L.ps_ci1);
  for (int k = 0; k < kNumArrays; ++k)
    if (int64_t(r.cnt[k]) != want.n[k] && !(k == kBias && r.cnt[k] == 0))
      return bad(kArrayNames[k], r.cnt[k], "not the size the op lays out");
  if (partial) {
    // Its one region: whole output channels, the ones it holds data for.
    const Region g = L.region(0);
    const int32_t P = partial_positions(d);
    if (g.kind != RegionKind::Run || g.v[0] % P || g.v[1] % P || g.v[0] / P != d.oc_base ||
        g.v[1] / P != d.oc_base + L.oc_count)
      return bad("region", 0, "not the partial share's output channels");
  } else if (op->per_channel_data && !idle && (ch_first < d.oc_base || ch_last >= d.oc_base + L.oc_count)) {
    return bad("oc_count", L.oc_count, "the regions' channels are not held");
  }
  if (!c.deep) return Why{};
  const uint8_t* s = c.base + r.off[kShift];
  for (uint32_t k = 0; k < r.cnt[kShift]; ++k)
    if (!shift_ok(rdi32(s + 4 * k))) return bad("shift", rdi32(s + 4 * k), "out of range");
  const uint8_t* b = c.base + r.off[kBias];
  for (uint32_t k = 0; k < r.cnt[kBias]; ++k) {
    const int32_t v = rdi32(b + 4 * k);
    if (v > kMaxBias || v < -kMaxBias) return bad("bias", v, "too large for int32 accumulation");
  }
  return Why{};
}

// Sends (deep): to the coordinator (this layer's OUTPUT) or to another
// board's operand of a later layer; each a span of one region segment.
Why check_sends(const EntryCheck& c) {
  const FragLayer& L = c.L;
  for (uint32_t i = 0; i < L.n_sends && c.deep; ++i) {
    const uint8_t* p = L.sends + frag::kSendBytes * uint64_t(i);
    if (p[5] || p[6] || p[7]) return bad("send.reserved", i);
    const Send s = L.send(i);
    if (s.count == 0) return bad("send.count", s.count);
    if (uint64_t(s.pos) + s.count > L.out_span_bytes()) return bad("send.pos", s.pos, "past the outputs");
    if (s.peer == kPeerCoordinator) {
      if (s.layer != c.index) return bad("send.layer", s.layer, "an OUTPUT of another layer");
      if (s.operand != 0) return bad("send.operand", s.operand);
    } else {
      if (s.peer >= c.hdr.n_workers || s.peer == c.hdr.worker) return bad("send.peer", s.peer);
      if (s.layer <= c.index || s.layer >= c.hdr.n_layers) return bad("send.layer", s.layer);
      if (s.operand >= kMaxInputs) return bad("send.operand", s.operand);
    }
    uint32_t pos = 0;
    if (!L.span(s.offset, s.count, &pos) || pos != s.pos) return bad("send.offset", s.offset, "not where the outputs sit");
  }
  return Why{};
}

// Input slot k of an idle entry: nothing held, nothing received.
Why check_idle_slot(const EntryCheck& c, int k) {
  const FragLayer& L = c.L;
  const EntryOffsets& r = c.at;
  const Box& b = L.box[k];
  if (b.c0 || b.c1 || b.h0 || b.h1) return bad("box", b.c1, "an idle entry holds no window");
  if (L.n_runs[k] || r.runs_off[k]) return bad("runs", L.n_runs[k], "an idle entry receives nothing");
  if (L.expected[k]) return bad("expected", L.expected[k], "an idle entry receives nothing");
  if (L.n_local[k] || r.local_off[k]) return bad("local", L.n_local[k], "an idle entry copies nothing");
  if (L.box_at[k]) return bad("box_at", L.box_at[k], "an idle entry holds no window");
  if (L.avail_from[k]) return bad("avail_from", L.avail_from[k], "an idle entry takes no frames");
  if (L.local_layer[k] != frag::kNoLayer) return bad("local_layer", L.local_layer[k], "an idle entry copies nothing");
  return Why{};
}

// Input slot k of an active entry: a window inside the tensor covering what
// the kernel reads; received and local runs sorted, disjoint, inside it.
Why check_active_slot(const EntryCheck& c, int k) {
  const EntryOffsets& r = c.at;
  FragLayer& L = c.L;
  const LayerDesc& d = L.desc;
  const Dims& X = d.in[k];
  const Box& b = L.box[k];
  if (b.c0 < 0 || b.c1 < b.c0 || b.c1 > X.c) return bad("box.c1", b.c1, "outside the operand");
  if (b.h0 < 0 || b.h1 < b.h0 || b.h1 > X.h) return bad("box.h1", b.h1, "outside the operand");
  if (L.avail_from[k] > c.index) return bad("avail_from", L.avail_from[k], "after the layer");
  if (L.flags & kEntryPartial) {
    // The window is the share's input channels, whole planes, or rows of
    // every channel holding its own; or nothing (core/partial.h).
    if (!partial_window_ok(d, L.ps_ci0, L.ps_ci1, b)) return bad("box.c0", b.c0, "not the partial share's input window");
  } else if (c.deep && !(k == 0 && c.line_buffer())) {
    bool inside = true;
    for (uint32_t i = 0; i < L.n_regions && inside; ++i)
      L.region(i).segments(d.out, [&](int32_t s0, int32_t s1) {
        const Box need = input_box(d, k, s0, s1);
        if (!need.empty() && (b.c0 > need.c0 || b.c1 < need.c1 || b.h0 > need.h0 || b.h1 < need.h1)) inside = false;
        return inside;
      });
    if (!inside) return bad("box", b.c1 - b.c0, "does not cover what the op reads");
  }
  if (!c.array_ok(r.runs_off[k], L.n_runs[k], frag::kRunBytes)) return bad("runs", r.runs_off[k], "outside the data section");
  if (!c.array_ok(r.local_off[k], L.n_local[k], frag::kRunBytes)) return bad("local", r.local_off[k], "outside the data section");
  if (L.n_runs[k] == 0 && L.expected[k] != 0) return bad("expected", L.expected[k], "no runs to receive");
  L.runs[k] = L.n_runs[k] ? c.base + r.runs_off[k] : nullptr;
  L.local[k] = L.n_local[k] ? c.base + r.local_off[k] : nullptr;
  if (L.view(k) && (L.local_layer[k] <= c.index || L.local_layer[k] >= c.hdr.n_layers || b.c0 == b.c1 || b.h0 == b.h1))
    return bad("local_layer", L.local_layer[k], "a view's host is not a later layer");
  if (L.n_local[k] != 0 && L.local_layer[k] >= c.index) return bad("local_layer", L.local_layer[k], "not an earlier layer");
  if (c.deep) {
    int64_t sum = 0, lsum = 0;
    if (!runs_ok(L.runs[k], L.n_runs[k], X, b, &sum)) return bad("runs", L.n_runs[k], "not sorted, disjoint, in the window");
    if (sum != int64_t(L.expected[k])) return bad("expected", L.expected[k], "not the runs' elements");
    if (!runs_ok(L.local[k], L.n_local[k], X, b, &lsum, false)) return bad("local", L.n_local[k], "not sorted, disjoint, in the window");
  }
  return Why{};
}

// Checks entry `index` (decoded into L, its offsets `at`) and points its
// fields into the data section. `deep` also walks the arrays (shift values,
// regions, sends, runs); open() does, the per-layer decode after it does not
// need to.
Why check_layer(const uint8_t* base, uint32_t data_begin, uint32_t data_end, uint32_t index, const FragHeader& hdr,
                bool deep, FragLayer& L, const EntryOffsets& at) {
  const EntryCheck c{base, data_begin, data_end, index, hdr, deep, L, at};
  LayerDesc& d = L.desc;
  Why w = check_desc_fields(c);
  if (w.refused()) return w;
  if (!c.array_ok(at.regions_off, L.n_regions, frag::kRegionBytes)) return bad("regions", at.regions_off, "outside the data section");
  if (!c.array_ok(at.sends_off, L.n_sends, frag::kSendBytes)) return bad("sends", at.sends_off, "outside the data section");
  L.regions = L.n_regions ? base + at.regions_off : nullptr;
  L.sends = L.n_sends ? base + at.sends_off : nullptr;
  const bool partial = (L.flags & kEntryPartial) != 0;
  if (L.streamed()) {
    if (partial) return bad("flags", L.flags, "a streamed entry has no partial sums");
    if (hdr.version < 4) return bad("flags", L.flags, "streamed entries need format version 4");
    if (L.stream_step == 0 || L.stream_step > 0xFFFF) return bad("stream_step", L.stream_step);
    if (L.n_regions == 0) return bad("flags", L.flags, "an idle entry does not stream");
    if (!L.out_pitch) return bad("out_pitch", 0, "a streamed entry is computed in place");
    if (L.n_sends) return bad("n_sends", L.n_sends, "a streamed entry sends nothing");
    if (L.flags & kEntryRunTrigger) return bad("flags", L.flags, "a streamed entry waits for no RUN");
  } else if (partial != (at.reserved != 0)) {
    return bad("partial", at.reserved, "set exactly when the partial flag is");
  }
  if (partial && hdr.version < 4) return bad("flags", L.flags, "partial sums need format version 4");
  if (partial && (w = check_partial_record(c)).refused()) return w;
  int32_t ch_first = 0, ch_last = -1;
  if ((w = check_regions(c, &ch_first, &ch_last)).refused()) return w;
  if ((w = check_data_arrays(c, ch_first, ch_last)).refused()) return w;
  if ((w = check_sends(c)).refused()) return w;
  for (int k = 0; k < d.n_inputs; ++k) {
    w = L.n_regions == 0 ? check_idle_slot(c, k) : check_active_slot(c, k);
    if (w.refused()) return w;
  }
  // Pointers into the data section.
  d.weights = at.cnt[kWeights] ? reinterpret_cast<const int8_t*>(base + at.off[kWeights]) : nullptr;
  d.bias = at.cnt[kBias] ? reinterpret_cast<const int32_t*>(base + at.off[kBias]) : nullptr;
  d.mult = at.cnt[kMult] ? reinterpret_cast<const int32_t*>(base + at.off[kMult]) : nullptr;
  d.shift = at.cnt[kShift] ? reinterpret_cast<const int32_t*>(base + at.off[kShift]) : nullptr;
  d.lut = at.cnt[kLut] ? reinterpret_cast<const int8_t*>(base + at.off[kLut]) : nullptr;
  return Why{};
}

// One planned arena buffer: [at, at + bytes) in use during layers [from, to].
struct Buffer {
  uint32_t at, bytes, from, to;
};

// Calls fn(buffer) for every buffer of an active entry; false stops.
// `first`: the first layer of the streamed chain L ends (core/stream.h), or
// L's own: a chain's last layer's outputs are made when its first runs.
template <class F>
bool each_buffer(const FragLayer& L, uint32_t first, F&& fn) {
  if (!L.active()) return true;
  // Partial sums: the own sums and the accumulator, used in this layer only.
  if (L.partial() && !(fn(Buffer{L.ps_at, arena_block(L.ps_bytes()), L.node, L.node}) &&
                       fn(Buffer{L.ps_acc_at, arena_block(L.out_elems * 4u), L.node, L.node})))
    return false;
  // An output computed in place lives inside a later layer's window (open()
  // checks that): no buffer of its own.
  if (!L.out_pitch && !fn(Buffer{L.out_at, arena_block(L.out_elems), first < L.node ? first : L.node, L.out_until}))
    return false;
  for (int k = 0; k < L.desc.n_inputs; ++k) {
    const uint32_t n = uint32_t(L.box[k].elems(L.desc.in[k].w));
    if (n && !L.view(k) && !fn(Buffer{L.box_at[k], arena_block(n), L.avail_from[k], L.node})) return false;
  }
  return true;
}

// What check_layer sets besides the decoded fields (pointers into the data
// section, the partial-sum record), for an entry open() already validated:
// the same values check_layer gives it, without the checks.
void attach(const uint8_t* base, FragLayer& L, const EntryOffsets& at) {
  LayerDesc& d = L.desc;
  L.regions = L.n_regions ? base + at.regions_off : nullptr;
  L.sends = L.n_sends ? base + at.sends_off : nullptr;
  if ((L.flags & kEntryPartial) && at.reserved) {
    const uint32_t so = read_ps_record(base + at.reserved, &L);
    L.ps_sends = L.n_ps_sends ? base + so : nullptr;
  }
  if (L.n_regions) {
    const int n = d.n_inputs <= kMaxInputs ? d.n_inputs : kMaxInputs;
    for (int k = 0; k < n; ++k) {
      L.runs[k] = L.n_runs[k] ? base + at.runs_off[k] : nullptr;
      L.local[k] = L.n_local[k] ? base + at.local_off[k] : nullptr;
    }
  }
  d.weights = at.cnt[0] ? reinterpret_cast<const int8_t*>(base + at.off[0]) : nullptr;
  d.bias = at.cnt[1] ? reinterpret_cast<const int32_t*>(base + at.off[1]) : nullptr;
  d.mult = at.cnt[2] ? reinterpret_cast<const int32_t*>(base + at.off[2]) : nullptr;
  d.shift = at.cnt[3] ? reinterpret_cast<const int32_t*>(base + at.off[3]) : nullptr;
  d.lut = at.cnt[4] ? reinterpret_cast<const int8_t*>(base + at.off[4]) : nullptr;
}

}  // namespace

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

// The checks across entries open() makes once every entry passed its own:
// where in-place outputs and local runs come from, and the arena plan.
struct CrossCheck {
  const uint8_t* data;
  uint32_t entries_end, body;
  const FragHeader& h;
  // Entry j decoded and given its pointers (it passed check_layer before).
  void entry(uint32_t j, FragLayer* L) const {
    EntryOffsets at;
    decode_entry(data + frag::kHeaderBytes + uint64_t(j) * frag::kEntryBytes, L, &at);
    check_layer(data, entries_end, body, j, h, false, *L, at);
  }
  // The first entry of the streamed chain that entry j is in (j if none).
  uint32_t chain_first(uint32_t j) const {
    while (j > 0 && entry_streamed(data, j - 1)) --j;
    return j;
  }
};

// An output computed in place (out_pitch): one region of whole rows, and the
// outputs sit in the window of an operand of layer out_until, each element
// where that window holds it, the window in use from this layer on.
Why check_in_place(const CrossCheck& x, uint32_t i, const FragLayer& L) {
  int32_t c0, c1, y0, y1;
  const Dims& o = L.desc.out;
  if (L.out_until == i) return bad("out_until", L.out_until, "in place needs a later reader");
  if (!L.whole_rows(&c0, &c1, &y0, &y1)) return bad("out_pitch", L.out_pitch, "in place needs whole rows");
  if (L.streamed() && L.out_until != i + 1) return bad("out_until", L.out_until, "a streamed entry's reader is the next");
  FragLayer s;
  x.entry(L.out_until, &s);
  if (!s.active()) return bad("out_until", L.out_until, "an idle layer");
  if (L.streamed()) {  // the line buffer: the reader's one window, from the share's first row
    const Box& b = s.box[0];
    const uint64_t pitch = uint64_t(b.h1 - b.h0) * uint32_t(o.w);
    const uint64_t at = s.box_at[0] + uint64_t(c0 - b.c0) * pitch;
    const Dims& in = s.desc.in[0];
    if (s.desc.n_inputs != 1 || in.c != o.c || in.h != o.h || in.w != o.w || s.avail_from[0] > i)
      return bad("out_until", L.out_until, "the reader of a streamed entry reads it alone");
    if (b.c0 > c0 || b.c1 < c1 || b.h0 != y0 || b.h1 <= b.h0 || pitch != L.out_pitch || at != L.out_at)
      return bad("out_at", L.out_at, "not the line buffer of the next entry");
    return Why{};
  }
  for (int k = 0; k < s.desc.n_inputs; ++k) {
    const Dims& in = s.desc.in[k];
    const Box& b = s.box[k];
    if (in.c != o.c || in.h != o.h || in.w != o.w || s.avail_from[k] > i) continue;
    if (b.c0 > c0 || b.c1 < c1 || b.h0 > y0 || b.h1 < y1) continue;
    const uint64_t pitch = uint64_t(b.h1 - b.h0) * uint32_t(o.w);
    const uint64_t at =
        s.box_at[k] + (uint64_t(c0 - b.c0) * uint32_t(b.h1 - b.h0) + uint32_t(y0 - b.h0)) * uint32_t(o.w);
    if (pitch == L.out_pitch && at == L.out_at) return Why{};
  }
  return bad("out_at", L.out_at, "not inside a window of layer out_until");
}

// A view lies inside a window of its host (a later active layer) that is not
// a view itself and is in use from no later than the view.
Why check_views(const CrossCheck& x, const FragLayer& L) {
  FragLayer s;
  for (int k = 0; k < L.desc.n_inputs; ++k) {
    if (!L.view(k)) continue;
    x.entry(L.local_layer[k], &s);
    const uint64_t at = L.box_at[k], end = at + arena_block(uint32_t(L.box[k].elems(L.desc.in[k].w)));
    bool inside = false;
    for (int j = 0; s.active() && j < s.desc.n_inputs && !inside; ++j) {
      const uint64_t n = arena_block(uint32_t(s.box[j].elems(s.desc.in[j].w)));
      inside = n && !s.view(j) && s.avail_from[j] <= L.avail_from[k] && at >= s.box_at[j] && end <= s.box_at[j] + n;
    }
    if (!inside) return bad("box_at", L.box_at[k], "a view outside its host's windows");
  }
  return Why{};
}

// Local runs come from an earlier active layer whose output is still held,
// and each lies in one segment of its regions.
Why check_local_runs(const CrossCheck& x, uint32_t i, const FragLayer& L) {
  FragLayer s;
  for (int k = 0; k < L.desc.n_inputs; ++k) {
    if (L.n_local[k] == 0) continue;
    x.entry(L.local_layer[k], &s);
    const Dims& o = s.desc.out;
    const Dims& in = L.desc.in[k];
    if (!s.active()) return bad("local_layer", L.local_layer[k], "an idle layer");
    if (s.out_until < i) return bad("local_layer", L.local_layer[k], "its output is no longer held");
    if (o.c != in.c || o.h != in.h || o.w != in.w) return bad("local_layer", L.local_layer[k], "another shape");
    uint32_t pos = 0;
    for (uint32_t j = 0; j < L.n_local[k]; ++j) {
      const InputRun lr = L.local_run(k, j);
      if (!s.span(lr.offset, lr.count, &pos)) return bad("local", lr.offset, "not in one output segment");
    }
  }
  return Why{};
}

// The arena plan at layer i: every buffer of entry i inside the arena
// (`space` bytes after the fixed part); buffers in use at the same time never
// overlap; ram_bytes is the top of what is in use at layer i over every
// entry. Sets *used to it.
Why check_arena_at(const CrossCheck& x, uint32_t i, uint32_t space, uint32_t* used) {
  FragLayer r, s;
  x.entry(i, &r);
  const char* fault = nullptr;
  uint32_t at = 0;
  each_buffer(r, x.chain_first(i), [&](const Buffer& a) {
    at = a.at;
    if (uint64_t(a.at) + a.bytes > space) fault = "a buffer past the arena";
    else if (a.at % 8) fault = "a buffer not 8-byte aligned";
    else if (a.from > a.to) fault = "a buffer used before it is filled";
    for (uint32_t j = i; j < x.h.n_layers && !fault; ++j) {
      x.entry(j, &s);
      bool self = j == i;
      const bool clear = each_buffer(s, x.chain_first(j), [&](const Buffer& b) {
        if (self) {  // skip a itself and the buffers before it in entry i
          self = !(b.at == a.at && b.bytes == a.bytes && b.from == a.from && b.to == a.to);
          return true;
        }
        const bool together = a.from <= b.to && b.from <= a.to;
        const bool apart = uint64_t(a.at) + a.bytes <= b.at || uint64_t(b.at) + b.bytes <= a.at;
        return !together || apart;
      });
      if (!clear) fault = "buffers in use together overlap";
    }
    return fault == nullptr;
  });
  if (fault) return bad("arena offset", at, fault);
  // Top of the buffers in use at layer i, over every entry.
  *used = 0;
  for (uint32_t j = 0; j < x.h.n_layers; ++j) {
    x.entry(j, &s);
    each_buffer(s, x.chain_first(j), [&](const Buffer& b) {
      if (b.from <= i && i <= b.to && b.at + b.bytes > *used) *used = b.at + b.bytes;
      return true;
    });
  }
  if (*used != r.ram_bytes) return bad("ram_bytes", r.ram_bytes, "not the top of the buffers in use");
  return Why{};
}

// Reads the header into *h, checking size, version, checksum.
FragStatus read_header(const uint8_t* data, size_t size, FragHeader* h, FragRefusal* why) {
  using namespace frag;
  auto no = [&](FragStatus st, const char* field, int64_t v) {
    *why = FragRefusal{-1, field, v, nullptr};
    return st;
  };
  if (data == nullptr || size < kHeaderBytes + 4) return no(FragStatus::TooShort, "size", int64_t(size));
  // int32 arrays are read in place: the fragment must be 4-byte aligned.
  if (reinterpret_cast<uintptr_t>(data) % 4) return no(FragStatus::BadSize, "address", int64_t(reinterpret_cast<uintptr_t>(data) % 4));
  h->magic = rd32(data + kMagic);
  if (h->magic != kFragMagic) return no(FragStatus::BadMagic, "magic", h->magic);
  h->version = rd16(data + kVersion);
  if (h->version < kFragMinVersion || h->version > kFragVersion) return no(FragStatus::BadVersion, "version", h->version);
  h->worker = rd16(data + kWorker);
  h->n_workers = rd16(data + kNWorkers);
  const uint16_t reserved = rd16(data + kReserved);
  h->plan_id = rd32(data + kPlanId);
  h->n_layers = rd32(data + kNLayers);
  h->total_bytes = rd32(data + kTotalBytes);
  h->arena_bytes = rd32(data + kArenaBytes);
  const uint32_t entry = rd32(data + kEntrySize);
  // A flash region may be larger than the fragment; never smaller.
  if (h->total_bytes < kHeaderBytes + 4 || h->total_bytes > size || h->total_bytes % 4)
    return no(FragStatus::BadSize, "total_bytes", h->total_bytes);
  if (entry != kEntryBytes) return no(FragStatus::BadSize, "entry_size", entry);
  if (reserved != 0) return no(FragStatus::BadSize, "reserved", reserved);
  const uint64_t entries_end = uint64_t(kHeaderBytes) + uint64_t(h->n_layers) * kEntryBytes;
  if (entries_end + 4 > h->total_bytes) return no(FragStatus::BadSize, "n_layers", h->n_layers);
  const uint32_t body = h->total_bytes - 4;
  if (crc32(data, body) != rd32(data + body)) return no(FragStatus::BadChecksum, "crc32", rd32(data + body));
  if (h->n_workers == 0 || h->worker >= h->n_workers) return no(FragStatus::BadLayer, "worker", h->worker);
  if (h->arena_bytes < kWorkerFixedArena) return no(FragStatus::BadLayer, "arena_bytes", h->arena_bytes);
  return FragStatus::Ok;
}

}  // namespace

FragStatus FragmentReader::open(const uint8_t* data, size_t size) {
  using namespace frag;
  data_ = nullptr;
  size_ = 0;
  hdr_ = FragHeader();
  why_ = FragRefusal();
  FragHeader h;
  const FragStatus hs = read_header(data, size, &h, &why_);
  if (hs != FragStatus::Ok) return hs;
  const uint32_t entries_end = uint32_t(kHeaderBytes + uint64_t(h.n_layers) * kEntryBytes);
  const uint32_t body = h.total_bytes - 4;
  const uint32_t space = h.arena_bytes - kWorkerFixedArena;
  auto refuse = [&](uint32_t layer, const Why& w) {
    why_ = FragRefusal{int64_t(layer), w.field, w.value, w.what};
    return FragStatus::BadLayer;
  };
  const CrossCheck x{data, entries_end, body, h};
  FragLayer L;
  EntryOffsets at;
  for (uint32_t i = 0; i < h.n_layers; ++i) {
    decode_entry(data + kHeaderBytes + uint64_t(i) * kEntryBytes, &L, &at);
    Why w = check_layer(data, entries_end, body, i, h, true, L, at);
    if (w.refused()) return refuse(i, w);
    if (!L.active()) continue;
    if (L.out_until < i || L.out_until >= h.n_layers) return refuse(i, bad("out_until", L.out_until));
    if (L.out_pitch && (w = check_in_place(x, i, L)).refused()) return refuse(i, w);
    if ((w = check_local_runs(x, i, L)).refused() || (w = check_views(x, L)).refused()) return refuse(i, w);
  }
  // The arena plan; the header's arena is the fixed part plus the largest
  // layer's top.
  uint32_t top = 0;
  for (uint32_t i = 0; i < h.n_layers; ++i) {
    uint32_t used = 0;
    const Why w = check_arena_at(x, i, space, &used);
    if (w.refused()) return refuse(i, w);
    if (used > top) top = used;
  }
  if (uint64_t(h.arena_bytes) != uint64_t(kWorkerFixedArena) + top) {
    why_ = FragRefusal{-1, "arena_bytes", h.arena_bytes, "not the fixed part plus the largest layer's top"};
    return FragStatus::BadLayer;
  }
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
  EntryOffsets at;
  decode_entry(data_ + frag::kHeaderBytes + uint64_t(i) * frag::kEntryBytes, out, &at);
  attach(data_, *out, at);
  return FragStatus::Ok;
}

FragStatus FragmentReader::layer_checked(uint32_t i, FragLayer* out) const {
  if (data_ == nullptr || out == nullptr || i >= hdr_.n_layers) return FragStatus::BadLayer;
  EntryOffsets at;
  decode_entry(data_ + frag::kHeaderBytes + uint64_t(i) * frag::kEntryBytes, out, &at);
  // The shallow checks again fill the pointers exactly as open() checked them.
  const uint32_t entries_end = frag::kHeaderBytes + hdr_.n_layers * frag::kEntryBytes;
  if (check_layer(data_, entries_end, uint32_t(size_ - 4), i, hdr_, false, *out, at).refused()) return FragStatus::BadLayer;
  return FragStatus::Ok;
}

size_t format_refusal(const FragRefusal& why, char* buf, size_t cap, bool with_what) {
  if (buf == nullptr || cap == 0) return 0;
  size_t n = 0;
  auto put = [&](const char* t) {
    for (; t && *t && n + 1 < cap; ++t) buf[n++] = *t;
  };
  auto num = [&](int64_t v) {
    char d[24];
    int k = 0;
    uint64_t u = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    do d[k++] = char('0' + u % 10); while ((u /= 10) && k < 23);
    if (v < 0) put("-");
    while (k > 0 && n + 1 < cap) buf[n++] = d[--k];
  };
  if (why.field) {
    if (why.layer >= 0) {
      put("layer ");
      num(why.layer);
      put(" ");
    }
    put(why.field);
    put(" = ");
    num(why.value);
    if (with_what && why.what) {
      put(" (");
      put(why.what);
      put(")");
    }
  }
  buf[n] = 0;
  return n;
}

size_t fragment_invalid_text(FragStatus s, const FragRefusal& why, char* buf, size_t cap) {
  if (buf == nullptr || cap == 0) return 0;
  const char* head = s == FragStatus::BadLayer && why.field ? "fragment invalid: " : "fragment invalid";
  size_t n = 0;
  for (; head[n] && n + 1 < cap; ++n) buf[n] = head[n];
  buf[n] = 0;
  if (s != FragStatus::BadLayer || !why.field) return n;
  return n + format_refusal(why, buf + n, cap - n, false);
}

}  // namespace core
}  // namespace ts
