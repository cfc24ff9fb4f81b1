// AVX-512 VNNI kernel variants (compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512vnni; used only after select.cpp has checked the CPU).
//
// VNNI's vpdpbusd multiplies unsigned bytes by signed bytes, four per 32-bit
// lane, and adds them to the lane without saturation. Activations are signed,
// so they go in shifted: u = x + 128 (x XOR 0x80), and
//   sum (x - zp) * w = sum u * w - (zp + 128) * sum w,
// exactly, in int32 (two's complement wraps cancel: the true value fits
// int32, kMaxFanIn in core/op.h). The correction (zp + 128) * sum w goes
// into the accumulator's starting value with the bias.
#include <string.h>

#include <array>
#include <utility>

#include "core/ops/conv_impl.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/rq_avx512.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

namespace {

void requant_row_512(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  int32_t k = 0;
  // The by_sign form as the kernels set it up 16 channels at a time
  // (rq_sign_row: its conditions are tested through this row), else RqS's.
  RqSignRow sg;
  if (!rq.exact && rq_sign_row(&rq.m, &rq.shift, 1, rq.zp, rq.lo, rq.hi, &sg)) {
    const SignK q = sign_k(sg, 0);
    for (; k < n; k += 16) {
      const __mmask16 m = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
      __m512i r[2];
      r[0] = r[1] = sign_vec(_mm512_maskz_loadu_epi32(m, acc + k), q);
      store_bytes_sat<2>(r, mini(16, n - k), out + k);
    }
    return;
  }
  RqS s;
  rqs_make(rq, &s);
  if (s.fast) {  // the kernels' epilogue forms (rqs_store), also tested through this row
    for (; k < n; k += 16) {
      const __mmask16 m = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
      rqs_store(_mm512_maskz_loadu_epi32(m, acc + k), s, m, out + k);
    }
    return;
  }
  if (vec_ok(rq)) {
    const Rq512 c = rq512(rq);
    for (; k < n; k += 16) {
      const __mmask16 m = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
      const __m512i r = rq512_apply(_mm512_maskz_loadu_epi32(m, acc + k), c);
      _mm512_mask_cvtsepi32_storeu_epi8(out + k, m, r);
    }
    return;
  }
  for (; k < n; ++k) out[k] = rq(acc[k]);
}

constexpr int32_t kTile = 64;    // positions per tile: 4 vectors of 16 lanes
constexpr int32_t kMaxCin = 1024;
constexpr int kPwOc = 6;  // output channels per pass of pw_tile
constexpr int32_t kMaxOc = 4096;  // output channels per call (their corrections are computed once)
constexpr int32_t kRqChunk = 256;  // output channels whose requantisers are set up at once

inline int32_t load_w4(const int8_t* w, int32_t g, int32_t cin) {
  int32_t r = 0;
  if (4 * g + 4 <= cin) {
    memcpy(&r, w + 4 * g, 4);
  } else {
    uint8_t b[4] = {0, 0, 0, 0};
    for (int32_t k = 0; 4 * g + k < cin; ++k) b[k] = uint8_t(w[4 * g + k]);
    memcpy(&r, b, 4);
  }
  return r;
}

// NO output channels x NV vectors of 16 positions over ng groups of four
// input channels; acc starts at init[o]; the np (<= 16 * NV) positions are
// requantised in registers and stored at out[o * cstride + p].
template <int NO, int NV>
inline void pw_tile(const uint8_t* xp, int32_t ng, const int8_t* const* w, int32_t cin, const int32_t* init,
                    const RqS* rq, const RqSignRow& sg, int32_t at, int32_t np, int8_t* out, int64_t cstride) {
  __m512i a[NO][NV];
  for (int o = 0; o < NO; ++o)
    for (int j = 0; j < NV; ++j) a[o][j] = _mm512_set1_epi32(init[o]);
  // Whole groups of four input channels (weights read in place), then the
  // partial last group (its missing weights 0): no test in the hot loop, so
  // the accumulators stay in registers.
  const int32_t full = cin / 4;
  for (int32_t g = 0; g < full; ++g) {
    __m512i x[NV];
    for (int j = 0; j < NV; ++j) x[j] = _mm512_load_si512(xp + (int64_t(g) * kTile + 16 * j) * 4);
    for (int o = 0; o < NO; ++o) {
      int32_t wv;
      memcpy(&wv, w[o] + 4 * g, 4);
      const __m512i wb = _mm512_set1_epi32(wv);
      for (int j = 0; j < NV; ++j) a[o][j] = dpbusd(a[o][j], x[j], wb);
    }
  }
  if (full < ng) {
    __m512i x[NV];
    for (int j = 0; j < NV; ++j) x[j] = _mm512_load_si512(xp + (int64_t(full) * kTile + 16 * j) * 4);
    for (int o = 0; o < NO; ++o) {
      const __m512i wb = _mm512_set1_epi32(load_w4(w[o], full, cin));
      for (int j = 0; j < NV; ++j) a[o][j] = dpbusd(a[o][j], x[j], wb);
    }
  }
  // Through memory: a register array handed to the epilogue makes GCC keep
  // the accumulators in memory inside the loop above.
  alignas(64) int32_t acc[NO][NV * 16];
  for (int o = 0; o < NO; ++o)
    for (int j = 0; j < NV; ++j) _mm512_store_si512(acc[o] + 16 * j, a[o][j]);
  for (int o = 0; o < NO; ++o) {
    const int32_t s = at + o;
    if (sg.ok[s]) {  // the by_sign form, then narrowed by packs: one store
      constexpr int NP = NV <= 2 ? 2 : 4;
      __m512i r[NP];
      const SignK q = sign_k(sg, s);
      for (int j = 0; j < NV; ++j) r[j] = sign_vec(_mm512_load_si512(acc[o] + 16 * j), q);
      for (int j = NV; j < NP; ++j) r[j] = r[NV - 1];  // never stored (np <= 16 * NV)
      store_bytes_sat<NP>(r, np, out + int64_t(o) * cstride);
      continue;
    }
    if (NV >= 2 && rq[o].fast) {  // requantised, then narrowed by packs: one store
      constexpr int NP = NV == 2 ? 2 : 4;
      __m512i r[NP];
      for (int j = 0; j < NV; ++j) r[j] = rqs_fast_vec(_mm512_load_si512(acc[o] + 16 * j), rq[o]);
      for (int j = NV; j < NP; ++j) r[j] = r[NV - 1];  // never stored (np <= 16 * NV)
      store_bytes_sat<NP>(r, np, out + int64_t(o) * cstride);
      continue;
    }
    for (int j = 0; j < NV; ++j) {
      const int32_t left = np - 16 * j;
      const __mmask16 lanes = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      rqs_store(_mm512_load_si512(acc[o] + 16 * j), rq[o], lanes, out + int64_t(o) * cstride + 16 * j);
    }
  }
}

template <int NV>
inline void pw_tile_no(int no, const uint8_t* xp, int32_t ng, const int8_t* const* w, int32_t cin, const int32_t* init,
                       const RqS* rq, const RqSignRow& sg, int32_t at, int32_t np, int8_t* out, int64_t cstride) {
  switch (no) {
    case 6: pw_tile<6, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
    case 5: pw_tile<5, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
    case 4: pw_tile<4, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
    case 3: pw_tile<3, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
    case 2: pw_tile<2, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
    default: pw_tile<1, NV>(xp, ng, w, cin, init, rq, sg, at, np, out, cstride); break;
  }
}

// Pointwise output channels' starting values, bias - (zp + 128) * sum(w), in
// int32 (wrapping cancels), for channels local0 .. local0 + n - 1 into
// init[0..n): sum(w) 64 bytes per vpdpbusd against ones (|sum| <= 128 *
// kMaxCin), the 16 channels of a step reduced together (sums16).
inline void pw_inits(const LayerDesc& L, int32_t local0, int32_t n, int32_t cin, int32_t* init) {
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i zc = _mm512_set1_epi32(L.in_zp[0] + 128);
  for (int32_t k0 = 0; k0 < n; k0 += 16) {
    const int32_t nk = mini(16, n - k0);
    __m512i s[16];
    for (int k = 0; k < 16; ++k) s[k] = _mm512_setzero_si512();
    for (int32_t k = 0; k < nk; ++k) {
      const int8_t* w = L.weights + int64_t(local0 + k0 + k) * cin;
      __m512i a = _mm512_setzero_si512();  // in a register through the loop
      for (int32_t i = 0; i < cin; i += 64) {
        const __mmask64 m = cin - i >= 64 ? ~__mmask64(0) : ((__mmask64(1) << (cin - i)) - 1);
        _mm_prefetch(reinterpret_cast<const char*>(w + i) + kPrefetchAhead, _MM_HINT_T0);
        a = dpbusd(a, ones, _mm512_maskz_loadu_epi8(m, w + i));
      }
      s[k] = a;
    }
    const __mmask16 live = nk >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nk) - 1);
    const __m512i bias = L.bias ? _mm512_maskz_loadu_epi32(live, L.bias + local0 + k0) : _mm512_setzero_si512();
    _mm512_mask_storeu_epi32(init + k0, live, _mm512_sub_epi32(bias, _mm512_mullo_epi32(sums16(s), zc)));
  }
}

