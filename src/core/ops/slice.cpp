// Slice: a strided sub-box of the input (ONNX Slice, and each output of a
// Split). The geometry fields hold the starts and steps of the three axes:
//   channels: start pad_b, step dh     rows: start pad_t, step sh
//   columns:  start pad_l, step sw     (kh = kw = dw = 1, pad_r = 0)
// Output (c, y, x) is input (pad_b + c*dh, pad_t + y*sh, pad_l + x*sw): a 1x1
// window whose "padding" is negative, over a strided choice of channels. The
// values are only moved: the output has the input's quantisation.
#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  const Dims& x = L.in[0];
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "a slice has one operand");
  if (L.kh != 1 || L.kw != 1 || L.dw != 1 || L.pad_r != 0 || L.groups != 1)
    return refuse("kh", L.kh, "a slice has no window, dilation, end padding or groups");
  static const char* const kWhat = "the slice reaches past the input";
  if (int64_t(L.pad_b) + int64_t(L.out.c - 1) * L.dh >= x.c) return refuse("out.c", L.out.c, kWhat);
  if (int64_t(L.pad_t) + int64_t(L.out.h - 1) * L.sh >= x.h) return refuse("out.h", L.out.h, kWhat);
  if (int64_t(L.pad_l) + int64_t(L.out.w - 1) * L.sw >= x.w) return refuse("out.w", L.out.w, kWhat);
  return ok();
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kWindow;
  a.sh = L.sh;
  a.sw = L.sw;
  a.pt = -L.pad_t;
  a.pl = -L.pad_l;
  a.c_off = L.pad_b;
  a.c_step = L.dh;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  return Box{L.pad_b + b.c0 * L.dh, L.pad_b + (b.c1 - 1) * L.dh + 1, L.pad_t + b.y0 * L.sh,
             L.pad_t + (b.y1 - 1) * L.sh + 1};
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w, Win = L.in[0].w;
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    const int32_t ci = L.pad_b + c * L.dh;
    for (int32_t p = p0; p < p1; ++p) {
      const int32_t y = p / W, x = p % W;
      o[p - p0] = row_ptr(in[0], Win, ci, L.pad_t + y * L.sh)[L.pad_l + x * L.sw];
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kSliceOp = {QOp::Slice, "Slice", check, nullptr, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
