// Convolutions with a kernel at least 3 wide (depthwise 3x3, the first 3x3
// conv, ...) as a small matrix product with AVX-512 VBMI byte permutes and
// VNNI dot products (compiled with -mavx512vbmi as well as the VNNI flags;
// called only after the CPU was found to have both: x86_kernels.h).
//
// An output channel's taps t = (ci * kh + ky) * kw + kx are taken four at a
// time: vpdpbusd adds four byte products into each 32-bit lane, so one
// instruction does four taps for 16 output columns. The four bytes lane j
// needs (its input at each of the four taps) come from at most two input
// rows (a group of four consecutive taps spans at most two rows when
// kw >= 3), so one vpermt2b over the two rows' 64-byte windows builds the
// operand for all 16 lanes. Each row window is loaded once per 16 output
// columns, straight from the input (masked loads: no row copies, no phase
// buffers); bytes outside the image are filled with the zero point, so a
// padded tap adds (zp - zp) * w = 0, exactly what the portable code does by
// skipping it.
//
// vpdpbusd multiplies unsigned by signed bytes: activations go in as
// u = x + 128 (x XOR 0x80) and the accumulator starts at
// bias - (zp + 128) * sum(w) over all taps, exact in int32 (core/op.h bounds
// the true sum). Output channels of one group share the operands: up to 8
// are computed per pass. The requantisation runs on the accumulators in
// registers (rq_avx512.h).
#include <stdint.h>

#include <type_traits>

#include "core/layer.h"
#include "core/ops/common.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/rq_avx512.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

