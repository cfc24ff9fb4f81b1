// ConvTranspose: a transposed convolution (groups, stride, asymmetric pads,
// dilation 1). Weights are stored as Conv's, per output channel:
// [o][cin/groups][kh][kw] (the importer transposes ONNX's [cin][cout/g]).
// Output (oy, ox) of channel o sums, over the input channels of its group and
// the taps ky, kx with oy = iy * sh - pad_t + ky and ox = ix * sw - pad_l + kx
// inside the input, w[o][ci][ky][kx] * (x[ci][iy][ix] - zp), plus the bias,
// requantised per channel as Conv (docs/int8.md).
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool groups_ok(const LayerDesc& L) {
  return L.groups > 0 && L.in[0].c % L.groups == 0 && L.out.c % L.groups == 0;
}

Why check(const LayerDesc& L) {
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "needs one input");
  if (!groups_ok(L)) return refuse("groups", L.groups, "channels not divisible by groups");
  if (L.dh != 1) return refuse("dh", L.dh, "ConvTranspose takes dilation 1");
  if (L.dw != 1) return refuse("dw", L.dw, "ConvTranspose takes dilation 1");
  const int64_t fan_in = int64_t(L.in[0].c / L.groups) * L.kh * L.kw;
  if (fan_in > kMaxFanIn) return refuse("in[0].c", L.in[0].c, "fan-in too large for int32 accumulation");
  return ok();
}

// out = (in - 1) * stride + kernel - pads.
Why model_check(const LayerDesc& L) {
  static const char* const kWhat = "output size disagrees with the transposed window";
  const Dims& x = L.in[0];
  if (int64_t(L.out.h) != int64_t(x.h - 1) * L.sh + L.kh - L.pad_t - L.pad_b) return refuse("out.h", L.out.h, kWhat);
  if (int64_t(L.out.w) != int64_t(x.w - 1) * L.sw + L.kw - L.pad_l - L.pad_r) return refuse("out.w", L.out.w, kWhat);
  return ok();
}

bool data_ok(const LayerDesc& L) { return L.weights && L.mult && L.shift; }

DataLayout layout(const LayerDesc& L, int32_t channels) {
  DataLayout d;
  d.n[kWeights] = int64_t(L.in[0].c / L.groups) * L.kh * L.kw * channels;
  d.n[kBias] = d.n[kMult] = d.n[kShift] = channels;
  return d;
}

// Input indices i with 0 <= o + pad - i * s < k, inside [0, n).
void span(const LayerDesc& L, int axis, int32_t o, int32_t* lo, int32_t* hi) {
  const int32_t n = axis == 0 ? L.in[0].h : L.in[0].w;
  const int32_t k = axis == 0 ? L.kh : L.kw, s = axis == 0 ? L.sh : L.sw;
  const int32_t t = o + (axis == 0 ? L.pad_t : L.pad_l);
  *lo = maxi(0, ceil_div(t - k + 1, s));
  *hi = mini(n, floor_div(t, s) + 1);
  if (*hi < *lo) *hi = *lo;
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kSpans;
  a.span = span;
  a.cin_g = L.in[0].c / L.groups;
  a.cout_g = L.out.c / L.groups;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  Box r;
  if (!groups_ok(L)) return r;
  const int32_t cin_g = L.in[0].c / L.groups, cout_g = L.out.c / L.groups;
  r.c0 = (b.c0 / cout_g) * cin_g;
  r.c1 = ((b.c1 - 1) / cout_g + 1) * cin_g;
  int32_t lo, hi;
  span(L, 0, b.y0, &r.h0, &hi);
  span(L, 0, b.y1 - 1, &lo, &r.h1);
  if (r.h1 < r.h0) r.h1 = r.h0;
  return r;
}

// Taps of one output at most: cin/groups x ceil(kh/sh) x ceil(kw/sw).
uint64_t macs(const LayerDesc& L) {
  if (!groups_ok(L) || L.sh < 1 || L.sw < 1) return 0;
  return uint64_t(L.in[0].c / L.groups) * uint64_t((L.kh + L.sh - 1) / L.sh) * uint64_t((L.kw + L.sw - 1) / L.sw);
}

