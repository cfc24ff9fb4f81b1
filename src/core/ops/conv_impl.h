// The convolution loops of src/core/ops/conv.cpp, as a header so that the
// x86 variant files (src/core/x86/) compile the very same source with wider
// vector instructions. Everything here has internal linkage (an unnamed
// namespace): each file that includes it gets its own copy, compiled with its
// own flags. The requantisation of finished accumulators goes through the
// `rr` the caller passes (a function or functor with RequantRow's
// signature: the portable table passes an inlined scalar loop, the x86
// variants their vector requantiser).
//
// Every convolution path below computes exactly
//   acc = bias + sum over taps inside the input of (x - zp) * w
// in int32, as the plain definition does; only the order of the additions
// changes, which integer addition does not see. So every output is
// bit-identical to the textbook loop (and to any board's share of it),
// whichever path, variant or split computes it.
//
// Loops that should vectorise run over a length rounded down to a multiple of
// 16 (n & ~15) followed by a scalar tail: GCC's -O2 vectoriser only takes
// loops whose trip count is known to be a multiple of the vector length.
#pragma once

#include "core/layer.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {
namespace {

using namespace opk;
using RequantRow = void (*)(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out);

// ------------------------------------------------------------------ pointwise
//
// Pointwise (1x1, stride 1, no padding) convolution as a small matrix
// product. A tile of kPwTile output positions is transposed into xt[position]
// [input channel] as int16 (x - zp), so each output is a dot product over
// contiguous input channels; two output channels x kPwTile positions are
// computed per pass (8 accumulators: they stay in registers, and the compiler
// turns the loop into pmaddwd/sdot-style widening multiply-adds). Each tile
// is transposed once and reused by every output channel of the block (when
// the input has at most kPwCinChunk channels; deeper inputs are taken in
// chunks, with kPwOcBlock output channels' partial sums kept on the stack).
constexpr int32_t kPwTile = 4;
constexpr int32_t kPwCinChunk = 256;
constexpr int32_t kPwOcBlock = 32;
// Stack: xt 2 KiB + acc 512 B.

// Positions [p, p + np) of input channels [c, c + nc) of a full-width view as
// xt[k][j] = x(c + j, p + k) - zp; positions np..kPwTile-1 are zero.
void pw_transpose(const View& v, int32_t W, int32_t c, int32_t nc, int32_t p, int32_t np, int32_t zp,
                  int16_t (*xt)[kPwCinChunk]) {
  for (int32_t j = 0; j < nc; ++j) {
    // Element p of channel c+j: the view's rows start at h0, so position p
    // sits (p - h0 * W) bytes into the channel's plane.
    const int8_t* src = v.data + (int64_t(c + j - v.c0) * v.nh * W + (p - int64_t(v.h0) * W));
    for (int32_t k = 0; k < kPwTile; ++k) xt[k][j] = int16_t(k < np ? int32_t(src[k]) - zp : 0);
  }
}

// a0[k] += sum_j xt[k][j] * w0[j], a1[k] likewise with w1, for j < n.
void pw_dot2(const int16_t (*xt)[kPwCinChunk], const int8_t* w0, const int8_t* w1, int32_t n, int32_t* a0,
             int32_t* a1) {
  static_assert(kPwTile == 4, "pw_dot2 is written out for 4 positions");
  const int16_t* x0 = xt[0];
  const int16_t* x1 = xt[1];
  const int16_t* x2 = xt[2];
  const int16_t* x3 = xt[3];
  int32_t s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
  const int32_t n16 = n & ~15;
  int32_t j = 0;
  for (; j < n16; ++j) {
    const int32_t u = w0[j], t = w1[j];
    s00 += x0[j] * u; s01 += x1[j] * u; s02 += x2[j] * u; s03 += x3[j] * u;
    s10 += x0[j] * t; s11 += x1[j] * t; s12 += x2[j] * t; s13 += x3[j] * t;
  }
  for (; j < n; ++j) {
    const int32_t u = w0[j], t = w1[j];
    s00 += x0[j] * u; s01 += x1[j] * u; s02 += x2[j] * u; s03 += x3[j] * u;
    s10 += x0[j] * t; s11 += x1[j] * t; s12 += x2[j] * t; s13 += x3[j] * t;
  }
  a0[0] += s00; a0[1] += s01; a0[2] += s02; a0[3] += s03;
  a1[0] += s10; a1[1] += s11; a1[2] += s12; a1[3] += s13;
}

// Output channels [o0, o0 + no) (all in one group) at positions [p0, p1) of
// each; out[(o - o0) * cstride + (p - p0)].
template <typename RequantRowT>
void pointwise_block(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1,
                     int8_t* out, int64_t cstride, RequantRowT rr) {
  const int32_t W = L.out.w;
  const int32_t cin_g = L.in[0].c / L.groups;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin_g;
  const int32_t zp = L.in_zp[0];
  const int32_t n = p1 - p0;
  const bool one_chunk = cin_g <= kPwCinChunk;
  int16_t xt[kPwTile][kPwCinChunk];
  int32_t acc[kPwOcBlock][kPwTile];
  for (int32_t t = 0; t < n; t += kPwTile) {
    const int32_t np = mini(kPwTile, n - t);
    if (one_chunk) pw_transpose(v, W, ci0, cin_g, p0 + t, np, zp, xt);
    for (int32_t ob = 0; ob < no; ob += kPwOcBlock) {
      const int32_t nb = mini(kPwOcBlock, no - ob);
      for (int32_t j = 0; j < nb; ++j) {
        const int32_t b = L.bias ? L.bias[o0 + ob + j - L.oc_base] : 0;
        for (int32_t k = 0; k < kPwTile; ++k) acc[j][k] = b;
      }
      for (int32_t cc = 0; cc < cin_g; cc += kPwCinChunk) {
        const int32_t nc = mini(kPwCinChunk, cin_g - cc);
        if (!one_chunk) pw_transpose(v, W, ci0 + cc, nc, p0 + t, np, zp, xt);
        const int8_t* wb = L.weights + int64_t(o0 + ob - L.oc_base) * cin_g + cc;
        int32_t j = 0;
        for (; j + 2 <= nb; j += 2) pw_dot2(xt, wb + int64_t(j) * cin_g, wb + int64_t(j + 1) * cin_g, nc, acc[j], acc[j + 1]);
        if (j < nb) {
          // Odd channel out: pair it with itself and drop the copy.
          int32_t spare[kPwTile] = {};
          pw_dot2(xt, wb + int64_t(j) * cin_g, wb + int64_t(j) * cin_g, nc, acc[j], spare);
        }
      }
      for (int32_t j = 0; j < nb; ++j) {
        const int32_t local = o0 + ob + j - L.oc_base;
        const Requant rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
        rr(acc[j], np, rq, out + int64_t(ob + j) * cstride + t);
      }
    }
  }
}

// ------------------------------------------------------------ any other conv

// acc[j] += (src[j] - zp) * w for j < n, written so that it vectorises: the
// difference fits int16 and the product is a 16x16->32 widening multiply.
static inline void axpy_i8(int32_t* __restrict acc, const int8_t* __restrict src, int32_t n, int32_t zp, int32_t w) {
  const int16_t z = int16_t(zp), w16 = int16_t(w);
  const int32_t n16 = n & ~15;
  int32_t j = 0;
  for (; j < n16; ++j) acc[j] += int32_t(int16_t(src[j] - z)) * int32_t(w16);
  for (; j < n; ++j) acc[j] += (int32_t(src[j]) - zp) * w;
}

constexpr int32_t kRowChunk = 128;  // output columns per pass (int32 accumulators)
constexpr int32_t kPhaseBuf = 512;  // input columns a strided row can be split into phases

// What computing output channel o of a convolution takes from the
// descriptor: its group's first input channel, its weights, bias and
// requantisation.
struct ConvChannel {
  int32_t cin_g, ci0, zp, taps, bias;
  const int8_t* weights;
  Requant rq;
  ConvChannel(const LayerDesc& L, int32_t o)
      : cin_g(L.in[0].c / L.groups),
        ci0((o / (L.out.c / L.groups)) * cin_g),
        zp(L.in_zp[0]),
        taps(L.kh * L.kw),
        bias(L.bias ? L.bias[o - L.oc_base] : 0),
        weights(L.weights + int64_t(o - L.oc_base) * cin_g * taps),
        rq(L.mult[o - L.oc_base], L.shift[o - L.oc_base], L.out_zp, L.act_min, L.act_max) {}
};

// Any other convolution (3x3, depthwise, strided, dilated, padded) for output
// channel o, positions [p0, p1) of it. Work goes row by row (columns in
// chunks of kRowChunk), and tap by tap: for a tap (ci, ky, kx) every output
// column whose input column lies inside the image gets the same weight, so
// the inner loop is one axpy_i8 over a contiguous range of columns; padding
// is handled by clipping that range, never by a test per element. With a
// stride s > 1, the input row is first split into its s phases
// (x[r], x[r+s], ...), which makes the taps' reads contiguous again.
template <typename RequantRowT>
void conv_channel(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out, RequantRowT rr) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const ConvChannel ch(L, o);
  const int32_t sw = L.sw;
  const bool phased = sw > 1 && X.w <= kPhaseBuf;
  const int32_t pw = (X.w + sw - 1) / sw;  // length of one phase
  int32_t acc[kRowChunk];
  int8_t phase[kPhaseBuf];
  int32_t pos = p0;
  while (pos < p1) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t ox1 = mini(mini(W, ox0 + (p1 - pos)), ox0 + kRowChunk);
    const int32_t n = ox1 - ox0;
    for (int32_t k = 0; k < n; ++k) acc[k] = ch.bias;
    for (int32_t ci = 0; ci < ch.cin_g; ++ci) {
      const int8_t* wc = ch.weights + ci * ch.taps;
      for (int32_t ky = 0; ky < L.kh; ++ky) {
        const int32_t iy = oy * L.sh - L.pad_t + ky * L.dh;
        if (iy < 0 || iy >= X.h) continue;  // zero padding contributes nothing
        const int8_t* row = row_ptr(v, X.w, ch.ci0 + ci, iy);
        if (phased) {
          for (int32_t r = 0; r < sw; ++r)
            for (int32_t j = 0, x = r; x < X.w; ++j, x += sw) phase[r * pw + j] = row[x];
        }
        for (int32_t kx = 0; kx < L.kw; ++kx) {
          const int32_t w = wc[ky * L.kw + kx];
          // Output column ox reads input column ox * sw + off.
          const int32_t off = kx * L.dw - L.pad_l;
          const int32_t lo = maxi(ox0, ceil_div(-off, sw));
          const int32_t hi = mini(ox1, floor_div(X.w - 1 - off, sw) + 1);
          if (lo >= hi) continue;
          int32_t* a = acc + (lo - ox0);
          if (sw == 1) {
            axpy_i8(a, row + lo + off, hi - lo, ch.zp, w);
          } else if (phased) {
            // ox * sw + off = (ox + q) * sw + r with r = off mod sw.
            const int32_t q = floor_div(off, sw), r = off - q * sw;
            axpy_i8(a, phase + r * pw + lo + q, hi - lo, ch.zp, w);
          } else {
            const int8_t* src = row + lo * sw + off;
            for (int32_t j = 0; j < hi - lo; ++j) a[j] += (int32_t(src[j * sw]) - ch.zp) * w;
          }
        }
      }
    }
    rr(acc, n, ch.rq, out + (pos - p0));
    pos += n;
  }
}

