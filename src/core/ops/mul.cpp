// Mul: the second operand has the output's shape or is per channel (C,1,1).
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  const Dims& b = L.in[1];
  static const char* const kWhat = "operand shapes do not broadcast to the output";
  if (L.n_inputs != 2) return refuse("n_inputs", L.n_inputs, kWhat);
  if (!same(L.out, L.in[0])) return refuse("in[0]", L.in[0].c, kWhat);
  if (!(same(L.out, b) || (b.c == L.out.c && b.h == 1 && b.w == 1))) return refuse("in[1]", b.c, kWhat);
  return ok();
}

bool broadcast(const LayerDesc& L) { return L.in[1].h == 1 && L.in[1].w == 1 && (L.out.h != 1 || L.out.w != 1); }

// The (C,1,1) operand: one element per output channel.
Access access(const LayerDesc& L, int i) {
  Access a;
  if (i == 1 && broadcast(L)) a.kind = Access::kPerChannel;
  return a;
}

Box box_of(const LayerDesc& L, int i, const OutBox& b) {
  if (i == 1 && broadcast(L)) return Box{b.c0, b.c1, 0, 1};
  return same_box(b);
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  const bool bcast = broadcast(L);
  const Requant rq(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    for (int32_t p = p0; p < p1; ++p) {
      const int32_t y = p / W, x = p % W;
      const int32_t a = int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0];
      const int32_t b = int32_t(bcast ? row_ptr(in[1], 1, c, 0)[0] : row_ptr(in[1], W, c, y)[x]) - L.in_zp[1];
      o[p - p0] = rq(a * b);
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kMulOp = {QOp::Mul, "Mul", check, nullptr, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
