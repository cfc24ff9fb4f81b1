// Pad: explicit zero padding of H and W that could not be folded into a
// consumer; padded elements hold the output zero point.
#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  const Dims& x = L.in[0];
  static const char* const kWhat = "output shape disagrees with the padding";
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, kWhat);
  if (L.out.c != x.c) return refuse("out.c", L.out.c, kWhat);
  if (int64_t(L.out.h) != int64_t(x.h) + L.pad_t + L.pad_b) return refuse("out.h", L.out.h, kWhat);
  if (int64_t(L.out.w) != int64_t(x.w) + L.pad_l + L.pad_r) return refuse("out.w", L.out.w, kWhat);
  return ok();
}

// A 1x1 window shifted by the padding.
Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kWindow;
  a.pt = L.pad_t;
  a.pl = L.pad_l;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  Box r{b.c0, b.c1, maxi(0, b.y0 - L.pad_t), mini(L.in[0].h, b.y1 - L.pad_t)};
  if (r.h1 < r.h0) r.h1 = r.h0;
  return r;
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    for (int32_t p = p0; p < p1; ++p) {
      const int32_t y = p / W - L.pad_t, x = p % W - L.pad_l;
      const bool inside = y >= 0 && y < X.h && x >= 0 && x < X.w;
      o[p - p0] = inside ? row_ptr(in[0], X.w, c, y)[x] : int8_t(L.out_zp);
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kPadOp = {QOp::Pad, "Pad", check, nullptr, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
