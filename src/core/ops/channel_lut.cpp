// ChannelLut: an elementwise int8 -> int8 table per channel (PRelu: a slope
// per channel). 256 entries per channel, indexed by x + 128; per-channel
// data, so a board stores the tables of the channels it computes only.
#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

Why check(const LayerDesc& L) {
  static const char* const kWhat = "output shape differs from the input's";
  if (L.n_inputs != 1) return refuse("n_inputs", L.n_inputs, kWhat);
  if (!same(L.out, L.in[0])) return refuse("out.c", L.out.c, kWhat);
  return ok();
}

bool data_ok(const LayerDesc& L) { return L.lut != nullptr; }

DataLayout layout(const LayerDesc&, int32_t channels) {
  DataLayout d;
  d.n[kLut] = int64_t(256) * channels;
  return d;
}

Box box_of(const LayerDesc&, int, const OutBox& b) { return same_box(b); }

KernelStatus eval(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                  int64_t cstride) {
  const int32_t W = L.out.w;
  for (int32_t c = c0; c < c1; ++c) {
    int8_t* o = out + int64_t(c - c0) * cstride;
    const int8_t* t = L.lut + int64_t(c - L.oc_base) * 256;
    for (int32_t p = p0; p < p1; ++p) o[p - p0] = t[int32_t(row_ptr(in[0], W, c, p / W)[p % W]) + 128];
  }
  return KernelStatus::Ok;
}

}  // namespace

const OpDef kChannelLutOp = {QOp::ChannelLut, "ChannelLut", check, nullptr, data_ok, true, layout, box_of, same_access, one_mac, eval, nullptr};

}  // namespace core
}  // namespace ts
