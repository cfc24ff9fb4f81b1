// Cortex-M7 kernels with the DSP extension (docs/kernels.md, "Cortex-M7
// kernels"). The instructions come from dsp_ops.h: ACLE intrinsics on the
// target, plain C++ elsewhere (host tests).
//
// Every kernel computes exactly what the portable one does:
//   acc = bias + sum over taps inside the input of (x - zp) * w   (int32)
// then the same requantisation. The products are formed on 16-bit lanes
// (x - zp in [-255, 255], w in [-128, 127]) and summed in int32, which is
// exact in any order; so outputs are bit-identical with the portable table
// (tests/arm_dsp_kernels_test.cpp on the host, `selftest` on the target).
// Layers outside a kernel's shape go to the portable table's function.
//
// The widening trick (as in CMSIS-NN): SXTB16 of a word of 4 int8 values
// (v0 v1 v2 v3) gives the halfword pair (v0, v2), and SXTB16 of it rotated
// by 8 gives (v1, v3). Weights are widened that way on the fly (2
// instructions per 4 weights), and activations are stored once in the same
// order, pairs (x0, x2) and (x1, x3), so one SMLAD adds two products.
#include "core/arm/dsp_kernels.h"

// Short fill and copy loops stay loops: GCC would turn them into memset /
// memcpy calls, which newlib-nano does byte by byte after a call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "core/arm/dsp_ops.h"
#include "core/ops/common.h"

