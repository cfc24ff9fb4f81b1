// Transpose: a permutation of the three axes (channels, rows, columns) of a
// batch-1 tensor (ONNX Transpose with perm[0] = 0). Output axis a is input
// axis p[a] (p = transpose_axis, kept in kh, kw, dh: core/op.h), so output
// element (o0, o1, o2) is the input element whose coordinate along axis p[a]
// is o[a]. Each output reads exactly one input element; an output box reads
// the input box whose axis p[a] spans the output's axis a. Values are only
// moved: the output has the input's quantisation.
#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

int32_t extent(const Dims& d, int32_t axis) { return axis == 0 ? d.c : axis == 1 ? d.h : d.w; }

Why check(const LayerDesc& L) {
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "a transpose has one operand");
  static const char* const kField[3] = {"kh", "kw", "dh"};
  bool seen[3] = {false, false, false};
  for (int a = 0; a < 3; ++a) {
    const int32_t p = transpose_axis(L, a);
    if (p < 0 || p > 2 || seen[p]) return refuse(kField[a], p + 1, "not a permutation of the axes 1, 2, 3");
    seen[p] = true;
  }
  if (L.sh != 1 || L.sw != 1 || L.dw != 1 || L.pad_t || L.pad_l || L.pad_b || L.pad_r || L.groups != 1)
    return refuse("sh", L.sh, "a transpose has no stride, dilation, padding or groups");
  static const char* const kOut[3] = {"out.c", "out.h", "out.w"};
  for (int a = 0; a < 3; ++a)
    if (extent(L.out, a) != extent(L.in[0], transpose_axis(L, a)))
      return refuse(kOut[a], extent(L.out, a), "output shape is not the permuted input shape");
  return ok();
}

Why model_check(const LayerDesc& L) {
  if (L.out_zp != L.in_zp[0]) return refuse("out_zp", L.out_zp, "Transpose output quantisation differs from the input's");
  return ok();
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kPermute;
  for (int k = 0; k < 3; ++k) a.perm[k] = int8_t(transpose_axis(L, k));
  return a;
}

// Input axis p[a] spans what output axis a spans; the box is its channels
// and rows (at full width).
Box box_of(const LayerDesc& L, int, const OutBox& b) {
  const int32_t lo[3] = {b.c0, b.y0, b.x0}, hi[3] = {b.c1, b.y1, b.x1};
  int32_t in_lo[3] = {0, 0, 0}, in_hi[3] = {0, 0, 0};
  for (int a = 0; a < 3; ++a) {
    in_lo[transpose_axis(L, a)] = lo[a];
    in_hi[transpose_axis(L, a)] = hi[a];
  }
  return Box{in_lo[0], in_hi[0], in_lo[1], in_hi[1]};
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w, Win = L.in[0].w;
  const int32_t pc = transpose_axis(L, 0), py = transpose_axis(L, 1), px = transpose_axis(L, 2);
  int32_t i[3];
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    i[pc] = c;
    for (int32_t p = p0; p < p1; ++p) {
      i[py] = p / W;
      i[px] = p % W;
      o[p - p0] = row_ptr(in[0], Win, i[0], i[1])[i[2]];
    }
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kTransposeOp = {QOp::Transpose, "Transpose", check, model_check, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
