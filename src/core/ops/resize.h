// Resize's mode, as a quantised layer carries it (LayerDesc has no field of
// its own for it): kh the interpolation, kw the coordinate transform, dh the
// rounding of nearest. docs/int8.md defines the arithmetic; ops/resize.cpp
// computes it; the quantiser and the ONNX importer name these codes.
#pragma once

#include <stdint.h>

namespace ts {
namespace core {
namespace resize {

enum Interp : int32_t { kNearest = 1, kLinear = 2 };
enum Coord : int32_t { kAsymmetric = 1, kHalfPixel = 2, kAlignCorners = 3, kPytorchHalfPixel = 4 };
enum Round : int32_t { kFloor = 1, kCeil = 2, kRoundPreferFloor = 3, kRoundPreferCeil = 4 };

// Bilinear weights are fractions of 256 (kFracBits); a product of two is
// 1 << 16.
constexpr int32_t kFracBits = 8;

// The source coordinate of output index o along an axis of n inputs and m
// outputs, as the fraction num / den (den > 0).
inline void source(int32_t coord, int32_t n, int32_t m, int32_t o, int64_t* num, int64_t* den) {
  switch (coord) {
    case kHalfPixel:
    case kPytorchHalfPixel:
      if (coord == kPytorchHalfPixel && m == 1) {
        *num = 0;
        *den = 1;
        return;
      }
      *num = (2 * int64_t(o) + 1) * n - m;
      *den = 2 * int64_t(m);
      return;
    case kAlignCorners:
      *num = m > 1 ? int64_t(o) * (n - 1) : 0;
      *den = m > 1 ? m - 1 : 1;
      return;
    default:  // kAsymmetric
      *num = int64_t(o) * n;
      *den = m;
      return;
  }
}

inline int64_t floor_div64(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Nearest: the input index output o copies, clamped to [0, n).
inline int32_t nearest(int32_t coord, int32_t rounding, int32_t n, int32_t m, int32_t o) {
  int64_t num, den;
  source(coord, n, m, o, &num, &den);
  int64_t i;
  switch (rounding) {
    case kCeil: i = -floor_div64(-num, den); break;
    case kRoundPreferFloor: i = -floor_div64(den - 2 * num, 2 * den); break;  // ceil(x - 1/2)
    case kRoundPreferCeil: i = floor_div64(2 * num + den, 2 * den); break;    // floor(x + 1/2)
    default: i = floor_div64(num, den); break;
  }
  return int32_t(i < 0 ? 0 : i >= n ? n - 1 : i);
}

// Linear: the two input indices i0 <= i1 output o blends and the weight of
// i1 in 256ths (the source coordinate clamped to [0, n - 1]).
inline void linear(int32_t coord, int32_t n, int32_t m, int32_t o, int32_t* i0, int32_t* i1, int32_t* w1) {
  int64_t num, den;
  source(coord, n, m, o, &num, &den);
  if (num < 0) num = 0;
  int64_t i = num / den;
  int64_t frac = num - i * den;
  if (i >= n - 1) {
    i = n - 1;
    frac = 0;
  }
  *i0 = int32_t(i);
  *i1 = int32_t(i + 1 < n ? i + 1 : n - 1);
  // round(frac / den * 256), halves up
  *w1 = int32_t((frac * (2 << kFracBits) + den) / (2 * den));
}

}  // namespace resize
}  // namespace core
}  // namespace ts
