// Resize: nearest or bilinear upsampling (or downsampling) of each plane,
// with the ONNX coordinate transforms FPN necks and PP-OCR use. The mode is
// in kh, kw, dh (ops/resize.h); the output shares the input's quantisation
// (out_zp == in_zp), so nearest copies and bilinear blends int8 values with
// weights in 256ths (docs/int8.md, "Resize").
#include "core/ops/resize.h"

#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "needs one input");
  if (L.out.c != L.in[0].c) return refuse("out.c", L.out.c, "output channels differ from the input's");
  if (L.kh != resize::kNearest && L.kh != resize::kLinear) return refuse("kh", L.kh, "unknown Resize interpolation");
  if (L.kw < resize::kAsymmetric || L.kw > resize::kPytorchHalfPixel)
    return refuse("kw", L.kw, "unknown Resize coordinate transform");
  if (L.dh < resize::kFloor || L.dh > resize::kRoundPreferCeil) return refuse("dh", L.dh, "unknown Resize rounding");
  return ok();
}

Why model_check(const LayerDesc& L) {
  if (L.out_zp != L.in_zp[0]) return refuse("out_zp", L.out_zp, "Resize output quantisation differs from the input's");
  return ok();
}

// Input indices [lo, hi) that output index o reads along an axis.
void span(const LayerDesc& L, int axis, int32_t o, int32_t* lo, int32_t* hi) {
  const int32_t n = axis == 0 ? L.in[0].h : L.in[0].w;
  const int32_t m = axis == 0 ? L.out.h : L.out.w;
  if (L.kh == resize::kNearest) {
    *lo = resize::nearest(L.kw, L.dh, n, m, o);
    *hi = *lo + 1;
    return;
  }
  int32_t i0, i1, w1;
  resize::linear(L.kw, n, m, o, &i0, &i1, &w1);
  *lo = i0;
  *hi = i1 + 1;
}

Access access(const LayerDesc&, int) {
  Access a;
  a.kind = Access::kSpans;
  a.span = span;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  int32_t lo, hi, lo2, hi2;
  span(L, 0, b.y0, &lo, &hi);
  span(L, 0, b.y1 - 1, &lo2, &hi2);
  return Box{b.c0, b.c1, lo, hi2};
}

uint64_t macs(const LayerDesc& L) { return L.kh == resize::kLinear ? 4 : 1; }

// One row's source columns and weights, for output columns [x0, x1) (at
// most kChunk of them).
constexpr int32_t kChunk = 64;

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, zp = L.in_zp[0];
  const bool lin = L.kh == resize::kLinear;
  int32_t xs0[kChunk], xs1[kChunk], xw[kChunk];
  for (int32_t pos = p0; pos < p1;) {
    const int32_t oy = pos / W, ox0 = pos % W;
    const int32_t n = mini(mini(W - ox0, p1 - pos), kChunk);
    int32_t y0, y1, wy = 0;
    if (lin) {
      resize::linear(L.kw, X.h, L.out.h, oy, &y0, &y1, &wy);
      for (int32_t k = 0; k < n; ++k) resize::linear(L.kw, X.w, W, ox0 + k, &xs0[k], &xs1[k], &xw[k]);
    } else {
      y0 = y1 = resize::nearest(L.kw, L.dh, X.h, L.out.h, oy);
      for (int32_t k = 0; k < n; ++k) xs0[k] = resize::nearest(L.kw, L.dh, X.w, W, ox0 + k);
    }
    for (int32_t c = c0; c < c1; ++c) {
      int8_t* o = out + int64_t(c - c0) * cstride + (pos - p0);
      const int8_t* r0 = row_ptr(in[0], X.w, c, y0);
      if (!lin) {
        for (int32_t k = 0; k < n; ++k) o[k] = clamp_i8(r0[xs0[k]], L.act_min, L.act_max);
        continue;
      }
      const int8_t* r1 = row_ptr(in[0], X.w, c, y1);
      constexpr int32_t one = 1 << resize::kFracBits;
      for (int32_t k = 0; k < n; ++k) {
        const int32_t top = (one - xw[k]) * (r0[xs0[k]] - zp) + xw[k] * (r0[xs1[k]] - zp);
        const int32_t bot = (one - xw[k]) * (r1[xs0[k]] - zp) + xw[k] * (r1[xs1[k]] - zp);
        const int32_t acc = (one - wy) * top + wy * bot;
        const int32_t v = ((acc + (1 << (2 * resize::kFracBits - 1))) >> (2 * resize::kFracBits)) + zp;
        o[k] = clamp_i8(v, L.act_min, L.act_max);
      }
    }
    pos += n;
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kResizeOp = {QOp::Resize, "Resize", check, model_check, no_data, false, no_arrays,
                         box_of, access, macs, eval, nullptr};

}  // namespace core
}  // namespace ts
