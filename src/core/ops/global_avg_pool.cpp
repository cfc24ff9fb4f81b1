// GlobalAvgPool: the mean over H and W of each channel; output (C,1,1).
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  const Dims& x = L.in[0];
  static const char* const kWhat = "needs one input and a (C,1,1) output";
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, kWhat);
  if (L.out.c != x.c) return refuse("out.c", L.out.c, kWhat);
  if (L.out.h != 1) return refuse("out.h", L.out.h, kWhat);
  if (L.out.w != 1) return refuse("out.w", L.out.w, kWhat);
  if (int64_t(x.h) * x.w > kMaxFanIn) return refuse("in[0].h", x.h, "input plane too large");
  return ok();
}

Access access(const LayerDesc&, int) {
  Access a;
  a.kind = Access::kPlanes;
  return a;
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

// Row shares with partial sums (core/partial.h): a board sums its rows of
// every channel, the channel's owner adds the sums and requantises, as eval
// does with the whole plane's sum.
bool partial_ok(const LayerDesc& L) { return L.in[0].h > 1; }
int32_t partial_positions(const LayerDesc&) { return 1; }
int32_t partial_k(const LayerDesc&) { return 0; }
const PartialForm kPartial = {partial_ok, partial_positions, partial_k, true};

}  // namespace

const OpDef kGlobalAvgPoolOp = {QOp::GlobalAvgPool, "GlobalAvgPool", check, nullptr, no_data, false, no_arrays,
                                box_of, access, macs, eval, &kPartial};

}  // namespace core
}  // namespace ts