constexpr int32_t kFlatChunk = 256;  // positions per pass of conv_channel_flat (int32 accumulators)

// Stride-1 convolution whose input rows are as wide as the output's (the
// usual "same" padding), for output channel o, positions [p0, p1). Here a tap
// (ky, kx) reads input position P + shift for output position P, with one
// shift for the whole plane, so each tap is a single axpy_i8 over the run's
// positions, however narrow the rows (a 7x7 plane is one loop of 49, not 7
// loops of 7). Positions whose column ox + kx*dw - pad_l falls outside the
// row read a neighbouring row's element there instead of padding; the few
// such reads (at most |offset| columns per row) are subtracted again
// afterwards, which integer arithmetic undoes exactly. Rows outside the image
// and reads outside the window `v` are clipped from the range up front.
template <typename RequantRowT>
void conv_channel_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out,
                       RequantRowT rr) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;  // == X.w
  const ConvChannel ch(L, o);
  const int32_t view_len = v.nh * W;  // bytes of one channel in the window
  int32_t acc[kFlatChunk];
  for (int32_t q0 = p0; q0 < p1; q0 += kFlatChunk) {
    const int32_t q1 = mini(p1, q0 + kFlatChunk);
    for (int32_t k = 0; k < q1 - q0; ++k) acc[k] = ch.bias;
    for (int32_t ci = 0; ci < ch.cin_g; ++ci) {
      const int8_t* plane = v.data + int64_t(ch.ci0 + ci - v.c0) * view_len;
      const int8_t* wc = ch.weights + ci * ch.taps;
      for (int32_t ky = 0; ky < L.kh; ++ky) {
        const int32_t offy = ky * L.dh - L.pad_t;
        // Output rows whose input row oy + offy is inside the image.
        const int32_t row_lo = maxi(0, -offy), row_hi = mini(L.out.h, X.h - offy);
        if (row_lo >= row_hi) continue;
        for (int32_t kx = 0; kx < L.kw; ++kx) {
          const int32_t w = wc[ky * L.kw + kx];
          const int32_t offx = kx * L.dw - L.pad_l;
          // Input position (relative to the window) read by output P.
          const int32_t shift = (offy - v.h0) * W + offx;
          const int32_t a = maxi(maxi(q0, row_lo * W), -shift);
          const int32_t b = mini(mini(q1, row_hi * W), view_len - shift);
          if (a >= b) continue;
          axpy_i8(acc + (a - q0), plane + (a + shift), b - a, ch.zp, w);
          if (offx == 0) continue;
          // Columns of each row that read across the row's edge.
          const int32_t c_lo = offx < 0 ? 0 : maxi(0, W - offx);
          const int32_t c_hi = offx < 0 ? mini(W, -offx) : W;
          for (int32_t y = a / W; y * W < b; ++y) {
            const int32_t e0 = maxi(a, y * W + c_lo), e1 = mini(b, y * W + c_hi);
            for (int32_t e = e0; e < e1; ++e) acc[e - q0] -= (int32_t(plane[e + shift]) - ch.zp) * w;
          }
        }
      }
    }
    rr(acc, q1 - q0, ch.rq, out + (q0 - p0));
  }
}

}  // namespace
}  // namespace core
}  // namespace ts