namespace {

using namespace opk;

constexpr int32_t kMaxGroups = 32;  // taps per output channel <= 128
constexpr int32_t kMaxRows = 48;    // (input channel, kernel row) pairs per output channel
constexpr int32_t kLanes = 16;

// What one call needs, set up once: the tap groups' rows and byte indices.
struct TapPlan {
  int32_t ngroups = 0, nrows = 0;
  int32_t ra[kMaxGroups], rb[kMaxGroups];  // rows (ci * kh + ky) of each group
  __m512i idx[kMaxGroups];                 // vpermt2b indices (64+: row rb)
};

bool make_plan(const LayerDesc& L, int32_t cin_g, TapPlan* p) {
  const int32_t taps = cin_g * L.kh * L.kw;
  if (L.kw < 3 || L.kh < 1 || L.sw < 1 || L.dw < 1 || L.sh < 1 || L.dh < 1) return false;
  if (taps > 4 * kMaxGroups || cin_g * L.kh > kMaxRows) return false;
  if ((kLanes - 1) * L.sw + (L.kw - 1) * L.dw > 63) return false;  // a lane's bytes within one 64-byte window
  p->ngroups = (taps + 3) / 4;
  p->nrows = cin_g * L.kh;
  alignas(64) uint8_t ix[64];
  for (int32_t g = 0; g < p->ngroups; ++g) {
    const int32_t t0 = 4 * g, tl = mini(4 * g + 3, taps - 1);
    p->ra[g] = t0 / L.kw;
    p->rb[g] = tl / L.kw;
    if (p->rb[g] - p->ra[g] > 1) return false;  // cannot happen with kw >= 3
    for (int32_t j = 0; j < kLanes; ++j)
      for (int32_t b = 0; b < 4; ++b) {
        const int32_t t = t0 + b;
        // Taps past the end have weight 0: any byte will do.
        ix[4 * j + b] = t < taps ? uint8_t((t / L.kw == p->ra[g] ? 0 : 64) + j * L.sw + (t % L.kw) * L.dw) : 0;
      }
    p->idx[g] = _mm512_load_si512(ix);
  }
  return true;
}

// One block of NB output channels [cb, cb + nb) of one group (nb <= NB; the
// missing ones repeat the last and are not stored) at positions [p0, p1).
template <int NB>
void conv_channels(const LayerDesc& L, const View& v, const TapPlan& P, int32_t c0, int32_t cb, int32_t nb, int32_t p0,
                   int32_t p1, int8_t* out, int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
  const int32_t ci0 = (cb / cout_g) * cin_g;
  const int32_t taps = cin_g * L.kh * L.kw;
  const int32_t zp = L.in_zp[0];
  int32_t w4[NB][kMaxGroups];
  int32_t init[NB];
  RqS rqs[NB];
  for (int k = 0; k < NB; ++k) {
    const int32_t local = cb + (k < nb ? k : nb - 1) - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * taps;
    int32_t sw = 0;
    for (int32_t t = 0; t < taps; ++t) sw += w[t];
    for (int32_t g = 0; g < P.ngroups; ++g) {
      uint32_t word = 0;
      for (int32_t b = 0; b < 4; ++b)
        if (4 * g + b < taps) word |= uint32_t(uint8_t(w[4 * g + b])) << (8 * b);
      w4[k][g] = int32_t(word);
    }
    init[k] = int32_t(uint32_t(int64_t(L.bias ? L.bias[local] : 0) - int64_t(zp + 128) * sw));
    rqs_make(Requant(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max), &rqs[k]);
  }
  bool all_fast = NB >= 4;  // requantised four channels at a time, narrowed together
  for (int k = 0; k < NB; ++k) all_fast = all_fast && rqs[k].fast;
  const __m512i vzp = _mm512_set1_epi8(int8_t(zp));
  const __m512i flip = _mm512_set1_epi8(int8_t(-128));
  const int64_t plane = int64_t(v.nh) * X.w;
  // Row iy of channel ci0 is at base + iy * X.w (addresses as integers: they
  // may lie before the view for padding, where nothing is read).
  const uintptr_t base = uintptr_t(v.data) + uintptr_t(intptr_t(int64_t(ci0 - v.c0) * plane - int64_t(v.h0) * X.w));
  // Row r = (ci, ky) of the group: at base + roff[r] + iy0 * X.w, input row iy0 + rky[r].
  int64_t roff[kMaxRows];
  int32_t rky[kMaxRows];
  for (int32_t r = 0; r < P.nrows; ++r) {
    const int32_t ci = r / L.kh, ky = r - ci * L.kh;
    rky[r] = ky * L.dh;
    roff[r] = int64_t(ci) * plane + int64_t(rky[r]) * X.w;
  }
  __m512i rows[kMaxRows];
  int32_t pos = p0;
  while (pos < p1) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t ox1 = mini(W, ox0 + (p1 - pos));
    const int32_t iy0 = oy * L.sh - L.pad_t;
    for (int32_t x = ox0; x < ox1; x += kLanes) {
      const int32_t nl = mini(kLanes, ox1 - x);
      const int32_t col0 = x * L.sw - L.pad_l;  // input column of lane 0's first tap
      const __mmask64 cols = bits64(-col0, X.w - col0);
      // Only bytes inside the row are read (the others are masked off).
      const uintptr_t at0 = base + uintptr_t(intptr_t(int64_t(iy0) * X.w + col0));
      for (int32_t r = 0; r < P.nrows; ++r) {
        const int32_t iy = iy0 + rky[r];
        rows[r] = iy < 0 || iy >= X.h ? vzp
                                      : _mm512_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at0 + uintptr_t(roff[r])));
      }
      __m512i acc[NB];
      for (int k = 0; k < NB; ++k) acc[k] = _mm512_set1_epi32(init[k]);
      for (int32_t g = 0; g < P.ngroups; ++g) {
        const __m512i u = _mm512_xor_si512(_mm512_permutex2var_epi8(rows[P.ra[g]], P.idx[g], rows[P.rb[g]]), flip);
        for (int k = 0; k < NB; ++k) acc[k] = dpbusd(acc[k], u, _mm512_set1_epi32(w4[k][g]));
      }
      const __mmask16 lanes = __mmask16((1u << nl) - 1);
      int8_t* o = out + int64_t(cb - c0) * cstride + (pos - p0) + (x - ox0);
      if (all_fast) {
        for (int k0 = 0; k0 < NB && k0 < nb; k0 += 4) {
          __m512i r[4];
          for (int k = 0; k < 4; ++k) r[k] = rqs_fast_vec(acc[mini(k0 + k, NB - 1)], rqs[mini(k0 + k, NB - 1)]);
          store_rows_sat4(r, mini(4, nb - k0), nl, o + int64_t(k0) * cstride, cstride);
        }
        continue;
      }
      for (int k = 0; k < NB; ++k) {
        if (k >= nb) break;
        rqs_store(acc[k], rqs[k], lanes, o + int64_t(k) * cstride);
      }
    }
    pos += ox1 - ox0;
  }
}

// Depthwise-like convolutions (one input channel per output channel) with
// output rows narrower than 16 columns (7x7, 3x3 planes, either stride): 16
// consecutive output positions per vector, across row ends, so that a 7x7
// plane takes 4 vectors rather than 7 half-empty ones. Every (lane, tap)
// byte's place in the input is worked out once per call (shared by all the
// channels): for each chunk of 16 positions, one 128-byte span of the
// channel's window holds all the bytes its lanes read, and vpermt2b picks
// them; a byte whose row or column lies outside the image is the span's last
// byte, which is never loaded (the spans are at most 127 bytes) and holds the
// zero point. Returns false for layers it does not take (or a chunk whose
// bytes do not fit one span).
constexpr int32_t kFlatChunks = 16;  // up to 256 positions per call
constexpr int32_t kFlatGroups = 4;   // up to 16 taps