// The kernel as large as the stride and no top or left padding (an
// upsampling by sh x sw: PP-OCRv4's 2x2 stride 2): output (oy, ox) reads one
// input, (oy / sh, ox / sw), of each channel of its group, at tap
// (oy % sh, ox % sw). Outputs [xa, xb) of row oy of channel c, 64 sums at a
// time on the stack, each input channel's row added in turn: no division or
// window per output.
bool tiles(const LayerDesc& L) { return L.kh == L.sh && L.kw == L.sw && L.pad_t == 0 && L.pad_l == 0; }

void tiled_row(const LayerDesc& L, const View& v, int32_t c, int32_t oy, int32_t xa, int32_t xb, int8_t* o) {
  constexpr int32_t kChunk = 64;
  const Dims& X = L.in[0];
  const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups, taps = L.kh * L.kw, sw = L.sw;
  const int32_t ci0 = (c / cout_g) * cin_g, local = c - L.oc_base, zp = L.in_zp[0], iy = oy / L.sh;
  const int8_t* wc = L.weights + int64_t(local) * cin_g * taps + (oy % L.sh) * L.kw;
  const int32_t bias = L.bias ? L.bias[local] : 0;
  int32_t acc[kChunk];
  for (int32_t x0 = xa; x0 < xb; x0 += kChunk) {
    const int32_t n = mini(kChunk, xb - x0);
    for (int32_t i = 0; i < n; ++i) acc[i] = bias;
    const int32_t m = iy < X.h ? mini(n, X.w * sw - x0) : 0;  // outputs with an input under them
    for (int32_t ci = 0; ci < cin_g && m > 0; ++ci) {
      const int8_t* row = row_ptr(v, X.w, ci0 + ci, iy);
      const int8_t* w = wc + int64_t(ci) * taps;
      for (int32_t i = 0, ix = x0 / sw, kx = x0 % sw; i < m; ++i) {
        acc[i] += int32_t(w[kx]) * (int32_t(row[ix]) - zp);
        if (++kx == sw) kx = 0, ++ix;
      }
    }
    for (int32_t i = 0; i < n; ++i)
      o[x0 - xa + i] = requant(acc[i], L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  if (tiles(L)) {
    const int32_t W = L.out.w;
    for (int32_t c = c0; c < c1; ++c)
      for (int32_t pos = p0; pos < p1;) {
        const int32_t oy = pos / W, x = pos % W, n = mini(p1 - pos, W - x);
        tiled_row(L, in[0], c, oy, x, x + n, out + int64_t(c - c0) * cstride + (pos - p0));
        pos += n;
      }
    return KernelStatus::Ok;
  }
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, zp = L.in_zp[0];
  const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
  const int32_t taps = L.kh * L.kw;
  for (int32_t c = c0; c < c1; ++c) {
    const int32_t ci0 = (c / cout_g) * cin_g;
    const int8_t* wc = L.weights + int64_t(c - L.oc_base) * cin_g * taps;
    const int32_t bias = L.bias ? L.bias[c - L.oc_base] : 0;
    const int32_t m = L.mult[c - L.oc_base], sh = L.shift[c - L.oc_base];
    int8_t* o = out + int64_t(c - c0) * cstride;
    for (int32_t pos = p0; pos < p1; ++pos) {
      const int32_t oy = pos / W, ox = pos % W;
      int32_t y0, y1, x0, x1;
      span(L, 0, oy, &y0, &y1);
      span(L, 1, ox, &x0, &x1);
      int32_t acc = bias;
      for (int32_t ci = 0; ci < cin_g; ++ci) {
        const int8_t* w = wc + ci * taps;
        for (int32_t iy = y0; iy < y1; ++iy) {
          const int8_t* row = row_ptr(in[0], X.w, ci0 + ci, iy);
          const int32_t ky = oy + L.pad_t - iy * L.sh;
          for (int32_t ix = x0; ix < x1; ++ix)
            acc += int32_t(w[ky * L.kw + ox + L.pad_l - ix * L.sw]) * (int32_t(row[ix]) - zp);
        }
      }
      o[pos - p0] = requant(acc, m, sh, L.out_zp, L.act_min, L.act_max);
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kConvTransposeOp = {QOp::ConvTranspose, "ConvTranspose", check, model_check, data_ok, true, layout,
                                box_of, access, macs, eval, nullptr};

}  // namespace core
}  // namespace ts