// Positions [0, np) of input channels s[0..3] (null: past cin, packed as
// 0) as u = x + 128, 4 channels per 32-bit lane, the nv 16-position vectors
// a tile uses (positions past np hold whatever; their lanes are never
// stored).
inline void pack_group(const int8_t* const* s, int32_t np, int nv, uint8_t* d) {
  const __m128i flip = _mm_set1_epi8(char(0x80));
  for (int32_t h = 0; h < 16 * nv; h += 16) {
    const int32_t left = np - h;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    __m128i a[4];
    for (int k = 0; k < 4; ++k) a[k] = s[k] ? _mm_xor_si128(_mm_maskz_loadu_epi8(m, s[k] + h), flip) : _mm_setzero_si128();
    const __m128i l01 = _mm_unpacklo_epi8(a[0], a[1]), h01 = _mm_unpackhi_epi8(a[0], a[1]);
    const __m128i l23 = _mm_unpacklo_epi8(a[2], a[3]), h23 = _mm_unpackhi_epi8(a[2], a[3]);
    __m128i* q = reinterpret_cast<__m128i*>(d + 4 * h);
    _mm_store_si128(q, _mm_unpacklo_epi16(l01, l23));
    _mm_store_si128(q + 1, _mm_unpackhi_epi16(l01, l23));
    _mm_store_si128(q + 2, _mm_unpacklo_epi16(h01, h23));
    _mm_store_si128(q + 3, _mm_unpackhi_epi16(h01, h23));
  }
}