// conv_flat_small's plan of a call, the same for every channel: per chunk
// of kLanes positions, where its span starts in a channel's view, which of
// its 128 bytes may be read and the byte indices of each group of four
// taps. False if a chunk's taps span more than 127 bytes.
struct FlatPlan {
  int64_t start[kFlatChunks];
  __mmask64 mlo[kFlatChunks], mhi[kFlatChunks];
  __m512i idx[kFlatChunks][kFlatGroups];
};

// The 16 lanes of a chunk at once, tap by tap (the scalar loops over every
// (lane, tap) were a fifth of a 14x14 layer's time): a lane's view offset
// (int32: the view is checked to be below 2^30 bytes), -1 outside the image
// or past p1; the byte indices are the offsets less the span's start, 127
// for -1, four taps' bytes shifted into each dword.
bool plan_flat(const LayerDesc& L, const View& v, int32_t p0, int32_t p1, int32_t ngroups, int32_t nchunks,
               FlatPlan* fp) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t taps = L.kh * L.kw;
  const int64_t view_len = int64_t(v.nh) * X.w;
  if (view_len >= (int64_t(1) << 30)) return false;
  int32_t tdy[4 * kFlatGroups], tdx[4 * kFlatGroups];  // each tap's row and column offsets
  for (int32_t t = 0, ky = 0, kx = 0; t < taps; ++t) {
    tdy[t] = ky * L.dh - L.pad_t - v.h0;  // rows relative to the view's first
    tdx[t] = kx * L.dw - L.pad_l;
    if (++kx == L.kw) kx = 0, ++ky;
  }
  const __m512i none = _mm512_set1_epi32(-1), vw = _mm512_set1_epi32(X.w);
  const __m512i hlo = _mm512_set1_epi32(-v.h0), hn = _mm512_set1_epi32(X.h);  // image rows, relative to the view
  alignas(64) int32_t oy[kLanes], ox[kLanes];
  int32_t y = p0 / W, x = p0 % W;  // position q + j, advanced lane by lane
  for (int32_t c = 0; c < nchunks; ++c) {
    const int32_t q = p0 + kLanes * c;
    for (int32_t j = 0; j < kLanes; ++j) {
      oy[j] = y * L.sh;
      ox[j] = x * L.sw;
      if (++x == W) x = 0, ++y;
    }
    const __mmask16 live = p1 - q >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (p1 - q)) - 1);
    const __m512i vy = _mm512_load_si512(oy), vx = _mm512_load_si512(ox);
    __m512i where[4 * kFlatGroups];
    __m512i lo = _mm512_set1_epi32(INT32_MAX), hi = _mm512_set1_epi32(INT32_MIN);
    for (int32_t t = 0; t < 4 * ngroups; ++t) {
      if (t >= taps) {  // weight 0: any byte; the zero point's
        where[t] = none;
        continue;
      }
      const __m512i iy = _mm512_add_epi32(vy, _mm512_set1_epi32(tdy[t]));  // relative to the view
      const __m512i ixx = _mm512_add_epi32(vx, _mm512_set1_epi32(tdx[t]));
      const __mmask16 in = live & _mm512_cmpge_epi32_mask(iy, hlo) &
                           _mm512_cmplt_epi32_mask(_mm512_sub_epi32(iy, hlo), hn) &
                           _mm512_cmplt_epu32_mask(ixx, vw);
      const __m512i at = _mm512_add_epi32(_mm512_mullo_epi32(iy, vw), ixx);
      where[t] = _mm512_mask_mov_epi32(none, in, at);
      lo = _mm512_mask_min_epi32(lo, in, lo, at);
      hi = _mm512_mask_max_epi32(hi, in, hi, at);
    }
    int64_t l = _mm512_reduce_min_epi32(lo), h = _mm512_reduce_max_epi32(hi);
    if (l > h) l = h = 0;  // nothing inside the image: all zero points
    if (h - l > 126) return false;  // byte 127 stays the zero point
    fp->start[c] = l;
    const int64_t a = -l, b = view_len - l;  // readable bytes [a, b) of the span
    const int32_t a0 = int32_t(a < 0 ? 0 : (a > 128 ? 128 : a)), b0 = int32_t(b < 0 ? 0 : (b > 128 ? 128 : b));
    fp->mlo[c] = bits64(a0, b0);
    fp->mhi[c] = bits64(a0 - 64, mini(b0, 127) - 64);
    const __m512i vl = _mm512_set1_epi32(int32_t(l)), z127 = _mm512_set1_epi32(127);
    for (int32_t g = 0; g < ngroups; ++g) {
      __m512i word = _mm512_setzero_si512();
      for (int32_t b2 = 0; b2 < 4; ++b2) {
        const __m512i w = where[4 * g + b2];
        const __m512i byte = _mm512_mask_sub_epi32(z127, _mm512_cmpge_epi32_mask(w, _mm512_setzero_si512()), w, vl);
        word = _mm512_or_si512(word, _mm512_slli_epi32(byte, 8 * b2));
      }
      fp->idx[c][g] = word;
    }
  }
  return true;
}

