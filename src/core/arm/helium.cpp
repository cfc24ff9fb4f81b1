// Cortex-M55 kernels with Helium (MVE): see docs/kernels.md, "Cortex-M55
// kernels". The instructions come from mve_ops.h: ACLE intrinsics on the
// target, plain C++ elsewhere (host tests). The table is the DSP one
// (dsp.cpp: the M55 has the DSP extension too) with the pointwise kernel,
// the largest share of MobileNetV2's MACs, replaced.
//
// Pointwise (1x1, stride 1, no padding), output channels [o0, o0 + no) at
// positions [p0, p1): acc = bias + sum_c (x[c] - zp) * w[c] is computed as
// (bias - zp * sum_c w[c]) + sum_c x[c] * w[c], the first term once per
// output channel, the second with VMLADAVA.S8 (16 int8 products summed into
// an int32 accumulator per instruction) over raw inputs. Both are exact in
// int32 arithmetic modulo 2^32, as the portable kernel's sum is, so the
// outputs are bit-identical. The input is channel-planar, so each tile of 16
// positions is first transposed into 16-channel blocks xt[cb][p][16] (one
// load of 16 positions of a channel and one byte scatter per channel); the
// dot products then read 16 channels of a position as one vector. Per 16
// input channels and two positions of two output channels: 4 loads and 4
// VMLADAVA (64 MACs). Requantisation is vectorised too, 4 outputs of one
// channel at a time: VQRDMULH gives qmath's h = floor((x*m + 2^30) / 2^31)
// exactly, and its rounding right shift by e (half away from zero) is VRSHL
// by -e of h - [h < 0] (requant.h explains both forms); then the clamp and
// a byte store.
#include "core/arm/helium_kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "core/arm/dsp_kernels.h"
#include "core/arm/mve_ops.h"
#include "core/ops/common.h"

