// Concat along channels; each operand is requantised to the output.
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return refuse("n_inputs", L.n_inputs, "bad input count");
  int64_t c = 0;
  for (int k = 0; k < L.n_inputs; ++k) {
    static const char* const kH[kMaxInputs] = {"in[0].h", "in[1].h", "in[2].h", "in[3].h",
                                               "in[4].h", "in[5].h", "in[6].h", "in[7].h"};
    static const char* const kW[kMaxInputs] = {"in[0].w", "in[1].w", "in[2].w", "in[3].w",
                                               "in[4].w", "in[5].w", "in[6].w", "in[7].w"};
    if (L.in[k].h != L.out.h) return refuse(kH[k], L.in[k].h, "operands differ in spatial size");
    if (L.in[k].w != L.out.w) return refuse(kW[k], L.in[k].w, "operands differ in spatial size");
    c += L.in[k].c;
  }
  if (c != L.out.c) return refuse("out.c", L.out.c, "operand channels do not sum to the output's");
  return ok();
}

// Operand i holds output channels [offset, offset + its channels).
Access access(const LayerDesc& L, int i) {
  Access a;
  a.kind = Access::kChannelSlice;
  for (int k = 0; k < i; ++k) a.offset += L.in[k].c;
  return a;
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

const OpDef kConcatOp = {QOp::Concat, "Concat", check, nullptr, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