// Pointwise conv: each 64-position tile of the input is packed once as
// xp[g][p][4] = u(4g..4g+3, p) (only the 16-position vectors the tile uses;
// channels past cin are 0, with weight 0; positions past the tile's end hold
// whatever, their lanes are never stored), then six output channels at a
// time run over it. The accumulators' starting values (bias and the +128
// correction) are computed once per call.
__attribute__((noinline)) void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0,
                                         int32_t p1, int8_t* out, int64_t cstride) {
  const int32_t W = L.out.w;
  const int32_t cin = L.in[0].c / L.groups;
  if (cin > kMaxCin || no > kMaxOc) return pointwise_block(L, v, o0, no, p0, p1, out, cstride, requant_row_512);
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t ng = (cin + 3) / 4;
  const int64_t plane = int64_t(v.nh) * W;
  alignas(64) uint8_t xp[kMaxCin / 4 * kTile * 4];
  alignas(64) int32_t init[kMaxOc];
  const int32_t n = p1 - p0;
  pw_inits(L, o0 - L.oc_base, no, cin, init);
  // Output channels in chunks of kRqChunk whose requantisers are set up
  // once per call, not once per tile (the tiles are packed once per chunk):
  // the by_sign form's constants 16 channels at a time, an RqS only for the
  // channels without that form.
  static_assert(kRqChunk == kSignRow, "one chunk of requantisers per RqSignRow");
  Uninit<RqS, kRqChunk> rq_store;  // made only for the channels without the by_sign form (the only ones read)
  RqS* const rq = rq_store.v;
  RqSignRow sg;
  for (int32_t c = 0; c < no; c += kRqChunk) {
    const int32_t nc = mini(kRqChunk, no - c);
    const int32_t l0 = o0 + c - L.oc_base;
    int32_t without = 0;  // channels without the by_sign form
    if (!rq_sign_row(L.mult + l0, L.shift + l0, nc, L.out_zp, L.act_min, L.act_max, &sg))
      for (int32_t k = 0; k < nc; ++k)
        if (!sg.ok[k]) ++without, rqs_make(Requant(L.mult[l0 + k], L.shift[l0 + k], L.out_zp, L.act_min, L.act_max), &rq[k]);
    if (without < nc) count_path(Path::kPwSignRow);
    if (without > 0) count_path(Path::kPwRqS);
    for (int32_t t = 0; t < n; t += kTile) {
      const int32_t np = mini(kTile, n - t);
      const int nv = (np + 15) / 16;
      const int64_t at = p0 + t - int64_t(v.h0) * W;
      for (int32_t g = 0; g < ng; ++g) {
        const int8_t* s[4];
        for (int k = 0; k < 4; ++k)
          s[k] = 4 * g + k < cin ? v.data + int64_t(ci0 + 4 * g + k - v.c0) * plane + at : nullptr;
        pack_group(s, np, nv, xp + int64_t(g) * kTile * 4);
      }
      for (int32_t j = c; j < c + nc; j += kPwOc) {
        const int nb = mini(kPwOc, c + nc - j);
        const int8_t* w[6];
        for (int k = 0; k < nb; ++k) w[k] = L.weights + int64_t(o0 + j + k - L.oc_base) * cin;
        int8_t* o = out + int64_t(j) * cstride + t;
        const RqS* r = rq + (j - c);
        switch (nv) {
          case 4: pw_tile_no<4>(nb, xp, ng, w, cin, init + j, r, sg, j - c, np, o, cstride); break;
          case 3: pw_tile_no<3>(nb, xp, ng, w, cin, init + j, r, sg, j - c, np, o, cstride); break;
          case 2: pw_tile_no<2>(nb, xp, ng, w, cin, init + j, r, sg, j - c, np, o, cstride); break;
          default: pw_tile_no<1>(nb, xp, ng, w, cin, init + j, r, sg, j - c, np, o, cstride); break;
        }
      }
    }
  }
}

// Pointwise on few positions (n <= kFew512: the 3x3 planes at input 112),
// where the 16-position vectors above would be mostly idle: output channels go in
// the lanes instead. For 16 output channels at a time the weights of group
// g (input channels 4g..4g+3) are one vector, lane k holding w(o+k, 4g..4g+3)
// (a 16 x 16 transpose of int32 per 64 input channels), and each position's
// four shifted inputs u = x + 128 are broadcast: one vpdpbusd adds four
// products for 16 channels; one accumulator per position, started at
// bias - (zp + 128) * sum(w) as above. They are requantised with per-lane
// constants (RqS's fast form with each constant a vector), then the bytes
// are transposed to the channels' rows.
constexpr int32_t kFew512 = 16;

