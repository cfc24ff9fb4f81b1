// Start-up choice of the x86 kernel table by CPU feature (compiled without
// extra -m flags, so it runs on any x86-64).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "core/arm/dsp_kernels.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

namespace {

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool has_vnni() {
  __builtin_cpu_init();
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

}  // namespace

namespace {
std::atomic<int64_t> path_counts[int(Path::kCount)];
}  // namespace

void count_path(Path p) { path_counts[int(p)].fetch_add(1, std::memory_order_relaxed); }
int64_t path_count(Path p) { return path_counts[int(p)].load(std::memory_order_relaxed); }

bool has_vbmi() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return has_vnni() && __builtin_cpu_supports("avx512vbmi");
  }();
  return yes;
}

const KernelTable* find_kernels(const char* name) {
  if (strcmp(name, "avx2") == 0) return has_avx2() ? &kAvx2Kernels : nullptr;
  if (strcmp(name, "vnni") == 0) return has_vnni() ? &kVnniKernels : nullptr;
  return nullptr;
}

const KernelTable* select_kernels(const KernelTable* portable) {
  const KernelTable* best = has_vnni() ? &kVnniKernels : has_avx2() ? &kAvx2Kernels : portable;
  // One switch chooses the table; the name some write for forcing the AVX2
  // path elsewhere is not a second one (a line says so rather than nothing).
  if (getenv("TS_X86_ISA"))
    fprintf(stderr, "TS_X86_ISA is not read; TS_KERNELS=avx2 forces the AVX2 kernels (portable|avx2|vnni|dsp)\n");
  const char* want = getenv("TS_KERNELS");
  if (!want || !*want) return best;
  if (strcmp(want, "portable") == 0) return portable;
  // The Cortex-M7 DSP table, its instructions emulated in C++ (slow; for
  // running the host test suite through the board's kernels).
  if (strcmp(want, "dsp") == 0) return &arm::kDspKernels;
  if (const KernelTable* t = find_kernels(want)) return t;
  fprintf(stderr, "TS_KERNELS=%s: not available on this CPU or unknown (portable|avx2|vnni|dsp); using %s\n", want,
          best->name);
  return best;
}

}  // namespace x86
}  // namespace core
}  // namespace ts
