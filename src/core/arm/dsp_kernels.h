// Cortex-M7 kernel variants using the Armv7E-M DSP extension (dual 16-bit
// multiply-accumulate SMLAD, sign-extend-and-pack SXTB16): see
// src/core/arm/dsp.cpp and docs/kernels.md. The firmware builds them in and
// makes them the default (make -C firmware KERNELS=dsp, the default;
// KERNELS=portable keeps the portable table as the default). Host builds
// compile the same source with plain-C++ versions of the instructions
// (src/core/arm/dsp_ops.h), for tests only: find_kernels("dsp").
#pragma once

#include "core/kernel_table.h"

namespace ts {
namespace core {
namespace arm {

extern const KernelTable kDspKernels;

// Exposed for tests: the fast requantiser's domain (multipliers in
// [2^30, 2^31), right shifts 2..31; Add's form also right shift 1) and its
// value there.
bool fast_requant_ok(int32_t mult, int32_t shift);
bool fast_requant_ok_any(int32_t mult, int32_t shift);
int32_t fast_scale(int32_t x, int32_t mult, int32_t shift);
// The pointwise kernel's requantiser of doubled sums: for acc with
// |acc| < 2^30, Requant(mult, shift, zp, -128, 127)(acc) computed from
// 2 * acc with SMMLAR, when *ok (multipliers in [2^30, 2^31), right shifts
// 1 to 21); else *ok is false and the result 0.
int32_t fast_requant2(int32_t acc, int32_t mult, int32_t shift, int32_t zp, bool* ok);
// Add's operand scaler of doubled values: Requant(mult, shift, 0, ...).scale(x)
// from 2 * x for |x| <= 255 * 2^20, when *ok (multipliers in [2^30, 2^31),
// shifts 0 to -21).
int32_t fast_op_scale(int32_t x, int32_t mult, int32_t shift, bool* ok);

// Calls the depthwise 3x3 kernel (src/core/arm/dsp_depthwise.cpp) took, by
// entry: runs of plane positions (conv_block, conv_channel) and boxes
// narrower than the plane (conv_box, from compute_box). Counted for the
// tests, which check that they reach both.
struct DwCalls {
  uint32_t runs = 0, boxes = 0;
};
extern DwCalls dw_calls;

}  // namespace arm
}  // namespace core
}  // namespace ts