// The 16 rows r[k] of 16 int32 each -> o[m] = element m of every row.
inline void transpose16(const __m512i* r, __m512i* o) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int j = 0; j < 16; j += 4) {  // b[j + e], 128-bit lane L: rows j..j+3 of element 4L + e
    b[j] = _mm512_unpacklo_epi64(a[j], a[j + 2]);
    b[j + 1] = _mm512_unpackhi_epi64(a[j], a[j + 2]);
    b[j + 2] = _mm512_unpacklo_epi64(a[j + 1], a[j + 3]);
    b[j + 3] = _mm512_unpackhi_epi64(a[j + 1], a[j + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // a 4 x 4 transpose of 128-bit lanes
    const __m512i c0 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0x44), c1 = _mm512_shuffle_i32x4(b[e], b[4 + e], 0xEE);
    const __m512i c2 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0x44), c3 = _mm512_shuffle_i32x4(b[8 + e], b[12 + e], 0xEE);
    o[e] = _mm512_shuffle_i32x4(c0, c2, 0x88);
    o[4 + e] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
    o[8 + e] = _mm512_shuffle_i32x4(c1, c3, 0x88);
    o[12 + e] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
  }
}

// wt[g], g < ng: lane k = the 4 weights of group g of row w[k] (k < nb; 0
// beyond, and past cin).
void few_weights_512(const int8_t* const* w, int nb, int32_t cin, int32_t ng, __m512i* wt) {
  for (int32_t g0 = 0; g0 < ng; g0 += 16) {
    const int32_t left = cin - 4 * g0;
    const __mmask64 m = left >= 64 ? ~__mmask64(0) : ((__mmask64(1) << left) - 1);
    __m512i r[16], o[16];
    for (int k = 0; k < 16; ++k) r[k] = k < nb ? _mm512_maskz_loadu_epi8(m, w[k] + 4 * g0) : _mm512_setzero_si512();
    transpose16(r, o);
    for (int j = 0; j < 16 && g0 + j < ng; ++j) wt[g0 + j] = o[j];
  }
}

