// Cortex-M55 kernel variants using Helium (the M-profile Vector Extension,
// MVE): see src/core/arm/helium.cpp and docs/kernels.md. The M55 firmware
// (make -C firmware BOARD=mps3-an547, KERNELS=helium there by default) makes
// them its default table. Host builds compile the same source with plain-C++
// versions of the instructions (src/core/arm/mve_ops.h), for tests only:
// find_kernels("helium").
#pragma once

#include "core/kernel_table.h"

namespace ts {
namespace core {
namespace arm {

extern const KernelTable kHeliumKernels;

}  // namespace arm
}  // namespace core
}  // namespace ts
