// Requant (core/requant.h) on 16 int32 lanes with AVX-512, bit-identical to
// Requant::scale / operator() wherever vec_ok (rq_avx2.h) holds. Internal to
// the AVX-512 variant files (internal linkage); include after rq_avx2.h.
#pragma once

#include <immintrin.h>

#include "core/requant.h"

namespace ts {
namespace core {
namespace x86 {
namespace {

// Requant (core/requant.h) on 16 lanes with AVX-512: the same integer
// function as Requant::scale / operator() (see rq_avx2.h for the steps;
// AVX-512 has the 64-bit arithmetic shift, and a saturating narrowing store).
// acc + the four u8 x s8 byte products of each lane (vpdpbusd, wrapping).
// As inline assembly: GCC 12 copies the accumulator around every
// _mm512_dpbusd_epi32 in a loop (and keeps it in memory), several times the
// instruction's own cost.
TS_ALWAYS_INLINE __m512i dpbusd(__m512i acc, __m512i u, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(w));
  return acc;
}

struct Rq512 {
  __m512i m, hi_lim, lo_lim, add, neg, lo, hi, zp;
  __m128i total;
  int32_t left;
};

TS_ALWAYS_INLINE Rq512 rq512(const Requant& rq) {
  Rq512 c;
  c.m = _mm512_set1_epi32(rq.m);
  c.left = rq.left;
  c.hi_lim = _mm512_set1_epi32(INT32_MAX >> rq.left);
  c.lo_lim = _mm512_set1_epi32(INT32_MIN >> rq.left);
  c.add = _mm512_set1_epi64((int64_t(1) << 30) + rq.half);
  c.neg = _mm512_set1_epi64(rq.neg);
  c.total = _mm_cvtsi32_si128(rq.total);
  c.lo = _mm512_set1_epi32(rq.lo - rq.zp);
  c.hi = _mm512_set1_epi32(rq.hi - rq.zp);
  c.zp = _mm512_set1_epi32(rq.zp);
  return c;
}

TS_ALWAYS_INLINE __m512i rq512_half(__m512i p, const Rq512& c) {
  // t = p + 2^30 is negative exactly when p < -2^30.
  const __mmask8 negative = _mm512_cmplt_epi64_mask(p, _mm512_set1_epi64(-(int64_t(1) << 30)));
  __m512i t = _mm512_add_epi64(p, c.add);
  t = _mm512_mask_add_epi64(t, negative, t, c.neg);
  return _mm512_sra_epi64(t, c.total);
}

// Requant::scale on 16 lanes.
TS_ALWAYS_INLINE __m512i rq512_scale(__m512i x, const Rq512& c) {
  if (c.left) {
    const __mmask16 over = _mm512_cmpgt_epi32_mask(x, c.hi_lim), under = _mm512_cmplt_epi32_mask(x, c.lo_lim);
    x = _mm512_sll_epi32(x, _mm_cvtsi32_si128(c.left));
    x = _mm512_mask_mov_epi32(x, over, _mm512_set1_epi32(INT32_MAX));
    x = _mm512_mask_mov_epi32(x, under, _mm512_set1_epi32(INT32_MIN));
  }
  const __m512i pe = rq512_half(_mm512_mul_epi32(x, c.m), c);
  const __m512i po = rq512_half(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), c.m), c);
  return _mm512_mask_blend_epi32(__mmask16(0xAAAA), pe, _mm512_slli_epi64(po, 32));
}

// 16 accumulators -> 16 int32 already clamped and offset.
TS_ALWAYS_INLINE __m512i rq512_apply(__m512i x, const Rq512& c) {
  __m512i r = rq512_scale(x, c);
  r = _mm512_min_epi32(_mm512_max_epi32(r, c.lo), c.hi);
  return _mm512_add_epi32(r, c.zp);
}

// The same function with its constants kept as scalars, broadcast where
// used (from memory, folded into the instructions): cheap to set up per
// output channel, for epilogues that requantise a few vectors per channel.
//
// Its fast form (the usual case: no left shift, a right shift e of 2 to 19,
// |zp| <= 128) has fewer instructions, for the same values:
//  - the zero point goes into the 64-bit constant as zp * 2^total:
//    floor((t + c + zp * 2^total) / 2^total) = floor((t + c) / 2^total) + zp
//    exactly, and no int64 overflows (|t| <= 2^62, |zp * 2^total| <= 2^57);
//    with total >= 33 the scaled value is below 2^29 in magnitude, so the
//    sum with zp is the same in int32 as Requant's int64 sum;
//  - even and odd lanes are merged by one vpermt2d;
//  - without a fused activation (lo = -128, hi = 127) the clamp is the
//    saturating narrowing store's own.
//
// Shorter still (`by_sign`: 9 instructions per 16 lanes before the clamp and
// store, against 12) when 0 < m <= 2^31 - 2^28, as rq_avx2.h's by_sign form
// (its comment proves the first two steps):
//  - with v = x * m + addz, the result is floor((h - [x < 0]) / 2^e), where
//    h = floor(v / 2^31) and e = total - 31, and h - [x < 0] fits int32;
//  - h comes from one unsigned vpmuludq by 2m (< 2^32 as uint32) plus 2 * addz
//    (|2 * addz| < 2^59): the low dword of a lane read as unsigned is
//    x + 2^32 * [x < 0], so the 64-bit sum is 2v + 2^33 * m * [x < 0]
//    (mod 2^64) and its high dword is h + 2m * [x < 0] (mod 2^32); the even
//    lanes' high dwords move down with one merge-masked vpshufd onto the odd
//    lanes' product (whose high dwords are already in place), and one
//    masked subtraction of 2m + 1 where x < 0 leaves h - [x < 0] (mod 2^32,
//    hence exactly, being inside int32); one 32-bit arithmetic shift by e.
struct RqS {
  Requant rq;
  int64_t add, neg, addz, addz2;
  int32_t m, hi_lim, lo_lim, lo, hi, zp, left, total, lo8, hi8, m2, m2p1, e;
  bool vok;      // else rq, lane by lane
  bool fast;     // the fast form applies
  bool by_sign;  // fast form, and the shorter one applies
  bool clamp8;   // fast form: clamp to [lo8, hi8] (a fused activation)
};

// by_sign false: leave the shorter form off (cheaper to set up, for paths that
// requantise one vector per channel, where the set-up is most of the cost).
TS_ALWAYS_INLINE void rqs_make(const Requant& rq, RqS* c, bool by_sign = true) {
  c->rq = rq;
  c->vok = vec_ok(rq);
  c->m = rq.m;
  c->left = rq.left;
  c->hi_lim = INT32_MAX >> (rq.left & 31);
  c->lo_lim = INT32_MIN >> (rq.left & 31);
  c->add = (int64_t(1) << 30) + rq.half;
  c->neg = rq.neg;
  c->total = rq.total;
  c->lo = rq.lo - rq.zp;
  c->hi = rq.hi - rq.zp;
  c->zp = rq.zp;
  c->fast = c->vok && rq.left == 0 && rq.total >= 33 && rq.total <= 50 && rq.zp >= -128 && rq.zp <= 128 &&
            rq.lo >= -128 && rq.lo <= rq.hi && rq.hi <= 127;
  c->addz = c->fast ? c->add + int64_t(rq.zp) * (int64_t(1) << rq.total) : 0;
  c->by_sign = by_sign && c->fast && rq.m > 0 && rq.m <= INT32_MAX - (int32_t(1) << 28) + 1;
  if (c->by_sign) {
    c->addz2 = 2 * c->addz;
    c->m2 = int32_t(2 * uint32_t(rq.m));
    c->m2p1 = int32_t(2 * uint32_t(rq.m) + 1);
    c->e = rq.total - 31;
  }
  c->lo8 = rq.lo < -128 ? -128 : rq.lo;
  c->hi8 = rq.hi > 127 ? 127 : rq.hi;
  c->clamp8 = c->lo8 > -128 || c->hi8 < 127;
}

TS_ALWAYS_INLINE __m512i rqs_half_fast(__m512i p, const RqS& c) {
  const __mmask8 negative = _mm512_cmplt_epi64_mask(p, _mm512_set1_epi64(-(int64_t(1) << 30)));
  __m512i t = _mm512_add_epi64(p, _mm512_set1_epi64(c.addz));
  t = _mm512_mask_add_epi64(t, negative, t, _mm512_set1_epi64(c.neg));
  return _mm512_sra_epi64(t, _mm_cvtsi32_si128(c.total));
}

TS_ALWAYS_INLINE __m512i rqs_half(__m512i p, const RqS& c) {
  const __mmask8 negative = _mm512_cmplt_epi64_mask(p, _mm512_set1_epi64(-(int64_t(1) << 30)));
  __m512i t = _mm512_add_epi64(p, _mm512_set1_epi64(c.add));
  t = _mm512_mask_add_epi64(t, negative, t, _mm512_set1_epi64(c.neg));
  return _mm512_sra_epi64(t, _mm_cvtsi32_si128(c.total));
}

// 16 accumulators -> 16 int32 already clamped and offset (needs c.vok).
TS_ALWAYS_INLINE __m512i rqs_apply(__m512i x, const RqS& c) {
  if (c.left) {
    const __mmask16 over = _mm512_cmpgt_epi32_mask(x, _mm512_set1_epi32(c.hi_lim)),
                    under = _mm512_cmplt_epi32_mask(x, _mm512_set1_epi32(c.lo_lim));
    x = _mm512_sll_epi32(x, _mm_cvtsi32_si128(c.left));
    x = _mm512_mask_mov_epi32(x, over, _mm512_set1_epi32(INT32_MAX));
    x = _mm512_mask_mov_epi32(x, under, _mm512_set1_epi32(INT32_MIN));
  }
  const __m512i m = _mm512_set1_epi32(c.m);
  const __m512i pe = rqs_half(_mm512_mul_epi32(x, m), c);
  const __m512i po = rqs_half(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), m), c);
  __m512i r = _mm512_mask_blend_epi32(__mmask16(0xAAAA), pe, _mm512_slli_epi64(po, 32));
  r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(c.lo)), _mm512_set1_epi32(c.hi));
  return _mm512_add_epi32(r, _mm512_set1_epi32(c.zp));
}

