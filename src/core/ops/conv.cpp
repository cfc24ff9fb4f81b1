// Conv: groups (incl. depthwise), stride, dilation, asymmetric zero padding.
//
// The loops themselves are in conv_impl.h (shared with the x86 variants);
// this file is the op: validation, boxes, MACs, and eval choosing a path and
// the active kernel table (core/kernel_table.h).
#include "core/op.h"
#include "core/kernel_table.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

bool is_pointwise(const LayerDesc& L) {
  return L.kh == 1 && L.kw == 1 && L.sh == 1 && L.sw == 1 && L.pad_t == 0 && L.pad_l == 0 && L.in[0].w == L.out.w &&
         L.in[0].h == L.out.h;
}

// ----------------------------------------------------------------- the op

bool groups_ok(const LayerDesc& L) {
  return L.groups > 0 && L.in[0].c % L.groups == 0 && L.out.c % L.groups == 0;
}

Why check(const LayerDesc& L) {
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "needs one input");
  if (!groups_ok(L)) return refuse("groups", L.groups, "channels not divisible by groups");
  const int64_t fan_in = int64_t(L.in[0].c / L.groups) * L.kh * L.kw;
  if (fan_in > kMaxFanIn) return refuse("in[0].c", L.in[0].c, "fan-in too large for int32 accumulation");
  return ok();
}

Why model_check(const LayerDesc& L) { return window_agrees(L, L.dh, L.dw); }

bool data_ok(const LayerDesc& L) { return L.weights && L.mult && L.shift; }

// Per output channel: its weights [cin/groups][kh][kw], bias, multiplier, shift.
DataLayout layout(const LayerDesc& L, int32_t channels) {
  DataLayout d;
  d.n[kWeights] = int64_t(L.in[0].c / L.groups) * L.kh * L.kw * channels;
  d.n[kBias] = d.n[kMult] = d.n[kShift] = channels;
  return d;
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kWindow;
  a.kh = L.kh; a.kw = L.kw; a.sh = L.sh; a.sw = L.sw; a.dh = L.dh; a.dw = L.dw;
  a.pt = L.pad_t; a.pl = L.pad_l;
  a.cin_g = L.in[0].c / L.groups;
  a.cout_g = L.out.c / L.groups;
  return a;
}

Box box_of(const LayerDesc& L, int, const OutBox& b) {
  Box r;
  if (!groups_ok(L)) return r;
  const Dims& X = L.in[0];
  const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
  r.c0 = (b.c0 / cout_g) * cin_g;
  r.c1 = ((b.c1 - 1) / cout_g + 1) * cin_g;
  window_rows(b.y0, b.y1, L.kh, L.sh, L.dh, L.pad_t, X.h, &r.h0, &r.h1);
  return r;
}

uint64_t macs(const LayerDesc& L) {
  if (!groups_ok(L) || L.kh < 0 || L.kw < 0) return 0;
  return uint64_t(L.in[0].c / L.groups) * uint64_t(L.kh) * uint64_t(L.kw);
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const KernelTable& K = kernels();
  if (is_pointwise(L)) {
    // One blocked matrix product per group the channels fall in.
    const int32_t cout_g = L.out.c / L.groups;
    for (int32_t c = c0; c < c1;) {
      const int32_t ce = mini(c1, (c / cout_g + 1) * cout_g);
      K.pointwise(L, in[0], c, ce - c, p0, p1, out + int64_t(c - c0) * cstride, cstride);
      c = ce;
    }
    return KernelStatus::Ok;
  }
  if (K.conv_block && K.conv_block(L, in[0], c0, c1, p0, p1, out, cstride)) return KernelStatus::Ok;
  const bool flat = L.sh == 1 && L.sw == 1 && L.in[0].w == L.out.w;
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    if (flat)
      K.conv_channel_flat(L, in[0], c, p0, p1, o);
    else
      K.conv_channel(L, in[0], c, p0, p1, o);
  }
  return KernelStatus::Ok;
}

// A box narrower than the plane in one call, where the table has a box
// kernel for the layer.
bool eval_box(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out) {
  const KernelTable& K = kernels();
  return !is_pointwise(L) && K.conv_box && K.conv_box(L, in[0], b, out);
}

// Partial sums: a pointwise convolution of one group, whose sums are its
// output plane; each input channel gives one element per position.
bool partial_ok(const LayerDesc& L) {
  return L.groups == 1 && L.kh == 1 && L.kw == 1 && L.sh == 1 && L.sw == 1 && L.pad_t == 0 && L.pad_l == 0 &&
         L.pad_b == 0 && L.pad_r == 0 && L.in[0].h == L.out.h && L.in[0].w == L.out.w;
}
int32_t partial_positions(const LayerDesc& L) { return L.out.h * L.out.w; }
int32_t partial_k(const LayerDesc&) { return 1; }
const PartialForm kPartial = {partial_ok, partial_positions, partial_k};

}  // namespace

const OpDef kConvOp = {QOp::Conv, "Conv", check, model_check, data_ok, true, layout, box_of, access, macs, eval,
                       &kPartial, eval_box};

}  // namespace core
}  // namespace ts