// r[p] (int32, lane k = channel k at position p; 4 NQ vectors, the first
// np <= 4 NQ stored) as bytes with saturation, channel k's np bytes to
// out + k * cstride (k < nb): per four positions two saturating packs
// (byte 16L + 4j + i: channel 4L + i at position 4m + j), a vpshufb
// transposing each 4 x 4 block of bytes, then a 4 x 4 transpose of dwords
// across the four vectors (unpacks), so that vector i's 128-bit lane L is
// channel 4L + i's row; one masked store per channel (against a vpmovsdb
// per position and a byte at a time: AVX-512 BW only).
template <int NQ>
TS_ALWAYS_INLINE void store_lane_rows(const __m512i* r, int np, int nb, int8_t* out, int64_t cstride) {
  const __m512i t44 = _mm512_set4_epi32(0x0F0B0703, 0x0E0A0602, 0x0D090501, 0x0C080400);
  __m512i q[4];
  for (int m = 0; m < 4; ++m)
    q[m] = m < NQ ? _mm512_shuffle_epi8(_mm512_packs_epi16(_mm512_packs_epi32(r[4 * m], r[4 * m + 1]),
                                                           _mm512_packs_epi32(r[4 * m + 2], r[4 * m + 3])),
                                        t44)
                  : _mm512_setzero_si512();
  const __m512i a0 = _mm512_unpacklo_epi32(q[0], q[1]), a1 = _mm512_unpackhi_epi32(q[0], q[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(q[2], q[3]), a3 = _mm512_unpackhi_epi32(q[2], q[3]);
  const __m512i rows[4] = {_mm512_unpacklo_epi64(a0, a2), _mm512_unpackhi_epi64(a0, a2), _mm512_unpacklo_epi64(a1, a3),
                           _mm512_unpackhi_epi64(a1, a3)};
  const __mmask16 m = __mmask16((1u << np) - 1);
  for (int i = 0; i < 4; ++i) {
    const __m128i l[4] = {_mm512_castsi512_si128(rows[i]), _mm512_extracti32x4_epi32(rows[i], 1),
                          _mm512_extracti32x4_epi32(rows[i], 2), _mm512_extracti32x4_epi32(rows[i], 3)};
    for (int L = 0; L < 4; ++L)
      if (4 * L + i < nb) _mm_mask_storeu_epi8(out + int64_t(4 * L + i) * cstride, m, l[L]);
  }
}

template <int P>
void few_pass_512(const int32_t* xs, int32_t ng, const int32_t* wt, const int32_t* init, const RqLanes512* rl,
                  const RqS* rq, int nb, int8_t* out, int64_t cstride) {
  __m512i acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_load_si512(init);
  for (int32_t g = 0; g < ng; ++g) {
    const __m512i w = _mm512_load_si512(wt + 16 * g);
    for (int p = 0; p < P; ++p) acc[p] = dpbusd(acc[p], _mm512_set1_epi32(xs[g * kFew512 + p]), w);
  }
  constexpr int NP = (P + 3) / 4 * 4;
  __m512i r[NP];
  if (rl) {
    for (int p = 0; p < P; ++p) r[p] = rq_lanes_apply_512(acc[p], *rl);
  } else {
    alignas(64) int32_t a[16];
    for (int p = 0; p < P; ++p) {
      _mm512_store_si512(a, acc[p]);
      for (int k = 0; k < nb; ++k) a[k] = rq[k].rq(a[k]);
      r[p] = _mm512_load_si512(a);
    }
  }
  for (int p = P; p < NP; ++p) r[p] = r[P - 1];  // packed, never stored
  store_lane_rows<NP / 4>(r, P, nb, out, cstride);
}

using FewPass512 = void (*)(const int32_t*, int32_t, const int32_t*, const int32_t*, const RqLanes512*, const RqS*, int,
                            int8_t*, int64_t);
template <int... P>
constexpr std::array<FewPass512, sizeof...(P)> few_passes_512(std::integer_sequence<int, P...>) {
  return {few_pass_512<P + 1>...};
}

// Pointwise for n = p1 - p0 <= kFew512 positions (cin <= kMaxCin).
__attribute__((noinline)) void pointwise_few_512(const LayerDesc& L, const View& v, int32_t o0, int32_t no,
                                                 int32_t p0, int32_t p1, int8_t* out, int64_t cstride) {
  static constexpr auto kPass = few_passes_512(std::make_integer_sequence<int, kFew512>());
  const int32_t W = L.out.w, n = p1 - p0;
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t ng = (cin + 3) / 4;
  const int64_t plane = int64_t(v.nh) * W;
  const int64_t at = p0 - int64_t(v.h0) * W;
  alignas(64) int32_t xs[kMaxCin / 4 * kFew512];
  static_assert(kFew512 == 16, "xs[g * 16 + p] is pack_group's layout for one 16-position vector");
  for (int32_t g = 0; g < ng; ++g) {
    const int8_t* s[4];
    for (int k = 0; k < 4; ++k) s[k] = 4 * g + k < cin ? v.data + int64_t(ci0 + 4 * g + k - v.c0) * plane + at : nullptr;
    pack_group(s, n, 1, reinterpret_cast<uint8_t*>(xs + g * kFew512));
  }
  alignas(64) __m512i wt[kMaxCin / 4];
  RqSignRow sg;
  for (int32_t j = 0; j < no; j += 16) {
    const int nb = mini(16, no - j);
    const int8_t* w[16];
    alignas(64) int32_t init[16] = {};
    Uninit<RqS, 16> rq_store;  // made and read only where the lanes' form does not apply
    RqS* const rq = rq_store.v;
    const int32_t l0 = o0 + j - L.oc_base;
    pw_inits(L, l0, nb, cin, init);
    for (int k = 0; k < nb; ++k) w[k] = L.weights + int64_t(l0 + k) * cin;
    few_weights_512(w, nb, cin, ng, wt);
    // Per-lane requantisers where every channel has the fast form, else
    // channel by channel.
    rq_sign_row(L.mult + l0, L.shift + l0, nb, L.out_zp, L.act_min, L.act_max, &sg);
    RqLanes512 rl;
    const bool lanes = sg.all_fast;
    count_path(lanes ? Path::kFewLanes : Path::kFewRqS);
    if (lanes)
      rq_lanes_512(sg, nb, &rl);
    else
      for (int k = 0; k < nb; ++k) rqs_make(Requant(L.mult[l0 + k], L.shift[l0 + k], L.out_zp, L.act_min, L.act_max), &rq[k]);
    kPass[n - 1](xs, ng, reinterpret_cast<const int32_t*>(wt), init, lanes ? &rl : nullptr, rq, nb, out + int64_t(j) * cstride, cstride);
  }
}

// The table's entry: few positions of deep layers (more than kFewMinCin
// input channels) go to pointwise_few_512. Its per-channel work (weight
// transpose, byte transpose of the outputs) is worth it only there: at
// input 112, Conv_1 (320 in) 34.5 -> 32 us and block_16_project (960 in)
// 22.8 -> 21 us when the threshold was 192; since its packing and
// requantisers' set-up are vector code, the 160-input expansions too (15.0-15.3
// -> 11.3-11.7 us with 128; they were 17.3 -> 19 us before). Splitting the
// last n % 16 positions of larger planes off to it, as the AVX2 table
// does, measured slower here (7x7 layers 17.4 -> 21.7 us).
constexpr int32_t kFewMinCin = 128;

void pointwise_any(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                   int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  if (p1 - p0 <= kFew512 && cin > kFewMinCin && cin <= kMaxCin)
    return pointwise_few_512(L, v, o0, no, p0, p1, out, cstride);
  pointwise(L, v, o0, no, p0, p1, out, cstride);
}

// Bits [lo, hi) of a 64-bit mask (0 <= lo <= hi <= 64).
inline uint64_t bits(int32_t lo, int32_t hi) {
  if (hi <= lo) return 0;
  const uint64_t top = hi >= 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1;
  return top & ~((uint64_t(1) << lo) - 1);
}

// Any conv with column stride 1 or 2 (depthwise 3x3, the first 3x3 conv,
// ...), for output channel o at positions [p0, p1): 16 output columns per
// vector, tap by tap, straight from the input rows (no copies into phases).
// Column stride 1: tap (ky, kx) of lanes x..x+15 reads 16 consecutive bytes;
// stride 2: 32 consecutive bytes whose even ones it uses. Masked loads read
// only bytes inside the row, and lanes whose input column is padding get
// (x - zp) = 0 through a zero-masked subtraction, so they add nothing, as in
// the portable code. Products (x - zp) * w fit int32; sums are exact.
// Channel parameters (weights pointer, bias, requantiser) are set up once
// per call, not per row.
void conv_ch(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  if (L.sw > 2) return conv_channel(L, v, o, p0, p1, out, requant_row_512);
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, sw = L.sw;
  const ConvChannel ch(L, o);
  const __m512i vzp = _mm512_set1_epi32(ch.zp);
  alignas(64) int32_t acc[16];
  int32_t pos = p0;
  while (pos < p1) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t ox1 = mini(W, ox0 + (p1 - pos));
    for (int32_t x = ox0; x < ox1; x += 16) {
      const int32_t nl = mini(16, ox1 - x);
      __m512i a = _mm512_set1_epi32(ch.bias);
      for (int32_t ci = 0; ci < ch.cin_g; ++ci) {
        const int8_t* wc = ch.weights + ci * ch.taps;
        for (int32_t ky = 0; ky < L.kh; ++ky) {
          const int32_t iy = oy * L.sh - L.pad_t + ky * L.dh;
          if (iy < 0 || iy >= X.h) continue;  // zero padding contributes nothing
          const int8_t* row = row_ptr(v, X.w, ch.ci0 + ci, iy);
          for (int32_t kx = 0; kx < L.kw; ++kx) {
            const int32_t start = x * sw + kx * L.dw - L.pad_l;  // input column of lane 0
            // Lanes j < nl whose column start + j * sw lies in [0, X.w).
            const int32_t sh = sw - 1;  // divide by the stride (1 or 2) with a shift
            const int32_t jlo = start >= 0 ? 0 : (-start + sh) >> sh;
            const int32_t jhi = X.w - 1 - start < 0 ? 0 : mini(nl, ((X.w - 1 - start) >> sh) + 1);
            if (jlo >= jhi) continue;
            const __mmask16 lanes = __mmask16(bits(jlo, jhi));
            __m512i xv;
            if (sw == 1) {
              xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, row + start));
            } else {
              // Bytes 2*jlo .. 2*(jhi-1) of the 32 from `start`.
              const __mmask32 bytes = __mmask32(bits(2 * jlo, 2 * jhi - 1));
              const __m512i w16 = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(bytes, row + start));
              xv = _mm512_srai_epi32(_mm512_slli_epi32(w16, 16), 16);  // the even bytes, one per lane
            }
            const __m512i xz = _mm512_maskz_sub_epi32(lanes, xv, vzp);
            // (x - zp) * w with one 16-bit multiply-add: the lane's low half
            // holds x - zp (it fits int16), the weight vector's high half is 0.
            const __m512i wv = _mm512_set1_epi32(int32_t(uint16_t(int16_t(wc[ky * L.kw + kx]))));
            a = _mm512_add_epi32(a, _mm512_madd_epi16(xz, wv));
          }
        }
      }
      _mm512_store_si512(acc, a);
      requant_row_512(acc, nl, ch.rq, out + (pos - p0) + (x - ox0));
    }
    pos += ox1 - ox0;
  }
}

