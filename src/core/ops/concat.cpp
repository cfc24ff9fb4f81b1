// Concat along channels; each operand is requantised to the output.
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool validate(const LayerDesc& L) {
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return false;
  int64_t c = 0;
  for (int k = 0; k < L.n_inputs; ++k) {
    if (L.in[k].h != L.out.h || L.in[k].w != L.out.w) return false;
    c += L.in[k].c;
  }
  return c == L.out.c;
}

Box box_of(const LayerDesc& L, int i, const OutBox& b) {
  int32_t off = 0;
  for (int k = 0; k < i; ++k) off += L.in[k].c;
  Box r;
  r.c0 = maxi(b.c0, off) - off;
  r.c1 = mini(b.c1, off + L.in[i].c) - off;
  if (r.c1 <= r.c0) return Box{};
  r.h0 = b.y0;
  r.h1 = b.y1;
  return r;
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  for (int32_t c = c0; c < c1; ++c) {
    int32_t k = 0, off = 0;
    while (k < L.n_inputs && c >= off + L.in[k].c) off += L.in[k++].c;
    if (k >= L.n_inputs) return KernelStatus::BadLayer;
    const Requant rq(L.in_mult[k], L.in_shift[k], L.out_zp, L.act_min, L.act_max);
    int8_t* o = out + int64_t(c - c0) * cstride;
    for (int32_t p = p0; p < p1; ++p) {
      const int32_t y = p / W, x = p % W;
      o[p - p0] = rq(int32_t(row_ptr(in[k], W, c - off, y)[x]) - L.in_zp[k]);
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kConcatOp = {QOp::Concat, "Concat", validate, no_data, false, box_of, one_mac, eval};

}  // namespace core
}  // namespace ts