// The by_sign form's constants m2 = 2m, addz2 = 2 * addz, m2p1 = 2m + 1 and
// e = total - 31 in registers (set up once per channel where a channel
// requantises several vectors), and its steps (see above).
struct BySign {
  __m512i m2, az, m2p1;
  __m128i e;
};

TS_ALWAYS_INLINE BySign by_sign_consts(int32_t m2, int64_t addz2, int32_t m2p1, int32_t e) {
  return BySign{_mm512_set1_epi32(m2), _mm512_set1_epi64(addz2), _mm512_set1_epi32(m2p1), _mm_cvtsi32_si128(e)};
}

TS_ALWAYS_INLINE __m512i by_sign_steps(__m512i x, const BySign& k) {
  const __m512i pe = _mm512_add_epi64(_mm512_mul_epu32(x, k.m2), k.az);
  const __m512i po = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(x, 32), k.m2), k.az);
  __m512i h = _mm512_mask_shuffle_epi32(po, __mmask16(0x5555), pe, _MM_PERM_DDBB);
  h = _mm512_mask_sub_epi32(h, _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512()), h, k.m2p1);
  return _mm512_sra_epi32(h, k.e);
}

// The fast form's result (needs c.by_sign), as int32 before the clamp.
TS_ALWAYS_INLINE __m512i rqs_by_sign(__m512i x, const RqS& c) {
  return by_sign_steps(x, by_sign_consts(c.m2, c.addz2, c.m2p1, c.e));
}