constexpr int32_t kFlatWide = 32;

// Stride-1 conv whose input rows are as wide as the output's (conv.cpp's
// "flat" path), for output channel o at positions [p0, p1): 16 consecutive
// plane positions per vector, across row ends, so narrow planes (7x7, 14x14)
// fill whole vectors. Tap (ky, kx) of position P reads P + (offy - h0) * W +
// offx in the window; a lane whose input row or column falls outside the
// image is masked off (not loaded, (x - zp) = 0), so it adds nothing.
void conv_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;  // == X.w
  // Wide planes: conv_impl.h's flat path (long unmasked runs per tap,
  // vectorised by the compiler for AVX-512) is faster there.
  if (W >= kFlatWide) return conv_channel_flat(L, v, o, p0, p1, out, requant_row_512);
  const ConvChannel ch(L, o);
  const int64_t view_len = int64_t(v.nh) * W;
  const __m512i vzp = _mm512_set1_epi32(ch.zp);
  alignas(64) int32_t acc[16], cols[16], rows[16];
  for (int32_t q = p0; q < p1; q += 16) {
    const int32_t nl = mini(16, p1 - q);
    for (int32_t j = 0, y = q / W, x = q % W; j < 16; ++j) {
      cols[j] = x;
      rows[j] = y;
      if (++x == W) x = 0, ++y;
    }
    const __m512i colv = _mm512_load_si512(cols), rowv = _mm512_load_si512(rows);
    const __mmask16 live = __mmask16(bits(0, nl));
    __m512i a = _mm512_set1_epi32(ch.bias);
    for (int32_t ky = 0; ky < L.kh; ++ky) {
      const int32_t offy = ky * L.dh - L.pad_t;
      // Rows oy with 0 <= oy + offy < X.h.
      const __mmask16 rok = _mm512_mask_cmpge_epi32_mask(live, rowv, _mm512_set1_epi32(-offy)) &
                            _mm512_cmplt_epi32_mask(rowv, _mm512_set1_epi32(X.h - offy));
      if (!rok) continue;
      for (int32_t kx = 0; kx < L.kw; ++kx) {
        const int32_t offx = kx * L.dw - L.pad_l;
        const __mmask16 m = _mm512_mask_cmpge_epi32_mask(rok, colv, _mm512_set1_epi32(-offx)) &
                            _mm512_cmplt_epi32_mask(colv, _mm512_set1_epi32(W - offx));
        if (!m) continue;
        const int64_t shift = int64_t(offy - v.h0) * W + offx;
        for (int32_t ci = 0; ci < ch.cin_g; ++ci) {
          const int8_t* plane = v.data + int64_t(ch.ci0 + ci - v.c0) * view_len;
          const __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, plane + q + shift));
          const __m512i xz = _mm512_maskz_sub_epi32(m, xv, vzp);
          const __m512i wv =
              _mm512_set1_epi32(int32_t(uint16_t(int16_t(ch.weights[ci * ch.taps + ky * L.kw + kx]))));
          a = _mm512_add_epi32(a, _mm512_madd_epi16(xz, wv));
        }
      }
    }
    _mm512_store_si512(acc, a);
    requant_row_512(acc, nl, ch.rq, out + (q - p0));
  }
}

