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
//
// The pointwise kernels are in dsp_pointwise.cpp, depthwise 3x3 in
// dsp_depthwise.cpp, what the files share in dsp_internal.h.

// Short fill and copy loops stay loops: GCC would turn them into memset /
// memcpy calls, which newlib-nano does byte by byte after a call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "core/arm/dsp_internal.h"

namespace ts {
namespace core {
namespace arm {

using namespace opk;
using namespace dsp;
using namespace dspk;

namespace {

void requant_row(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  // Requant keeps its inputs: rebuild the fast form from them.
  const FastRq f(rq.m, rq.shift, rq.zp, rq.lo, rq.hi);
  if (rq.exact || !f.ok) {
    for (int32_t k = 0; k < n; ++k) out[k] = rq(acc[k]);
    return;
  }
  requant_n(acc, n, f, out);
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
// to the same length (zeros), so dotn reads whole words. A patch of more
// than kPatchMax taps (PP-OCRv4's 3x3 convolutions over 96 channels: 864)
// goes in parts of whole input channels, the sums of the parts added before
// the requantisation, each part's weights copied per tile.
constexpr int32_t kPatchMax = 512;    // taps per patch (xt and the patches: 4 KiB each)
constexpr int32_t kWeightBuf = 4096;  // bytes of padded weights per block

bool patch_ok(const LayerDesc& L) {
  return L.groups == 1 && L.kh * L.kw <= kPatchMax && L.in[0].c * L.kh * L.kw >= 4;
}

// Input channels per part of a patch: as many whole channels as it holds.
int32_t patch_channels(const LayerDesc& L) { return mini(L.in[0].c, kPatchMax / (L.kh * L.kw)); }

// Taps of input channels [ci0, ci1) rounded up to whole words: a part's kp.
int32_t padded_taps(const LayerDesc& L, int32_t ci0, int32_t ci1) { return ((ci1 - ci0) * L.kh * L.kw + 3) & ~3; }

// Input channels [ci0, ci1) of the weights of output channels [cb, cb + nb),
// each padded with zeros to kp bytes in wbuf.
void copy_weights(const LayerDesc& L, int32_t cb, int32_t nb, int32_t ci0, int32_t ci1, int32_t kp, int8_t* wbuf) {
  const int32_t per = L.kh * L.kw, taps = L.in[0].c * per, n = (ci1 - ci0) * per;
  for (int32_t j = 0; j < nb; ++j) {
    const int8_t* src = L.weights + int64_t(cb + j - L.oc_base) * taps + ci0 * per;
    int8_t* dst = wbuf + j * kp;
    for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
    for (int32_t i = n; i < kp; ++i) dst[i] = 0;
  }
}

// The patch of the output at row oy, column ox over input channels
// [ci0, ci1): pk[i] = x - zp for tap i (input channel, kernel row, kernel
// column), 0 for padding and for i in [taps, kp).
void patch_row(const LayerDesc& L, const View& v, int32_t oy, int32_t ox, int32_t ci0, int32_t ci1, int32_t kp,
               int16_t* pk) {
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
    for (int32_t ci = ci0; ci < ci1; ++ci) {
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
  for (int32_t ci = ci0; ci < ci1; ++ci) {
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
  const int32_t C = L.in[0].c, cpp = patch_channels(L);
  const bool whole = cpp == C;  // one part: each block's weights copied once
  const int32_t W = L.out.w;
  const int32_t block = mini(kWeightBuf / padded_taps(L, 0, cpp), kOcBlock);
  uint32_t xt[kPatchMax * 2];
  int16_t pk[kTile][kPatchMax];
  int8_t wbuf[kWeightBuf];
  FastRq rq[kOcBlock];
  int32_t acc[kOcBlock][kTile];
  for (int32_t cb = c0; cb < c1; cb += block) {
    const int32_t nb = mini(block, c1 - cb);
    for (int32_t j = 0; j < nb; ++j) rq[j] = channel_rq(L, cb + j);
    if (whole) copy_weights(L, cb, nb, 0, C, padded_taps(L, 0, C), wbuf);
    for (int32_t t = p0; t < p1; t += kTile) {
      const int32_t np = mini(kTile, p1 - t);
      for (int32_t j = 0; j < nb; ++j) {
        const int32_t b = L.bias ? L.bias[cb + j - L.oc_base] : 0;
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = b;
      }
      for (int32_t ci0 = 0; ci0 < C; ci0 += cpp) {
        const int32_t ci1 = mini(C, ci0 + cpp), kp = padded_taps(L, ci0, ci1);
        if (!whole) copy_weights(L, cb, nb, ci0, ci1, kp, wbuf);
        // Patches position by position, then interleaved into dotn's
        // layout: from (p0, p1) and (p2, p3) of a position, (p0, p2) and
        // (p1, p3).
        for (int32_t k = 0; k < kTile; ++k) {
          if (k < np) {
            patch_row(L, v, (t + k) / W, (t + k) % W, ci0, ci1, kp, pk[k]);
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
        for (int32_t j = 0; j < nb; ++j) dot_np(np, xt, wbuf + j * kp, kp / 4, acc[j]);
      }
      for (int32_t j = 0; j < nb; ++j) requant_n(acc[j], np, rq[j], out + int64_t(cb + j - c0) * cstride + (t - p0));
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

// The usual case with doubled values and SMMLAR (as Rq2): each operand as
// X = (v - z) * 2^(left+1) = 2x by one MLA, its scaler
//   floor((c + floor((X*m + 2^31) / 2^32)) / 2^e),  c = 2^(e-1) - [X < 0] (e >= 1), 0 (e = 0)
// (Requant.scale(x): for e = 0 the high product itself), then the output
// requantiser of doubled sums on 2 * (sx + sy), four outputs per word. Needs
// multipliers in [2^30, 2^31), operand shifts 0 to -21, output shifts -1 to
// -21, left <= 20: |x| <= 255 * 2^20, so |sx + sy| < 2^29 and every doubled
// value fits (the quantiser gives left = 20, shifts 0 to -4 and -17 to -21).
struct OpRq {
  int32_t m = 0, c = 0, e = 0;
  bool ok = false;
  explicit OpRq(const Requant& r) {
    ok = !r.exact && r.m >= (int32_t(1) << 30) && r.shift <= 0 && r.shift >= -21;
    if (!ok) return;
    m = r.m;
    e = -r.shift;
    c = e ? int32_t(1) << (e - 1) : 0;
  }
  // E0: e = 0, the high product alone.
  template <bool E0>
  TS_DSP_INLINE int32_t scale(int32_t x2) const {
    return E0 ? smmlar(x2, m, 0) : smmlar(x2, m, c + (x2 >> 31)) >> e;
  }
};

// 2 * (sx + sy) for a chunk of elements into y2, then the output
// requantiser of doubled sums over the chunk (requant2_n).
template <bool E0a, bool E0b>
void add_loop2(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, const OpRq& ra, const OpRq& rb,
               const Rq2& ro, int8_t* out) {
  constexpr int32_t kChunk = 256;
  int32_t y2[kChunk];
  const int32_t s = p.left + 1, za = p.za, zb = p.zb;
  for (int32_t k0 = 0; k0 < n; k0 += kChunk) {
    const int32_t nc = mini(kChunk, n - k0);
    for (int32_t k = 0; k < nc; ++k) {
      // A multiply, not a shift: a - za may be negative (the same LSL on the M7).
      const int32_t x = (int32_t(a[k0 + k]) - za) * (int32_t(1) << s);
      const int32_t y = (int32_t(b[k0 + k]) - zb) * (int32_t(1) << s);
      y2[k] = 2 * (ra.scale<E0a>(x) + rb.scale<E0b>(y));
    }
    requant2_n(y2, nc, ro, p.rout.lo, p.rout.hi, out + k0);
  }
}

void add_row(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  const OpRq qa(p.ra), qb(p.rb);
  const Rq2 qo(p.rout.m, p.rout.shift, p.rout.zp);
  if (qa.ok && qb.ok && qo.ok && !p.rout.exact && p.left >= 0 && p.left <= 20) {
    if (qa.e == 0)
      return qb.e == 0 ? add_loop2<true, true>(a, b, n, p, qa, qb, qo, out)
                       : add_loop2<true, false>(a, b, n, p, qa, qb, qo, out);
    return qb.e == 0 ? add_loop2<false, true>(a, b, n, p, qa, qb, qo, out)
                     : add_loop2<false, false>(a, b, n, p, qa, qb, qo, out);
  }
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

int32_t fast_op_scale(int32_t x, int32_t mult, int32_t shift, bool* ok) {
  Requant r(mult, shift, 0, -128, 127);
  const OpRq q(r);
  *ok = q.ok;
  if (!q.ok) return 0;
  return q.e == 0 ? q.scale<true>(2 * x) : q.scale<false>(2 * x);
}

const KernelTable kDspKernels = {"dsp", requant_row, pointwise, conv_ch, conv_ch_flat, add_row, gemm, conv_block,
                                 conv_box};

}  // namespace arm
}  // namespace core
}  // namespace ts