// The by_sign form's constants of up to kSignRow output channels of a layer
// (structure of arrays), set up 16 channels per step with vector code:
// rqs_make per channel costs about 40 instructions, a fifth of the pointwise
// layers' time at input 112 (measured by running it twice). ok[k] says
// whether channel k has that form (the same conditions as rqs_make's fast
// and by_sign: 2 <= -shift <= 19, 0 < m <= 2^31 - 2^28 + 1, and for the
// layer |zp| <= 128, -128 <= lo <= hi <= 127); the others need an RqS.
// fast[k]: channel k has RqS's fast form (the same without the multiplier's
// bound, m != INT32_MIN), whose constants are m, addz2 / 2 and e + 31.
constexpr int32_t kSignRow = 256;

struct RqSignRow {
  alignas(64) int64_t addz2[kSignRow];
  alignas(64) int32_t m[kSignRow], m2[kSignRow], m2p1[kSignRow], e[kSignRow];
  bool ok[kSignRow];
  uint16_t fast16[kSignRow / 16];  // bit i of fast16[k]: channel 16k + i has the fast form
  bool all_fast;  // every channel has the fast form
  bool clamp8;    // the layer's: clamp to [lo8, hi8] (a fused activation)
  int32_t lo8, hi8;
};

// Channels k < n (<= kSignRow) from mult[k], shift[k]; the layer's zero
// point and clamp. Returns whether every channel has the form.
inline bool rq_sign_row(const int32_t* mult, const int32_t* shift, int32_t n, int32_t zp, int32_t lo, int32_t hi,
                        RqSignRow* r) {
  r->lo8 = lo < -128 ? -128 : lo;
  r->hi8 = hi > 127 ? 127 : hi;
  r->clamp8 = r->lo8 > -128 || r->hi8 < 127;
  const bool layer_ok = zp >= -128 && zp <= 128 && lo >= -128 && lo <= hi && hi <= 127;
  bool all = layer_ok;
  r->all_fast = layer_ok;
  const __m512i zp64 = _mm512_set1_epi64(zp);
  for (int32_t k = 0; k < n; k += 16) {
    const __mmask16 live = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
    const __m512i m = _mm512_maskz_loadu_epi32(live, mult + k);
    const __m512i e = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_maskz_loadu_epi32(live, shift + k));
    const __mmask16 fast = _mm512_mask_cmpge_epi32_mask(live, e, _mm512_set1_epi32(2)) &
                           _mm512_cmple_epi32_mask(e, _mm512_set1_epi32(19)) &
                           _mm512_cmpneq_epi32_mask(m, _mm512_set1_epi32(INT32_MIN));
    __mmask16 ok = fast & _mm512_cmpgt_epi32_mask(m, _mm512_setzero_si512()) &
                   _mm512_cmple_epi32_mask(m, _mm512_set1_epi32(INT32_MAX - (int32_t(1) << 28) + 1));
    if (!layer_ok) ok = 0;
    all = all && ok == live;
    r->all_fast = r->all_fast && fast == live;
    _mm512_mask_storeu_epi32(r->m + k, live, m);
    const __m512i m2 = _mm512_add_epi32(m, m);
    _mm512_mask_storeu_epi32(r->m2 + k, live, m2);
    _mm512_mask_storeu_epi32(r->m2p1 + k, live, _mm512_add_epi32(m2, _mm512_set1_epi32(1)));
    _mm512_mask_storeu_epi32(r->e + k, live, e);
    _mm_mask_storeu_epi8(r->ok + k, live, _mm_maskz_set1_epi8(ok, 1));
    r->fast16[k / 16] = layer_ok ? uint16_t(fast) : uint16_t(0);
    // addz2 = 2 (2^30 + 2^(e + 30) + zp 2^(31 + e)), eight channels at a time
    // (lanes without the form get whatever; they are not used).
    for (int h = 0; h < 2; ++h) {
      const __m512i e64 = _mm512_cvtepi32_epi64(h ? _mm512_extracti64x4_epi64(e, 1) : _mm512_castsi512_si256(e));
      const __m512i half = _mm512_sllv_epi64(_mm512_set1_epi64(1), _mm512_add_epi64(e64, _mm512_set1_epi64(30)));
      const __m512i zs = _mm512_sllv_epi64(zp64, _mm512_add_epi64(e64, _mm512_set1_epi64(31)));
      const __m512i addz = _mm512_add_epi64(_mm512_add_epi64(half, zs), _mm512_set1_epi64(int64_t(1) << 30));
      _mm512_mask_storeu_epi64(r->addz2 + k + 8 * h, __mmask8(live >> (8 * h)), _mm512_add_epi64(addz, addz));
    }
  }
  return all;
}

