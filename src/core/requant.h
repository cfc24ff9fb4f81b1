// Requantisation of an int32 accumulator to int8, shared by the op kernels.
//
// multiply_by_quantized_multiplier (qmath.h) by (mult, shift), + zero point,
// clamp to the fused activation; with the per-channel work done once and
// fewer operations per value, for the same result on every input
// (requantising is a large share of the time of layers with few input
// channels). Why it is the same:
//  - qmath's doubling high multiply adds a nudge (2^30, or 1 - 2^30 when the
//    product is negative) and divides by 2^31 truncating toward zero; both
//    cases equal h = floor((x*m + 2^30) / 2^31). Its one saturating case
//    (x = m = INT32_MIN) needs m = INT32_MIN, which goes to qmath itself, as
//    do shifts beyond its range.
//  - its rounding right shift by e >= 1 (half away from zero) equals
//    floor((h + 2^(e-1) - [h < 0]) / 2^e), and two nested floor divisions
//    are one: floor((t + (2^(e-1) - [t < 0]) * 2^31) / 2^(31+e)) with
//    t = x*m + 2^30 (t < 0 exactly when h < 0). All of it fits int64.
//  - a positive shift is qmath's saturating left shift, then e = 0.
// Portable C++17, header-only.
#pragma once

#include <stdint.h>

#include "core/qmath.h"

namespace ts {
namespace core {

// Requant's members are always inlined: the x86 variant files are compiled
// with other -m flags, and an out-of-line copy of an inline function from one
// of them could be the one the linker keeps for the portable code too.
#if defined(__GNUC__)
#define TS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define TS_ALWAYS_INLINE inline
#endif

struct Requant {
  int32_t m = 0, shift = 0, left = 0, total = 31;
  int64_t half = 0, neg = 0;  // 2^(e-1) * 2^31 and -2^31 when e >= 1, else 0
  int32_t zp = 0, lo = -128, hi = 127;
  bool exact = false;  // use qmath directly

  Requant() = default;
  TS_ALWAYS_INLINE Requant(int32_t mult, int32_t sh, int32_t zero, int32_t lo_, int32_t hi_)
      : m(mult), shift(sh), zp(zero), lo(lo_), hi(hi_) {
    exact = mult == INT32_MIN || sh < -31;
    left = sh > 0 ? sh : 0;
    const int32_t e = sh < 0 ? -sh : 0;
    total = 31 + e;
    half = e > 0 ? int64_t(1) << (e + 30) : 0;
    neg = e > 0 ? -(int64_t(1) << 31) : 0;
  }
  TS_ALWAYS_INLINE int32_t scale(int32_t x) const {
    if (exact) return multiply_by_quantized_multiplier(x, m, shift);
    if (left) {
      const int64_t v = int64_t(x) * (int64_t(1) << left);
      x = int32_t(v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v));
    }
    const int64_t t = int64_t(x) * m + (int64_t(1) << 30);
    return int32_t((t + half + ((t >> 63) & neg)) >> total);
  }
  TS_ALWAYS_INLINE int8_t operator()(int32_t acc) const {
    // int64: a saturated scale plus the zero point must not wrap.
    const int64_t r = int64_t(scale(acc)) + zp;
    return int8_t(r < lo ? lo : (r > hi ? hi : r));
  }
};

TS_ALWAYS_INLINE int8_t requant(int32_t acc, int32_t m, int32_t s, int32_t zp, int32_t lo, int32_t hi) {
  return Requant(m, s, zp, lo, hi)(acc);
}

}  // namespace core
}  // namespace ts
