// int8 kernels over runs of output neurons. See layer.h.
//
// Every kernel computes its run with int32 accumulators in small fixed
// buffers on the stack (at most a few KiB, for the pointwise convolution's
// transposed input tile; no heap), on a board or on the host. The
// convolutions are organised so that their inner loops run over contiguous
// memory with one weight or one input row held fixed, which compilers
// vectorise; see the section on convolution below. Whatever the loop order,
// every output is the same integer sum as the textbook definition, so the
// results do not depend on how a layer is split into runs.
#include "core/layer.h"

#include "core/qmath.h"

namespace ts {
namespace core {

namespace {

inline int32_t mini(int32_t a, int32_t b) { return a < b ? a : b; }
inline int32_t maxi(int32_t a, int32_t b) { return a > b ? a : b; }

inline bool covers(const View& v, const Box& b) {
  if (b.empty()) return true;
  return v.data != nullptr && v.c0 <= b.c0 && v.c0 + v.nc >= b.c1 && v.h0 <= b.h0 && v.h0 + v.nh >= b.h1;
}

inline const int8_t* row_ptr(const View& v, int32_t W, int32_t c, int32_t y) {
  return v.data + (int64_t(c - v.c0) * v.nh + (y - v.h0)) * W;
}

// Requantisation of one channel: multiply_by_quantized_multiplier (qmath.h)
// by (mult, shift), + zero point, clamp; with the per-channel work done once
// and fewer operations per value, for the same result on every input
// (requantising is a large share of the time of layers with few input
// channels). Why it is the same:
//  - qmath's doubling high multiply adds a nudge (2^30, or 1 - 2^30 when the
//    product is negative) and divides by 2^31 truncating toward zero; both
//    cases equal h = floor((x*m + 2^30) / 2^31). Its one saturating case
//    (x = m = INT32_MIN) needs m = INT32_MIN, which goes to qmath itself, as
//    do shifts beyond its range.
//  - its rounding right shift by e >= 1 (half away from zero) equals
//    floor((h + 2^(e-1) - [h < 0]) / 2^e), and two nested floor divisions
//    are one: floor((t + (2^(e-1) - [t < 0]) * 2^31) / 2^(31+e)) with
//    t = x*m + 2^30 (t < 0 exactly when h < 0). All of it fits int64.
//  - a positive shift is qmath's saturating left shift, then e = 0.
struct Requant {
  int32_t m = 0, shift = 0, left = 0, total = 31;
  int64_t half = 0, neg = 0;  // 2^(e-1) * 2^31 and -2^31 when e >= 1, else 0
  int32_t zp = 0, lo = -128, hi = 127;
  bool exact = false;  // use qmath directly