// Channel k's requantiser (needs r.ok[k]) in registers, and its
// requantisation of 16 accumulators, as int32 to be narrowed with saturation
// (clamped here where a fused activation asks: lo, hi as vectors).
struct SignK {
  BySign c;
  bool clamp;
  __m512i lo, hi;
};

TS_ALWAYS_INLINE SignK sign_k(const RqSignRow& r, int32_t k) {
  return SignK{by_sign_consts(r.m2[k], r.addz2[k], r.m2p1[k], r.e[k]), r.clamp8, _mm512_set1_epi32(r.lo8),
               _mm512_set1_epi32(r.hi8)};
}

TS_ALWAYS_INLINE __m512i sign_vec(__m512i acc, const SignK& k) {
  __m512i v = by_sign_steps(acc, k.c);
  if (k.clamp) v = _mm512_min_epi32(_mm512_max_epi32(v, k.lo), k.hi);
  return v;
}

// Lane k of the result = the sum of the 16 lanes of a[k] (wrapping).
TS_ALWAYS_INLINE __m512i sums16(const __m512i* a) {
  __m512i u[8], v[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: a[2i] and a[2i+1], two partial sums each
    u[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: a[4i..4i+3], one partial sum each
    v[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * i], u[2 * i + 1]), _mm512_unpackhi_epi64(u[2 * i], u[2 * i + 1]));
  const __m512i w0 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88), _mm512_shuffle_i32x4(v[0], v[1], 0xDD));
  const __m512i w1 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2], v[3], 0x88), _mm512_shuffle_i32x4(v[2], v[3], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(w0, w1, 0x88), _mm512_shuffle_i32x4(w0, w1, 0xDD));
}

