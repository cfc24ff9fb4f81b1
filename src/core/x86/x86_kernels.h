// x86 kernel variants (host builds only; the firmware never compiles this
// folder). avx2.cpp and vnni.cpp are compiled with their own -m flags (see
// CMakeLists.txt); select.cpp, compiled without them, checks the CPU before
// any of their code runs.
#pragma once

#include "core/kernel_table.h"

namespace ts {
namespace core {
namespace x86 {

// The start-up default: TS_KERNELS if set (portable|avx2|vnni; a variant the
// CPU lacks is refused with one line on stderr and the best supported one is
// used), else the best the CPU supports.
const KernelTable* select_kernels(const KernelTable* portable);

// "avx2" or "vnni" if the CPU supports it, else nullptr.
const KernelTable* find_kernels(const char* name);

// The tables (only to be used after checking the CPU).
extern const KernelTable kAvx2Kernels;
extern const KernelTable kVnniKernels;

// Shared by the two variant files (AVX2 instructions only).
void requant_row_avx2(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out);
void add_row_avx2(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out);

// Bytes ahead of a stream of weights read for the first time in a call
// (the weight sums of the pointwise layers, Gemm) that are prefetched: on a
// whole inference each layer's weights come from L3 or memory (MobileNetV2's
// pointwise weights are about 2 MB at input 112), and the hardware
// prefetcher alone left those loops waiting on them (vnni table: whole run
// at 112 about 4 %, at 224 about 3 % faster with it; 4 and 8 KB measured the
// same).
constexpr int32_t kPrefetchAhead = 4096;

// Paths of the AVX-512 kernels that the tests must show they reach (each
// counted once per call or per block of channels that takes it; relaxed
// atomic increments, negligible beside a call's work). tests/x86_kernels_test.cpp
// reads them.
enum class Path : int {
  kPwSignRow,    // pointwise tiles: channels requantised from an RqSignRow
  kPwRqS,        // pointwise tiles: channels without the by_sign form (their RqS)
  kFlatSignRow,  // narrow-plane depthwise: channels requantised from an RqSignRow
  kFlatRqS,      // narrow-plane depthwise: channels without the by_sign form
  kFewLanes,     // few-positions pointwise: 16 channels with per-lane requantisers
  kFewRqS,       // few-positions pointwise: 16 channels requantised one by one
  kLanesSign,    // tiny-plane depthwise: 16 channels with per-lane by_sign requantisers
  kLanesFast,    // tiny-plane depthwise: 16 channels with per-lane fast-form requantisers
  kLanesScalar,  // tiny-plane depthwise: 16 channels requantised lane by lane
  kCount
};
void count_path(Path p);
int64_t path_count(Path p);

// True if the CPU has AVX-512 VBMI (vpermb/vpermt2b) besides what the vnni
// table needs; checked once.
bool has_vbmi();

// vbmi.cpp (AVX-512 VBMI + VNNI; only after has_vbmi()): KernelTable::conv_block
// for convolutions with kernels at least 3 wide and column stride <= 2
// (depthwise 3x3, the first 3x3 conv); false for layers it does not take.
bool conv_block_vbmi(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride);

// vbmi_lanes.cpp (AVX-512 VBMI + VNNI; only after has_vbmi()): depthwise-like
// convolutions (one input channel per group) on at most 16 output positions
// with 16 channels in the lanes; false for layers it does not take.
bool conv_lanes_vbmi(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride);

// avx2_conv.cpp (AVX2): KernelTable::conv_block for convolutions 3 wide
// (dilation 1 across, column stride 1 or 2: depthwise 3x3, the first 3x3
// conv); false for layers it does not take.
bool conv_block_avx2(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride);

}  // namespace x86
}  // namespace core
}  // namespace ts
