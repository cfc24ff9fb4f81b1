// Add: two operands of the output's shape, each rescaled (after a common
// left shift) to a shared scale, summed in int32 and requantised.
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool validate(const LayerDesc& L) { return L.n_inputs == 2 && same(L.out, L.in[0]) && same(L.out, L.in[1]); }

Box box_of(const LayerDesc&, int, const OutBox& b) { return same_box(b); }

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  const Requant ra(L.in_mult[0], L.in_shift[0], 0, -128, 127), rb(L.in_mult[1], L.in_shift[1], 0, -128, 127);
  const Requant rout(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    for (int32_t p = p0; p < p1; ++p) {
      const int32_t y = p / W, x = p % W;
      const int32_t a = (int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0]) * (int32_t(1) << L.left_shift);
      const int32_t b = (int32_t(row_ptr(in[1], W, c, y)[x]) - L.in_zp[1]) * (int32_t(1) << L.left_shift);
      o[p - p0] = rout(ra.scale(a) + rb.scale(b));
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kAddOp = {QOp::Add, "Add", validate, no_data, false, box_of, one_mac, eval};

}  // namespace core
}  // namespace ts