// The by_sign form, lane k with channel k's constants (from an RqSignRow's
// first 16 channels, k < nk), where sign_lanes_ok says it applies: where
// every channel has the form (rq_sign_row's result), or where every channel
// has the fast form with a positive multiplier and every accumulator is
// below 2^30 in magnitude (bounded): then |x * m| < 2^61 for any m < 2^31,
// which keeps h - 1 inside int32 and 2v inside int64, and that is all the
// form's bound on m serves in its proof (above).
struct SignLanes {
  __m512i m2, m2o, m2p1, aze, azo, e, lo, hi;
  bool clamp;
};

TS_ALWAYS_INLINE void sign_lanes(const RqSignRow& sg, int32_t nk, SignLanes* c) {
  const __mmask16 live = __mmask16((1u << nk) - 1);
  c->m2 = _mm512_maskz_loadu_epi32(live, sg.m2);
  c->m2o = _mm512_srli_epi64(c->m2, 32);
  c->m2p1 = _mm512_maskz_loadu_epi32(live, sg.m2p1);
  c->e = _mm512_maskz_loadu_epi32(live, sg.e);
  const __m512i a0 = _mm512_maskz_loadu_epi64(__mmask8(live), sg.addz2);
  const __m512i a1 = _mm512_maskz_loadu_epi64(__mmask8(live >> 8), sg.addz2 + 8);
  c->aze = _mm512_permutex2var_epi64(a0, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), a1);
  c->azo = _mm512_permutex2var_epi64(a0, _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), a1);
  c->clamp = sg.clamp8;
  c->lo = _mm512_set1_epi32(sg.lo8);
  c->hi = _mm512_set1_epi32(sg.hi8);
}

TS_ALWAYS_INLINE __m512i sign_lanes_apply(__m512i x, const SignLanes& c) {
  const __m512i pe = _mm512_add_epi64(_mm512_mul_epu32(x, c.m2), c.aze);
  const __m512i po = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(x, 32), c.m2o), c.azo);
  __m512i h = _mm512_mask_shuffle_epi32(po, __mmask16(0x5555), pe, _MM_PERM_DDBB);
  h = _mm512_mask_sub_epi32(h, _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512()), h, c.m2p1);
  h = _mm512_srav_epi32(h, c.e);
  if (c.clamp) h = _mm512_min_epi32(_mm512_max_epi32(h, c.lo), c.hi);
  return h;
}

TS_ALWAYS_INLINE bool sign_lanes_ok(const RqSignRow& sg, int32_t nk, bool all, bool bounded) {
  if (all) return true;
  const __mmask16 live = __mmask16((1u << nk) - 1);
  if (!bounded || (sg.fast16[0] & live) != live) return false;
  return _mm512_mask_cmpgt_epi32_mask(live, _mm512_maskz_loadu_epi32(live, sg.m), _mm512_setzero_si512()) == live;
}

// Whether |bias[k]| <= 2^29 for k < nk (nullptr: no bias).
TS_ALWAYS_INLINE bool bias_small(const int32_t* bias, int32_t nk) {
  if (!bias) return true;
  const __mmask16 live = __mmask16((1u << nk) - 1);
  const __m512i b = _mm512_maskz_loadu_epi32(live, bias);
  return _mm512_mask_cmple_epu32_mask(live, _mm512_abs_epi32(b), _mm512_set1_epi32(1 << 29)) == live;
}

