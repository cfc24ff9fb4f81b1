// The handful of Armv7E-M DSP instructions the Cortex-M7 kernels use
// (src/core/arm/dsp.cpp), as inline functions. On a target with the DSP
// extension (__ARM_FEATURE_DSP, e.g. -mcpu=cortex-m7) they are the ACLE
// intrinsics of <arm_acle.h> (or one instruction of inline assembly where
// ACLE has no intrinsic); anywhere else they are plain C++ with the same
// results, so the same kernel source runs in the host test suite
// (tests/arm_dsp_kernels_test.cpp) as on the board.
//
// Halfword lanes: "lo" is bits 0-15, "hi" bits 16-31, both signed.
#pragma once

#include <stdint.h>
#include <string.h>

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
#include <arm_acle.h>
#define TS_DSP_NATIVE 1
#else
#define TS_DSP_NATIVE 0
#endif

namespace ts {
namespace core {
namespace dsp {

#if defined(__GNUC__)
#define TS_DSP_INLINE inline __attribute__((always_inline))
#else
#define TS_DSP_INLINE inline
#endif

// Four bytes from any address (the M7 allows unaligned word loads from
// normal memory; memcpy compiles to one LDR there).
TS_DSP_INLINE uint32_t ld32(const void* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
TS_DSP_INLINE void st32(void* p, uint32_t v) { memcpy(p, &v, 4); }
// Words p[off] and p[off + 1] of a word-aligned array (one LDRD on the
// target; GCC splits a 64-bit load into two LDRs).
template <int off>
TS_DSP_INLINE void ld2(const uint32_t* p, uint32_t* a, uint32_t* b) {
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
  static_assert(off >= 0 && off * 4 <= 1016, "LDRD offset");
  __asm__("ldrd %0, %1, [%2, %3]"
          : "=r"(*a), "=r"(*b)
          : "r"(p), "I"(off * 4), "m"(*reinterpret_cast<const uint32_t(*)[off + 2]>(p)));
#else
  *a = p[off];
  *b = p[off + 1];
#endif
}

TS_DSP_INLINE int32_t lo16(uint32_t v) { return int32_t(int16_t(uint16_t(v))); }
TS_DSP_INLINE int32_t hi16(uint32_t v) { return int32_t(int16_t(uint16_t(v >> 16))); }
TS_DSP_INLINE uint32_t pack16(int32_t lo, int32_t hi) { return (uint32_t(lo) & 0xFFFFu) | (uint32_t(hi) << 16); }

#if TS_DSP_NATIVE

// Bytes 0 and 2, sign-extended into the two halfwords.
TS_DSP_INLINE uint32_t sxtb16(uint32_t v) { return uint32_t(__sxtb16(int32_t(v))); }
// Bytes 1 and 3, sign-extended into the two halfwords.
TS_DSP_INLINE uint32_t sxtb16_ror8(uint32_t v) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
// acc + lo(a)*lo(b) + hi(a)*hi(b)
TS_DSP_INLINE int32_t smlad(uint32_t a, uint32_t b, int32_t acc) { return __smlad(int32_t(a), int32_t(b), acc); }
// acc + lo(a)*hi(b) + hi(a)*lo(b)
TS_DSP_INLINE int32_t smladx(uint32_t a, uint32_t b, int32_t acc) { return __smladx(int32_t(a), int32_t(b), acc); }
TS_DSP_INLINE int32_t smlabb(uint32_t a, uint32_t b, int32_t acc) { return __smlabb(int32_t(a), int32_t(b), acc); }
TS_DSP_INLINE int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) { return __smlatb(int32_t(a), int32_t(b), acc); }
TS_DSP_INLINE int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) { return __smlabt(int32_t(a), int32_t(b), acc); }
TS_DSP_INLINE int32_t smlatt(uint32_t a, uint32_t b, int32_t acc) { return __smlatt(int32_t(a), int32_t(b), acc); }
// Halfword-wise a - b (wrapping).
TS_DSP_INLINE uint32_t ssub16(uint32_t a, uint32_t b) { return uint32_t(__ssub16(int32_t(a), int32_t(b))); }
// Halfword-wise a + b (wrapping).
TS_DSP_INLINE uint32_t sadd16(uint32_t a, uint32_t b) { return uint32_t(__sadd16(int32_t(a), int32_t(b))); }
// acc + floor((a*b + 2^31) / 2^32), modulo 2^32 (the high word of the
// rounded 64-bit sum acc * 2^32 + a*b).
TS_DSP_INLINE int32_t smmlar(int32_t a, int32_t b, int32_t acc) {
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}
// w with bits [pos, pos + 8) replaced by the low byte of v.
template <int pos>
TS_DSP_INLINE uint32_t bfi8(uint32_t w, uint32_t v) {
  __asm__("bfi %0, %1, %2, #8" : "+r"(w) : "r"(v), "I"(pos));
  return w;
}
// (lo(a), lo(b)) and (hi(a), hi(b)).
TS_DSP_INLINE uint32_t pkhbt(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
TS_DSP_INLINE uint32_t pkhtb(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
  return r;
}
// Bytes 0 and 2, zero-extended into the two halfwords.
TS_DSP_INLINE uint32_t uxtb16(uint32_t v) { return __uxtb16(v); }
// Byte-wise signed maximum and minimum (SSUB8 sets a GE flag per byte, SEL
// picks by them; one asm block so nothing comes between the two).
TS_DSP_INLINE uint32_t max8(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
  return r;
}
TS_DSP_INLINE uint32_t min8(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(a), "r"(b) : "cc");
  return r;
}
// x clamped to [-128, 127].
TS_DSP_INLINE int32_t ssat8(int32_t x) { return __ssat(x, 8); }

#else

TS_DSP_INLINE uint32_t sxtb16(uint32_t v) { return pack16(int8_t(uint8_t(v)), int8_t(uint8_t(v >> 16))); }
TS_DSP_INLINE uint32_t sxtb16_ror8(uint32_t v) { return pack16(int8_t(uint8_t(v >> 8)), int8_t(uint8_t(v >> 24))); }
// The sums wrap modulo 2^32 as the instruction's do (the kernels' sums never
// leave int32, see kMaxFanIn).
TS_DSP_INLINE int32_t wrap_add(int32_t acc, int64_t p) { return int32_t(uint32_t(acc) + uint32_t(uint64_t(p))); }
TS_DSP_INLINE int32_t smlad(uint32_t a, uint32_t b, int32_t acc) {
  return wrap_add(acc, int64_t(lo16(a)) * lo16(b) + int64_t(hi16(a)) * hi16(b));
}
TS_DSP_INLINE int32_t smladx(uint32_t a, uint32_t b, int32_t acc) {
  return wrap_add(acc, int64_t(lo16(a)) * hi16(b) + int64_t(hi16(a)) * lo16(b));
}
TS_DSP_INLINE int32_t smlabb(uint32_t a, uint32_t b, int32_t acc) { return wrap_add(acc, int64_t(lo16(a)) * lo16(b)); }
TS_DSP_INLINE int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) { return wrap_add(acc, int64_t(hi16(a)) * lo16(b)); }
TS_DSP_INLINE int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) { return wrap_add(acc, int64_t(lo16(a)) * hi16(b)); }
TS_DSP_INLINE int32_t smlatt(uint32_t a, uint32_t b, int32_t acc) { return wrap_add(acc, int64_t(hi16(a)) * hi16(b)); }
TS_DSP_INLINE uint32_t ssub16(uint32_t a, uint32_t b) { return pack16(lo16(a) - lo16(b), hi16(a) - hi16(b)); }
TS_DSP_INLINE uint32_t sadd16(uint32_t a, uint32_t b) { return pack16(lo16(a) + lo16(b), hi16(a) + hi16(b)); }
TS_DSP_INLINE int32_t smmlar(int32_t a, int32_t b, int32_t acc) {
  const uint64_t v = (uint64_t(uint32_t(acc)) << 32) + uint64_t(int64_t(a) * b) + 0x80000000u;
  return int32_t(uint32_t(v >> 32));
}
template <int pos>
TS_DSP_INLINE uint32_t bfi8(uint32_t w, uint32_t v) {
  return (w & ~(0xFFu << pos)) | ((v & 0xFFu) << pos);
}
TS_DSP_INLINE uint32_t pkhbt(uint32_t a, uint32_t b) { return (a & 0xFFFFu) | (b << 16); }
TS_DSP_INLINE uint32_t pkhtb(uint32_t a, uint32_t b) { return (a >> 16) | (b & 0xFFFF0000u); }
TS_DSP_INLINE uint32_t uxtb16(uint32_t v) { return v & 0x00FF00FFu; }
TS_DSP_INLINE uint32_t max8(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int k = 0; k < 32; k += 8) {
    const int8_t x = int8_t(uint8_t(a >> k)), y = int8_t(uint8_t(b >> k));
    r |= uint32_t(uint8_t(x >= y ? x : y)) << k;
  }
  return r;
}
TS_DSP_INLINE uint32_t min8(uint32_t a, uint32_t b) {
  uint32_t r = 0;
  for (int k = 0; k < 32; k += 8) {
    const int8_t x = int8_t(uint8_t(a >> k)), y = int8_t(uint8_t(b >> k));
    r |= uint32_t(uint8_t(x >= y ? y : x)) << k;
  }
  return r;
}
TS_DSP_INLINE int32_t ssat8(int32_t x) { return x < -128 ? -128 : (x > 127 ? 127 : x); }

#endif

}  // namespace dsp
}  // namespace core
}  // namespace ts
