// Shuffle: the channel shuffle of ShuffleNet (ONNX Reshape to [g, C/g, H, W],
// Transpose of the two channel axes, Reshape back), a permutation of whole
// channels: with g = groups and n = C / g, output channel o = i*g + j is
// input channel j*n + i. Values are only moved: the output has the input's
// quantisation.
#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, "a shuffle has one operand");
  if (!same(L.out, L.in[0])) return refuse("out.c", L.out.c, "output shape differs from the input's");
  if (L.in[0].c % L.groups != 0) return refuse("groups", L.groups, "groups do not divide the channels");
  return ok();
}

Access access(const LayerDesc& L, int) {
  Access a;
  a.kind = Access::kChannelShuffle;
  a.cout_g = L.groups;
  return a;
}

// The channels of [c0, c1) come from every group: the box spans the
// smallest and largest source channel.
Box box_of(const LayerDesc& L, int, const OutBox& b) {
  int32_t lo = L.in[0].c, hi = -1;
  for (int32_t c = b.c0; c < b.c1; ++c) {
    const int32_t s = shuffle_source(c, L.groups, L.in[0].c);
    lo = mini(lo, s);
    hi = maxi(hi, s);
  }
  return Box{lo, hi + 1, b.y0, b.y1};
}

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    const int32_t s = shuffle_source(c, L.groups, L.in[0].c);
    for (int32_t p = p0; p < p1; ++p) o[p - p0] = row_ptr(in[0], W, s, p / W)[p % W];
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kShuffleOp = {QOp::Shuffle, "Shuffle", check, nullptr, no_data, false, no_arrays, box_of, access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