  Requant(int32_t mult, int32_t sh, int32_t zero, int32_t lo_, int32_t hi_)
      : m(mult), shift(sh), zp(zero), lo(lo_), hi(hi_) {
    exact = mult == INT32_MIN || sh < -31;
    left = sh > 0 ? sh : 0;
    const int32_t e = sh < 0 ? -sh : 0;
    total = 31 + e;
    half = e > 0 ? int64_t(1) << (e + 30) : 0;
    neg = e > 0 ? -(int64_t(1) << 31) : 0;
  }
  int32_t scale(int32_t x) const {
    if (exact) return multiply_by_quantized_multiplier(x, m, shift);
    if (left) {
      const int64_t v = int64_t(x) * (int64_t(1) << left);
      x = int32_t(v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v));
    }
    const int64_t t = int64_t(x) * m + (int64_t(1) << 30);
    return int32_t((t + half + ((t >> 63) & neg)) >> total);
  }
  int8_t operator()(int32_t acc) const {
    // int64: a saturated scale plus the zero point must not wrap.
    const int64_t r = int64_t(scale(acc)) + zp;
    return int8_t(r < lo ? lo : (r > hi ? hi : r));
  }
};

inline int8_t requant(int32_t acc, int32_t m, int32_t s, int32_t zp, int32_t lo, int32_t hi) {
  return Requant(m, s, zp, lo, hi)(acc);
}

// Rows [h0,h1) of the input that output rows [oy0, oy1] read with a window of
// k taps, stride s, dilation d and top padding p, clipped to the input.
inline void window_rows(int32_t oy0, int32_t oy1, int32_t k, int32_t s, int32_t d, int32_t p, int32_t H,
                        int32_t* h0, int32_t* h1) {
  *h0 = maxi(0, oy0 * s - p);
  *h1 = mini(H, oy1 * s - p + (k - 1) * d + 1);
  if (*h1 < *h0) *h1 = *h0;
}

// ---------------------------------------------------------------- convolution
//
// Both convolution kernels below compute exactly
//   acc = bias + sum over taps inside the input of (x - zp) * w
// in int32, as the plain definition does; only the order of the additions
// changes, which integer addition does not see. So every output is
// bit-identical to the textbook loop (and to any board's share of it).
//
// Loops that should vectorise run over a length rounded down to a multiple of
// 16 (n & ~15) followed by a scalar tail: GCC's -O2 vectoriser only takes
// loops whose trip count is known to be a multiple of the vector length.

// Pointwise (1x1, stride 1, no padding) convolution as a small matrix
// product. A tile of kPwTile output positions is transposed into xt[position]
// [input channel] as int16 (x - zp), so each output is a dot product over
// contiguous input channels; two output channels x kPwTile positions are
// computed per pass (8 accumulators: they stay in registers, and the compiler
// turns the loop into pmaddwd/sdot-style widening multiply-adds). Each tile
// is transposed once and reused by every output channel of the run (when the
// input has at most kPwCinChunk channels; deeper inputs are taken in chunks,
// with kPwOcBlock output channels' partial sums kept on the stack).
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
// each; out[(o - o0) * (p1 - p0) + (p - p0)].
void pointwise_block(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1,
                     int8_t* out) {
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
        int8_t* dst = out + int64_t(ob + j) * n + t;
        for (int32_t k = 0; k < np; ++k) dst[k] = rq(acc[j][k]);
      }
    }
  }
}

// Pointwise outputs [begin, end): a partial first channel, whole channels in
// between (blocked together, group by group), a partial last channel.
void pointwise_range(const LayerDesc& L, const View& v, int32_t begin, int32_t end, int8_t* out) {
  const int32_t hw = L.out.h * L.out.w;
  const int32_t cout_g = L.out.c / L.groups;
  int32_t pos = begin;
  while (pos < end) {
    const int32_t c = pos / hw, p = pos % hw;
    int32_t no = 1, p1 = mini(hw, p + (end - pos));
    if (p == 0 && p1 == hw) {
      // Whole channels from c on, up to the run's end and the group's end.
      const int32_t whole = (end - pos) / hw;
      no = mini(whole, (c / cout_g + 1) * cout_g - c);
    }
    pointwise_block(L, v, c, no, p, p1, out + (pos - begin));
    pos += (no - 1) * hw + (p1 - p);
  }
}

// acc[j] += (src[j] - zp) * w for j < n, written so that it vectorises: the
// difference fits int16 and the product is a 16x16->32 widening multiply.
inline void axpy_i8(int32_t* __restrict acc, const int8_t* __restrict src, int32_t n, int32_t zp, int32_t w) {
  const int16_t z = int16_t(zp), w16 = int16_t(w);
  const int32_t n16 = n & ~15;
  int32_t j = 0;
  for (; j < n16; ++j) acc[j] += int32_t(int16_t(src[j] - z)) * int32_t(w16);
  for (; j < n; ++j) acc[j] += (int32_t(src[j]) - zp) * w;
}

inline int32_t floor_div(int32_t a, int32_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int32_t ceil_div(int32_t a, int32_t b) { return -floor_div(-a, b); }

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
KernelStatus conv_channel(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
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
    for (int32_t k = 0; k < n; ++k) out[pos - p0 + k] = ch.rq(acc[k]);
    pos += n;
  }
  return KernelStatus::Ok;
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
KernelStatus conv_channel_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
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
    for (int32_t k = 0; k < q1 - q0; ++k) out[q0 - p0 + k] = ch.rq(acc[k]);
  }
  return KernelStatus::Ok;
}

