// Integer-only requantisation (arXiv:1712.05877, gemmlowp semantics).
//
// A real multiplier M in (0, 2^31) is stored as a Q31 mantissa m in
// [2^30, 2^31) and a power-of-two exponent `shift` (positive = left), so that
// M ~= m / 2^31 * 2^shift. Applying it to an int32 accumulator uses a
// saturating rounding doubling high multiply followed by a rounding right
// shift (round half away from zero), exactly as gemmlowp defines them.
// Portable C++17, header-only, no floating point on the execution path.
#pragma once

#include <stdint.h>

namespace ts {
namespace core {

// Always inlined (see core/requant.h: x86 variant files are compiled with
// other -m flags and must not lend the portable code their copies).
#if defined(__GNUC__)
#define TS_QMATH_INLINE inline __attribute__((always_inline))
#else
#define TS_QMATH_INLINE inline
#endif

// a * b / 2^31 rounded to nearest, ties toward +infinity (gemmlowp's
// nudge-and-truncate; the same as NEON VQRDMULH): 1.5 -> 2 but -1.5 -> -1.
// Saturates the single overflow case INT32_MIN * INT32_MIN.
TS_QMATH_INLINE int32_t sat_round_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  const int64_t ab = int64_t(a) * int64_t(b);
  const int64_t nudge = ab >= 0 ? (int64_t(1) << 30) : (1 - (int64_t(1) << 30));
  // Division (not shift) truncates toward zero; with the nudge that is
  // floor(ab / 2^31 + 1/2) for either sign (an exact -1/2 becomes 0).
  return int32_t((ab + nudge) / (int64_t(1) << 31));
}

// x / 2^exponent rounded to nearest, ties away from zero. Models use
// 0 <= exponent <= 31 (the loaders refuse shifts below -31); a larger one is
// still defined (int64 arithmetic, up to 62): 0, or -1 for INT32_MIN / 2^32.
TS_QMATH_INLINE int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  if (exponent <= 0) return x;
  if (exponent > 31) {
    const int e = exponent > 62 ? 62 : exponent;
    const int64_t mask = (int64_t(1) << e) - 1;
    const int64_t remainder = int64_t(x) & mask;
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return int32_t((int64_t(x) >> e) + (remainder > threshold ? 1 : 0));
  }
  const int32_t mask = int32_t((int64_t(1) << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// x * M with M given as (multiplier, shift). A positive shift is applied as a
// left shift before the multiply (saturating), a negative one as a rounding
// right shift after it.
TS_QMATH_INLINE int32_t multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  int64_t shifted = int64_t(x) * (int64_t(1) << left);
  if (shifted > INT32_MAX) shifted = INT32_MAX;
  if (shifted < INT32_MIN) shifted = INT32_MIN;
  return rounding_divide_by_pot(sat_round_doubling_high_mul(int32_t(shifted), multiplier), right);
}

// a + b in two's complement, wrapping instead of overflowing (signed
// overflow is undefined in C++). Add's a + b fits int32 for every valid
// model (docs/int8.md); this keeps out-of-spec parameters defined, and the
// same in every kernel variant.
TS_QMATH_INLINE int32_t wrap_add(int32_t a, int32_t b) { return int32_t(uint32_t(a) + uint32_t(b)); }

TS_QMATH_INLINE int8_t clamp_i8(int32_t v, int32_t lo, int32_t hi) {
  return int8_t(v < lo ? lo : (v > hi ? hi : v));
}

}  // namespace core
}  // namespace ts