bool conv_flat_small(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t taps = L.kh * L.kw;
  const int32_t n = p1 - p0;
  if (X.c / L.groups != 1 || W >= kLanes || L.kh < 1 || L.kw < 1 || taps > 4 * kFlatGroups ||
      n > kLanes * kFlatChunks)
    return false;
  const int32_t ngroups = (taps + 3) / 4, nchunks = (n + kLanes - 1) / kLanes;
  const int64_t view_len = int64_t(v.nh) * X.w;
  FlatPlan fp;
  if (!plan_flat(L, v, p0, p1, ngroups, nchunks, &fp)) return false;
  const int32_t zp = L.in_zp[0];
  const __m512i vzp = _mm512_set1_epi8(int8_t(zp));
  const __m512i flip = _mm512_set1_epi8(int8_t(-128));
  const int32_t cout_g = L.out.c / L.groups;
  const __mmask16 tapmask = __mmask16((1u << taps) - 1);
  // Channels 16 at a time: their starting values (bias - (zp + 128) *
  // sum(w)) and the by_sign requantisers' constants set up together with
  // vector code (per channel, that set-up cost about as much as the channel's
  // multiply-adds on 7x7 and 3x3 planes); a channel without the by_sign form
  // gets its RqS.
  RqSignRow sg;
  bool with_sign = false, without_sign = false;  // for the tests (count_path), once per call
  auto run = [&](auto ng_const) {
    constexpr int NG = decltype(ng_const)::value;
    for (int32_t ob = c0; ob < c1; ob += 16) {
      const int32_t nk = mini(16, c1 - ob), l0 = ob - L.oc_base;
      __m512i wsum[16];
      for (int32_t k = 0; k < 16; ++k)
        wsum[k] = k < nk ? _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(tapmask, L.weights + int64_t(l0 + k) * taps))
                         : _mm512_setzero_si512();
      const __mmask16 live = __mmask16((1u << nk) - 1);
      const __m512i bias = L.bias ? _mm512_maskz_loadu_epi32(live, L.bias + l0) : _mm512_setzero_si512();
      alignas(64) int32_t init16[16];
      _mm512_store_si512(init16, _mm512_sub_epi32(bias, _mm512_mullo_epi32(sums16(wsum), _mm512_set1_epi32(zp + 128))));
      const bool all = rq_sign_row(L.mult + l0, L.shift + l0, nk, L.out_zp, L.act_min, L.act_max, &sg);
      bool some = all;  // some channel has the by_sign form
      for (int32_t k = 0; k < nk && !some; ++k) some = sg.ok[k];
      with_sign |= some;
      without_sign |= !all;
      for (int32_t k = 0; k < nk; ++k) {
        const int32_t o = ob + k;
        // The channel's taps as they are stored are the four-tap words
        // vpdpbusd wants (taps past the end 0).
        alignas(16) int32_t w4[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(w4), _mm_maskz_loadu_epi8(tapmask, L.weights + int64_t(l0 + k) * taps));
        __m512i wb[NG];
        for (int g = 0; g < NG; ++g) wb[g] = _mm512_set1_epi32(w4[g]);
        const __m512i init = _mm512_set1_epi32(init16[k]);
        const int32_t ci = cout_g == 1 ? o : o / cout_g;
        const uintptr_t plane = uintptr_t(v.data) + uintptr_t(intptr_t(int64_t(ci - v.c0) * view_len));
        int8_t* dst = out + int64_t(o - c0) * cstride;
        auto chunk = [&](int32_t c) {
          const uintptr_t at = plane + uintptr_t(intptr_t(fp.start[c]));
          // The span as u = x + 128 (the zero point's u where not loaded).
          const __m512i lo = _mm512_xor_si512(_mm512_mask_loadu_epi8(vzp, fp.mlo[c], reinterpret_cast<const void*>(at)), flip);
          const __m512i hi = _mm512_xor_si512(_mm512_mask_loadu_epi8(vzp, fp.mhi[c], reinterpret_cast<const void*>(at + 64)), flip);
          __m512i acc = init;
          for (int g = 0; g < NG; ++g)
            acc = dpbusd(acc, _mm512_permutex2var_epi8(lo, fp.idx[c][g], hi), wb[g]);
          return acc;
        };
        // Up to four chunks (consecutive positions) requantised by rq(acc)
        // and narrowed into one store.
        auto by_fours = [&](auto rq) {
          for (int32_t c = 0; c < nchunks; c += 4) {
            const int32_t nc = mini(4, nchunks - c);
            __m512i r[4];
            for (int32_t j = 0; j < 4; ++j) r[j] = j < nc ? rq(chunk(c + j)) : r[nc - 1];
            const int32_t nb = mini(4 * kLanes, n - kLanes * c);
            if (nc <= 2)
              store_bytes_sat<2>(r, nb, dst + kLanes * c);
            else
              store_bytes_sat<4>(r, nb, dst + kLanes * c);
          }
        };
        if (all || sg.ok[k]) {
          const SignK q = sign_k(sg, k);
          by_fours([&](__m512i acc) { return sign_vec(acc, q); });
          continue;
        }
        RqS rq;
        rqs_make(Requant(L.mult[l0 + k], L.shift[l0 + k], L.out_zp, L.act_min, L.act_max), &rq, false);
        if (rq.fast) {
          by_fours([&](__m512i acc) { return rqs_fast_vec<false>(acc, rq); });
          continue;
        }
        for (int32_t c = 0; c < nchunks; ++c) {
          const int32_t nl = mini(kLanes, n - kLanes * c);
          rqs_store<false>(chunk(c), rq, __mmask16((1u << nl) - 1), dst + kLanes * c);
        }
      }
    }
  };
  switch (ngroups) {
    case 1: run(std::integral_constant<int, 1>()); break;
    case 2: run(std::integral_constant<int, 2>()); break;
    case 3: run(std::integral_constant<int, 3>()); break;
    default: run(std::integral_constant<int, 4>()); break;
  }
  if (with_sign) count_path(Path::kFlatSignRow);
  if (without_sign) count_path(Path::kFlatRqS);
  return true;
}

