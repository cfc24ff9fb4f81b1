// AvgPool and MaxPool: a kh x kw window with stride and zero padding.
// AvgPool's divisor follows count_include_pad, with one multiplier per
// possible window count (mult/shift indexed by count - 1); MaxPool's output
// shares the input's quantisation (padding never wins).
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
  return ok();
}

Why max_model_check(const LayerDesc& L) { return window_agrees(L, 1, 1); }

Why avg_model_check(const LayerDesc& L) {
  const Why w = window_agrees(L, 1, 1);
  if (w.refused()) return w;
  // An average over a window entirely in the padding would divide by 0.
  static const char* const kWhat = "padding as large as the pool window";
  if (L.pad_t >= L.kh) return refuse("pad_t", L.pad_t, kWhat);
  if (L.pad_b >= L.kh) return refuse("pad_b", L.pad_b, kWhat);
  if (L.pad_l >= L.kw) return refuse("pad_l", L.pad_l, kWhat);
  if (L.pad_r >= L.kw) return refuse("pad_r", L.pad_r, kWhat);
  return ok();
}

bool avg_data_ok(const LayerDesc& L) { return L.mult && L.shift; }

// AvgPool: one multiplier and shift per possible window count (1 .. kh*kw),
// shared by every share.
DataLayout avg_layout(const LayerDesc& L, int32_t) {
  DataLayout d;
  d.n[kMult] = d.n[kShift] = int64_t(L.kh) * L.kw;
  return d;
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kWindow;
  a.kh = L.kh; a.kw = L.kw; a.sh = L.sh; a.sw = L.sw;
  a.pt = L.pad_t; a.pl = L.pad_l;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  Box r{b.c0, b.c1, 0, 0};
  window_rows(b.y0, b.y1, L.kh, L.sh, 1, L.pad_t, L.in[0].h, &r.h0, &r.h1);
  return r;
}

uint64_t macs(const LayerDesc& L) {
  return L.kh > 0 && L.kw > 0 ? uint64_t(L.kh) * uint64_t(L.kw) : 0;
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

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  for (int32_t c = c0; c < c1; ++c) {
    const KernelStatus st = pool_channel(L, in[0], c, p0, p1, out + int64_t(c - c0) * cstride);
    if (st != KernelStatus::Ok) return st;
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kAvgPoolOp = {QOp::AvgPool, "AvgPool", check, avg_model_check, avg_data_ok, false, avg_layout,
                          box_of, access, macs, eval, nullptr};
const OpDef kMaxPoolOp = {QOp::MaxPool, "MaxPool", check, max_model_check, no_data, false, no_arrays,
                          box_of, access, macs, eval, nullptr};

}  // namespace core
}  // namespace ts
