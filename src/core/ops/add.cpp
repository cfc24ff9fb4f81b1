// Add: two operands, each rescaled (after a common left shift) to a shared
// scale, summed in int32 and requantised. The first has the output's shape;
// the second too, or it is read nearest-upsampled by whole factors sh x sw
// (output (y, x) reads its (y / sh, x / sw)): a nearest Resize folded into
// the Add that reads it (model/fold.cpp), as feature pyramids' top-down
// paths add an upsampled coarser level, without the upsampled map.
#include "core/op.h"
#include "core/ops/common.h"
#include "core/kernel_table.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  static const char* const kWhat = "needs two operands of the output's shape";
  static const char* const kUp = "second operand is not the output's shape divided by sh x sw";
  if (L.n_inputs != 2) return refuse("n_inputs", L.n_inputs, kWhat);
  if (!same(L.out, L.in[0])) return refuse("in[0]", L.in[0].c, kWhat);
  if (L.in[1].c != L.out.c) return refuse("in[1]", L.in[1].c, kWhat);
  if (int64_t(L.in[1].h) * L.sh != L.out.h) return refuse("sh", L.sh, kUp);
  if (int64_t(L.in[1].w) * L.sw != L.out.w) return refuse("sw", L.sw, kUp);
  return ok();
}

bool upsampled(const LayerDesc& L) { return L.sh != 1 || L.sw != 1; }

// Each operand is rescaled after left_shift and the two are summed in int32:
// a rescale must not grow.
Why model_check(const LayerDesc& L) {
  for (int k = 0; k < 2; ++k)
    if (L.in_shift[k] > 0) return refuse(k ? "in_shift[1]" : "in_shift[0]", L.in_shift[k], "operand rescale must not grow");
  return ok();
}

Box box_of(const LayerDesc& L, int i, const OutBox& b) {
  if (i == 0) return same_box(b);
  return Box{b.c0, b.c1, b.y0 / L.sh, (b.y1 - 1) / L.sh + 1};
}

// The second operand's index that output index o reads along an axis.
void span(const LayerDesc& L, int axis, int32_t o, int32_t* lo, int32_t* hi) {
  *lo = o / (axis == 0 ? L.sh : L.sw);
  *hi = *lo + 1;
}

Access access(const LayerDesc& L, int i) {
  Access a;
  if (i == 1 && upsampled(L)) {
    a.kind = Access::kSpans;
    a.span = span;
  }
  return a;
}

// Positions [p0, p1) of channel c with the second operand upsampled: row by
// row, its values repeated sw times into a chunk on the stack, through the
// table's add_row like the plain case.
void add_upsampled(const LayerDesc& L, const View* in, int32_t c, int32_t p0, int32_t p1, const AddParams& ap,
                   int8_t* o) {
  constexpr int32_t kChunk = 64;
  int8_t up[kChunk];
  const int32_t W = L.out.w, Wb = L.in[1].w;
  const KernelTable& K = kernels();
  for (int32_t pos = p0; pos < p1;) {
    const int32_t y = pos / W, x0 = pos % W;
    const int32_t n = mini(mini(W - x0, p1 - pos), kChunk);
    const int8_t* b = row_ptr(in[1], Wb, c, y / L.sh);
    for (int32_t i = 0, x = x0; i < n; ++i, ++x) up[i] = b[x / L.sw];
    K.add_row(row_ptr(in[0], W, c, y) + x0, up, n, ap, o);
    o += n;
    pos += n;
  }
}

// Row by row (no division per element), through the active table's add_row.
KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  AddParams ap;
  ap.ra = Requant(L.in_mult[0], L.in_shift[0], 0, -128, 127);
  ap.rb = Requant(L.in_mult[1], L.in_shift[1], 0, -128, 127);
  ap.rout = Requant(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
  ap.za = L.in_zp[0];
  ap.zb = L.in_zp[1];
  ap.left = L.left_shift;
  const KernelTable& K = kernels();
  if (upsampled(L)) {
    for (int32_t c = c0; c < c1; ++c) add_upsampled(L, in, c, p0, p1, ap, out + int64_t(c - c0) * cstride);
    return KernelStatus::Ok;
  }
  // Whole planes of views holding whole planes (a whole layer's run):
  // channels [c0, c1) are contiguous in both operands and the output, one
  // call for all of them (a call per channel cost more than its work on the
  // 7x7 and 3x3 planes, about 20 ns against 9 elements).
  const int32_t H = L.out.h;
  if (p0 == 0 && p1 == H * W && cstride == int64_t(H) * W && in[0].h0 == 0 && in[0].nh == H && in[1].h0 == 0 &&
      in[1].nh == H) {
    const int64_t n = int64_t(c1 - c0) * H * W;
    if (n <= INT32_MAX) {
      K.add_row(row_ptr(in[0], W, c0, 0), row_ptr(in[1], W, c0, 0), int32_t(n), ap, out);
      return KernelStatus::Ok;
    }
  }
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    // Views are full width: positions [p0, p1) of channel c are contiguous.
    const int8_t* a = row_ptr(in[0], W, c, in[0].h0) + p0 - int64_t(in[0].h0) * W;
    const int8_t* b = row_ptr(in[1], W, c, in[1].h0) + p0 - int64_t(in[1].h0) * W;
    K.add_row(a, b, p1 - p0, ap, o);
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kAddOp = {QOp::Add, "Add", check, model_check, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
