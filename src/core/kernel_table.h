// Kernel variants: the inner loops an op's eval hands its hot work to, as a
// table of function pointers chosen once at start-up. The portable table
// (plain C++17) is always there; host builds on x86 add AVX2 and AVX-512 VNNI
// tables (src/core/x86/), selected by CPU feature, or forced with the
// environment variable TS_KERNELS=portable|avx2|vnni|dsp|helium. The
// Cortex-M7 and M4 firmware's default is the DSP table (src/core/arm/,
// TS_ARM_DSP_KERNELS, make -C firmware KERNELS=portable to keep the portable
// one), the Cortex-M55's the Helium table (TS_ARM_HELIUM_KERNELS).
// Every variant gives bit-identical results: integer accumulation is exact
// whatever the order or width, and the requantisation is the same integer
// function (tests/x86_kernels_test.cpp compares each variant with the
// portable one on random shapes and saturation corners).
#pragma once

#include <stdint.h>

#include "core/layer.h"
#include "core/requant.h"

namespace ts {
namespace core {

// Add's per-element work: out = rout(ra.scale(a') + rb.scale(b')) with
// a' = (a - za) * 2^left (likewise b').
struct AddParams {
  Requant ra, rb, rout;
  int32_t za = 0, zb = 0, left = 0;
};

struct KernelTable {
  const char* name;
  // out[k] = rq(acc[k]) for k < n.
  void (*requant_row)(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out);
  // Pointwise conv (1x1, stride 1, no padding): output channels [o0, o0+no)
  // of one group at plane positions [p0, p1), out[(o - o0) * cstride + p - p0].
  void (*pointwise)(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                    int64_t cstride);
  // Any other conv, one output channel o at positions [p0, p1): the general
  // path (row by row) and the stride-1 same-width path (conv.cpp explains).
  void (*conv_channel)(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out);
  void (*conv_channel_flat)(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out);
  // n elements of Add.
  void (*add_row)(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out);
  // Gemm outputs [o0, o1) over the contiguous input x of fan_in elements.
  void (*gemm)(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride);
  // Optional (nullptr: none): a non-pointwise conv's channels [c0, c1) at
  // positions [p0, p1) at once, out[(c - c0) * cstride + p - p0]; returns
  // false, having written nothing, for layers it does not take (conv.cpp then
  // goes channel by channel). The Cortex-M7 table's widened-patch product.
  bool (*conv_block)(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride);
  // Optional (nullptr: none): a non-pointwise conv's box narrower than the
  // plane at once, out in box-local C,Y,X order (compute_box); false, having
  // written nothing, for boxes it does not take (compute_box then goes row
  // by row). The Cortex-M7 table's narrow-span depthwise kernel.
  bool (*conv_box)(const LayerDesc& L, const View& v, const OutBox& b, int8_t* out) = nullptr;
};

// The portable table.
const KernelTable& portable_kernels();

// The active table: the one set_kernels chose, else the start-up default
// (the portable table on boards; on x86 hosts the best the CPU supports, or
// TS_KERNELS).
const KernelTable& kernels();

// Makes t the active table (nullptr: back to the start-up default). For
// tests and benchmarks; not thread-safe against running kernels.
void set_kernels(const KernelTable* t);

// The table called `name` ("portable"; "dsp", the Cortex-M7 DSP table, and
// "helium", the Cortex-M55 Helium table, emulated in plain C++ off the target; on x86 hosts "avx2", "vnni") if this
// build and CPU have it, else nullptr.
const KernelTable* find_kernels(const char* name);

}  // namespace core
}  // namespace ts
