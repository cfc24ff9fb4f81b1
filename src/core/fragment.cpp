// Fragment reader: validates a fragment once, then decodes entries in place.
//
// Byte layout (the writer is src/plan/fragment_writer.cpp; docs/planner.md
// has the full table). Little-endian, offsets from the fragment start:
//
//   header (32): magic u32, version u16, worker u16, n_workers u16,
//                reserved u16 (0), plan_id u32, n_layers u32, total_bytes u32,
//                arena_bytes u32, entry_bytes u32 (568)
//   entries (568 each), data section, CRC-32 u32 over everything before it.
//
// Nothing is trusted: every offset, count and geometry field is checked with
// 64-bit arithmetic before it is used, so truncated, corrupted or hostile
// input yields a status and never an out-of-bounds read. A layer that passes
// is also safe to hand to compute_range() with windows built from its boxes:
// shapes agree with the op, per-channel arrays have the sizes the kernels
// index, shifts are in the range the fixed-point helpers accept, and every
// input run lies inside its box.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#include "core/fragment.h"

#include "core/crc32.h"
#include "core/op.h"

namespace ts {
namespace core {

namespace {

constexpr uint32_t kHeaderBytes = kFragHeaderBytes;
constexpr uint32_t kEntryBytes = kFragLayerBytes;
constexpr uint32_t kSlotBytes = kFragInputSlotBytes;
constexpr uint32_t kSlotsAt = kFragSlotsAt;

// Bounds that keep every kernel computation inside int32 and every size
// inside a 32-bit board's address space.
constexpr int64_t kMaxDim = 1 << 15;        // c, h, w each
constexpr int64_t kMaxTensor = 1 << 28;     // elements of one tensor
constexpr int32_t kMaxGeom = 1 << 10;       // kernel, stride, dilation, pad
// Conv/Gemm fan-in: kMaxFanIn (core/op.h), checked by each op's validate.
constexpr int32_t kMaxBias = 1 << 30;

inline uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline int32_t rdi32(const uint8_t* p) { return int32_t(rd32(p)); }

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
};

// Reads entry i (the caller has checked it lies inside the fragment).
void decode_entry(const uint8_t* e, RawLayer* r) {
  FragLayer& L = r->L;
  L = FragLayer();
  LayerDesc& d = L.desc;
  d.op = QOp(e[0]);
  d.n_inputs = e[1];
  d.count_include_pad = e[2];
  L.node = rd32(e + 4);
  L.run_begin = rdi32(e + 8);
  L.run_end = rdi32(e + 12);
  d.oc_base = rdi32(e + 16);
  L.oc_count = rdi32(e + 20);
  int32_t* f[] = {&d.out.c, &d.out.h, &d.out.w, &d.out_zp, &d.act_min, &d.act_max, &d.kh,    &d.kw,     &d.sh,      &d.sw,
                  &d.dh,    &d.dw,    &d.pad_t, &d.pad_l,  &d.pad_b,   &d.pad_r,   &d.groups, &d.left_shift, &d.out_mult, &d.out_shift};
  for (int k = 0; k < 20; ++k) *f[k] = rdi32(e + 24 + 4 * k);
  L.ram_bytes = rd32(e + 104);
  for (int k = 0; k < 5; ++k) {
    r->off[k] = rd32(e + 108 + 8 * k);
    r->cnt[k] = rd32(e + 112 + 8 * k);
  }
  const int n = d.n_inputs <= kMaxInputs ? d.n_inputs : kMaxInputs;
  for (int k = 0; k < kMaxInputs; ++k) r->runs_off[k] = 0;
  for (int k = 0; k < n; ++k) {
    const uint8_t* s = e + kSlotsAt + k * kSlotBytes;
    d.in[k].c = rdi32(s + 0);
    d.in[k].h = rdi32(s + 4);
    d.in[k].w = rdi32(s + 8);
    d.in_zp[k] = rdi32(s + 12);
    d.in_mult[k] = rdi32(s + 16);
    d.in_shift[k] = rdi32(s + 20);
    L.box[k].c0 = rdi32(s + 24);
    L.box[k].c1 = rdi32(s + 28);
    L.box[k].h0 = rdi32(s + 32);
    L.box[k].h1 = rdi32(s + 36);
    r->runs_off[k] = rd32(s + 40);
    L.n_runs[k] = rd32(s + 44);
    L.expected[k] = rd32(s + 48);
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

// `deep` also walks the arrays (shift values, input runs); open() does, the
// per-layer decode after it does not need to.
FragStatus check_layer(const uint8_t* base, uint32_t data_begin, uint32_t data_end, uint32_t index,
                       uint32_t n_layers, bool deep, RawLayer* r, uint32_t* arena_max) {
  FragLayer& L = r->L;
  LayerDesc& d = L.desc;
  if (uint8_t(d.op) < 1 || uint8_t(d.op) > 10) return FragStatus::BadLayer;
  if (d.n_inputs < 1 || d.n_inputs > kMaxInputs) return FragStatus::BadLayer;
  if (d.count_include_pad > 1) return FragStatus::BadLayer;
  if (L.node != index || index >= n_layers) return FragStatus::BadLayer;
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

  // The run.
  const int32_t total = d.out.c * d.out.h * d.out.w;  // <= kMaxTensor
  if (L.run_begin < 0 || L.run_end < L.run_begin || L.run_end > total) return FragStatus::BadLayer;
  const bool idle = L.run_begin == L.run_end;

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
  if (per > 0) {
    if (L.oc_count < 0 || d.oc_base < 0 || int64_t(d.oc_base) + L.oc_count > d.out.c) return FragStatus::BadLayer;
    if (int64_t(wn) != per * L.oc_count || int64_t(mn) != L.oc_count || int64_t(sn) != L.oc_count) return FragStatus::BadLayer;
    if (bn != 0 && int64_t(bn) != L.oc_count) return FragStatus::BadLayer;
    if (ln != 0) return FragStatus::BadLayer;
    if (!idle) {
      // The run's channels (Conv) or columns (Gemm) must be held.
      const int32_t hw = d.out.h * d.out.w;
      const int32_t first = d.op == QOp::Conv ? L.run_begin / hw : L.run_begin;
      const int32_t last = d.op == QOp::Conv ? (L.run_end - 1) / hw : L.run_end - 1;
      if (first < d.oc_base || last >= d.oc_base + L.oc_count) return FragStatus::BadLayer;
    }
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

  // Inputs: boxes inside the tensor and covering what the kernel reads, runs
  // sorted, disjoint, inside the box, summing to the expected count.
  uint64_t ram = idle ? 0 : arena_block(uint32_t(L.run_end - L.run_begin));
  for (int k = 0; k < d.n_inputs; ++k) {
    const Dims& X = d.in[k];
    const Box& b = L.box[k];
    if (idle) {
      if (b.c0 || b.c1 || b.h0 || b.h1 || L.n_runs[k] || L.expected[k] || r->runs_off[k]) return FragStatus::BadLayer;
      continue;
    }
    if (b.c0 < 0 || b.c1 < b.c0 || b.c1 > X.c || b.h0 < 0 || b.h1 < b.h0 || b.h1 > X.h) return FragStatus::BadLayer;
    const Box need = input_box(d, k, L.run_begin, L.run_end);
    if (!need.empty() && (b.c0 > need.c0 || b.c1 < need.c1 || b.h0 > need.h0 || b.h1 < need.h1))
      return FragStatus::BadLayer;
    ram += arena_block(uint32_t(b.elems(X.w)));
    const uint32_t n = L.n_runs[k];
    if (n == 0) {
      if (L.expected[k] != 0 || r->runs_off[k] != 0) return FragStatus::BadLayer;
      continue;
    }
    const uint32_t ro = r->runs_off[k];
    if (ro < data_begin || ro % 4 || uint64_t(ro) + uint64_t(n) * 8 > data_end) return FragStatus::BadLayer;
    const int64_t size = int64_t(X.c) * X.h * X.w;
    int64_t prev_end = -1, sum = 0;
    for (uint32_t i = 0; deep && i < n; ++i) {
      const uint32_t off = rd32(base + ro + 8 * uint64_t(i));
      const uint32_t cnt = rd32(base + ro + 8 * uint64_t(i) + 4);
      if (cnt == 0 || int64_t(off) + cnt > size) return FragStatus::BadLayer;
      if (prev_end >= 0 && int64_t(off) <= prev_end) return FragStatus::BadLayer;  // sorted, disjoint, merged
      if (!run_in_box(off, cnt, X, b)) return FragStatus::BadLayer;
      prev_end = int64_t(off) + cnt;
      sum += cnt;
    }
    if (deep && sum != int64_t(L.expected[k])) return FragStatus::BadLayer;
    L.runs[k] = base + ro;
  }
  if (ram != L.ram_bytes) return FragStatus::BadLayer;
  if (L.ram_bytes > *arena_max) *arena_max = L.ram_bytes;

  // Pointers into the data section.
  d.weights = wn ? reinterpret_cast<const int8_t*>(base + r->off[0]) : nullptr;
  d.bias = bn ? reinterpret_cast<const int32_t*>(base + r->off[1]) : nullptr;
  d.mult = mn ? reinterpret_cast<const int32_t*>(base + r->off[2]) : nullptr;
  d.shift = sn ? reinterpret_cast<const int32_t*>(base + r->off[3]) : nullptr;
  d.lut = ln ? reinterpret_cast<const int8_t*>(base + r->off[4]) : nullptr;
  return FragStatus::Ok;
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

InputRun FragLayer::run(int input, uint32_t i) const {
  InputRun r{0, 0};
  if (input < 0 || input >= kMaxInputs || runs[input] == nullptr || i >= n_runs[input]) return r;
  const uint8_t* p = runs[input] + 8 * size_t(i);
  r.offset = rd32(p);
  r.count = rd32(p + 4);
  return r;
}

FragStatus FragmentReader::open(const uint8_t* data, size_t size) {
  data_ = nullptr;
  size_ = 0;
  hdr_ = FragHeader();
  if (data == nullptr || size < kHeaderBytes + 4) return FragStatus::TooShort;
  // int32 arrays are read in place: the fragment must be 4-byte aligned.
  if (reinterpret_cast<uintptr_t>(data) % 4) return FragStatus::BadSize;
  FragHeader h;
  h.magic = rd32(data + 0);
  if (h.magic != kFragMagic) return FragStatus::BadMagic;
  h.version = rd16(data + 4);
  if (h.version != kFragVersion) return FragStatus::BadVersion;
  h.worker = rd16(data + 6);
  h.n_workers = rd16(data + 8);
  const uint16_t reserved = rd16(data + 10);
  h.plan_id = rd32(data + 12);
  h.n_layers = rd32(data + 16);
  h.total_bytes = rd32(data + 20);
  h.arena_bytes = rd32(data + 24);
  const uint32_t entry = rd32(data + 28);
  // A flash region may be larger than the fragment; never smaller.
  if (h.total_bytes < kHeaderBytes + 4 || h.total_bytes > size || h.total_bytes % 4) return FragStatus::BadSize;
  if (entry != kEntryBytes || reserved != 0) return FragStatus::BadSize;
  const uint64_t entries_end = uint64_t(kHeaderBytes) + uint64_t(h.n_layers) * kEntryBytes;
  if (entries_end + 4 > h.total_bytes) return FragStatus::BadSize;
  const uint32_t body = h.total_bytes - 4;
  if (crc32(data, body) != rd32(data + body)) return FragStatus::BadChecksum;
  if (h.n_workers == 0 || h.worker >= h.n_workers) return FragStatus::BadLayer;

  uint32_t arena_max = 0;
  RawLayer r;
  for (uint32_t i = 0; i < h.n_layers; ++i) {
    decode_entry(data + kHeaderBytes + uint64_t(i) * kEntryBytes, &r);
    const FragStatus st = check_layer(data, uint32_t(entries_end), body, i, h.n_layers, true, &r, &arena_max);
    if (st != FragStatus::Ok) return st;
  }
  if (uint64_t(h.arena_bytes) != uint64_t(kWorkerFixedArena) + arena_max) return FragStatus::BadLayer;
  data_ = data;
  size_ = h.total_bytes;
  hdr_ = h;
  return FragStatus::Ok;
}

FragStatus FragmentReader::layer(uint32_t i, FragLayer* out) const {
  if (data_ == nullptr || out == nullptr || i >= hdr_.n_layers) return FragStatus::BadLayer;
  RawLayer r;
  decode_entry(data_ + kHeaderBytes + uint64_t(i) * kEntryBytes, &r);
  uint32_t arena_max = 0;
  // open() validated everything, including the arrays; the shallow checks
  // again fill the pointers exactly as open() checked them (O(1) per entry).
  const uint32_t entries_end = kHeaderBytes + hdr_.n_layers * kEntryBytes;
  const FragStatus st = check_layer(data_, entries_end, uint32_t(size_ - 4), i, hdr_.n_layers, false, &r, &arena_max);
  if (st != FragStatus::Ok) return st;
  *out = r.L;
  return FragStatus::Ok;
}

}  // namespace core
}  // namespace ts