bool is_pointwise(const LayerDesc& L) {
  return L.kh == 1 && L.kw == 1 && L.sh == 1 && L.sw == 1 && L.pad_t == 0 && L.pad_l == 0 && L.in[0].w == L.out.w &&
         L.in[0].h == L.out.h;
}

KernelStatus gemm_range(const LayerDesc& L, const View& v, int32_t begin, int32_t end, int8_t* out) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  // The full-input view is contiguous (covers() checked it spans everything).
  const int8_t* x = v.data;
  for (int32_t o = begin; o < end; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    int32_t acc = L.bias ? L.bias[local] : 0;
    for (int32_t i = 0; i < fan_in; ++i) acc += (int32_t(x[i]) - zp) * w[i];
    out[o - begin] = requant(acc, L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
  return KernelStatus::Ok;
}

// Geometry that box arithmetic relies on (it divides by the group sizes and
// by the output plane). Pointers are not looked at: boxes are also computed
// from descriptors that carry no data (planner, fragment checks).
bool geometry_ok(const LayerDesc& L) {
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return false;
  if (L.out.c <= 0 || L.out.h <= 0 || L.out.w <= 0) return false;
  if (L.op == QOp::Conv && (L.groups <= 0 || L.in[0].c % L.groups || L.out.c % L.groups)) return false;
  return true;
}

// Everything compute_range needs before it follows a pointer.
bool layer_ok(const LayerDesc& L) {
  if (!geometry_ok(L)) return false;
  switch (L.op) {
    case QOp::Conv:
    case QOp::Gemm: return L.weights && L.mult && L.shift;
    case QOp::AvgPool: return L.mult && L.shift;
    case QOp::Lut: return L.lut != nullptr;
    default: return true;
  }
}

KernelStatus pool_channel(const LayerDesc& L, const View& v, int32_t c, int32_t p0, int32_t p1, int8_t* out) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t zp = L.in_zp[0];
  for (int32_t pos = p0; pos < p1; ++pos) {
    const int32_t oy = pos / W, ox = pos % W;
    const int32_t iy0 = oy * L.sh - L.pad_t, ix0 = ox * L.sw - L.pad_l;
    int32_t acc = 0, count = 0, best = -128;
    for (int32_t ky = 0; ky < L.kh; ++ky) {
      const int32_t iy = iy0 + ky;
      if (iy < 0 || iy >= X.h) continue;
      const int8_t* row = row_ptr(v, X.w, c, iy);
      for (int32_t kx = 0; kx < L.kw; ++kx) {
        const int32_t ix = ix0 + kx;
        if (ix < 0 || ix >= X.w) continue;
        acc += int32_t(row[ix]) - zp;
        if (row[ix] > best) best = row[ix];
        ++count;
      }
    }
    int8_t r;
    if (L.op == QOp::MaxPool) {
      r = clamp_i8(best, L.act_min, L.act_max);
    } else {
      // Padded taps hold real zero, i.e. contribute nothing to acc; they
      // only change the divisor.
      const int32_t div = L.count_include_pad ? L.kh * L.kw : count;
      if (div <= 0) return KernelStatus::BadLayer;
      r = requant(acc, L.mult[div - 1], L.shift[div - 1], L.out_zp, L.act_min, L.act_max);
    }
    out[pos - p0] = r;
  }
  return KernelStatus::Ok;
}

}  // namespace

const char* qop_name(QOp op) {
  switch (op) {
    case QOp::Conv: return "Conv";
    case QOp::Gemm: return "Gemm";
    case QOp::Add: return "Add";
    case QOp::Mul: return "Mul";
    case QOp::Concat: return "Concat";
    case QOp::AvgPool: return "AvgPool";
    case QOp::GlobalAvgPool: return "GlobalAvgPool";
    case QOp::MaxPool: return "MaxPool";
    case QOp::Lut: return "Lut";
    case QOp::Pad: return "Pad";
  }
  return "?";
}

