// Gemm: fully connected. Output (C,1,1); every output reads the whole input
// (flattened C-H-W), weights [o][fan_in].
#include "core/op.h"
#include "core/ops/common.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool validate(const LayerDesc& L) {
  const Dims& x = L.in[0];
  return L.n_inputs == 1 && L.out.h == 1 && L.out.w == 1 && int64_t(x.c) * x.h * x.w <= kMaxFanIn;
}

bool data_ok(const LayerDesc& L) { return L.weights && L.mult && L.shift; }

Box box_of(const LayerDesc& L, int, const OutBox&) { return Box{0, L.in[0].c, 0, L.in[0].h}; }

uint64_t macs(const LayerDesc& L) {
  const int64_t n = int64_t(L.in[0].c) * L.in[0].h * L.in[0].w;
  return n > 0 ? uint64_t(n) : 0;
}

// Outputs are channels (the plane has one position).
KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t, int32_t, int8_t* out,
                  int64_t cstride) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  // The full-input view is contiguous (it covers the whole input).
  const int8_t* x = in[0].data;
  for (int32_t o = c0; o < c1; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    int32_t acc = L.bias ? L.bias[local] : 0;
    for (int32_t i = 0; i < fan_in; ++i) acc += (int32_t(x[i]) - zp) * w[i];
    out[int64_t(o - c0) * cstride] = requant(acc, L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kGemmOp = {QOp::Gemm, "Gemm", validate, data_ok, true, box_of, macs, eval};

}  // namespace core
}  // namespace ts
