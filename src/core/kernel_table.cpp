// The portable kernel table, and the choice of the active one.
#include "core/kernel_table.h"

#include "core/ops/conv_impl.h"

#include "core/arm/dsp_kernels.h"
#include "core/arm/helium_kernels.h"

// The Helium table exists on hosts (plain-C++ instructions, for tests) and
// on Arm targets with MVE; the M7 and M4 images leave helium.cpp out.
#if !defined(__arm__) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
#define TS_HAVE_HELIUM 1
#else
#define TS_HAVE_HELIUM 0
#endif

#if defined(TS_X86_KERNELS)
#include "core/x86/x86_kernels.h"
#endif

namespace ts {
namespace core {

namespace {

void requant_row(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  for (int32_t k = 0; k < n; ++k) out[k] = rq(acc[k]);
}

// The same, as a functor the conv loops inline (the pointwise block
// requantises 4 values at a time: no call per 4 outputs on a board).
struct ScalarRequant {
  TS_ALWAYS_INLINE void operator()(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) const {
    for (int32_t k = 0; k < n; ++k) out[k] = rq(acc[k]);
  }
};

void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  pointwise_block(L, v, o0, no, p0, p1, out, cstride, ScalarRequant());
}

void conv_ch(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  conv_channel(L, v, o, p0, p1, out, ScalarRequant());
}

void conv_ch_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  conv_channel_flat(L, v, o, p0, p1, out, ScalarRequant());
}

void add_row(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  for (int32_t k = 0; k < n; ++k) {
    const int32_t x = (int32_t(a[k]) - p.za) * (int32_t(1) << p.left);
    const int32_t y = (int32_t(b[k]) - p.zb) * (int32_t(1) << p.left);
    out[k] = p.rout(wrap_add(p.ra.scale(x), p.rb.scale(y)));
  }
}

void gemm(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  for (int32_t o = o0; o < o1; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    int32_t acc = L.bias ? L.bias[local] : 0;
    for (int32_t i = 0; i < fan_in; ++i) acc += (int32_t(x[i]) - zp) * w[i];
    out[int64_t(o - o0) * ostride] = requant(acc, L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
}

const KernelTable kPortable = {"portable", requant_row, pointwise, conv_ch, conv_ch_flat, add_row, gemm, nullptr};

const KernelTable* g_forced = nullptr;

const KernelTable& default_kernels() {
#if defined(TS_X86_KERNELS)
  static const KernelTable* chosen = x86::select_kernels(&kPortable);
  return *chosen;
#elif defined(TS_ARM_HELIUM_KERNELS)
  return arm::kHeliumKernels;
#elif defined(TS_ARM_DSP_KERNELS)
  return arm::kDspKernels;
#else
  return kPortable;
#endif
}

bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

}  // namespace

const KernelTable& portable_kernels() { return kPortable; }

const KernelTable& kernels() { return g_forced ? *g_forced : default_kernels(); }

void set_kernels(const KernelTable* t) { g_forced = t; }

const KernelTable* find_kernels(const char* name) {
  if (!name) return nullptr;
  if (same_name(name, "portable")) return &kPortable;
  if (same_name(name, "dsp")) return &arm::kDspKernels;
#if TS_HAVE_HELIUM
  if (same_name(name, "helium")) return &arm::kHeliumKernels;
#endif
#if defined(TS_X86_KERNELS)
  return x86::find_kernels(name);
#else
  return nullptr;
#endif
}

}  // namespace core
}  // namespace ts
