// Gemm: fully connected. Output (C,1,1); every output reads the whole input
// (flattened C-H-W), weights [o][fan_in].
#include "core/op.h"
#include "core/ops/common.h"
#include "core/kernel_table.h"

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

// Outputs are channels (the plane has one position); the full-input view is
// contiguous (it covers the whole input).
KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t, int32_t, int8_t* out,
                  int64_t cstride) {
  kernels().gemm(L, in[0].data, c0, c1, out, cstride);
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kGemmOp = {QOp::Gemm, "Gemm", validate, data_ok, true, box_of, macs, eval};

}  // namespace core
}  // namespace ts