// Gemm: 64 products per step; the input shifted on the fly, the weight sum
// by a second vpdpbusd against a vector of ones.
void gemm(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  const __m512i flip = _mm512_set1_epi8(char(0x80)), ones = _mm512_set1_epi8(1);
  for (int32_t o = o0; o < o1; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    __m512i s = _mm512_setzero_si512(), sw = _mm512_setzero_si512();
    for (int32_t i = 0; i < fan_in; i += 64) {
      const __mmask64 m = fan_in - i >= 64 ? ~__mmask64(0) : ((__mmask64(1) << (fan_in - i)) - 1);
      const __m512i xv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip);
      _mm_prefetch(reinterpret_cast<const char*>(w + i) + kPrefetchAhead, _MM_HINT_T0);
      const __m512i wv = _mm512_maskz_loadu_epi8(m, w + i);
      s = dpbusd(s, xv, wv);
      sw = dpbusd(sw, ones, wv);
    }
    const uint32_t dot = uint32_t(_mm512_reduce_add_epi32(s)), wsum = uint32_t(_mm512_reduce_add_epi32(sw));
    const uint32_t acc = uint32_t(L.bias ? L.bias[local] : 0) + dot - uint32_t(zp + 128) * wsum;
    out[int64_t(o - o0) * ostride] = requant(int32_t(acc), L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
}

// Add's usual parameters (the quantiser's: left shift 20, operand shifts 0
// or -1, the output's fast form) in int32 lanes, without 64-bit products.
// An operand's rescale Requant::scale(x), x = d * 2^L (d = a - za, |d| <=
// 384 < 2^9, L = left in [10, 20]; the operand's left shift 0, not exact,
// T = its total, K = T - L in [9, 21], m >= 2^(31 - L)):
//  - t = x * m + 2^30 is negative exactly when d < 0 (m * 2^L >= 2^31);
//  - 2^30 + half and neg are multiples of 2^L (L <= 30), so scale(x) =
//    floor((d * m + c0 + [d < 0] c1) / 2^K) with c0 = (2^30 + half) / 2^L,
//    c1 = neg / 2^L;
//  - with m = mh * 2^K + ml (0 <= ml < 2^K) that is d * mh +
//    floor((d * ml + c0 + [d < 0] c1) / 2^K), an exact identity, every term
//    inside int32: |d * mh| < 2^9 * 2^(31 - K) <= 2^31, |d * ml| < 2^30,
//    c0 <= 2^20 + 2^20 and |c1| <= 2^21 (L >= 10 + e, as K <= 21).
// The output's requantiser is the by_sign form (rq_avx512.h) for any
// 0 < m < 2^31: each operand's rescale is below 2^29 + 1 in magnitude
// (|x| < 2^29, m < 2^31, T >= 31), so the sum x' is within 2^30 + 2 and
// |x' * m| < 2^61 + 2^32: the form's proof needs its bound on m only to keep
// |x' * m| below 2^62 - 2^59. 64 elements per step, one 64-byte store.
struct OpScale512 {
  __m512i mh, ml, c0, c01;
  __m128i k;
};

inline bool op_scale_make(const Requant& r, int32_t left, OpScale512* c) {
  if (r.exact || r.left != 0 || left < 10 || left > 20) return false;
  const int32_t K = r.total - left;
  if (K < 9 || K > 21 || r.m < (int32_t(1) << (31 - left))) return false;
  const int32_t c0 = int32_t(((int64_t(1) << 30) + r.half) >> left), c1 = int32_t(r.neg >> left);
  c->mh = _mm512_set1_epi32(r.m >> K);
  c->ml = _mm512_set1_epi32(r.m & ((int32_t(1) << K) - 1));
  c->c0 = _mm512_set1_epi32(c0);
  c->c01 = _mm512_set1_epi32(c0 + c1);
  c->k = _mm_cvtsi32_si128(K);
  return true;
}

TS_ALWAYS_INLINE __m512i op_scale(__m512i d, const OpScale512& c) {
  const __m512i c0 = _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(d, _mm512_setzero_si512()), c.c0, c.c01);
  const __m512i r = _mm512_add_epi32(_mm512_mullo_epi32(d, c.ml), c0);
  return _mm512_add_epi32(_mm512_mullo_epi32(d, c.mh), _mm512_sra_epi32(r, c.k));
}