namespace ts {
namespace core {
namespace arm {

using namespace opk;
using namespace mve;

namespace {

constexpr int32_t kTile = 16;      // positions per tile
constexpr int32_t kMaxBlocks = 64;  // 16-channel blocks in xt: 1024 input channels, 16 KiB of stack
constexpr int32_t kOcBlock = 64;   // output channels whose corrections and requantisers are kept

// One output channel's requantiser in vector form; ok = false: use Requant.
struct VecRq {
  int32_t m = 0, e = 0, zp = 0, lo = -128, hi = 127;  // lo, hi: the clamp with zp taken out
  bool ok = false;
};

VecRq vec_rq(int32_t m, int32_t shift, int32_t zp, int32_t lo, int32_t hi) {
  VecRq q;
  q.ok = m != INT32_MIN && shift <= 0 && shift >= -31 && zp >= -(1 << 24) && zp <= (1 << 24);
  q.m = m;
  q.e = -shift;
  q.zp = zp;
  // clamp(h + zp, lo, hi) = clamp(h, lo - zp, hi - zp) + zp, without wrapping.
  q.lo = lo - zp;
  q.hi = hi - zp;
  return q;
}

// Output channel o's np values of the tile: out[k] = requant(acc[k] +
// corr), 4 at a time (the last group's store predicated).
TS_MVE_INLINE void store_channel(const LayerDesc& L, int32_t o, const int32_t* acc, int32_t corr, const VecRq& q,
                                 int32_t np, int8_t* out) {
  if (!q.ok) {
    const int32_t local = o - L.oc_base;
    const Requant slow(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
    for (int32_t k = 0; k < np; ++k) out[k] = slow(int32_t(uint32_t(acc[k]) + uint32_t(corr)));
    return;
  }
  // Locals: the byte stores could alias q as far as the compiler knows.
  const int32_t m = q.m, ne = -q.e, zp = q.zp;
  const i32x4 lo = dup(q.lo), hi = dup(q.hi);
  int32_t k = 0;
  for (; k + 4 <= np; k += 4) {
    i32x4 h = qrdmulh_n(add_n(ld32x4(acc + k), corr), m);
    if (ne) h = rshl_n(add(h, sign(h)), ne);
    st8x4(out + k, add_n(min(max(h, lo), hi), zp));
  }
  if (k < np) {
    i32x4 h = qrdmulh_n(add_n(ld32x4(acc + k), corr), m);
    if (ne) h = rshl_n(add(h, sign(h)), ne);
    st8x4_p(out + k, add_n(min(max(h, lo), hi), zp), first32(uint32_t(np - k)));
  }
}

// Channels [0, cin) at positions [0, np) (np <= 16) from src (channel c at
// src + c * plane) into xt[c / 16][p][c % 16]; positions np..15 are zero.
void transpose_tile(const int8_t* src, int64_t plane, int32_t cin, int32_t np, int8_t* xt) {
  const u8x16 rows = rows16();
  if (np == kTile) {
    for (int32_t c = 0; c < cin; ++c, src += plane) scatter8(xt + (c >> 4) * 256 + (c & 15), rows, ld8(src));
    return;
  }
  const pred m = first8(uint32_t(np));
  for (int32_t c = 0; c < cin; ++c, src += plane) scatter8(xt + (c >> 4) * 256 + (c & 15), rows, ld8_z(src, m));
}

// acc0[k], acc1[k] for positions k < np (rounded up to even) of the tile:
// the dot products of output channels w0 and w1 with the tile's inputs.
void dot_tile(const int8_t* xt, const int8_t* w0, const int8_t* w1, int32_t cin, int32_t np, int32_t* acc0,
              int32_t* acc1) {
  const int32_t full = cin >> 4, rem = cin & 15;
  const pred m = first8(uint32_t(rem));
  for (int32_t k = 0; k < np; k += 2) {
    const int8_t* xa = xt + k * 16;
    const int8_t* wa = w0;
    const int8_t* wb = w1;
    int32_t a00 = 0, a01 = 0, a10 = 0, a11 = 0;
    for (int32_t cb = 0; cb < full; ++cb, xa += 256, wa += 16, wb += 16) {
      const i8x16 x0 = ld8(xa), x1 = ld8(xa + 16);
      const i8x16 u = ld8(wa), v = ld8(wb);
      a00 = dot_acc(a00, x0, u);
      a01 = dot_acc(a01, x1, u);
      a10 = dot_acc(a10, x0, v);
      a11 = dot_acc(a11, x1, v);
    }
    if (rem) {
      // The lanes past cin: zero weights (the loads stop at the row's end).
      const i8x16 x0 = ld8(xa), x1 = ld8(xa + 16);
      const i8x16 u = ld8_z(wa, m), v = ld8_z(wb, m);
      a00 = dot_acc(a00, x0, u);
      a01 = dot_acc(a01, x1, u);
      a10 = dot_acc(a10, x0, v);
      a11 = dot_acc(a11, x1, v);
    }
    acc0[k] = a00;
    acc0[k + 1] = a01;
    acc1[k] = a10;
    acc1[k + 1] = a11;
  }
}

// The same for inputs of NB <= 3 blocks (up to 48 channels: MobileNetV2's
// expansions of 16, 24 and 32 channels): the two channels' weights stay in
// registers (2 NB vectors, the last one zero past cin) across the tile, and
// each pair of positions is 2 NB loads and 4 NB VMLADAV(A), no inner loop.
template <int NB>
TS_MVE_INLINE void dot_tile_small(const int8_t* xt, const int8_t* w0, const int8_t* w1, int32_t cin, int32_t np,
                                  int32_t* acc0, int32_t* acc1) {
  i8x16 u[NB], v[NB];
  for (int b = 0; b < NB; ++b) {
    const pred m = first8(uint32_t(cin - 16 * b));
    u[b] = ld8_z(w0 + 16 * b, m);
    v[b] = ld8_z(w1 + 16 * b, m);
  }
  for (int32_t k = 0; k < np; k += 2, xt += 32) {
    const i8x16 x0 = ld8(xt), x1 = ld8(xt + 16);
    int32_t a00 = dot(x0, u[0]), a01 = dot(x1, u[0]), a10 = dot(x0, v[0]), a11 = dot(x1, v[0]);
    for (int b = 1; b < NB; ++b) {
      const i8x16 y0 = ld8(xt + 256 * b), y1 = ld8(xt + 256 * b + 16);
      a00 = dot_acc(a00, y0, u[b]);
      a01 = dot_acc(a01, y1, u[b]);
      a10 = dot_acc(a10, y0, v[b]);
      a11 = dot_acc(a11, y1, v[b]);
    }
    acc0[k] = a00;
    acc0[k + 1] = a01;
    acc1[k] = a10;
    acc1[k + 1] = a11;
  }
}

// What the tiles of one block of output channels share.
struct Block {
  const LayerDesc* L;
  const int8_t* src0;  // input channel ci0 at position p0
  int64_t plane;
  int32_t cin, n;      // input channels, positions
  int32_t o, nb;       // first output channel, how many
  const int8_t* w;     // channel o's weights
  const int32_t* corr;
  const VecRq* rq;
  int8_t* out;  // channel o's first output
  int64_t cstride;
  int8_t* xt;
};

// Every tile of the block, NB = the input's 16-channel blocks when <= 3 (their
// weights in registers), 0 = any (dot_tile).
template <int NB>
void block_tiles(const Block& B) {
  alignas(16) int32_t acc0[kTile], acc1[kTile];
  for (int32_t t = 0; t < B.n; t += kTile) {
    const int32_t np = mini(kTile, B.n - t);
    transpose_tile(B.src0 + t, B.plane, B.cin, np, B.xt);
    for (int32_t j = 0; j < B.nb; j += 2) {
      const bool two = j + 1 < B.nb;
      const int8_t* w0 = B.w + int64_t(j) * B.cin;
      const int8_t* w1 = two ? w0 + B.cin : w0;
      if (NB > 0) dot_tile_small<NB == 0 ? 1 : NB>(B.xt, w0, w1, B.cin, np, acc0, acc1);
      else dot_tile(B.xt, w0, w1, B.cin, np, acc0, acc1);
      int8_t* o = B.out + int64_t(j) * B.cstride + t;
      store_channel(*B.L, B.o + j, acc0, B.corr[j], B.rq[j], np, o);
      if (two) store_channel(*B.L, B.o + j + 1, acc1, B.corr[j + 1], B.rq[j + 1], np, o + B.cstride);
    }
  }
}

void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  if (cin > kMaxBlocks * 16) return kDspKernels.pointwise(L, v, o0, no, p0, p1, out, cstride);
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  alignas(16) int8_t xt[kMaxBlocks * 256];
  const int32_t blocks = (cin + 15) >> 4;
  // The last block's lanes past cin are multiplied by zero weights; keep
  // them defined.
  if (cin & 15)
    for (int32_t i = 0; i < 256; ++i) xt[(blocks - 1) * 256 + i] = 0;
  int32_t corr[kOcBlock];
  VecRq rq[kOcBlock];
  Block B;
  B.L = &L;
  B.plane = int64_t(v.nh) * W;
  B.src0 = v.data + int64_t(ci0 - v.c0) * B.plane + (p0 - int64_t(v.h0) * W);
  B.cin = cin;
  B.n = p1 - p0;
  B.corr = corr;
  B.rq = rq;
  B.cstride = cstride;
  B.xt = xt;
  for (int32_t ob = 0; ob < no; ob += kOcBlock) {
    B.o = o0 + ob;
    B.nb = mini(kOcBlock, no - ob);
    B.w = L.weights + int64_t(B.o - L.oc_base) * cin;
    B.out = out + int64_t(ob) * cstride;
    for (int32_t j = 0; j < B.nb; ++j) {
      const int32_t local = B.o + j - L.oc_base;
      const int8_t* w = B.w + int64_t(j) * cin;
      int32_t sw = 0;
      int32_t c = 0;
      for (; c + 16 <= cin; c += 16) sw = sum_acc(sw, ld8(w + c));
      if (c < cin) sw = sum_acc(sw, ld8_z(w + c, first8(uint32_t(cin - c))));
      const uint32_t bias = L.bias ? uint32_t(L.bias[local]) : 0u;
      corr[j] = int32_t(bias - uint32_t(zp) * uint32_t(sw));
      rq[j] = vec_rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
    }
    switch (blocks) {
      case 1: block_tiles<1>(B); break;
      case 2: block_tiles<2>(B); break;
      case 3: block_tiles<3>(B); break;
      default: block_tiles<0>(B); break;
    }
  }
}

// ------------------------------------------------- depthwise 3x3, dilation 1
//
// One output channel (channel multiplier 1), framed as the DSP kernel does: the
// input rows a block of output rows reads are copied into a buffer with the
// padding made explicit (the zero point), so every output reads 3 full
// kernel rows and the zero point is taken out once (acc starts at bias - zp *
// sum of the 9 weights; the taps multiply raw inputs). Then 8 outputs of a
// row at a time in 2 vectors: per tap and vector one widening load of 4
// input bytes (stride 2: a gather of every other byte) and one VMLA by the
// tap's weight, shared by the vectors: 9 x 2 of each for 72 MACs; the requantisation and a byte store as for pointwise. The
// fill and copy are vector stores, 16 bytes each.
constexpr int32_t kDwPad = 8192;  // bytes of padded input rows (stack)

// Width of a padded row: groups of G outputs (dw_group) read up to column
// sw * (WG - 1) + 2 (WG: the row's outputs rounded up to G), and the input
// row sits at columns [pad_l, pad_l + Win). Rounded up to 16.
// Rows of at most 8 outputs go 4 at a time (one vector), wider ones 8 (two:
// four vectors of 16 spill under GCC 12, 2.76 against 2.52 instructions per
// MAC on dw3x3_s1_144).
int32_t dw_group(const LayerDesc& L) { return L.out.w <= 8 ? 4 : 8; }

int32_t dw_width(const LayerDesc& L) {
  const int32_t g = dw_group(L);
  const int32_t w4 = (L.out.w + g - 1) / g * g;
  const int32_t need = maxi(L.sw * (w4 - 1) + 3, L.pad_l + L.in[0].w);
  return (need + 15) & ~15;
}

bool dw_ok(const LayerDesc& L) {
  return L.groups == L.in[0].c && L.out.c == L.in[0].c && L.kh == 3 && L.kw == 3 && L.dh == 1 && L.dw == 1 &&
         (L.sw == 1 || L.sw == 2) && L.sh >= 1 && L.sh <= 2 && L.pad_l >= 0 && L.pad_t >= 0 &&
         dw_width(L) * 4 <= kDwPad;
}

// Up to 16 outputs of a row as NV vectors: a_i += w * (the 4 inputs of
// vector i under the tap at r), one weight shared by them.
struct DwAcc {
  i32x4 a0, a1, a2, a3;
};
template <int SW>
TS_MVE_INLINE i32x4 dw_ld(const int8_t* r) {
  return SW == 1 ? ld8x4(r) : ld8x4_s2(r);
}
template <int SW, int NV>
TS_MVE_INLINE void dw_tap(const int8_t* r, int32_t w, DwAcc& s) {
  s.a0 = mla_n(s.a0, dw_ld<SW>(r), w);
  if (NV == 1) return;
  s.a1 = mla_n(s.a1, dw_ld<SW>(r + 4 * SW), w);
  if (NV == 2) return;
  s.a2 = mla_n(s.a2, dw_ld<SW>(r + 8 * SW), w);
  s.a3 = mla_n(s.a3, dw_ld<SW>(r + 12 * SW), w);
}

TS_MVE_INLINE void dw_store(i32x4 acc, int32_t m, int32_t ne, i32x4 lo, i32x4 hi, int32_t zp, int8_t* o, int32_t n) {
  i32x4 h = qrdmulh_n(acc, m);
  if (ne) h = rshl_n(add(h, sign(h)), ne);
  h = add_n(min(max(h, lo), hi), zp);
  if (n >= 4) st8x4(o, h);
  else if (n > 0) st8x4_p(o, h, first32(uint32_t(n)));
}

// Outputs [xa, xb) of one row, 4 NV at a time (NV = 1, 2 or 4); r: the row's
// first padded input row, w: the 9 weights.
template <int SW, int NV>
void dw_rows(const int8_t* r, int32_t Wp, int32_t xa, int32_t xb, const int32_t* w, int32_t base, const VecRq& q,
             int8_t* o) {
  const int32_t m = q.m, ne = -q.e, zp = q.zp;
  const i32x4 lo = dup(q.lo), hi = dup(q.hi), b = dup(base);
  for (int32_t x = xa; x < xb; x += 4 * NV) {
    const int8_t* p = r + SW * x;
    DwAcc s{b, b, b, b};
    for (int ky = 0; ky < 3; ++ky, p += Wp) {
      dw_tap<SW, NV>(p, w[3 * ky], s);
      dw_tap<SW, NV>(p + 1, w[3 * ky + 1], s);
      dw_tap<SW, NV>(p + 2, w[3 * ky + 2], s);
    }
    const int32_t n = xb - x;
    dw_store(s.a0, m, ne, lo, hi, zp, o + x, n);
    if (NV == 1) continue;
    dw_store(s.a1, m, ne, lo, hi, zp, o + x + 4, n - 4);
    if (NV == 2) continue;
    dw_store(s.a2, m, ne, lo, hi, zp, o + x + 8, n - 8);
    dw_store(s.a3, m, ne, lo, hi, zp, o + x + 12, n - 12);
  }
}

// Channel o at positions [p0, p1); false (nothing written) if its
// requantiser is outside the vector form.
bool dw_channel(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out, int8_t* pad) {
  const int32_t local = o - L.oc_base;
  const VecRq q = vec_rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  if (!q.ok) return false;
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, Win = X.w, sh = L.sh;
  const int8_t* wt = L.weights + int64_t(local) * 9;
  const int32_t zp = L.in_zp[0];
  int32_t w[9];
  uint32_t wsum = 0;
  for (int i = 0; i < 9; ++i) w[i] = wt[i], wsum += uint32_t(w[i]);
  const int32_t base = int32_t((L.bias ? uint32_t(L.bias[local]) : 0u) - uint32_t(zp) * wsum);
  const int32_t Wp = dw_width(L);
  const bool narrow = dw_group(L) == 4;
  const int32_t rows_per_block = (kDwPad / Wp - 3) / sh + 1;
  const i8x16 zz = dup8(zp);
  const int32_t oy_first = p0 / W, oy_last = (p1 - 1) / W;
  for (int32_t by = oy_first; by <= oy_last; by += rows_per_block) {
    const int32_t ey = mini(oy_last + 1, by + rows_per_block);
    const int32_t iy0 = by * sh - L.pad_t;
    const int32_t nrows = (ey - 1 - by) * sh + 3;
    for (int32_t i = 0; i < nrows; ++i) {
      int8_t* d = pad + i * Wp;
      for (int32_t c = 0; c < Wp; c += 16) st8(d + c, zz);
      const int32_t iy = iy0 + i;
      if (iy < 0 || iy >= X.h) continue;
      const int8_t* s = row_ptr(v, Win, o, iy);
      d += L.pad_l;
      int32_t c = 0;
      for (; c + 16 <= Win; c += 16) st8(d + c, ld8(s + c));
      if (c < Win) {
        const pred m = first8(uint32_t(Win - c));
        st8_p(d + c, ld8_z(s + c, m), m);
      }
    }
    for (int32_t oy = by; oy < ey; ++oy) {
      const int32_t xa = oy == oy_first ? p0 % W : 0;
      const int32_t xb = oy == oy_last ? (p1 - 1) % W + 1 : W;
      const int8_t* r = pad + (oy - by) * sh * Wp;
      int8_t* orow = out + (int64_t(oy) * W - p0);
      if (narrow) {
        if (L.sw == 1) dw_rows<1, 1>(r, Wp, xa, xb, w, base, q, orow);
        else dw_rows<2, 1>(r, Wp, xa, xb, w, base, q, orow);
      } else {
        if (L.sw == 1) dw_rows<1, 2>(r, Wp, xa, xb, w, base, q, orow);
        else dw_rows<2, 2>(r, Wp, xa, xb, w, base, q, orow);
      }
    }
  }
  return true;
}

void dw_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
              int64_t cstride) {
  alignas(16) int8_t pad[kDwPad];
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    if (!dw_channel(L, v, c, p0, p1, o, pad)) kDspKernels.conv_channel(L, v, c, p0, p1, o);
  }
}

// The rest of the table is the DSP one.
void requant_row(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  kDspKernels.requant_row(acc, n, rq, out);
}
void conv_ch(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  if (dw_ok(L)) return dw_block(L, v, o, o + 1, p0, p1, out, 0);
  kDspKernels.conv_channel(L, v, o, p0, p1, out);
}
void conv_ch_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  if (dw_ok(L)) return dw_block(L, v, o, o + 1, p0, p1, out, 0);
  kDspKernels.conv_channel_flat(L, v, o, p0, p1, out);
}
// Requant::scale on 4 lanes (r not exact): the saturating left shift, then
// VQRDMULH and the rounding right shift as in store_channel.
struct VecScale {
  int32_t m, left, ne;
  explicit VecScale(const Requant& r) : m(r.m), left(r.left), ne(31 - r.total) {}
  TS_MVE_INLINE i32x4 operator()(i32x4 x) const {
    if (left) x = qshl_n(x, left);
    i32x4 h = qrdmulh_n(x, m);
    if (ne) h = rshl_n(add(h, sign(h)), ne);
    return h;
  }
};

// Add, 4 elements at a time: a' = (a - za) << left (exact for left <= 23),
// the two operand scales, their wrapping sum, the output requantiser (clamp
// with the zero point taken out, as in store_channel).
void add_row(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  if (p.ra.exact || p.rb.exact || p.rout.exact || p.left < 0 || p.left > 23 || p.rout.zp < -(1 << 24) ||
      p.rout.zp > (1 << 24))
    return kDspKernels.add_row(a, b, n, p, out);
  const VecScale sa(p.ra), sb(p.rb), so(p.rout);
  const int32_t za = p.za, zb = p.zb, left = p.left, zo = p.rout.zp;
  const i32x4 lo = dup(p.rout.lo - zo), hi = dup(p.rout.hi - zo);
  int32_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const i32x4 x = shl_n(sub_n(ld8x4(a + k), za), left), y = shl_n(sub_n(ld8x4(b + k), zb), left);
    st8x4(out + k, add_n(min(max(so(add(sa(x), sb(y))), lo), hi), zo));
  }
  if (k < n) {
    const pred m = first32(uint32_t(n - k));
    const i32x4 x = shl_n(sub_n(ld8x4_z(a + k, m), za), left), y = shl_n(sub_n(ld8x4_z(b + k, m), zb), left);
    st8x4_p(out + k, add_n(min(max(so(add(sa(x), sb(y))), lo), hi), zo), m);
  }
}
void gemm(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride) {
  kDspKernels.gemm(L, x, o0, o1, out, ostride);
}
bool conv_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                int64_t cstride) {
  if (dw_ok(L)) {
    dw_block(L, v, c0, c1, p0, p1, out, cstride);
    return true;
  }
  return kDspKernels.conv_block(L, v, c0, c1, p0, p1, out, cstride);
}

}  // namespace

const KernelTable kHeliumKernels = {"helium", requant_row, pointwise, conv_ch, conv_ch_flat, add_row, gemm, conv_block};

}  // namespace arm
}  // namespace core
}  // namespace ts