// RqS's fast form, lane k with channel k's constants (from an RqSignRow
// whose channels all have that form; lanes past nb: 0, never stored).
struct RqLanes512 {
  __m512i m, m_odd, addz_e, addz_o, total_e, total_o;
  bool clamp8;
  int32_t lo8, hi8;
};

TS_ALWAYS_INLINE void rq_lanes_512(const RqSignRow& sg, int nb, RqLanes512* c) {
  const __mmask16 live = nb >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nb) - 1);
  c->m = _mm512_maskz_loadu_epi32(live, sg.m);
  c->m_odd = _mm512_srli_epi64(c->m, 32);
  // addz = addz2 / 2 (even), channel 2i in qword i of the even lanes' vector, 2i + 1 of the odd.
  const __m512i a0 = _mm512_srai_epi64(_mm512_maskz_loadu_epi64(__mmask8(live), sg.addz2), 1);
  const __m512i a1 = _mm512_srai_epi64(_mm512_maskz_loadu_epi64(__mmask8(live >> 8), sg.addz2 + 8), 1);
  c->addz_e = _mm512_permutex2var_epi64(a0, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), a1);
  c->addz_o = _mm512_permutex2var_epi64(a0, _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), a1);
  const __m512i total = _mm512_add_epi32(_mm512_maskz_loadu_epi32(live, sg.e), _mm512_set1_epi32(31));
  c->total_e = _mm512_and_si512(total, _mm512_set1_epi64(0xFFFFFFFF));
  c->total_o = _mm512_srli_epi64(total, 32);
  c->clamp8 = sg.clamp8;  // lo, hi and zp are the layer's
  c->lo8 = sg.lo8;
  c->hi8 = sg.hi8;
}

TS_ALWAYS_INLINE __m512i rq_lanes_half_512(__m512i p, __m512i addz, __m512i total) {
  const __mmask8 negative = _mm512_cmplt_epi64_mask(p, _mm512_set1_epi64(-(int64_t(1) << 30)));
  __m512i t = _mm512_add_epi64(p, addz);
  t = _mm512_mask_add_epi64(t, negative, t, _mm512_set1_epi64(-(int64_t(1) << 31)));
  return _mm512_srav_epi64(t, total);
}

// The fast form on 16 accumulators with per-lane constants, as int32 to be
// narrowed with saturation (clamped here where a fused activation asks).
TS_ALWAYS_INLINE __m512i rq_lanes_apply_512(__m512i acc, const RqLanes512& c) {
  const __m512i pick = _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
  const __m512i pe = rq_lanes_half_512(_mm512_mul_epi32(acc, c.m), c.addz_e, c.total_e);
  const __m512i po = rq_lanes_half_512(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), c.m_odd), c.addz_o, c.total_o);
  __m512i r = _mm512_permutex2var_epi32(pe, pick, po);
  if (c.clamp8) r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(c.lo8)), _mm512_set1_epi32(c.hi8));
  return r;
}

// The fast forms' result for 16 accumulators (needs c.fast), as int32 to be
// narrowed with saturation (clamped here where a fused activation asks).
template <bool BySign = true>
TS_ALWAYS_INLINE __m512i rqs_fast_vec(__m512i acc, const RqS& c) {
  __m512i r;
  if (BySign && c.by_sign) {
    r = rqs_by_sign(acc, c);
  } else {
    const __m512i m = _mm512_set1_epi32(c.m);
    const __m512i pe = rqs_half_fast(_mm512_mul_epi32(acc, m), c);
    const __m512i po = rqs_half_fast(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), m), c);
    const __m512i pick = _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    r = _mm512_permutex2var_epi32(pe, pick, po);
  }
  if (c.clamp8) r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(c.lo8)), _mm512_set1_epi32(c.hi8));
  return r;
}

// N (2 or 4) vectors of int32 narrowed to bytes with saturation, vector j's
// lane i to out[16 * j + i]; the first n (>= 1) bytes are stored. Two
// saturating packs (int32 -> int16 -> int8, the same as one saturation to
// int8) and one dword permute: on AMD Zen 4 a vpmovsdb per vector costs
// several times as much.
// The packs and the permute: r0..r3 (int32) as bytes, vector k's lane i at
// byte 16 k + i.
TS_ALWAYS_INLINE __m512i packed_bytes_sat(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
  const __m512i a = _mm512_packs_epi32(r0, r1);  // 128-bit lane L: r0's quad L, r1's (int16)
  const __m512i b = _mm512_packs_epi32(r2, r3);
  // Dword 4L + k of the byte pack is vector k's quad L; it goes to dword 4k + L.
  const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_epi32(idx, _mm512_packs_epi16(a, b));
}