// False (nothing written) if the parameters are not of that kind.
bool add_row_usual(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  OpScale512 ca, cb;
  RqS ro;
  rqs_make(p.rout, &ro, false);
  if (!ro.fast || p.rout.m <= 0 || p.za < -256 || p.za > 256 || p.zb < -256 || p.zb > 256 ||
      !op_scale_make(p.ra, p.left, &ca) || !op_scale_make(p.rb, p.left, &cb))
    return false;
  const uint32_t m = uint32_t(p.rout.m);
  const BySign k = by_sign_consts(int32_t(2 * m), 2 * ro.addz, int32_t(2 * m + 1), ro.total - 31);
  const __m512i za = _mm512_set1_epi32(p.za), zb = _mm512_set1_epi32(p.zb);
  const __m512i lo = _mm512_set1_epi32(ro.lo8), hi = _mm512_set1_epi32(ro.hi8);
  for (int32_t i = 0; i < n; i += 64) {
    __m512i r[4];
    for (int j = 0; j < 4; ++j) {
      const int32_t left = n - i - 16 * j;  // past the end (left <= 0): zeros, never stored
      const __mmask16 m16 = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (left > 0 ? left : 0)) - 1);
      const __m128i a16 = left > 0 ? _mm_maskz_loadu_epi8(m16, a + i + 16 * j) : _mm_setzero_si128();
      const __m128i b16 = left > 0 ? _mm_maskz_loadu_epi8(m16, b + i + 16 * j) : _mm_setzero_si128();
      const __m512i x = _mm512_sub_epi32(_mm512_cvtepi8_epi32(a16), za);
      const __m512i y = _mm512_sub_epi32(_mm512_cvtepi8_epi32(b16), zb);
      r[j] = by_sign_steps(_mm512_add_epi32(op_scale(x, ca), op_scale(y, cb)), k);
      if (ro.clamp8) r[j] = _mm512_min_epi32(_mm512_max_epi32(r[j], lo), hi);
    }
    store_bytes_sat<4>(r, n - i, out + i);
  }
  return true;
}

// Add, 16 lanes per step (avx2.cpp's add_row_avx2 on twice the width): the
// operands' rescale, then the output's, each the exact Requant function.
void add_row_512(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  if (add_row_usual(a, b, n, p, out)) return;
  if (!(vec_ok(p.ra) && vec_ok(p.rb) && vec_ok(p.rout) && p.left >= 0 && p.left <= 22 && p.za >= -256 &&
        p.za <= 256 && p.zb >= -256 && p.zb <= 256))
    return add_row_avx2(a, b, n, p, out);
  const Rq512 ca = rq512(p.ra), cb = rq512(p.rb), co = rq512(p.rout);
  const __m512i za = _mm512_set1_epi32(p.za), zb = _mm512_set1_epi32(p.zb);
  const __m128i sh = _mm_cvtsi32_si128(p.left);
  for (int32_t k = 0; k < n; k += 16) {
    const __mmask16 m = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
    // |a - za| <= 384 and left <= 22: the shifted values fit int32.
    const __m512i x = _mm512_sll_epi32(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, a + k)), za), sh);
    const __m512i y = _mm512_sll_epi32(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, b + k)), zb), sh);
    const __m512i r = rq512_apply(_mm512_add_epi32(rq512_scale(x, ca), rq512_scale(y, cb)), co);
    _mm512_mask_cvtsepi32_storeu_epi8(out + k, m, r);
  }
}

// vbmi.cpp's kernel where the CPU has VBMI (every AVX-512 VNNI CPU but
// Cascade Lake), else the per-channel paths above.
bool conv_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                int64_t cstride) {
  return has_vbmi() && conv_block_vbmi(L, v, c0, c1, p0, p1, out, cstride);
}

}  // namespace

const KernelTable kVnniKernels = {"vnni", requant_row_512, pointwise_any, conv_ch, conv_flat, add_row_512, gemm, conv_block};

}  // namespace x86
}  // namespace core
}  // namespace ts