// The phase paths' weight words: per kernel row (a, b, c) = w[3ky..3ky+2],
// [a b c 0], [0 a b c], [0 0 a b], [c 0 0 0], [0 0 0 a], [b c 0 0] as
// little-endian words, each in every lane.
TS_ALWAYS_INLINE void phase_weights(const int8_t* w, __m512i wp[3][6]) {
  for (int ky = 0; ky < 3; ++ky) {
    const uint32_t a = uint8_t(w[3 * ky]), b = uint8_t(w[3 * ky + 1]), c = uint8_t(w[3 * ky + 2]);
    const uint32_t words[6] = {a | b << 8 | c << 16, a << 8 | b << 16 | c << 24, a << 16 | b << 24, c, a << 24, b | c << 8};
    for (int k = 0; k < 6; ++k) wp[ky][k] = _mm512_set1_epi32(int32_t(words[k]));
  }
}

// One kernel row's taps into the four stride-1 phases (R: the row's window,
// R4: the window 4 bytes on; wk: that row's six weight words).
TS_ALWAYS_INLINE void four_phases(__m512i* acc, __m512i R, __m512i R4, const __m512i* wk) {
  acc[0] = dpbusd(acc[0], R, wk[0]);
  acc[1] = dpbusd(acc[1], R, wk[1]);
  acc[2] = dpbusd(acc[2], R, wk[2]);
  acc[2] = dpbusd(acc[2], R4, wk[3]);
  acc[3] = dpbusd(acc[3], R, wk[4]);
  acc[3] = dpbusd(acc[3], R4, wk[5]);
}