void output_channels(const LayerDesc& L, int32_t begin, int32_t end, int32_t* first, int32_t* last) {
  const int32_t hw = L.out.h * L.out.w;
  *first = begin / hw;
  *last = (end - 1) / hw;
}

Box input_box(const LayerDesc& L, int i, int32_t begin, int32_t end) {
  Box b;
  if (end <= begin || i < 0 || i >= L.n_inputs || !geometry_ok(L)) return b;
  const Dims& X = L.in[i];
  const int32_t hw = L.out.h * L.out.w;
  int32_t oc0, oc1;
  output_channels(L, begin, end, &oc0, &oc1);
  // Output rows touched: exact within one channel, all rows across channels.
  int32_t oy0 = 0, oy1 = L.out.h - 1;
  if (oc0 == oc1) {
    oy0 = (begin % hw) / L.out.w;
    oy1 = ((end - 1) % hw) / L.out.w;
  }
  switch (L.op) {
    case QOp::Conv: {
      const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
      b.c0 = (oc0 / cout_g) * cin_g;
      b.c1 = (oc1 / cout_g + 1) * cin_g;
      window_rows(oy0, oy1, L.kh, L.sh, L.dh, L.pad_t, X.h, &b.h0, &b.h1);
      return b;
    }
    case QOp::AvgPool:
    case QOp::MaxPool:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      window_rows(oy0, oy1, L.kh, L.sh, 1, L.pad_t, X.h, &b.h0, &b.h1);
      return b;
    case QOp::GlobalAvgPool:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = 0;
      b.h1 = X.h;
      return b;
    case QOp::Gemm:
      b.c0 = 0;
      b.c1 = X.c;
      b.h0 = 0;
      b.h1 = X.h;
      return b;
    case QOp::Add:
    case QOp::Lut:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = oy0;
      b.h1 = oy1 + 1;
      return b;
    case QOp::Mul:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      if (i == 1 && X.h == 1 && X.w == 1 && (L.out.h != 1 || L.out.w != 1)) {
        b.h0 = 0;
        b.h1 = 1;
      } else {
        b.h0 = oy0;
        b.h1 = oy1 + 1;
      }
      return b;
    case QOp::Concat: {
      int32_t off = 0;
      for (int k = 0; k < i; ++k) off += L.in[k].c;
      b.c0 = maxi(oc0, off) - off;
      b.c1 = mini(oc1 + 1, off + X.c) - off;
      if (b.c1 <= b.c0) return Box{};
      b.h0 = oy0;
      b.h1 = oy1 + 1;
      return b;
    }
    case QOp::Pad:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = maxi(0, oy0 - L.pad_t);
      b.h1 = mini(X.h, oy1 - L.pad_t + 1);
      if (b.h1 < b.h0) b.h1 = b.h0;
      return b;
  }
  return b;
}