template <int N>
TS_ALWAYS_INLINE void store_bytes_sat(const __m512i* r, int32_t n, int8_t* out) {
  static_assert(N == 2 || N == 4, "2 or 4 vectors");
  const __m512i p = N == 4 ? packed_bytes_sat(r[0], r[1], r[2], r[3]) : packed_bytes_sat(r[0], r[1], r[0], r[1]);
  if (n >= 16 * N) {
    if (N == 4)
      _mm512_storeu_si512(out, p);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_castsi512_si256(p));
  } else {
    _mm512_mask_storeu_epi8(out, __mmask64((uint64_t(1) << n) - 1), p);
  }
}

// Four vectors of int32 narrowed to bytes with saturation, vector k's first
// n (1-16) lanes to out + k * stride, for k < rows (<= 4): the same packs and
// permute as store_bytes_sat, then one 16-byte store per row.
TS_ALWAYS_INLINE void store_rows_sat4(const __m512i* r, int rows, int32_t n, int8_t* out, int64_t stride) {
  const __m512i p = packed_bytes_sat(r[0], r[1], r[2], r[3]);
  __m128i q[4];
  q[0] = _mm512_castsi512_si128(p);
  q[1] = _mm512_extracti32x4_epi32(p, 1);
  q[2] = _mm512_extracti32x4_epi32(p, 2);
  q[3] = _mm512_extracti32x4_epi32(p, 3);
  if (n >= 16) {
    for (int k = 0; k < rows; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k * stride), q[k]);
  } else {
    const __mmask16 m = __mmask16((1u << n) - 1);
    for (int k = 0; k < rows; ++k) _mm_mask_storeu_epi8(out + k * stride, m, q[k]);
  }
}

// Requantises 16 accumulators and stores the lanes in `lanes` as bytes
// (BySign false: without the by_sign form's code, for loops that set up a
// requantiser per vector or two, where its constants cost more than it saves).
template <bool BySign = true>
TS_ALWAYS_INLINE void rqs_store(__m512i acc, const RqS& c, __mmask16 lanes, int8_t* out) {
  if (BySign && c.by_sign) {
    __m512i r = rqs_by_sign(acc, c);
    if (c.clamp8) r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(c.lo8)), _mm512_set1_epi32(c.hi8));
    _mm512_mask_cvtsepi32_storeu_epi8(out, lanes, r);
  } else if (c.fast) {
    const __m512i m = _mm512_set1_epi32(c.m);
    const __m512i pe = rqs_half_fast(_mm512_mul_epi32(acc, m), c);
    const __m512i po = rqs_half_fast(_mm512_mul_epi32(_mm512_srli_epi64(acc, 32), m), c);
    // Dword 2i of pe (lane 2i's result) and dword 2i of po (lane 2i+1's).
    const __m512i pick = _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    __m512i r = _mm512_permutex2var_epi32(pe, pick, po);
    if (c.clamp8) r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(c.lo8)), _mm512_set1_epi32(c.hi8));
    _mm512_mask_cvtsepi32_storeu_epi8(out, lanes, r);
  } else if (c.vok) {
    _mm512_mask_cvtsepi32_storeu_epi8(out, lanes, rqs_apply(acc, c));
  } else {
    alignas(64) int32_t a[16];
    _mm512_store_si512(a, acc);
    for (int j = 0; j < 16; ++j)
      if (lanes >> j & 1) out[j] = c.rq(a[j]);
  }
}

// Bits [lo, hi) of a 64-bit mask, clipped to [0, 64): byte masks of
// loads and stores.
inline __mmask64 bits64(int64_t lo, int64_t hi) {
  if (lo < 0) lo = 0;
  if (hi > 64) hi = 64;
  if (hi <= lo) return 0;
  const uint64_t top = hi >= 64 ? ~uint64_t(0) : (uint64_t(1) << hi) - 1;
  return __mmask64(top & ~((uint64_t(1) << lo) - 1));
}

}  // namespace
}  // namespace x86
}  // namespace core
}  // namespace ts