// Depthwise 3x3, column stride 1, one channel on rows at least 48 wide: 64
// output columns per step in four phases: lane j of phase r is column
// x + 4j + r. Dword j of a row's 64-byte window R (starting at the input
// column of column x's first tap) holds R[4j..4j+3], of R4 (the window 4
// bytes on) R[4j+4..4j+7], so with the row's taps (a, b, c) as shifted weight
// words, phase 0 is R * [a b c 0], 1 is R * [0 a b c], 2 is R * [0 0 a b] +
// R4 * [c 0 0 0], 3 is R * [0 0 0 a] + R4 * [b c 0 0]: 18 vpdpbusd per 64
// columns and no byte permutes for the operands (the 32-column path: 12
// vpdpbusd and 12 permutes), one vpermb for the output bytes.
//
// Column stride 2 (SW = 2): 32 columns per step in two phases, lane j of
// phase r being column x + 2j + r, whose taps are bytes 4j + 2r + kx of R:
// phase 0 is R * [a b c 0], phase 1 R * [0 0 a b] + R4 * [c 0 0 0] (9
// vpdpbusd per 32 columns against 6 and 6 byte permutes in two halves).
template <int SW>
__attribute__((noinline)) void dw3_phases(const LayerDesc& L, uintptr_t base, const int8_t* w, __m512i init, const RqS& rq,
                                          int32_t p0, int32_t p1, int8_t* dst) {
  constexpr int32_t kStep = 64 / SW;  // output columns per step
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const __m512i vzp = _mm512_set1_epi8(int8_t(L.in_zp[0])), flip = _mm512_set1_epi8(int8_t(-128));
  alignas(64) uint8_t unph[64] = {};  // output byte 4j + r (SW 2: 2j + r) <- packed byte 16 (j / 4) + 4r + j % 4
  for (int32_t j = 0; j < kLanes; ++j)
    for (int32_t r = 0; r < 4 / SW; ++r) unph[(4 / SW) * j + r] = uint8_t(16 * (j / 4) + 4 * r + j % 4);
  const __m512i unphase = _mm512_load_si512(unph);
  __m512i wp[3][6];
  phase_weights(w, wp);
  int32_t pos = p0;
  while (pos < p1) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t ox1 = mini(W, ox0 + (p1 - pos));
    const int32_t iy0 = oy * L.sh - L.pad_t;
    bool in[3];
    for (int ky = 0; ky < 3; ++ky) in[ky] = iy0 + ky >= 0 && iy0 + ky < X.h;
    const uintptr_t at0 = base + uintptr_t(intptr_t(int64_t(iy0) * X.w));
    for (int32_t x = ox0; x < ox1; x += kStep) {
      const int32_t col0 = x * SW - L.pad_l;
      const __mmask64 cols = bits64(-col0, X.w - col0), cols4 = bits64(-col0 - 4, X.w - col0 - 4);
      __m512i acc[4] = {init, init, init, init};
      for (int ky = 0; ky < 3; ++ky) {
        const uintptr_t at = at0 + uintptr_t(intptr_t(int64_t(ky) * X.w + col0));
        const __m512i R =
            _mm512_xor_si512(in[ky] ? _mm512_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at)) : vzp, flip);
        const __m512i R4 =
            _mm512_xor_si512(in[ky] ? _mm512_mask_loadu_epi8(vzp, cols4, reinterpret_cast<const void*>(at + 4)) : vzp, flip);
        if (SW == 1) {
          four_phases(acc, R, R4, wp[ky]);
        } else {
          acc[0] = dpbusd(acc[0], R, wp[ky][0]);
          acc[1] = dpbusd(acc[1], R, wp[ky][2]);
          acc[1] = dpbusd(acc[1], R4, wp[ky][3]);
        }
      }
      // Packed, dword 4L + r holds phase r's lanes 4L..4L+3 (bytes): lane j
      // of phase r (column 4j + r) is byte 16 (j / 4) + 4r + j % 4.
      // (At stride 2 the same with phases 0 and 1, and 2 and 3 as copies of
      // them: lane j of phase r, column 2j + r, is byte 16 (j / 4) + 4r + j % 4.)
      __m512i r[4];
      for (int k = 0; k < 4 / SW; ++k) r[k] = rqs_fast_vec(acc[k], rq);
      if (SW == 2) r[2] = r[0], r[3] = r[1];
      const __m512i bytes =
          _mm512_permutexvar_epi8(unphase, _mm512_packs_epi16(_mm512_packs_epi32(r[0], r[1]), _mm512_packs_epi32(r[2], r[3])));
      const int32_t nb = mini(kStep, ox1 - x);
      int8_t* d = dst + (pos - p0) + (x - ox0);
      if (nb >= 64)
        _mm512_storeu_si512(d, bytes);
      else
        _mm512_mask_storeu_epi8(d, __mmask64((uint64_t(1) << nb) - 1), bytes);
    }
    pos += ox1 - ox0;
  }
}

