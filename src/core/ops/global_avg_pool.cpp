// GlobalAvgPool: the mean over H and W of each channel; output (C,1,1).
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool validate(const LayerDesc& L) {
  const Dims& x = L.in[0];
  return L.n_inputs == 1 && L.out.c == x.c && L.out.h == 1 && L.out.w == 1 && int64_t(x.h) * x.w <= kMaxFanIn;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) { return Box{b.c0, b.c1, 0, L.in[0].h}; }

uint64_t macs(const LayerDesc& L) {
  const int64_t n = int64_t(L.in[0].h) * L.in[0].w;
  return n > 0 ? uint64_t(n) : 0;
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t, int32_t, int8_t* out,
                  int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t zp = L.in_zp[0];
  const Requant rq(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
  const int32_t n = X.h * X.w;
  for (int32_t c = c0; c < c1; ++c) {
    int32_t acc = 0;
    const int8_t* src = row_ptr(in[0], X.w, c, 0);
    for (int32_t k = 0; k < n; ++k) acc += int32_t(src[k]) - zp;
    out[int64_t(c - c0) * cstride] = rq(acc);
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kGlobalAvgPoolOp = {QOp::GlobalAvgPool, "GlobalAvgPool", validate, no_data, false, box_of, macs, eval};

}  // namespace core
}  // namespace ts
