// Vectorised Requant (core/requant.h) on 8 int32 lanes, AVX2, bit-identical
// to Requant::scale / operator() for every input. Internal to the x86
// variant files (internal linkage).
//
// Requant::scale (non-exact case) is, per lane:
//   x' = x saturating-shifted left by `left`
//   t  = x' * m + 2^30                          (int64)
//   r  = int32((t + half + (t < 0 ? neg : 0)) >> total)   (arithmetic)
// AVX2 has the 32x32->64 signed multiply (even lanes; odd lanes after a
// 32-bit shift) and 64-bit compares, but no 64-bit arithmetic shift: for a
// signed v, floor(v / 2^k) = ((v + 2^63) >>> k) - 2^(63-k), with v + 2^63
// (mod 2^64) being v with its top bit flipped; k = total is in [31, 62], and
// only the low 32 bits are kept, as the scalar cast does.
// The clamp r + zp into [lo, hi] (int64 in the scalar) is done as
// clamp(r, lo - zp, hi - zp) + zp, equal when lo <= hi and the bounds are
// small (checked by vec_ok; anything else goes to the scalar code).
#pragma once

#include <immintrin.h>

#include "core/requant.h"

namespace ts {
namespace core {
namespace x86 {
namespace {

// N objects of T (trivially destructible) left uninitialised, for arrays of
// requantisers filled only where used: Requant's default member
// initialisers cost ten stores per element, and the pointwise paths' arrays
// of 256 were zeroed on every call (about 1 % of a whole run at 112, most of
// `pointwise`'s own time in `perf`).
template <class T, int N>
struct Uninit {
  union {
    T v[N];
  };
  Uninit() {}
};

struct RqVec {
  __m256i m, hi_lim, lo_lim, c30, half, neg, sign, corr, lo, hi, zp;
  __m128i left_cnt, total_cnt;
  bool left;
};

inline bool vec_ok(const Requant& rq) {
  const int32_t B = 1 << 24;
  return !rq.exact && rq.lo <= rq.hi && rq.zp >= -B && rq.zp <= B && rq.lo >= -B && rq.hi <= B && rq.left >= 0 &&
         rq.left <= 31 && rq.total >= 31 && rq.total <= 62;
}

inline RqVec rq_vec(const Requant& rq) {
  RqVec c;
  c.m = _mm256_set1_epi32(rq.m);
  c.left = rq.left > 0;
  c.hi_lim = _mm256_set1_epi32(INT32_MAX >> rq.left);
  c.lo_lim = _mm256_set1_epi32(INT32_MIN >> rq.left);
  c.left_cnt = _mm_cvtsi32_si128(rq.left);
  c.total_cnt = _mm_cvtsi32_si128(rq.total);
  c.c30 = _mm256_set1_epi64x(int64_t(1) << 30);
  c.half = _mm256_set1_epi64x(rq.half);
  c.neg = _mm256_set1_epi64x(rq.neg);
  c.sign = _mm256_set1_epi64x(INT64_MIN);
  c.corr = _mm256_set1_epi64x(int64_t(uint64_t(1) << (63 - rq.total)));
  c.lo = _mm256_set1_epi32(rq.lo - rq.zp);
  c.hi = _mm256_set1_epi32(rq.hi - rq.zp);
  c.zp = _mm256_set1_epi32(rq.zp);
  return c;
}

inline __m256i rq_fin(__m256i p, const RqVec& c) {
  __m256i t = _mm256_add_epi64(p, c.c30);
  const __m256i negm = _mm256_cmpgt_epi64(_mm256_setzero_si256(), t);
  t = _mm256_add_epi64(t, _mm256_add_epi64(c.half, _mm256_and_si256(negm, c.neg)));
  t = _mm256_srl_epi64(_mm256_xor_si256(t, c.sign), c.total_cnt);
  return _mm256_sub_epi64(t, c.corr);
}

// Requant::scale on 8 lanes.
inline __m256i rq_scale(__m256i x, const RqVec& c) {
  if (c.left) {
    const __m256i over = _mm256_cmpgt_epi32(x, c.hi_lim);
    const __m256i under = _mm256_cmpgt_epi32(c.lo_lim, x);
    __m256i xs = _mm256_sll_epi32(x, c.left_cnt);
    xs = _mm256_blendv_epi8(xs, _mm256_set1_epi32(INT32_MAX), over);
    x = _mm256_blendv_epi8(xs, _mm256_set1_epi32(INT32_MIN), under);
  }
  const __m256i pe = rq_fin(_mm256_mul_epi32(x, c.m), c);
  const __m256i po = rq_fin(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), c.m), c);
  return _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

// Requant::operator() on 8 lanes, as int32 in [lo, hi].
inline __m256i rq_apply(__m256i acc, const RqVec& c) {
  __m256i r = rq_scale(acc, c);
  r = _mm256_min_epi32(_mm256_max_epi32(r, c.lo), c.hi);
  return _mm256_add_epi32(r, c.zp);
}

// The usual case in fewer instructions (what the AVX2 kernels' epilogues
// use): no left shift, total = 31 + e in [33, 50], |zp| <= 128 and a clamp
// inside int8. Then, per lane, with p = x * m (int64, vpmuldq):
//  - the zero point goes into the 64-bit constant as zp * 2^total, an exact
//    multiple of the divisor: floor((v + zp * 2^total) / 2^total) =
//    floor(v / 2^total) + zp, no int64 overflow (|p| <= 2^62, half <= 2^49,
//    |zp * 2^total| <= 2^57), and the result (below 2^30 in magnitude) is
//    Requant's int64 scale + zp;
//  - t < 0 (Requant's t = p + 2^30) is p < -2^30, one 64-bit compare;
//  - floor(v / 2^total) = floor(floor(v / 2^32) / 2^(total - 32)): the high
//    dword of v, then a 32-bit arithmetic shift, so no 64-bit arithmetic
//    shift (AVX2 has none) and the even/odd halves merge with one blend;
//  - the clamp to [lo, hi] in int32; with lo = -128, hi = 127 it is the
//    saturating pack's own.
// Its constants are kept as scalars (broadcast from memory where used), so
// that a kernel can set up one per output channel cheaply.
//
// Shorter still (`by_sign`, 11 instructions per 8 lanes against 14) when
// 0 < m <= 2^31 - 2^28:
//  - t < 0 may be replaced by x < 0: they differ only for -2^30 <= x*m < 0,
//    where both forms give floor(v / 2^total) = zp (v - zp * 2^total lies in
//    [2^(total-1) - 2^31, 2^(total-1) + 2^30), inside [0, 2^total) for
//    total >= 33);
//  - then, with v = p + addz, the result is floor((h - [x < 0]) / 2^e) with
//    h = floor(v / 2^31) (a floor of a floor: [x < 0] * 2^31 is a multiple
//    of 2^31) and e = total - 31: h is bits 31-62 of v (vpsrlq by 31 on even
//    lanes, vpsllq by 1 on odd ones, one blend), [x < 0] is vpsrad(x, 31),
//    and one 32-bit arithmetic shift by e ends it;
//  - the bound on m keeps h - 1 inside int32: |p| <= 2^31 * m <= 2^62 -
//    2^59 and |addz| < 2^58 (|zp| <= 128, total <= 50), so |v| < 2^62 - 2^58.
struct RqF {
  int64_t addz, neg;
  int32_t m, lo, hi, sh;  // sh = total - 32
  bool clamp, by_sign;
};

inline bool rqf_ok(const Requant& rq) {
  return !rq.exact && rq.left == 0 && rq.total >= 33 && rq.total <= 50 && rq.zp >= -128 && rq.zp <= 128 &&
         rq.lo >= -128 && rq.lo <= rq.hi && rq.hi <= 127;
}

inline void rqf_make(const Requant& rq, RqF* c) {
  c->m = rq.m;
  c->addz = (int64_t(1) << 30) + rq.half + int64_t(rq.zp) * (int64_t(1) << (rq.total & 63));
  c->neg = rq.neg;
  c->lo = rq.lo;
  c->hi = rq.hi;
  c->sh = rq.total - 32;
  c->clamp = rq.lo > -128 || rq.hi < 127;
  c->by_sign = rq.m > 0 && rq.m <= INT32_MAX - (int32_t(1) << 28) + 1;
}

inline __m256i rqf_half(__m256i p, const RqF& c) {
  const __m256i negative = _mm256_cmpgt_epi64(_mm256_set1_epi64x(-(int64_t(1) << 30)), p);
  return _mm256_add_epi64(_mm256_add_epi64(p, _mm256_set1_epi64x(c.addz)),
                          _mm256_and_si256(negative, _mm256_set1_epi64x(c.neg)));
}

// Requant::operator() on 8 lanes (as int32; in [lo, hi] when c.clamp, else
// to be narrowed with saturation, which is the same).
inline __m256i rqf_apply(__m256i x, const RqF& c) {
  const __m256i m = _mm256_set1_epi32(c.m);
  if (c.by_sign) {
    const __m256i az = _mm256_set1_epi64x(c.addz);
    const __m256i ve = _mm256_add_epi64(_mm256_mul_epi32(x, m), az);
    const __m256i vo = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m), az);
    const __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(ve, 31), _mm256_slli_epi64(vo, 1), 0xAA);
    __m256i r = _mm256_sra_epi32(_mm256_add_epi32(h, _mm256_srai_epi32(x, 31)), _mm_cvtsi32_si128(c.sh + 1));
    if (c.clamp) r = _mm256_min_epi32(_mm256_max_epi32(r, _mm256_set1_epi32(c.lo)), _mm256_set1_epi32(c.hi));
    return r;
  }
  const __m256i pe = rqf_half(_mm256_mul_epi32(x, m), c);
  const __m256i po = rqf_half(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m), c);
  __m256i r = _mm256_sra_epi32(_mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA), _mm_cvtsi32_si128(c.sh));
  if (c.clamp) r = _mm256_min_epi32(_mm256_max_epi32(r, _mm256_set1_epi32(c.lo)), _mm256_set1_epi32(c.hi));
  return r;
}