// Depthwise 3x3, column stride 1, one channel on rows 16 to 32 wide (28x28
// planes): the phases of dw3_phases with two output rows per step, the
// first in lanes 0-7 of each phase, the next in lanes 8-15: each operand is
// the two rows' 32-byte windows (two masked 256-bit loads). A step starts
// at any position; its first row's columns [ox0, W) and, where the range
// goes on, the next row's first columns are stored, one vpermb putting the
// bytes in position order. Input rows outside [y_lo, y_hi) (the image's
// rows the view holds) read as the zero point: the second row of the last
// step may be one whose positions are not stored, and its inputs may lie
// past the view's rows.
__attribute__((noinline)) void dw3_row_pairs(const LayerDesc& L, uintptr_t base, const int8_t* w, __m512i init,
                                             const RqS& rq, int32_t p0, int32_t p1, int32_t y_lo, int32_t y_hi,
                                             int8_t* dst) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, OH = L.out.h;
  const __m256i vzp = _mm256_set1_epi8(int8_t(L.in_zp[0]));
  const __m512i flip = _mm512_set1_epi8(int8_t(-128));
  alignas(64) uint8_t ix[64] = {};  // byte row * W + col <- packed byte of lane j = 8 row + col / 4, phase col % 4
  for (int32_t row = 0; row < 2; ++row)
    for (int32_t col = 0; col < W; ++col) {
      const int32_t j = 8 * row + col / 4, r = col % 4;
      ix[row * W + col] = uint8_t(16 * (j / 4) + 4 * r + j % 4);
    }
  const __m512i order = _mm512_load_si512(ix);
  __m512i wp[3][6];
  phase_weights(w, wp);
  const int32_t col0 = -L.pad_l;  // input column of column 0's first tap
  const __mmask32 cols = __mmask32(bits64(-col0, X.w - col0)), cols4 = __mmask32(bits64(-col0 - 4, X.w - col0 - 4));
  int32_t pos = p0;
  while (pos < p1) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t n = mini(p1 - pos, (W - ox0) + (oy + 1 < OH ? W : 0));  // positions stored this step
    const int32_t iy0 = oy * L.sh - L.pad_t;
    __m512i acc[4] = {init, init, init, init};
    for (int ky = 0; ky < 3; ++ky) {
      __m256i h[2], h4[2];
      for (int row = 0; row < 2; ++row) {
        const int32_t iy = iy0 + row * L.sh + ky;
        if (iy < y_lo || iy >= y_hi) {
          h[row] = h4[row] = vzp;
          continue;
        }
        const uintptr_t at = base + uintptr_t(intptr_t(int64_t(iy) * X.w + col0));
        h[row] = _mm256_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at));
        h4[row] = _mm256_mask_loadu_epi8(vzp, cols4, reinterpret_cast<const void*>(at + 4));
      }
      const __m512i R = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(h[0]), h[1], 1), flip);
      const __m512i R4 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(h4[0]), h4[1], 1), flip);
      four_phases(acc, R, R4, wp[ky]);
    }
    __m512i r[4];
    for (int k = 0; k < 4; ++k) r[k] = rqs_fast_vec(acc[k], rq);
    const __m512i bytes =
        _mm512_permutexvar_epi8(order, _mm512_packs_epi16(_mm512_packs_epi32(r[0], r[1]), _mm512_packs_epi32(r[2], r[3])));
    // Byte ox0 + i is position pos + i: store bytes [ox0, ox0 + n) at dst + (pos - p0) - ox0.
    _mm512_mask_storeu_epi8(dst + (pos - p0) - ox0, bits64(ox0, ox0 + n), bytes);
    pos += n;
  }
}

