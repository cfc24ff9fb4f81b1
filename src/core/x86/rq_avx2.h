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

// 16 int32 lanes already in int8 range -> 16 bytes.
inline __m128i pack16(__m256i a, __m256i b) {
  const __m128i a16 = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packs_epi16(a16, b16);
}

}  // namespace
}  // namespace x86
}  // namespace core
}  // namespace ts