KernelStatus compute_range(const LayerDesc& L, const View* in, int32_t begin, int32_t end, int8_t* out,
                           int32_t oc_count) {
  const int32_t total = L.out.size();
  if (begin < 0 || end > total || begin > end) return KernelStatus::BadRange;
  if (begin == end) return KernelStatus::Ok;
  if (!layer_ok(L)) return KernelStatus::BadLayer;
  for (int i = 0; i < L.n_inputs; ++i)
    if (!covers(in[i], input_box(L, i, begin, end))) return KernelStatus::ViewTooSmall;
  const int32_t hw = L.out.h * L.out.w;
  const int32_t W = L.out.w;

  // Walk the run channel by channel: [c, p0..p1) slices.
  auto each_channel = [&](auto&& fn) -> KernelStatus {
    int32_t pos = begin;
    while (pos < end) {
      const int32_t c = pos / hw;
      const int32_t p0 = pos % hw;
      const int32_t p1 = mini(hw, p0 + (end - pos));
      KernelStatus st = fn(c, p0, p1, out + (pos - begin));
      if (st != KernelStatus::Ok) return st;
      pos += p1 - p0;
    }
    return KernelStatus::Ok;
  };

  switch (L.op) {
    case QOp::Conv: {
      int32_t oc0, oc1;
      output_channels(L, begin, end, &oc0, &oc1);
      if (oc0 < L.oc_base || oc1 >= L.oc_base + oc_count) return KernelStatus::MissingData;
      if (is_pointwise(L)) {
        pointwise_range(L, in[0], begin, end, out);
        return KernelStatus::Ok;
      }
      if (L.sh == 1 && L.sw == 1 && L.in[0].w == L.out.w) {
        return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
          return conv_channel_flat(L, in[0], c, p0, p1, o);
        });
      }
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        return conv_channel(L, in[0], c, p0, p1, o);
      });
    }
    case QOp::Gemm: {
      if (begin < L.oc_base || end > L.oc_base + oc_count) return KernelStatus::MissingData;
      return gemm_range(L, in[0], begin, end, out);
    }
    case QOp::AvgPool:
    case QOp::MaxPool:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        return pool_channel(L, in[0], c, p0, p1, o);
      });
    case QOp::GlobalAvgPool: {
      const Dims& X = L.in[0];
      const int32_t zp = L.in_zp[0];
      for (int32_t c = begin; c < end; ++c) {
        int32_t acc = 0;
        const int8_t* src = row_ptr(in[0], X.w, c, 0);
        const int32_t n = X.h * X.w;
        for (int32_t k = 0; k < n; ++k) acc += int32_t(src[k]) - zp;
        out[c - begin] = requant(acc, L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
      }
      return KernelStatus::Ok;
    }
    case QOp::Add: {
      const Requant ra(L.in_mult[0], L.in_shift[0], 0, -128, 127), rb(L.in_mult[1], L.in_shift[1], 0, -128, 127);
      const Requant rout(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t a = (int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0]) * (int32_t(1) << L.left_shift);
          const int32_t b = (int32_t(row_ptr(in[1], W, c, y)[x]) - L.in_zp[1]) * (int32_t(1) << L.left_shift);
          o[p - p0] = rout(ra.scale(a) + rb.scale(b));
        }
        return KernelStatus::Ok;
      });
    }
    case QOp::Mul: {
      const bool bcast = L.in[1].h == 1 && L.in[1].w == 1 && (L.out.h != 1 || L.out.w != 1);
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t a = int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0];
          const int32_t b = int32_t(bcast ? row_ptr(in[1], 1, c, 0)[0] : row_ptr(in[1], W, c, y)[x]) - L.in_zp[1];
          o[p - p0] = requant(a * b, L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
        }
        return KernelStatus::Ok;
      });
    }
    case QOp::Concat:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        int32_t k = 0, off = 0;
        while (k < L.n_inputs && c >= off + L.in[k].c) off += L.in[k++].c;
        if (k >= L.n_inputs) return KernelStatus::BadLayer;
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t v = int32_t(row_ptr(in[k], W, c - off, y)[x]) - L.in_zp[k];
          o[p - p0] = requant(v, L.in_mult[k], L.in_shift[k], L.out_zp, L.act_min, L.act_max);
        }
        return KernelStatus::Ok;
      });
    case QOp::Lut:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          o[p - p0] = L.lut[int32_t(row_ptr(in[0], W, c, y)[x]) + 128];
        }
        return KernelStatus::Ok;
      });
    case QOp::Pad: {
      const Dims& X = L.in[0];
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W - L.pad_t, x = p % W - L.pad_l;
          const bool inside = y >= 0 && y < X.h && x >= 0 && x < X.w;
          o[p - p0] = inside ? row_ptr(in[0], X.w, c, y)[x] : int8_t(L.out_zp);
        }
        return KernelStatus::Ok;
      });
    }
  }
  return KernelStatus::BadLayer;
}

}  // namespace core
}  // namespace ts
