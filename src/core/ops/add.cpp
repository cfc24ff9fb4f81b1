// Add: two operands of the output's shape, each rescaled (after a common
// left shift) to a shared scale, summed in int32 and requantised.
#include "core/op.h"
#include "core/ops/common.h"
#include "core/kernel_table.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  static const char* const kWhat = "needs two operands of the output's shape";
  if (L.n_inputs != 2) return refuse("n_inputs", L.n_inputs, kWhat);
  if (!same(L.out, L.in[0])) return refuse("in[0]", L.in[0].c, kWhat);
  if (!same(L.out, L.in[1])) return refuse("in[1]", L.in[1].c, kWhat);
  return ok();
}

// Each operand is rescaled after left_shift and the two are summed in int32:
// a rescale must not grow.
Why model_check(const LayerDesc& L) {
  for (int k = 0; k < 2; ++k)
    if (L.in_shift[k] > 0) return refuse(k ? "in_shift[1]" : "in_shift[0]", L.in_shift[k], "operand rescale must not grow");
  return ok();
}

Box box_of(const LayerDesc&, int, const OutBox& b) { return same_box(b); }

// Row by row (no division per element), through the active table's add_row.
KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  AddParams ap;
  ap.ra = Requant(L.in_mult[0], L.in_shift[0], 0, -128, 127);
  ap.rb = Requant(L.in_mult[1], L.in_shift[1], 0, -128, 127);
  ap.rout = Requant(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
  ap.za = L.in_zp[0];
  ap.zb = L.in_zp[1];
  ap.left = L.left_shift;
  const KernelTable& K = kernels();
  // Whole planes of views holding whole planes (a whole layer's run):
  // channels [c0, c1) are contiguous in both operands and the output, one
  // call for all of them (a call per channel cost more than its work on the
  // 7x7 and 3x3 planes, about 20 ns against 9 elements).
  const int32_t H = L.out.h;
  if (p0 == 0 && p1 == H * W && cstride == int64_t(H) * W && in[0].h0 == 0 && in[0].nh == H && in[1].h0 == 0 &&
      in[1].nh == H) {
    const int64_t n = int64_t(c1 - c0) * H * W;
    if (n <= INT32_MAX) {
      K.add_row(row_ptr(in[0], W, c0, 0), row_ptr(in[1], W, c0, 0), int32_t(n), ap, out);
      return KernelStatus::Ok;
    }
  }
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    // Views are full width: positions [p0, p1) of channel c are contiguous.
    const int8_t* a = row_ptr(in[0], W, c, in[0].h0) + p0 - int64_t(in[0].h0) * W;
    const int8_t* b = row_ptr(in[1], W, c, in[1].h0) + p0 - int64_t(in[1].h0) * W;
    K.add_row(a, b, p1 - p0, ap, o);
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kAddOp = {QOp::Add, "Add", check, model_check, no_data, false, no_arrays, box_of, same_access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