// One output channel's requantiser in whichever form applies: the fast one,
// the general vector one (rq_vec, set up per use: rare), or Requant lane by
// lane. The vector forms are used only with a clamp inside int8, where the
// saturating narrowing equals Requant's int8 result.
struct Rq8 {
  Requant rq;
  RqF f;
  int mode;  // 2: fast, 1: general vector, 0: scalar
};

inline void rq8_make(const Requant& rq, Rq8* c) {
  c->rq = rq;
  c->mode = rqf_ok(rq) ? 2 : vec_ok(rq) && rq.lo >= -128 && rq.hi <= 127 ? 1 : 0;
  if (c->mode == 2) rqf_make(rq, &c->f);
}

inline __m128i pack16(__m256i a, __m256i b);
inline __m128i pack16_il(__m256i a, __m256i b);

// 16 accumulators -> 16 bytes. IL false: a holds lanes 0-7, b 8-15; IL
// true: a holds 0-3 and 8-11, b 4-7 and 12-15 (unpacklo/hi order).
template <bool IL>
inline __m128i rq8_16(__m256i a, __m256i b, const Rq8& c) {
  if (c.mode == 2) {
    const __m256i x = rqf_apply(a, c.f), y = rqf_apply(b, c.f);
    return IL ? pack16_il(x, y) : pack16(x, y);
  }
  if (c.mode == 1) {
    const RqVec v = rq_vec(c.rq);
    const __m256i x = rq_apply(a, v), y = rq_apply(b, v);
    return IL ? pack16_il(x, y) : pack16(x, y);
  }
  alignas(32) int32_t t[16];
  alignas(16) int8_t o[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), a);
  _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), b);
  static const int kIl[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  for (int k = 0; k < 16; ++k) o[IL ? kIl[k] : k] = c.rq(t[k]);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(o));
}

// n <= 16 bytes of v to out.
inline void store_n(int8_t* out, __m128i v, int32_t n) {
  if (n >= 16) return _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
  alignas(16) int8_t t[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(t), v);
  for (int32_t k = 0; k < n; ++k) out[k] = t[k];
}

// 16 int32 lanes already in int8 range -> 16 bytes.
inline __m128i pack16(__m256i a, __m256i b) {
  const __m128i a16 = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packs_epi16(a16, b16);
}

// The same for lanes in unpacklo/hi order (rq8_16).
inline __m128i pack16_il(__m256i a, __m256i b) {
  const __m256i w = _mm256_packs_epi32(a, b);  // int16, positions 0-7 | 8-15
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi16(w, w), 0x08));
}

}  // namespace
}  // namespace x86
}  // namespace core
}  // namespace ts