namespace ts {
namespace core {
namespace arm {

using namespace opk;
using namespace dsp;

namespace {

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
  TS_DSP_INLINE int32_t scale_z(int32_t x) const {
    const uint32_t l = 0x40000000u + (uint32_t(x) & 0x80000000u);
    const int32_t h = chiz + (x >> 31);
    int64_t u = int64_t((uint64_t(uint32_t(h)) << 32) | l);
    u += int64_t(x) * m;
    return int32_t(u >> 32) >> sh;
  }
  TS_DSP_INLINE int32_t scale(int32_t x) const {
    const uint32_t l = 0x40000000u + (uint32_t(x) & 0x80000000u);
    const int32_t h = chi + (x >> 31);
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

void requant_row(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  // Requant keeps its inputs: rebuild the fast form from them.
  const FastRq f(rq.m, rq.shift, rq.zp, rq.lo, rq.hi);
  if (rq.exact || !f.ok) {
    for (int32_t k = 0; k < n; ++k) out[k] = rq(acc[k]);
    return;
  }
  requant_n(acc, n, f, out);
}

FastRq channel_rq(const LayerDesc& L, int32_t o) {
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

// One group of 4 channels at word offset G of x (weights wv), positions
// k < N.
#define TS_DOT_GROUP(G, wv)                               \
  do {                                                    \
    const uint32_t we = sxtb16(wv), wo = sxtb16_ror8(wv); \
    uint32_t e, o;                                        \
    ld2<G>(x, &e, &o);                                    \
    a0 = smlad(o, wo, smlad(e, we, a0));                  \
    if (N > 1) {                                          \
      ld2<G + 2>(x, &e, &o);                              \
      a1 = smlad(o, wo, smlad(e, we, a1));                \
    }                                                     \
    if (N > 2) {                                          \
      ld2<G + 4>(x, &e, &o);                              \
      a2 = smlad(o, wo, smlad(e, we, a2));                \
    }                                                     \
    if (N > 3) {                                          \
      ld2<G + 6>(x, &e, &o);                              \
      a3 = smlad(o, wo, smlad(e, we, a3));                \
    }                                                     \
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

// ------------------------------------------------------------------ pointwise
//
// Output channels [o0, o0+no) of one group, positions [p0, p1): for blocks
// of kOcBlock channels (requantisers built once per block), for tiles of 4
// positions, the tile's activations are widened into xt once (4 words of
// input per 4 channels, SXTB16 + PKHBT/PKHTB + SSUB16) and every channel of
// the block runs dotn over them. Inputs deeper than kCinChunk channels are
// taken in chunks, the partial sums kept in acc.
constexpr int32_t kCinChunk = 1024;  // xt: 8 KiB of stack
constexpr int32_t kOcBlock = 64;     // requantisers: 3 KiB

// Channels [c, c + nc) (nc a multiple of 4) at positions [p, p + np) of a
// full-width view into xt; positions np..3 are zero.
// Sub = false: raw inputs (the zero point goes into the sums' start).
template <bool Sub = true>
void pw_widen(const View& v, int32_t W, int32_t c, int32_t nc, int32_t p, int32_t np, int32_t zp, uint32_t* xt) {
  if (!Sub) zp = 0;
  const int64_t plane = int64_t(v.nh) * W;
  const int64_t at = int64_t(c - v.c0) * plane + (p - int64_t(v.h0) * W);
  const int8_t* s = v.data + at;
  // A partial tile may load 4 bytes anyway when they stay inside the view
  // (the extra positions' lanes are never read: dotn<np>).
  if (np == kTile || at + int64_t(nc - 1) * plane + 4 <= int64_t(v.nc) * plane) {
    const uint32_t zz = pack16(zp, zp);
    for (int32_t g = 0; g < nc / 4; ++g, s += 4 * plane, xt += 8) {
      const uint32_t A = ld32(s), B = ld32(s + plane), C = ld32(s + 2 * plane), D = ld32(s + 3 * plane);
      const uint32_t ae = sxtb16(A), ao = sxtb16_ror8(A), ce = sxtb16(C), co = sxtb16_ror8(C);
      const uint32_t be = sxtb16(B), bo = sxtb16_ror8(B), de = sxtb16(D), dof = sxtb16_ror8(D);
      if (Sub) {
        xt[0] = ssub16(pkhbt(ae, ce), zz);
        xt[1] = ssub16(pkhbt(be, de), zz);
        xt[2] = ssub16(pkhbt(ao, co), zz);
        xt[3] = ssub16(pkhbt(bo, dof), zz);
        xt[4] = ssub16(pkhtb(ae, ce), zz);
        xt[5] = ssub16(pkhtb(be, de), zz);
        xt[6] = ssub16(pkhtb(ao, co), zz);
        xt[7] = ssub16(pkhtb(bo, dof), zz);
      } else {
        xt[0] = pkhbt(ae, ce);
        xt[1] = pkhbt(be, de);
        xt[2] = pkhbt(ao, co);
        xt[3] = pkhbt(bo, dof);
        xt[4] = pkhtb(ae, ce);
        xt[5] = pkhtb(be, de);
        xt[6] = pkhtb(ao, co);
        xt[7] = pkhtb(bo, dof);
      }
    }
    return;
  }
  for (int32_t g = 0; g < nc / 4; ++g, s += 4 * plane, xt += 8) {
    for (int32_t k = 0; k < kTile; ++k) {
      int32_t x[4] = {0, 0, 0, 0};
      if (k < np)
        for (int32_t r = 0; r < 4; ++r) x[r] = int32_t(s[r * plane + k]) - zp;
      xt[2 * k] = pack16(x[0], x[2]);
      xt[2 * k + 1] = pack16(x[1], x[3]);
    }
  }
}

// nt whole tiles (positions [p, p + 4 nt)) at once: the address worked out
// once, 4 channels x 4 positions per step (4 loads, 8 SXTB16, 8 PKHBT/PKHTB,
// 8 stores; Sub: 8 SSUB16 more).
template <bool Sub>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pw_widen_tiles(const View& v, int32_t W, int32_t c, int32_t nc, int32_t p, int32_t nt, int32_t zp,
                    uint32_t* xt) {
  const int32_t plane = v.nh * W;
  const int8_t* s0 = v.data + int64_t(c - v.c0) * plane + (p - v.h0 * W);
  const uint32_t zz = pack16(zp, zp);
  const int32_t ng = nc / 4;
  for (int32_t k = 0; k < nt; ++k, s0 += kTile) {
    const int8_t* s = s0;
    uint32_t* x = xt + k * 2 * nc;
    for (int32_t g = 0; g < ng; ++g, s += 4 * plane, x += 8) {
      const uint32_t A = ld32(s), B = ld32(s + plane), C = ld32(s + 2 * plane), D = ld32(s + 3 * plane);
      const uint32_t ae = sxtb16(A), ao = sxtb16_ror8(A), ce = sxtb16(C), co = sxtb16_ror8(C);
      const uint32_t be = sxtb16(B), bo = sxtb16_ror8(B), de = sxtb16(D), dof = sxtb16_ror8(D);
      x[0] = Sub ? ssub16(pkhbt(ae, ce), zz) : pkhbt(ae, ce);
      x[1] = Sub ? ssub16(pkhbt(be, de), zz) : pkhbt(be, de);
      x[2] = Sub ? ssub16(pkhbt(ao, co), zz) : pkhbt(ao, co);
      x[3] = Sub ? ssub16(pkhbt(bo, dof), zz) : pkhbt(bo, dof);
      x[4] = Sub ? ssub16(pkhtb(ae, ce), zz) : pkhtb(ae, ce);
      x[5] = Sub ? ssub16(pkhtb(be, de), zz) : pkhtb(be, de);
      x[6] = Sub ? ssub16(pkhtb(ao, co), zz) : pkhtb(ao, co);
      x[7] = Sub ? ssub16(pkhtb(bo, dof), zz) : pkhtb(bo, dof);
    }
  }
}

// One output channel over `nt` whole tiles of widened positions (tile k at
// xt + k * tw): bias, dot product and requantisation per tile with the
// channel's requantiser, weights pointer and bias held across the tiles.
template <bool Z>
void pw_channel_tiles(const uint32_t* xt, int32_t tw, int32_t nt, const int8_t* w, int32_t ng, int32_t bias,
                      const FastRq& rq, int8_t* out) {
  for (int32_t k = 0; k < nt; ++k, xt += tw, out += kTile) {
    int32_t a[kTile] = {bias, bias, bias, bias};
    dotn<4>(xt, w, ng, a);
    requant4<Z>(a, kTile, rq, out);
  }
}

// Inputs of at most kXtWords / 2 channels: positions are taken in chunks of
// as many tiles as xt holds (256 positions at 16 channels, 4 at 1024), the
// chunk widened once, then every output channel runs over all its tiles.
// Per channel and chunk the requantiser is built once; per tile what is
// left besides the dot product is the requantisation of 4 values into one
// word (about 7 instructions per output).
constexpr int32_t kXtWords = 2 * kCinChunk;

#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pointwise_chunks(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1,
                      int8_t* out, int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  const int32_t n = p1 - p0;
  const int32_t tw = 2 * cin;  // words of xt per tile
  const int32_t chunk = (kXtWords / tw) * kTile;
  uint32_t xt[kXtWords];
  for (int32_t c0 = 0; c0 < n; c0 += chunk) {
    const int32_t nc = mini(chunk, n - c0);
    const int32_t nt = nc / kTile, rest = nc % kTile;
    pw_widen_tiles<true>(v, W, ci0, cin, p0 + c0, nt, zp, xt);
    if (rest) pw_widen(v, W, ci0, cin, p0 + c0 + nt * kTile, rest, zp, xt + nt * tw);
    const int8_t* wj = L.weights + int64_t(o0 - L.oc_base) * cin;
    int8_t* oj = out + c0;
    for (int32_t j = 0; j < no; ++j, wj += cin, oj += cstride) {
      const int32_t local = o0 + j - L.oc_base;
      const int32_t bias = L.bias ? L.bias[local] : 0;
      const FastRq rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
      if (rq.zfold) {
        pw_channel_tiles<true>(xt, tw, nt, wj, cin / 4, bias, rq, oj);
      } else if (rq.ok) {
        pw_channel_tiles<false>(xt, tw, nt, wj, cin / 4, bias, rq, oj);
      } else {
        for (int32_t k = 0; k < nt; ++k) {
          int32_t a[kTile] = {bias, bias, bias, bias};
          dotn<4>(xt + k * tw, wj, cin / 4, a);
          requant_n(a, kTile, rq, oj + k * kTile);
        }
      }
      if (rest) {
        int32_t a[kTile] = {bias, bias, bias, bias};
        dot_np(rest, xt + nt * tw, wj, cin / 4, a);
        requant_n(a, rest, rq, oj + nt * kTile);
      }
    }
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

// The weights of one output channel (4 * ng bytes) into d: d[2g] = (w(4g),
// w(4g+2)), d[2g+1] = (w(4g+1), w(4g+3)), doubled when dbl. Returns
// zp * sum(w).
int32_t pw_widen_weights(const int8_t* w, int32_t ng, uint32_t zz, bool dbl, uint32_t* d) {
  int32_t s = 0;
  for (int32_t g = 0; g < ng; ++g, w += 4, d += 2) {
    const uint32_t q = ld32(w);
    uint32_t e = sxtb16(q), o = sxtb16_ror8(q);
    s = smlad(e, zz, s);
    s = smlad(o, zz, s);
    if (dbl) e = sadd16(e, e), o = sadd16(o, o);
    d[0] = e;
    d[1] = o;
  }
  return s;
}

// One group of 4 channels: activations at word offset G of x, widened
// weights at word offset WO of wv; positions k < N.
#define TS_DOTW_GROUP(G, WO)     \
  do {                           \
    uint32_t we, wo, e, o;       \
    ld2<WO>(wv, &we, &wo);       \
    ld2<G>(x, &e, &o);           \
    a0 = smlad(o, wo, smlad(e, we, a0)); \
    if (N > 1) {                 \
      ld2<G + 2>(x, &e, &o);     \
      a1 = smlad(o, wo, smlad(e, we, a1)); \
    }                            \
    if (N > 2) {                 \
      ld2<G + 4>(x, &e, &o);     \
      a2 = smlad(o, wo, smlad(e, we, a2)); \
    }                            \
    if (N > 3) {                 \
      ld2<G + 6>(x, &e, &o);     \
      a3 = smlad(o, wo, smlad(e, we, a3)); \
    }                            \
  } while (0)

// acc[k] += the dot product of position k of xt with the widened weights
// wv (ng groups), k < N.
template <int N>
TS_DSP_INLINE void dotw(const uint32_t* xt, const uint32_t* wv, int32_t ng, int32_t* acc) {
  int32_t a0 = acc[0], a1 = N > 1 ? acc[1] : 0, a2 = N > 2 ? acc[2] : 0, a3 = N > 3 ? acc[3] : 0;
  const uint32_t* x = xt;
  const uint32_t* const end2 = xt + 8 * (ng & ~1);
  for (; x != end2; x += 16, wv += 4) {
    TS_DOTW_GROUP(0, 0);
    TS_DOTW_GROUP(8, 2);
  }
  if (ng & 1) TS_DOTW_GROUP(0, 0);
  acc[0] = a0;
  if (N > 1) acc[1] = a1;
  if (N > 2) acc[2] = a2;
  if (N > 3) acc[3] = a3;
}
#undef TS_DOTW_GROUP

TS_DSP_INLINE void dotw_np(int32_t np, const uint32_t* xt, const uint32_t* wv, int32_t ng, int32_t* acc) {
  switch (np) {
    case 4: return dotw<4>(xt, wv, ng, acc);
    case 3: return dotw<3>(xt, wv, ng, acc);
    case 2: return dotw<2>(xt, wv, ng, acc);
    default: return dotw<1>(xt, wv, ng, acc);
  }
}

// Groups G..NG-1 of a tile of 4 positions, unrolled (offsets are
// immediates: no loop, no pointer updates).
template <int G, int NG>
struct DotTile {
  static TS_DSP_INLINE void run(const uint32_t* x, const uint32_t* wv, int32_t& a0, int32_t& a1, int32_t& a2,
                                int32_t& a3) {
    uint32_t we, wo, e, o;
    ld2<2 * G>(wv, &we, &wo);
    ld2<8 * G>(x, &e, &o);
    a0 = smlad(o, wo, smlad(e, we, a0));
    ld2<8 * G + 2>(x, &e, &o);
    a1 = smlad(o, wo, smlad(e, we, a1));
    ld2<8 * G + 4>(x, &e, &o);
    a2 = smlad(o, wo, smlad(e, we, a2));
    ld2<8 * G + 6>(x, &e, &o);
    a3 = smlad(o, wo, smlad(e, we, a3));
    DotTile<G + 1, NG>::run(x, wv, a0, a1, a2, a3);
  }
};
template <int NG>
struct DotTile<NG, NG> {
  static TS_DSP_INLINE void run(const uint32_t*, const uint32_t*, int32_t&, int32_t&, int32_t&, int32_t&) {}
};

// One output channel with doubled weights over nt whole tiles of xt (tile k
// at xt + k * tw), 4 outputs per word; Full: no clamp besides SSAT. NG > 0:
// ng = NG, the tile's groups unrolled.
template <bool Full, int NG>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pw_pre_tiles(const uint32_t* xt, int32_t tw, int32_t nt, const uint32_t* wv, int32_t ng, int32_t base,
                  const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  const uint32_t* const end = xt + nt * tw;
  for (; xt != end; xt += (NG ? 8 * NG : tw), out += kTile) {
    int32_t a0 = base, a1 = base, a2 = base, a3 = base;
    if (NG) {
      DotTile<0, NG>::run(xt, wv, a0, a1, a2, a3);
    } else {  // 4 groups per pass, then one at a time
      const uint32_t* x = xt;
      const uint32_t* w = wv;
      const uint32_t* const end4 = xt + 8 * (ng & ~3);
      for (; x != end4; x += 32, w += 8) DotTile<0, 4>::run(x, w, a0, a1, a2, a3);
      for (; x != xt + 8 * ng; x += 8, w += 2) DotTile<0, 1>::run(x, w, a0, a1, a2, a3);
    }
    const uint32_t word = pack4(rq(a0), rq(a1), rq(a2), rq(a3));
    st32(out, Full ? word : min8(max8(word, lo4), hi4));
  }
}

template <bool Full>
void pw_pre_tiles_any(const uint32_t* xt, int32_t tw, int32_t nt, const uint32_t* wv, int32_t ng, int32_t base,
                      const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  switch (ng) {
    case 4: return pw_pre_tiles<Full, 4>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 6: return pw_pre_tiles<Full, 6>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 8: return pw_pre_tiles<Full, 8>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 9: return pw_pre_tiles<Full, 9>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);  // 3x3 over 3 channels
    default: return pw_pre_tiles<Full, 0>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
  }
}

// out[k] = the requantised doubled sum acc[k], clamped to [lo, hi], k < n.
template <bool Full>
void requant2_4(const int32_t* acc, int32_t n, const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  for (int32_t k = 0; k + 4 <= n; k += 4) {
    const uint32_t word = pack4(rq(acc[k]), rq(acc[k + 1]), rq(acc[k + 2]), rq(acc[k + 3]));
    st32(out + k, Full ? word : min8(max8(word, lo4), hi4));
  }
}
void requant2_n(const int32_t* acc, int32_t n, const Rq2& rq, int32_t lo, int32_t hi, int8_t* out) {
  if (lo <= -128 && hi >= 127)
    requant2_4<true>(acc, n, rq, 0, 0, out);
  else
    requant2_4<false>(acc, n, rq, splat8(lo), splat8(hi), out);
  for (int32_t k = n & ~3; k < n; ++k) {
    const int32_t q = rq(acc[k]);
    out[k] = int8_t(q < lo ? lo : (q > hi ? hi : q));
  }
}

// Channel j of a block: np positions of xt from tile t on, into out.
void pw_pre_channel(const LayerDesc& L, int32_t o, const uint32_t* xt, int32_t tw, int32_t nt, int32_t rest,
                    const uint32_t* wv, int32_t ng, int32_t base, bool dbl, int8_t* out) {
  const int32_t local = o - L.oc_base;
  const int32_t lo = L.act_min, hi = L.act_max;
  if (dbl) {
    const Rq2 rq(L.mult[local], L.shift[local], L.out_zp);
    if (lo <= -128 && hi >= 127)
      pw_pre_tiles_any<true>(xt, tw, nt, wv, ng, base, rq, 0, 0, out);
    else
      pw_pre_tiles_any<false>(xt, tw, nt, wv, ng, base, rq, splat8(lo), splat8(hi), out);
    if (rest) {
      int32_t a[kTile] = {base, base, base, base};
      dotw_np(rest, xt + nt * tw, wv, ng, a);
      for (int32_t k = 0; k < rest; ++k) {
        const int32_t q = rq(a[k]);
        out[nt * kTile + k] = int8_t(q < lo ? lo : (q > hi ? hi : q));
      }
    }
    return;
  }
  const Requant rq(L.mult[local], L.shift[local], L.out_zp, lo, hi);
  for (int32_t k = 0; k < nt; ++k) {
    int32_t a[kTile] = {base, base, base, base};
    dotw<4>(xt + k * tw, wv, ng, a);
    for (int32_t i = 0; i < kTile; ++i) out[k * kTile + i] = rq(a[i]);
  }
  if (rest) {
    int32_t a[kTile] = {base, base, base, base};
    dotw_np(rest, xt + nt * tw, wv, ng, a);
    for (int32_t k = 0; k < rest; ++k) out[nt * kTile + k] = rq(a[k]);
  }
}

// The weights of output channels [o, o + nb) widened into wb, with their
// sums' start and whether they are doubled.
void pw_pre_weights(const LayerDesc& L, int32_t o, int32_t nb, int32_t cin, uint32_t* wb, int32_t* base, bool* dbl) {
  const int32_t ng = cin / 4;
  const int32_t zp = L.in_zp[0];
  for (int32_t j = 0; j < nb; ++j) {
    const int32_t local = o + j - L.oc_base;
    const int32_t bias = L.bias ? L.bias[local] : 0;
    dbl[j] = Rq2(L.mult[local], L.shift[local], L.out_zp).ok && bias >= -(int32_t(1) << 29) &&
             bias <= (int32_t(1) << 29);
    const int32_t s = pw_widen_weights(L.weights + int64_t(local) * cin, ng, pack16(zp, zp), dbl[j], wb + j * 2 * ng);
    const uint32_t b = uint32_t(bias) - uint32_t(s);  // bias - zp * sum(w), modulo 2^32
    base[j] = int32_t(dbl[j] ? 2 * b : b);
  }
}

// Positions [p, p + np) of a full-width view, raw, into xt (tiles of 4).
void pw_pre_acts(const View& v, int32_t W, int32_t ci0, int32_t cin, int32_t p, int32_t np, uint32_t* xt) {
  const int32_t nt = np / kTile, rest = np % kTile;
  pw_widen_tiles<false>(v, W, ci0, cin, p, nt, 0, xt);
  if (rest) pw_widen<false>(v, W, ci0, cin, p + nt * kTile, rest, 0, xt + nt * 2 * cin);
}

// Whether widening the weights pays for a call of no output channels at n
// positions: estimates (instructions, from the inner loops' counts) of this
// path and of pointwise_chunks (weights widened on the fly, about 2 more per
// 4 input channels and 4 positions, and a longer requantisation). Calls of
// a few positions (a row of a 7x7 plane) do not repay the widening.
bool pre_pays(int32_t cin, int32_t no, int32_t n) {
  const int64_t ng = cin / 4, nt = (n + kTile - 1) / kTile;
  const PreSizes z(2 * cin, cin / 4, no);
  const int64_t chunk = z.chunk, blk = z.blk;
  const int64_t nchunks = (n + chunk - 1) / chunk, nblocks = (no + blk - 1) / blk;
  const int64_t weights = int64_t(no) * cin * 3, acts = int64_t(n) * cin * 8 / 5;
  const int64_t rewiden = nblocks == 1 ? 0 : (nchunks - 1) * weights < (nblocks - 1) * acts ? (nchunks - 1) * weights
                                                                                           : (nblocks - 1) * acts;
  const int64_t pre = no * nt * (ng * 13 + 20) + acts + weights + rewiden + nchunks * no * 40;
  const int64_t old = no * nt * (ng * 15 + 32) + int64_t(n) * cin * 2 + nchunks * no * 30;
  return pre < old;
}

// Positions are taken in chunks (as many tiles as xt holds), output channels
// in blocks (as many as wb holds); when the call's channels are more than one
// block, either the weights are widened again per chunk or the activations
// per block, whichever is fewer instructions (about 3 per weight, 1.6 per
// activation).
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pointwise_pre(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                   int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t ng = cin / 4;
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t n = p1 - p0;
  const int32_t tw = 2 * cin;  // words of xt per tile
  const PreSizes z(tw, ng, no);
  const int32_t chunk = z.chunk, blk = z.blk;
  const int32_t nchunks = (n + chunk - 1) / chunk, nblocks = (no + blk - 1) / blk;
  // Blocks outside when widening the activations nblocks times costs less
  // than widening the weights nchunks times.
  const bool blocks_out = nblocks == 1 || int64_t(nblocks) * n * 8 < int64_t(nchunks) * no * 15;
  uint32_t buf[kPreWords];
  uint32_t* const wb = buf;
  uint32_t* const xt = buf + z.wb_words;
  int32_t base[kPreBlock];
  bool dbl[kPreBlock];
  const int32_t n_out = blocks_out ? nblocks : nchunks, n_in = blocks_out ? nchunks : nblocks;
  for (int32_t i = 0; i < n_out; ++i) {
    for (int32_t k = 0; k < n_in; ++k) {
      const int32_t b0 = (blocks_out ? i : k) * blk, c0 = (blocks_out ? k : i) * chunk;
      const int32_t nb = mini(blk, no - b0), nc = mini(chunk, n - c0);
      if (k == 0 || !blocks_out) pw_pre_weights(L, o0 + b0, nb, cin, wb, base, dbl);
      if (k == 0 || blocks_out) pw_pre_acts(v, W, ci0, cin, p0 + c0, nc, xt);
      for (int32_t j = 0; j < nb; ++j)
        pw_pre_channel(L, o0 + b0 + j, xt, tw, nc / kTile, nc % kTile, wb + j * 2 * ng, ng, base[j], dbl[j],
                       out + int64_t(b0 + j) * cstride + c0);
    }
  }
}

void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  if (cin % 4 != 0) return portable_kernels().pointwise(L, v, o0, no, p0, p1, out, cstride);
  if (cin <= kPreMaxCin && pre_pays(cin, no, p1 - p0)) return pointwise_pre(L, v, o0, no, p0, p1, out, cstride);
  if (cin <= kXtWords / 2) return pointwise_chunks(L, v, o0, no, p0, p1, out, cstride);
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  const int32_t n = p1 - p0;
  uint32_t xt[kCinChunk * 2];
  FastRq rq[kOcBlock];
  int32_t bias[kOcBlock];
  int32_t acc[kOcBlock][kTile];
  for (int32_t ob = 0; ob < no; ob += kOcBlock) {
    const int32_t nb = mini(kOcBlock, no - ob);
    for (int32_t j = 0; j < nb; ++j) rq[j] = channel_rq(L, o0 + ob + j);
    const int8_t* wb = L.weights + int64_t(o0 + ob - L.oc_base) * cin;
    for (int32_t j = 0; j < nb; ++j) bias[j] = L.bias ? L.bias[o0 + ob + j - L.oc_base] : 0;
    for (int32_t t = 0; t < n; t += kTile) {
      const int32_t np = mini(kTile, n - t);
      for (int32_t j = 0; j < nb; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = bias[j];
      for (int32_t cc = 0; cc < cin; cc += kCinChunk) {
        const int32_t nc = mini(kCinChunk, cin - cc);
        pw_widen(v, W, ci0 + cc, nc, p0 + t, np, zp, xt);
        for (int32_t j = 0; j < nb; ++j) dot_np(np, xt, wb + int64_t(j) * cin + cc, nc / 4, acc[j]);
      }
      for (int32_t j = 0; j < nb; ++j) requant_n(acc[j], np, rq[j], out + int64_t(ob + j) * cstride + t);
    }
  }
}

// ------------------------------------------------- depthwise 3x3, dilation 1
//
// One output channel (channel multiplier 1). The input rows a block of
// output rows reads are first copied into a buffer with the padding made
// explicit: columns and rows outside the image hold the zero point, so that
// every output reads 3 full kernel rows and (x - zp) * w of a padded tap is 0.
// The zero point is then taken out once: acc starts at bias - zp * (sum of
// the 9 weights), and the loop multiplies raw inputs. Outputs go two at a
// time: per kernel row, the input bytes are loaded as a word and widened
// with SXTB16, and the 3 taps of each output are one SMLAD (two taps) plus
// one SMLAxy (the third). The copy costs about one instruction per input
// byte, against 9 MACs per output.
bool dw3x3_ok(const LayerDesc& L);

// Pairs of outputs over padded rows r, r + Wp, r + 2 Wp: acc[2j], acc[2j+1]
// for the pair starting at column 2j (input column 2j * SW of r). The middle
// weights of rows 0 and 1 share a register (b01), row 2's is in b2.
template <int SW>
void dw_pairs3(const int8_t* r, int32_t Wp, int32_t npairs, const uint32_t* w02, uint32_t b01, uint32_t b2,
               int32_t base, int32_t* acc) {
  const uint32_t a0 = w02[0], a1 = w02[1], a2 = w02[2];
  for (int32_t j = 0; j < npairs; ++j, r += 2 * SW, acc += 2) {
    const uint32_t q0 = ld32(r), q1 = ld32(r + Wp), q2 = ld32(r + 2 * Wp);
    const uint32_t e0 = sxtb16(q0), d0 = sxtb16_ror8(q0);  // (x0, x2), (x1, x3) of row 0
    const uint32_t e1 = sxtb16(q1), d1 = sxtb16_ror8(q1);
    const uint32_t e2 = sxtb16(q2), d2 = sxtb16_ror8(q2);
    int32_t s0 = smlad(e0, a0, base);
    s0 = smlabb(d0, b01, s0);
    s0 = smlad(e1, a1, s0);
    s0 = smlabt(d1, b01, s0);
    s0 = smlad(e2, a2, s0);
    s0 = smlabb(d2, b2, s0);
    int32_t s1;
    if (SW == 1) {
      s1 = smlad(d0, a0, base);  // x1*w0 + x3*w2
      s1 = smlatb(e0, b01, s1);  // x2*w1
      s1 = smlad(d1, a1, s1);
      s1 = smlatt(e1, b01, s1);
      s1 = smlad(d2, a2, s1);
      s1 = smlatb(e2, b2, s1);
    } else {
      s1 = smlatb(e0, a0, base);                     // x2*w0
      s1 = smlatb(d0, b01, s1);                      // x3*w1
      s1 = smlabt(uint32_t(int32_t(r[4])), a0, s1);  // x4*w2
      s1 = smlatb(e1, a1, s1);
      s1 = smlatt(d1, b01, s1);
      s1 = smlabt(uint32_t(int32_t(r[Wp + 4])), a1, s1);
      s1 = smlatb(e2, a2, s1);
      s1 = smlatb(d2, b2, s1);
      s1 = smlabt(uint32_t(int32_t(r[2 * Wp + 4])), a2, s1);
    }
    acc[0] = s0;
    acc[1] = s1;
  }
}

constexpr int32_t kDwPadBuf = 6144;  // bytes of padded input rows (stack)
constexpr int32_t kDwAcc = 1024;     // sums of a block of output rows (stack)

// Width of a padded row: the pairs read up to column SW * (W - 1) + 4 of it
// (a last odd output is computed as a pair), and the input row sits at
// columns [pad_l, pad_l + Win). Rounded up to a word.
int32_t dw_pad_width(const LayerDesc& L) {
  const int32_t need = maxi(L.sw * (L.out.w - 1) + 5 + L.sw, L.pad_l + L.in[0].w);
  return (need + 3) & ~3;
}

bool dw3x3_ok(const LayerDesc& L) {
  return L.groups == L.in[0].c && L.out.c == L.in[0].c && L.kh == 3 && L.kw == 3 && L.dh == 1 && L.dw == 1 &&
         (L.sw == 1 || L.sw == 2) && L.sh >= 1 && L.sh <= 2 && L.pad_l >= 0 && L.pad_t >= 0 &&
         dw_pad_width(L) * 4 <= kDwPadBuf && L.out.w <= kDwAcc;
}

// n bytes (any alignment), words first.
TS_DSP_INLINE void copy_bytes(int8_t* d, const int8_t* s, int32_t n) {
  int32_t k = 0;
  for (; k + 4 <= n; k += 4) st32(d + k, ld32(s + k));
  for (; k < n; ++k) d[k] = s[k];
}
TS_DSP_INLINE void fill_bytes(int8_t* d, uint32_t word, int32_t n) {
  int32_t k = 0;
  for (; k + 4 <= n; k += 4) st32(d + k, word);
  for (; k < n; ++k) d[k] = int8_t(word);
}

// The padded rows and the sums, kept across the channels of one call: the
// padding (rows above and below the image, columns left and right) is the
// same for every channel of a layer, so when a channel's block has the same
// rows as the previous one only the image bytes are copied again.
struct DwScratch {
  int8_t pad[kDwPadBuf];
  int32_t acc[kDwAcc + 2];
  int32_t framed_iy0 = 0, framed_rows = -1;  // rows of the last full fill
};

// What every channel of a call shares: the padded rows' width, output rows
// per block, the call's first and last output rows.
struct DwGeom {
  int32_t Wp = 0, rows_per_block = 0, oy_first = 0, oy_last = 0;
  DwGeom(const LayerDesc& L, int32_t p0, int32_t p1) {
    const int32_t W = L.out.w;
    Wp = dw_pad_width(L);
    const int32_t max_rows = kDwPadBuf / Wp;  // padded rows the buffer holds
    rows_per_block = mini((max_rows - 3) / L.sh + 1, kDwAcc / W);
    oy_first = p0 / W;
    oy_last = (p1 - 1) / W;
  }
};

void dw3x3_channel(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out,
                   DwScratch& sc, const DwGeom& g) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, Win = X.w, sw = L.sw, sh = L.sh;
  const int32_t local = o - L.oc_base;
  const int8_t* w = L.weights + int64_t(local) * 9;
  const int32_t zp = L.in_zp[0];
  // Doubled weights and sums when the requantiser of doubled sums applies
  // (|sum| <= |bias| + 9 * 255 * 128: |bias| <= 2^29 keeps it under 2^30).
  const int32_t bias = L.bias ? L.bias[local] : 0;
  const Rq2 rq2(L.mult[local], L.shift[local], L.out_zp);
  const bool dbl = rq2.ok && bias >= -(int32_t(1) << 29) && bias <= (int32_t(1) << 29);
  const int32_t k2 = dbl ? 2 : 1;
  uint32_t w02[3];
  int32_t wsum = 0;
  for (int32_t ky = 0; ky < 3; ++ky) {
    w02[ky] = pack16(k2 * w[ky * 3], k2 * w[ky * 3 + 2]);
    wsum += w[ky * 3] + w[ky * 3 + 1] + w[ky * 3 + 2];
  }
  const uint32_t b01 = pack16(k2 * w[1], k2 * w[4]), b2 = pack16(k2 * w[7], 0);
  const int32_t base = int32_t(uint32_t(k2) * (uint32_t(bias) - uint32_t(zp * wsum)));
  const uint32_t zz = splat8(zp);
  const int32_t Wp = g.Wp, rows_per_block = g.rows_per_block;
  int8_t* const pad = sc.pad;
  int32_t* const acc = sc.acc;
  const int32_t oy_first = g.oy_first, oy_last = g.oy_last;
  for (int32_t by = oy_first; by <= oy_last; by += rows_per_block) {
    const int32_t ey = mini(oy_last + 1, by + rows_per_block);
    // Input rows [iy0, iy0 + nrows) into padded rows 0..nrows-1.
    const int32_t iy0 = by * sh - L.pad_t;
    const int32_t nrows = (ey - 1 - by) * sh + 3;
    if (sc.framed_rows == nrows && sc.framed_iy0 == iy0) {
      // Same frame as the last channel: the padding is in place.
      const int32_t i0 = maxi(0, -iy0), i1 = mini(nrows, X.h - iy0);
      for (int32_t i = i0; i < i1; ++i) copy_bytes(pad + i * Wp + L.pad_l, row_ptr(v, Win, o, iy0 + i), Win);
    } else {
      for (int32_t i = 0; i < nrows; ++i) {
        int8_t* d = pad + i * Wp;
        const int32_t iy = iy0 + i;
        if (iy < 0 || iy >= X.h) {
          fill_bytes(d, zz, Wp);
          continue;
        }
        fill_bytes(d, zz, L.pad_l);
        copy_bytes(d + L.pad_l, row_ptr(v, Win, o, iy), Win);
        fill_bytes(d + L.pad_l + Win, zz, Wp - L.pad_l - Win);
      }
      sc.framed_iy0 = iy0;
      sc.framed_rows = nrows;
    }
    // The block's outputs are the contiguous positions [q0, q1): their sums
    // go to acc[pos - q0] row after row (a row's last pair may write one
    // past the row: the next row's first slot, computed after it, or
    // acc's spare slots), then one requantisation for the block.
    const int32_t q0 = by == oy_first ? p0 : by * W;
    const int32_t q1 = ey - 1 == oy_last ? p1 : ey * W;
    for (int32_t oy = by; oy < ey; ++oy) {
      const int32_t xa = oy == oy_first ? p0 % W : 0;
      const int32_t xb = oy == oy_last ? (p1 - 1) % W + 1 : W;
      const int8_t* r = pad + (oy - by) * sh * Wp;
      const int32_t np = (xb - xa + 1) / 2;
      int32_t* a = acc + (oy * W + xa - q0);
      if (sw == 1)
        dw_pairs3<1>(r + xa, Wp, np, w02, b01, b2, base, a);
      else
        dw_pairs3<2>(r + 2 * xa, Wp, np, w02, b01, b2, base, a);
    }
    if (dbl)
      requant2_n(acc, q1 - q0, rq2, L.act_min, L.act_max, out + (q0 - p0));
    else
      requant_n(acc, q1 - q0, channel_rq(L, o), out + (q0 - p0));
  }
}

// Depthwise weights of channel o: the pairs dw_pairs3 takes, doubled when
// the requantiser of doubled sums applies (*dbl), and the sums' start.
TS_DSP_INLINE int32_t dw_weights(const LayerDesc& L, int32_t o, uint32_t* w02, uint32_t* b01, uint32_t* b2,
                                 bool* dbl) {
  const int32_t local = o - L.oc_base;
  const int8_t* w = L.weights + int64_t(local) * 9;
  const int32_t bias = L.bias ? L.bias[local] : 0;
  *dbl = Rq2(L.mult[local], L.shift[local], L.out_zp).ok && bias >= -(int32_t(1) << 29) &&
         bias <= (int32_t(1) << 29);
  const uint32_t q0 = ld32(w), q1 = ld32(w + 4);  // w0..w3, w4..w7
  const uint32_t e0 = sxtb16(q0), d0 = sxtb16_ror8(q0), e1 = sxtb16(q1), d1 = sxtb16_ror8(q1);
  const int32_t w8 = w[8];
  // (w0, w2), (w3, w5), (w6, w8); (w1, w4); (w7, 0); halfword-wise doubled.
  const uint32_t p[5] = {e0, pack16(hi16(d0), lo16(d1)), pack16(hi16(e1), w8), pack16(lo16(d0), lo16(e1)),
                         pack16(hi16(d1), 0)};
  w02[0] = *dbl ? sadd16(p[0], p[0]) : p[0];
  w02[1] = *dbl ? sadd16(p[1], p[1]) : p[1];
  w02[2] = *dbl ? sadd16(p[2], p[2]) : p[2];
  *b01 = *dbl ? sadd16(p[3], p[3]) : p[3];
  *b2 = *dbl ? sadd16(p[4], p[4]) : p[4];
  const int32_t wsum = lo16(e0) + hi16(e0) + lo16(d0) + hi16(d0) + lo16(e1) + hi16(e1) + lo16(d1) + hi16(d1) + w8;
  const uint32_t b = uint32_t(bias) - uint32_t(L.in_zp[0] * wsum);
  return int32_t(*dbl ? 2 * b : b);
}

// One output row's run [p0, p1) of at most kDwRowMax outputs (boards
// computing a box narrower than the plane get one call per row): the input
// columns it reads go into a 3-row frame whose padding (the zero point) is
// filled once per call, so per channel only the image bytes of its rows are
// copied before the pair loop.
constexpr int32_t kDwRowMax = 24;
constexpr int32_t kDwFrame = 64;  // bytes per frame row: 2 * 24 + 3 + the pair loop's overread

bool dw_row_ok(const LayerDesc& L, int32_t p0, int32_t p1) {
  const int32_t W = L.out.w;
  return p1 - p0 <= kDwRowMax && p0 / W == (p1 - 1) / W;
}

void dw3x3_row(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, n = p1 - p0, sw = L.sw;
  const int32_t oy = p0 / W, xa = p0 % W;
  const int32_t ix0 = xa * sw - L.pad_l;          // frame column 0
  const int32_t lo = maxi(0, -ix0), hi = mini((n - 1) * sw + 3, X.w - ix0);  // image columns of the frame
  const int32_t iy0 = oy * L.sh - L.pad_t;
  int8_t fr[3 * kDwFrame];
  int32_t acc[kDwRowMax + 2];
  fill_bytes(fr, splat8(L.in_zp[0]), 3 * kDwFrame);
  for (int32_t c = c0; c < c1; ++c) {
    for (int32_t ky = 0; ky < 3; ++ky) {
      const int32_t iy = iy0 + ky;
      if (iy >= 0 && iy < X.h && hi > lo) copy_bytes(fr + ky * kDwFrame + lo, row_ptr(v, X.w, c, iy) + ix0 + lo, hi - lo);
    }
    uint32_t w02[3], b01, b2;
    bool dbl;
    const int32_t base = dw_weights(L, c, w02, &b01, &b2, &dbl);
    if (sw == 1)
      dw_pairs3<1>(fr, kDwFrame, (n + 1) / 2, w02, b01, b2, base, acc);
    else
      dw_pairs3<2>(fr, kDwFrame, (n + 1) / 2, w02, b01, b2, base, acc);
    int8_t* o = out + int64_t(c - c0) * cstride;
    if (dbl) {
      const int32_t local = c - L.oc_base;
      requant2_n(acc, n, Rq2(L.mult[local], L.shift[local], L.out_zp), L.act_min, L.act_max, o);
    } else {
      requant_n(acc, n, channel_rq(L, c), o);
    }
  }
}

// Channels [c0, c1) of a depthwise 3x3 layer, one scratch for all of them.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void dw3x3_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                 int64_t cstride) {
  if (dw_row_ok(L, p0, p1)) return dw3x3_row(L, v, c0, c1, p0, p1, out, cstride);
  DwScratch sc;
  const DwGeom g(L, p0, p1);
  for (int32_t c = c0; c < c1; ++c) dw3x3_channel(L, v, c, p0, p1, out + int64_t(c - c0) * cstride, sc, g);
}

void conv_ch(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  if (dw3x3_ok(L)) return dw3x3_block(L, v, o, o + 1, p0, p1, out, 0);
  portable_kernels().conv_channel(L, v, o, p0, p1, out);
}

void conv_ch_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  if (dw3x3_ok(L)) return dw3x3_block(L, v, o, o + 1, p0, p1, out, 0);
  portable_kernels().conv_channel_flat(L, v, o, p0, p1, out);
}

// ------------------------------------- other convolutions: widened patches
//
// A convolution with one group (the first layer of a CNN: 3x3 stride 2 over
// 3 channels) as a matrix product: the patch of each output position (cin x
// kh x kw taps, zero point subtracted, 0 for padding; rounded up to a
// multiple of 4 with zeros) is widened into xt, 4 positions at a time in
// dotn's layout, and every output channel of the block runs dotn over it.
// The weights of a block of channels are copied once into a buffer padded
// to the same length (zeros), so dotn reads whole words.
constexpr int32_t kPatchMax = 512;    // taps per patch (xt and the patches: 4 KiB each)
constexpr int32_t kWeightBuf = 4096;  // bytes of padded weights per block

bool patch_ok(const LayerDesc& L) {
  const int32_t taps = L.in[0].c * L.kh * L.kw;
  return L.groups == 1 && taps <= kPatchMax && taps >= 4;
}

// The patch of the output at row oy, column ox: pk[i] = x - zp for tap i
// (input channel, kernel row, kernel column), 0 for padding and for
// i in [taps, kp).
void patch_row(const LayerDesc& L, const View& v, int32_t oy, int32_t ox, int32_t kp, int16_t* pk) {
  const Dims& X = L.in[0];
  const int32_t zp = L.in_zp[0];
  const int32_t ix0 = ox * L.sw - L.pad_l;
  // Kernel columns inside the row: [kx0, kx1).
  int32_t kx0 = 0, kx1 = L.kw;
  while (kx0 < kx1 && ix0 + kx0 * L.dw < 0) ++kx0;
  while (kx1 > kx0 && ix0 + (kx1 - 1) * L.dw >= X.w) --kx1;
  const int32_t plane = v.nh * X.w;
  int16_t* d = pk;
  if (kx0 == 0 && kx1 == 3 && L.kw == 3 && L.dw == 1) {
    // The usual case: 3 columns, all inside the row.
    for (int32_t ci = 0; ci < X.c; ++ci) {
      const int8_t* chan = v.data + (ci - v.c0) * plane + ix0;
      int32_t iy = oy * L.sh - L.pad_t;
      for (int32_t ky = 0; ky < L.kh; ++ky, d += 3, iy += L.dh) {
        if (iy < 0 || iy >= X.h) {
          d[0] = d[1] = d[2] = 0;
          continue;
        }
        const int8_t* row = chan + (iy - v.h0) * X.w;
        d[0] = int16_t(row[0] - zp);
        d[1] = int16_t(row[1] - zp);
        d[2] = int16_t(row[2] - zp);
      }
    }
    for (int32_t i = int32_t(d - pk); i < kp; ++i) pk[i] = 0;
    return;
  }
  for (int32_t ci = 0; ci < X.c; ++ci) {
    const int8_t* chan = v.data + (ci - v.c0) * plane;
    for (int32_t ky = 0; ky < L.kh; ++ky, d += L.kw) {
      const int32_t iy = oy * L.sh - L.pad_t + ky * L.dh;
      if (iy < 0 || iy >= X.h) {
        for (int32_t kx = 0; kx < L.kw; ++kx) d[kx] = 0;
        continue;
      }
      const int8_t* row = chan + (iy - v.h0) * X.w + ix0;
      for (int32_t kx = 0; kx < kx0; ++kx) d[kx] = 0;
      for (int32_t kx = kx0; kx < kx1; ++kx) d[kx] = int16_t(row[kx * L.dw] - zp);
      for (int32_t kx = kx1; kx < L.kw; ++kx) d[kx] = 0;
    }
  }
  for (int32_t i = int32_t(d - pk); i < kp; ++i) pk[i] = 0;
}

// Kernels 3 wide (dilation 1, one group), e.g. MobileNetV2's first layer:
// each (input channel, kernel row) of a patch is one group of 4 taps, the
// 3 kernel columns and a fourth with weight 0, so a position's group is the
// word at its row's first column, widened with two SXTB16 straight into
// dotn's layout (no per-tap gather, no transpose). Raw inputs, the zero
// point taken out through the accumulator's start (bias - zp * sum of the
// weights), taps outside the image read as the zero point. A third more
// MACs in the dot product than the packed patch (9 groups instead of 7 for
// 3 channels), against a patch about 5 times cheaper to build, which counts
// when a board computes few output channels of the layer.
bool rows3_ok(const LayerDesc& L) {
  return L.groups == 1 && L.kw == 3 && L.dw == 1 && L.in[0].c * L.kh * 4 <= kPatchMax;
}

// The weights of channels [o, o + nb) of a 3-wide convolution as widened
// groups (w0, w2), (w1, 0) per (input channel, kernel row), doubled when the
// requantiser of doubled sums applies; the sums' start in base.
void rows3_weights(const LayerDesc& L, int32_t o, int32_t nb, int32_t ng, uint32_t* wb, int32_t* base, bool* dbl) {
  const int32_t zp = L.in_zp[0];
  for (int32_t j = 0; j < nb; ++j, wb += 2 * ng) {
    const int32_t local = o + j - L.oc_base;
    const int32_t bias = L.bias ? L.bias[local] : 0;
    // |sum| <= |bias| + 255 * 128 * 3 * ng, ng <= 128: under 2^30 when |bias| <= 2^29.
    dbl[j] = Rq2(L.mult[local], L.shift[local], L.out_zp).ok && bias >= -(int32_t(1) << 29) &&
             bias <= (int32_t(1) << 29);
    const int32_t k2 = dbl[j] ? 2 : 1;
    const int8_t* src = L.weights + int64_t(local) * ng * 3;
    int32_t sum = 0;
    for (int32_t g = 0; g < ng; ++g, src += 3) {
      wb[2 * g] = pack16(k2 * src[0], k2 * src[2]);
      wb[2 * g + 1] = pack16(k2 * src[1], 0);
      sum += src[0] + src[1] + src[2];
    }
    base[j] = int32_t(uint32_t(k2) * (uint32_t(bias) - uint32_t(zp * sum)));
  }
}

// Position t's patch into its tile of xt (lane k of the tile at x): per
// (input channel, kernel row) the word at the row's first column, widened.
void rows3_patch(const LayerDesc& L, const View& v, int32_t oy, int32_t ox, uint32_t* x) {
  const Dims& X = L.in[0];
  const int32_t zp = L.in_zp[0];
  const uint32_t zz = splat8(zp), zpair = pack16(zp, zp);
  const int32_t plane = v.nh * X.w;
  const int32_t ix0 = ox * L.sw - L.pad_l;
  const bool whole = ix0 >= 0 && ix0 + 4 <= X.w;  // 4 bytes inside the row
  for (int32_t ci = 0; ci < X.c; ++ci) {
    const int8_t* chan = v.data + int64_t(ci - v.c0) * plane;
    int32_t iy = oy * L.sh - L.pad_t;
    for (int32_t ky = 0; ky < L.kh; ++ky, iy += L.dh, x += 8) {
      if (iy < 0 || iy >= X.h) {
        x[0] = x[1] = zpair;
        continue;
      }
      const int8_t* row = chan + (iy - v.h0) * X.w;
      uint32_t q;
      if (whole) {
        q = ld32(row + ix0);
      } else {
        q = zz & 0xFF000000u;  // the fourth tap (weight 0): anything
        for (int32_t kx = 0; kx < 3; ++kx) {
          const int32_t ix = ix0 + kx;
          const uint32_t b = ix >= 0 && ix < X.w ? uint8_t(row[ix]) : (zz & 0xFFu);
          q |= b << (8 * kx);
        }
      }
      x[0] = sxtb16(q);
      x[1] = sxtb16_ror8(q);
    }
  }
}

// Positions are taken in chunks of as many tiles as the buffer leaves
// (31 for 3 input channels and 32 output channels), each patch built once;
// the weights of a block of output channels are widened once per chunk (a
// few hundred words), and
// every channel runs the pointwise kernel's tile loop (pw_pre_channel) over
// the chunk's tiles.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void conv_rows3(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                int64_t cstride) {
  const int32_t ng = L.in[0].c * L.kh;  // groups of 4 taps
  const int32_t tw = 8 * ng;              // words of xt per tile
  const int32_t W = L.out.w;
  const PreSizes z(tw, ng, c1 - c0);
  const int32_t chunk = z.chunk, blk = z.blk;
  uint32_t buf[kPreWords];
  uint32_t* const wb = buf;
  uint32_t* const xt = buf + z.wb_words;
  int32_t base[kPreBlock];
  bool dbl[kPreBlock];
  for (int32_t t0 = p0; t0 < p1; t0 += chunk) {
    const int32_t nc = mini(chunk, p1 - t0);
    const int32_t nt = nc / kTile, rest = nc % kTile;
    int32_t oy = t0 / W, ox = t0 % W;
    for (int32_t k = 0; k < nc; ++k) {
      rows3_patch(L, v, oy, ox, xt + (k / kTile) * tw + 2 * (k % kTile));
      if (++ox == W) ox = 0, ++oy;
    }
    for (int32_t k = nc; k < (nt + (rest ? 1 : 0)) * kTile; ++k) {  // lanes never read; keep them defined
      uint32_t* x = xt + (k / kTile) * tw + 2 * (k % kTile);
      for (int32_t g = 0; g < ng; ++g, x += 8) x[0] = x[1] = 0;
    }
    for (int32_t cb = c0; cb < c1; cb += blk) {
      const int32_t nb = mini(blk, c1 - cb);
      rows3_weights(L, cb, nb, ng, wb, base, dbl);
      for (int32_t j = 0; j < nb; ++j)
        pw_pre_channel(L, cb + j, xt, tw, nt, rest, wb + j * 2 * ng, ng, base[j], dbl[j],
                       out + int64_t(cb + j - c0) * cstride + (t0 - p0));
    }
  }
}

bool conv_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                int64_t cstride) {
  if (dw3x3_ok(L)) {
    dw3x3_block(L, v, c0, c1, p0, p1, out, cstride);
    return true;
  }
  if (rows3_ok(L)) {
    conv_rows3(L, v, c0, c1, p0, p1, out, cstride);
    return true;
  }
  if (!patch_ok(L)) return false;
  const int32_t taps = L.in[0].c * L.kh * L.kw;
  const int32_t kp = (taps + 3) & ~3;
  const int32_t W = L.out.w;
  const int32_t block = mini(kWeightBuf / kp, kOcBlock);
  uint32_t xt[kPatchMax * 2];
  int16_t pk[kTile][kPatchMax];
  int8_t wbuf[kWeightBuf];
  FastRq rq[kOcBlock];
  int32_t acc[kOcBlock][kTile];
  for (int32_t cb = c0; cb < c1; cb += block) {
    const int32_t nb = mini(block, c1 - cb);
    for (int32_t j = 0; j < nb; ++j) {
      const int8_t* src = L.weights + int64_t(cb + j - L.oc_base) * taps;
      int8_t* dst = wbuf + j * kp;
      for (int32_t i = 0; i < taps; ++i) dst[i] = src[i];
      for (int32_t i = taps; i < kp; ++i) dst[i] = 0;
      rq[j] = channel_rq(L, cb + j);
    }
    for (int32_t t = p0; t < p1; t += kTile) {
      const int32_t np = mini(kTile, p1 - t);
      // Patches position by position, then interleaved into dotn's layout:
      // from (p0, p1) and (p2, p3) of a position, (p0, p2) and (p1, p3).
      for (int32_t k = 0; k < kTile; ++k) {
        if (k < np) {
          patch_row(L, v, (t + k) / W, (t + k) % W, kp, pk[k]);
        } else {
          for (int32_t i = 0; i < kp; ++i) pk[k][i] = 0;
        }
      }
      for (int32_t g = 0; g < kp / 4; ++g) {
        for (int32_t k = 0; k < kTile; ++k) {
          const uint32_t a = ld32(pk[k] + 4 * g), b = ld32(pk[k] + 4 * g + 2);
          xt[8 * g + 2 * k] = pkhbt(a, b);
          xt[8 * g + 2 * k + 1] = pkhtb(a, b);
        }
      }
      for (int32_t j = 0; j < nb; ++j) {
        const int32_t b = L.bias ? L.bias[cb + j - L.oc_base] : 0;
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = b;
        dot_np(np, xt, wbuf + j * kp, kp / 4, acc[j]);
        requant_n(acc[j], np, rq[j], out + int64_t(cb + j - c0) * cstride + (t - p0));
      }
    }
  }
  return true;
}

// ------------------------------------------------------------------------ Add
//
// The portable arithmetic (operands rescaled to a common scale, summed,
// requantised) with the 5-instruction scaling of FastRq when all three
// requantisers allow it.
// E0/E1: operand a/b's scaler has shift 0 (scale0) or a right shift
// (scale_any).
template <bool E0a, bool E0b>
void add_loop(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, const FastRq& ra, const FastRq& rb,
              const FastRq& ro, int8_t* out) {
  // |a - za| <= 255 and left <= 23: the shifted operand fits int32.
  const int32_t za = p.za, zb = p.zb, left = p.left;
  for (int32_t k = 0; k < n; ++k) {
    // A multiply, not a shift: a - za may be negative (the same LSL on the M7).
    const int32_t x = (int32_t(a[k]) - za) * (int32_t(1) << left);
    const int32_t y = (int32_t(b[k]) - zb) * (int32_t(1) << left);
    const int32_t sx = E0a ? ra.scale0(x) : ra.scale_any(x);
    const int32_t sy = E0b ? rb.scale0(y) : rb.scale_any(y);
    int32_t r = ro.scale_any(wrap_add(sx, sy)) + ro.zp;
    r = r < ro.lo ? ro.lo : r;
    out[k] = int8_t(r > ro.hi ? ro.hi : r);
  }
}

void add_row(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  const FastRq ra(p.ra.m, p.ra.shift, 0, -128, 127);
  const FastRq rb(p.rb.m, p.rb.shift, 0, -128, 127);
  const FastRq ro(p.rout.m, p.rout.shift, p.rout.zp, p.rout.lo, p.rout.hi);
  if (p.ra.exact || p.rb.exact || p.rout.exact || !(ra.ok_any || ra.ok0) || !(rb.ok_any || rb.ok0) || !ro.ok_any ||
      p.left < 0 || p.left > 23)
    return portable_kernels().add_row(a, b, n, p, out);
  if (ra.ok0)
    return rb.ok0 ? add_loop<true, true>(a, b, n, p, ra, rb, ro, out) : add_loop<true, false>(a, b, n, p, ra, rb, ro, out);
  return rb.ok0 ? add_loop<false, true>(a, b, n, p, ra, rb, ro, out) : add_loop<false, false>(a, b, n, p, ra, rb, ro, out);
}

// ----------------------------------------------------------------------- Gemm
//
// The input vector is widened once (zero point subtracted) into pairs (x0,
// x2), (x1, x3) per 4 elements; then two outputs per pass share each input
// word: per 4 inputs, 2 weight loads, 4 SXTB16, 4 SMLAD for 8 MACs.
constexpr int32_t kGemmMax = 2048;  // xw: 4 KiB of stack

void gemm(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride) {
  const int32_t fan_in = L.in[0].size();
  if (fan_in % 4 != 0 || fan_in > kGemmMax) return portable_kernels().gemm(L, x, o0, o1, out, ostride);
  const int32_t zp = L.in_zp[0];
  const int32_t ng = fan_in / 4;
  uint32_t xw[kGemmMax / 2];
  const uint32_t zz = pack16(zp, zp);
  for (int32_t g = 0; g < ng; ++g) {
    const uint32_t q = ld32(x + 4 * g);
    xw[2 * g] = ssub16(sxtb16(q), zz);
    xw[2 * g + 1] = ssub16(sxtb16_ror8(q), zz);
  }
  int32_t o = o0;
  for (; o + 2 <= o1; o += 2) {
    const int32_t l0 = o - L.oc_base;
    const int8_t* w0 = L.weights + int64_t(l0) * fan_in;
    const int8_t* w1 = w0 + fan_in;
    int32_t s0 = L.bias ? L.bias[l0] : 0, s1 = L.bias ? L.bias[l0 + 1] : 0;
    for (int32_t g = 0; g < ng; ++g) {
      const uint32_t xe = xw[2 * g], xo = xw[2 * g + 1];
      const uint32_t u = ld32(w0 + 4 * g), t = ld32(w1 + 4 * g);
      s0 = smlad(xe, sxtb16(u), s0);
      s0 = smlad(xo, sxtb16_ror8(u), s0);
      s1 = smlad(xe, sxtb16(t), s1);
      s1 = smlad(xo, sxtb16_ror8(t), s1);
    }
    out[int64_t(o - o0) * ostride] = channel_rq(L, o).apply(s0);
    out[int64_t(o + 1 - o0) * ostride] = channel_rq(L, o + 1).apply(s1);
  }
  for (; o < o1; ++o) {
    const int32_t l0 = o - L.oc_base;
    const int8_t* w0 = L.weights + int64_t(l0) * fan_in;
    int32_t s0 = L.bias ? L.bias[l0] : 0;
    for (int32_t g = 0; g < ng; ++g) {
      const uint32_t u = ld32(w0 + 4 * g);
      s0 = smlad(xw[2 * g], sxtb16(u), s0);
      s0 = smlad(xw[2 * g + 1], sxtb16_ror8(u), s0);
    }
    out[int64_t(o - o0) * ostride] = channel_rq(L, o).apply(s0);
  }
}

}  // namespace

bool fast_requant_ok(int32_t mult, int32_t shift) { return mult >= (int32_t(1) << 30) && shift <= -2 && shift >= -31; }

bool fast_requant_ok_any(int32_t mult, int32_t shift) {
  return fast_requant_ok(mult, shift) || (shift == -1 && fast_requant_ok(mult, -2));
}

int32_t fast_scale(int32_t x, int32_t mult, int32_t shift) {
  const FastRq f(mult, shift, 0, -128, 127);
  return f.ok ? f.scale(x) : f.scale_any(x);
}

int32_t fast_requant2(int32_t acc, int32_t mult, int32_t shift, int32_t zp, bool* ok) {
  const Rq2 rq(mult, shift, zp);
  *ok = rq.ok;
  return rq.ok ? rq(int32_t(uint32_t(acc) * 2u)) : 0;
}

const KernelTable kDspKernels = {"dsp", requant_row, pointwise, conv_ch, conv_ch_flat, add_row, gemm, conv_block};

}  // namespace arm
}  // namespace core
}  // namespace ts
