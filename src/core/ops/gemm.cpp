// Gemm: fully connected. Output (C,1,1); every output reads the whole input
// (flattened C-H-W), weights [o][fan_in].
#include "core/op.h"
#include "core/ops/common.h"
#include "core/kernel_table.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  const Dims& x = L.in[0];
  static const char* const kWhat = "needs one input and a (C,1,1) output";
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, kWhat);
  if (L.out.h != 1) return refuse("out.h", L.out.h, kWhat);
  if (L.out.w != 1) return refuse("out.w", L.out.w, kWhat);
  if (int64_t(x.c) * x.h * x.w > kMaxFanIn) return refuse("in[0].c", x.c, "fan-in too large for int32 accumulation");
  return ok();
}

bool data_ok(const LayerDesc& L) { return L.weights && L.mult && L.shift; }

// Per output: its weights [fan_in], bias, multiplier, shift.
DataLayout layout(const LayerDesc& L, int32_t channels) {
  DataLayout d;
  d.n[kWeights] = int64_t(L.in[0].c) * L.in[0].h * L.in[0].w * channels;
  d.n[kBias] = d.n[kMult] = d.n[kShift] = channels;
  return d;
}

Access access(const LayerDesc&, int) {
  Access a;
  a.kind = Access::kAll;
  return a;
}

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

// Partial sums: one per output; each input channel gives its plane (the
// fan-in is the flattened C-H-W input).
bool partial_ok(const LayerDesc& L) { return L.out.h == 1 && L.out.w == 1; }
int32_t partial_positions(const LayerDesc&) { return 1; }
int32_t partial_k(const LayerDesc& L) { return L.in[0].h * L.in[0].w; }
const PartialForm kPartial = {partial_ok, partial_positions, partial_k};

}  // namespace

const OpDef kGemmOp = {QOp::Gemm, "Gemm", check, nullptr, data_ok, true, layout, box_of, access, macs, eval, &kPartial};

}  // namespace core
}  // namespace ts