// Depthwise 3x3 (dilation 1, column stride 1 or 2) on wider planes: the
// general block path with one channel, its three rows held in registers and
// its constants set up once per channel. For column stride 1, 32 output
// columns per step (two accumulators from the same three row loads).
bool depthwise3x3(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, sw = L.sw;
  if (X.c / L.groups != 1 || L.kh != 3 || L.kw != 3 || L.dh != 1 || L.dw != 1 || sw < 1 || sw > 2 || L.sh < 1)
    return false;
  const int32_t step = sw == 1 ? 2 * kLanes : kLanes;  // output columns per step
  alignas(64) uint8_t ix[3][2][64];
  for (int32_t h = 0; h < 2; ++h)
    for (int32_t j = 0; j < kLanes; ++j)
      for (int32_t b = 0; b < 4; ++b) {
        const int32_t col = (j + h * kLanes) * sw;
        // Taps 0-3: row 0 kx 0..2, row 1 kx 0; 4-7: row 1 kx 1..2, row 2 kx 0..1; 8: row 2 kx 2.
        ix[0][h][4 * j + b] = uint8_t(b < 3 ? col + b : 64 + col);
        ix[1][h][4 * j + b] = uint8_t(b < 2 ? col + 1 + b : 64 + col + (b - 2));
        ix[2][h][4 * j + b] = uint8_t(col + 2);
      }
  __m512i idx[3][2];
  for (int g = 0; g < 3; ++g)
    for (int h = 0; h < 2; ++h) idx[g][h] = _mm512_load_si512(ix[g][h]);
  const int32_t zp = L.in_zp[0];
  const __m512i vzp = _mm512_set1_epi8(int8_t(zp)), flip = _mm512_set1_epi8(int8_t(-128));
  const int32_t cout_g = L.out.c / L.groups;
  const int64_t plane = int64_t(v.nh) * X.w;
  for (int32_t o = c0; o < c1; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * 9;
    int32_t sum = 0;
    for (int t = 0; t < 9; ++t) sum += w[t];
    auto word = [&](int t0, int n) {
      uint32_t r = 0;
      for (int b = 0; b < n; ++b) r |= uint32_t(uint8_t(w[t0 + b])) << (8 * b);
      return int32_t(r);
    };
    const __m512i w0 = _mm512_set1_epi32(word(0, 4)), w1 = _mm512_set1_epi32(word(4, 4)), w2 = _mm512_set1_epi32(word(8, 1));
    const __m512i init = _mm512_set1_epi32(int32_t(uint32_t(int64_t(L.bias ? L.bias[local] : 0) - int64_t(zp + 128) * sum)));
    RqS rq;
    rqs_make(Requant(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max), &rq);
    const uintptr_t base =
        uintptr_t(v.data) + uintptr_t(intptr_t(int64_t(o / cout_g - v.c0) * plane - int64_t(v.h0) * X.w));
    int8_t* dst = out + int64_t(o - c0) * cstride;
    if (sw == 1 && W >= 48 && rq.fast) {
      dw3_phases<1>(L, base, w, init, rq, p0, p1, dst);
      continue;
    }
    if (sw == 2 && rq.fast) {
      dw3_phases<2>(L, base, w, init, rq, p0, p1, dst);
      continue;
    }
    if (sw == 1 && W >= 16 && W <= 32 && rq.fast) {
      dw3_row_pairs(L, base, w, init, rq, p0, p1, maxi(v.h0, 0), mini(v.h0 + v.nh, X.h), dst);
      continue;
    }
    int32_t pos = p0;
    while (pos < p1) {
      const int32_t oy = pos / W, ox0 = pos % W;
      const int32_t ox1 = mini(W, ox0 + (p1 - pos));
      const int32_t iy0 = oy * L.sh - L.pad_t;
      const bool in0 = iy0 >= 0 && iy0 < X.h, in1 = iy0 + 1 >= 0 && iy0 + 1 < X.h, in2 = iy0 + 2 >= 0 && iy0 + 2 < X.h;
      for (int32_t x = ox0; x < ox1; x += step) {
        const int32_t col0 = x * sw - L.pad_l;
        const __mmask64 cols = bits64(-col0, X.w - col0);
        const uintptr_t at = base + uintptr_t(intptr_t(int64_t(iy0) * X.w + col0));
        const __m512i r0 = _mm512_xor_si512(in0 ? _mm512_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at)) : vzp, flip);
        const __m512i r1 = _mm512_xor_si512(
            in1 ? _mm512_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at + uintptr_t(X.w))) : vzp, flip);
        const __m512i r2 = _mm512_xor_si512(
            in2 ? _mm512_mask_loadu_epi8(vzp, cols, reinterpret_cast<const void*>(at + 2 * uintptr_t(X.w))) : vzp, flip);
        int8_t* d = dst + (pos - p0) + (x - ox0);
        const int32_t nl = mini(step, ox1 - x);
        if (sw == 1 && rq.fast) {  // both halves' bytes in one store
          __m512i r[2];
          for (int h = 0; h < 2; ++h) {
            __m512i a = dpbusd(init, _mm512_permutex2var_epi8(r0, idx[0][h], r1), w0);
            a = dpbusd(a, _mm512_permutex2var_epi8(r1, idx[1][h], r2), w1);
            a = dpbusd(a, _mm512_permutexvar_epi8(idx[2][h], r2), w2);
            r[h] = rqs_fast_vec(a, rq);
            if (nl <= kLanes) {
              r[1] = r[0];
              break;
            }
          }
          store_bytes_sat<2>(r, nl, d);
          continue;
        }
        for (int h = 0; h < step / kLanes; ++h) {
          if (h * kLanes >= nl) break;
          __m512i a = dpbusd(init, _mm512_permutex2var_epi8(r0, idx[0][h], r1), w0);
          a = dpbusd(a, _mm512_permutex2var_epi8(r1, idx[1][h], r2), w1);
          a = dpbusd(a, _mm512_permutexvar_epi8(idx[2][h], r2), w2);
          const int32_t left = nl - h * kLanes;
          rqs_store(a, rq, left >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1), d + h * kLanes);
        }
      }
      pos += ox1 - ox0;
    }
  }
  return true;
}

}  // namespace

bool conv_block_vbmi(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride) {
  const int32_t cin_g = L.in[0].c / L.groups, cout_g = L.out.c / L.groups;
  if (conv_lanes_vbmi(L, v, c0, c1, p0, p1, out, cstride)) return true;
  if (conv_flat_small(L, v, c0, c1, p0, p1, out, cstride)) return true;
  if (depthwise3x3(L, v, c0, c1, p0, p1, out, cstride)) return true;
  TapPlan P;
  if (!make_plan(L, cin_g, &P)) return false;
  for (int32_t c = c0; c < c1;) {
    const int32_t ge = mini(c1, (c / cout_g + 1) * cout_g);  // end of c's group
    while (c < ge) {
      const int32_t nb = mini(8, ge - c);
      if (nb == 1)
        conv_channels<1>(L, v, P, c0, c, 1, p0, p1, out, cstride);
      else if (nb <= 4)
        conv_channels<4>(L, v, P, c0, c, nb, p0, p1, out, cstride);
      else
        conv_channels<8>(L, v, P, c0, c, nb, p0, p1, out, cstride);
      c += nb;
    }
  }
  return true;
}

}  // namespace x86
}  // namespace core
}  // namespace ts
