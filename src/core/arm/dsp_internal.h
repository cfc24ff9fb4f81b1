// Internals shared by the Cortex-M7 DSP kernels (src/core/arm/dsp.cpp,
// src/core/arm/dsp_pointwise.cpp; docs/kernels.md, "Cortex-M7 kernels"): the
// requantisers, the 4-position dot-product cores and the sizes of the
// widened-weight kernels. Not a public interface.
#pragma once

#include "core/arm/dsp_kernels.h"
#include "core/arm/dsp_ops.h"
#include "core/ops/common.h"

namespace ts {
namespace core {
namespace arm {
namespace dspk {

using namespace opk;
using namespace dsp;

// ------------------------------------------------------------ requantisation
//
// Requant (requant.h) computes floor((t + 2^(30+e) - 2^31 [t < 0]) / 2^(31+e))
// with t = x*m + 2^30 and e = -shift. For m >= 2^30, t < 0 exactly when
// x < 0 (x = -1, m = 2^30 gives t = 0, where both forms give 0), so the
// whole numerator is x*m plus a constant chosen by x's sign: for e >= 2 the
// constant 2^30 + 2^(30+e) - 2^31 [x < 0] has low word 2^30 + 2^31 [x < 0]
// (mod 2^32) and high word 2^(e-2) - [x < 0]. One SMLAL into that 64-bit
// value and an arithmetic shift of its high word by e - 1 give the result:
// 5 instructions instead of a 64-bit shift by a variable amount. Other
// multipliers and shifts (rare: quantize_multiplier normalises m into
// [2^30, 2^31)) use Requant itself.
struct FastRq {
  int32_t m = 0, sh = 0, chi = 0;  // multiplier, e - 1, 2^(e-2)
  int32_t zp = 0, lo = -128, hi = 127;
  bool ok = false;    // e >= 2: scale() and operator()
  bool ok_any = false;  // e >= 1: scale_any()
  uint32_t lbase = 0x40000000u;
  int32_t hmask = -1;
  bool ok0 = false;  // shift 0, m != INT32_MIN: scale0()
  int32_t m0 = 0, shift0 = 0;  // the multiplier and shift as given
  uint32_t lo4 = 0x80808080u, hi4 = 0x7F7F7F7Fu;  // lo, hi in each byte
  bool full = true;                                // [lo, hi] = [-128, 127]
  bool zfold = false;                              // scale_z() usable
  int32_t chiz = 0;                                // chi + zp * 2^sh
  FastRq() = default;
  FastRq(int32_t mult, int32_t shift, int32_t zero, int32_t lo_, int32_t hi_)
      : zp(zero), lo(lo_), hi(hi_), shift0(shift) {
    lo4 = (uint32_t(lo_) & 0xFFu) * 0x01010101u;
    hi4 = (uint32_t(hi_) & 0xFFu) * 0x01010101u;
    full = lo_ <= -128 && hi_ >= 127;
    ok = fast_requant_ok(mult, shift);
    ok_any = fast_requant_ok_any(mult, shift);
    ok0 = shift == 0 && mult != INT32_MIN;
    m0 = mult;
    if (ok) {
      m = mult;
      sh = -shift - 1;
      chi = int32_t(1) << (-shift - 2);
      // |high word| <= 2^30 + 2^29; with sh <= 20, |zp| * 2^sh <= 2^27: no overflow.
      zfold = sh <= 20 && zero >= -128 && zero <= 128;
      if (zfold) chiz = chi + int32_t(uint32_t(zero) << sh);
    } else if (ok_any) {
      m = mult;
      sh = 0;
      chi = 0;
      lbase = 0xC0000000u;
      hmask = 0;
    }
  }
  // scale(x) + zp, the zero point added to the high word before the shift
  // (exact: adding zp * 2^(32+sh) to the 64-bit value adds zp * 2^sh to its
  // high word, which the shift turns into + zp); needs zfold.
  TS_DSP_INLINE int32_t scale_z(int32_t x) const { return scale_hi(x, chiz); }
  TS_DSP_INLINE int32_t scale(int32_t x) const { return scale_hi(x, chi); }
  // The two above: the rounding constant's high word is hi (chi, or chiz
  // with the zero point folded in).
  TS_DSP_INLINE int32_t scale_hi(int32_t x, int32_t hi) const {
    const uint32_t l = 0x40000000u + (uint32_t(x) & 0x80000000u);
    const int32_t h = hi + (x >> 31);
    int64_t u = int64_t((uint64_t(uint32_t(h)) << 32) | l);
    u += int64_t(x) * m;
    return int32_t(u >> 32) >> sh;
  }
  // The same for any e >= 1: with e = 1 the constant's low word is
  // 2^30 + 2^31 and subtracting 2^31 borrows nothing from the high word.
  TS_DSP_INLINE int32_t scale_any(int32_t x) const {
    const uint32_t l = lbase + (uint32_t(x) & 0x80000000u);
    const int32_t h = chi + ((x >> 31) & hmask);
    int64_t u = int64_t((uint64_t(uint32_t(h)) << 32) | l);
    u += int64_t(x) * m;
    return int32_t(u >> 32) >> sh;
  }
  // e = 0 (multipliers of 0.5, Add's larger operand): floor((x*m + 2^30) / 2^31).
  TS_DSP_INLINE int32_t scale0(int32_t x) const {
    const int64_t u = int64_t(x) * m0 + (int64_t(1) << 30);
    return int32_t(u >> 31);
  }
  TS_DSP_INLINE int8_t operator()(int32_t acc) const {
    int32_t r = scale(acc) + zp;
    r = r < lo ? lo : r;
    return int8_t(r > hi ? hi : r);
  }
  // Requant itself (outside the fast domain).
  Requant slow() const { return Requant(m0, shift0, zp, lo, hi); }
  // Either form, for single values.
  TS_DSP_INLINE int8_t apply(int32_t acc) const { return ok ? (*this)(acc) : slow()(acc); }
};

// Four bytes of lo or hi, for the byte-wise clamp.
inline uint32_t splat8(int32_t v) { return (uint32_t(v) & 0xFFu) * 0x01010101u; }

// out[k] = rq(acc[k]) for k < n. Four at a time: each value scaled, plus the
// zero point, saturated to int8 (SSAT), packed into a word, and the word
// clamped to [lo, hi] byte-wise (SSUB8 + SEL); clamping to [-128, 127] first
// changes nothing since lo >= -128 and hi <= 127.
// Four at a time; with Z, the zero point is already in the high word (chiz).
template <bool Z>
TS_DSP_INLINE int32_t requant4(const int32_t* acc, int32_t n, const FastRq& rq, int8_t* out) {
  const uint32_t lo4 = rq.lo4, hi4 = rq.hi4;
  const bool full = rq.full;  // SSAT is the whole clamp
  int32_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const int32_t q0 = ssat8(Z ? rq.scale_z(acc[k]) : rq.scale(acc[k]) + rq.zp);
    const int32_t q1 = ssat8(Z ? rq.scale_z(acc[k + 1]) : rq.scale(acc[k + 1]) + rq.zp);
    const int32_t q2 = ssat8(Z ? rq.scale_z(acc[k + 2]) : rq.scale(acc[k + 2]) + rq.zp);
    const int32_t q3 = ssat8(Z ? rq.scale_z(acc[k + 3]) : rq.scale(acc[k + 3]) + rq.zp);
    // Halfword pairs (q0, q2) and (q1, q3); their low bytes interleave
    // into q0 q1 q2 q3.
    const uint32_t word = uxtb16(pkhbt(uint32_t(q0), uint32_t(q2))) | (uxtb16(pkhbt(uint32_t(q1), uint32_t(q3))) << 8);
    st32(out + k, full ? word : min8(max8(word, lo4), hi4));
  }
  return k;
}

TS_DSP_INLINE void requant_n(const int32_t* acc, int32_t n, const FastRq& rq, int8_t* out) {
  if (!rq.ok) {
    const Requant r = rq.slow();
    for (int32_t k = 0; k < n; ++k) out[k] = r(acc[k]);
    return;
  }
  int32_t k = 0;
  if (n >= 4) k = rq.zfold ? requant4<true>(acc, n, rq, out) : requant4<false>(acc, n, rq, out);
  for (; k < n; ++k) out[k] = rq(acc[k]);
}

inline FastRq channel_rq(const LayerDesc& L, int32_t o) {
  const int32_t local = o - L.oc_base;
  return FastRq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
}

// ------------------------------------------- the 4-position dot-product core
//
// Activations of 4 output positions over ng groups of 4 "channels" (input
// channels, or a convolution patch's taps), as
//   xt[g][k][0] = (x(4g, k), x(4g+2, k)),  xt[g][k][1] = (x(4g+1, k), x(4g+3, k))
// (int16 halfwords, zero point already subtracted). acc[k] += the dot product
// of position k with the int8 weight row w (4*ng bytes, any alignment).
// Per 4 channels: 1 weight load, 2 SXTB16, 4 LDRD and 8 SMLAD for 16 MACs.
constexpr int32_t kTile = 4;
constexpr int32_t kOcBlock = 64;  // output channels per block of requantisers (3 KiB)

// One group of 4 channels at word offset G of x (weights wv), positions
// k < N.
// The accumulation of one group for positions k < N, from the widened
// weight halves we (even channels) and wo (odd) in scope; TS_DOT_GROUP and
// TS_DOTW_GROUP (dsp_pointwise.cpp) differ only in how they get them.
#define TS_DOT_POSITIONS(G)                \
  do {                                     \
    uint32_t e, o;                         \
    ld2<G>(x, &e, &o);                     \
    a0 = smlad(o, wo, smlad(e, we, a0));   \
    if (N > 1) {                           \
      ld2<G + 2>(x, &e, &o);               \
      a1 = smlad(o, wo, smlad(e, we, a1)); \
    }                                      \
    if (N > 2) {                           \
      ld2<G + 4>(x, &e, &o);               \
      a2 = smlad(o, wo, smlad(e, we, a2)); \
    }                                      \
    if (N > 3) {                           \
      ld2<G + 6>(x, &e, &o);               \
      a3 = smlad(o, wo, smlad(e, we, a3)); \
    }                                      \
  } while (0)

#define TS_DOT_GROUP(G, wv)                               \
  do {                                                    \
    const uint32_t we = sxtb16(wv), wo = sxtb16_ror8(wv); \
    TS_DOT_POSITIONS(G);                                  \
  } while (0)

// acc[k] += dot product of position k with w, for k < N (N <= 4): partial
// tiles cost what they compute.
template <int N>
TS_DSP_INLINE void dotn(const uint32_t* xt, const int8_t* w, int32_t ng, int32_t* acc) {
  int32_t a0 = acc[0], a1 = N > 1 ? acc[1] : 0, a2 = N > 2 ? acc[2] : 0, a3 = N > 3 ? acc[3] : 0;
  const uint32_t* x = xt;
  // Two groups (8 channels) per pass.
  const uint32_t* const end2 = xt + 8 * (ng & ~1);
  for (; x != end2; x += 16, w += 8) {
    const uint32_t w0 = ld32(w), w1 = ld32(w + 4);
    TS_DOT_GROUP(0, w0);
    TS_DOT_GROUP(8, w1);
  }
  if (ng & 1) {
    const uint32_t w0 = ld32(w);
    TS_DOT_GROUP(0, w0);
  }
  acc[0] = a0;
  if (N > 1) acc[1] = a1;
  if (N > 2) acc[2] = a2;
  if (N > 3) acc[3] = a3;
}
#undef TS_DOT_GROUP

// dotn for np = 1..4 positions.
TS_DSP_INLINE void dot_np(int32_t np, const uint32_t* xt, const int8_t* w, int32_t ng, int32_t* acc) {
  switch (np) {
    case 4: return dotn<4>(xt, w, ng, acc);
    case 3: return dotn<3>(xt, w, ng, acc);
    case 2: return dotn<2>(xt, w, ng, acc);
    default: return dotn<1>(xt, w, ng, acc);
  }
}

// ----------------------------------------- pointwise with widened weights
//
// For inputs of up to kPreMaxCin channels: the weights of a block of output
// channels are widened once into a buffer (the same pairs as the
// activations, doubled), so the inner loop reads both operands with LDRD
// and does no SXTB16: per 4 input channels and 4 positions, 1 + 4 LDRD and
// 8 SMLAD. The activations are widened raw (no zero point); the zero point
// goes into the sums' start as bias - zp * sum(w).
//
// Doubled sums: with the weights doubled the sum is X = 2 * acc, and for
// |acc| < 2^30, m in [2^30, 2^31), e = -shift in [1, 21], Requant is
//   floor((c + floor((X*m + 2^31) / 2^32)) / 2^e),  c = 2^(e-1) + zp * 2^e - [X < 0]:
// SMMLAR's high word is h = floor((acc*m + 2^30) / 2^31), Requant's doubling
// high product; its rounding shift by e (half away from zero) is
// floor((h + 2^(e-1) - [h < 0]) / 2^e), and h < 0 exactly when acc < 0 but at
// acc = -1, m = 2^30 (h = 0), where both forms give 0. |c + h| < 2^30 + 2^29:
// no overflow. Then SSAT and the byte-wise clamp: 4 instructions per output
// instead of 6. |acc| < 2^30 holds when |bias| <= 2^29 (|x - zp| <= 255,
// |w| <= 128, cin <= 1024: the products add at most 2^25); other channels
// keep single weights and Requant itself.
constexpr int32_t kPreWords = 2816;  // widened weights and activations: 11 KiB of stack, shared
constexpr int32_t kPreMaxCin = 256;  // tiles of 2 * cin <= 512 words
constexpr int32_t kPreBlock = 128;   // output channels per weight block

// How the buffer is shared for tiles of tw words and ng groups of weights
// per channel, no channels: the weights get what the call's channels need
// up to all but 8 tiles (or half the buffer), the activations the rest.
struct PreSizes {
  int32_t blk = 0, chunk = 0, wb_words = 0;  // channels per block, positions per chunk
  PreSizes(int32_t tw, int32_t ng, int32_t no) {
    const int32_t xt_min = mini(8 * tw, kPreWords / 2);
    blk = mini(mini(kPreBlock, no), (kPreWords - xt_min) / (2 * ng));
    wb_words = blk * 2 * ng;
    chunk = ((kPreWords - wb_words) / tw) * kTile;
  }
};

struct Rq2 {
  int32_t m = 0, c = 0, e = 0;
  bool ok = false;
  Rq2(int32_t mult, int32_t shift, int32_t zp) {
    ok = mult >= (int32_t(1) << 30) && shift <= -1 && shift >= -21 && zp >= -128 && zp <= 128;
    if (ok) {
      m = mult;
      e = -shift;
      c = (int32_t(1) << (e - 1)) + zp * (int32_t(1) << e);
    }
  }
  TS_DSP_INLINE int32_t operator()(int32_t x2) const { return ssat8(smmlar(x2, m, c + (x2 >> 31)) >> e); }
};

// Four int8 values (in their low bytes) as one word, q0 first.
TS_DSP_INLINE uint32_t pack4(int32_t q0, int32_t q1, int32_t q2, int32_t q3) {
  return bfi8<24>(bfi8<16>(bfi8<8>(uint32_t(q0), uint32_t(q1)), uint32_t(q2)), uint32_t(q3));
}

// out[k] = the requantised doubled sum acc[k], clamped to [lo, hi] (lo4,
// hi4: each in every byte; Full: the clamp is [-128, 127], skipped), k < n:
// whole words, then the last n % 4 packed into one word.
template <bool Full>
void requant2_words(const int32_t* acc, int32_t n, const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  for (int32_t k = 0; k + 4 <= n; k += 4) {
    const uint32_t word = pack4(rq(acc[k]), rq(acc[k + 1]), rq(acc[k + 2]), rq(acc[k + 3]));
    st32(out + k, Full ? word : min8(max8(word, lo4), hi4));
  }
  const int32_t t = n & 3;
  if (t == 0) return;
  acc += n - t;
  out += n - t;
  uint32_t word = uint32_t(rq(acc[0]));
  if (t > 1) word = bfi8<8>(word, uint32_t(rq(acc[1])));
  if (t > 2) word = bfi8<16>(word, uint32_t(rq(acc[2])));
  if (!Full) word = min8(max8(word, lo4), hi4);
  out[0] = int8_t(word);
  if (t > 1) out[1] = int8_t(word >> 8);
  if (t > 2) out[2] = int8_t(word >> 16);
}
inline void requant2_n(const int32_t* acc, int32_t n, const Rq2& rq, int32_t lo, int32_t hi, int8_t* out) {
  if (lo <= -128 && hi >= 127)
    requant2_words<true>(acc, n, rq, 0, 0, out);
  else
    requant2_words<false>(acc, n, rq, splat8(lo), splat8(hi), out);
}

// The pointwise kernel's tile loop for one output channel over nt whole
// tiles of xt (tile k at xt + k * tw) and rest more positions, with widened
// weights wv (ng groups), doubled when dbl (dsp_pointwise.cpp).
void pw_pre_channel(const LayerDesc& L, int32_t o, const uint32_t* xt, int32_t tw, int32_t nt, int32_t rest,
                    const uint32_t* wv, int32_t ng, int32_t base, bool dbl, int8_t* out);

// The table's pointwise entry (dsp_pointwise.cpp).
void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride);

// Depthwise 3x3 (dsp_depthwise.cpp): the layers it takes (one input
// channel per group, 3x3, dilation 1, strides 1-2, padding on any side,
// output rows that fit its frame); channels [c0, c1) at plane positions
// [p0, p1), channel c's outputs at out + (c - c0) * cstride; and the
// table's conv_box entry (a box narrower than the plane in one call, out in
// box-local order; false, nothing written, for other layers).
bool dw3x3_ok(const LayerDesc& L);
void dw3x3_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                 int64_t cstride);
bool conv_box(const LayerDesc& L, const View& v, const OutBox& b, int8_t* out);

}  // namespace dspk
}  // namespace arm
}  // namespace core
}  // namespace ts
