// Small helpers shared by the op files (src/core/ops/*.cpp). Internal to the
// kernels; portable C++17, header-only.
#pragma once

#include <stdint.h>

#include "core/layer.h"

namespace ts {
namespace core {
namespace opk {

static inline int32_t mini(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t maxi(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t floor_div(int32_t a, int32_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static inline int32_t ceil_div(int32_t a, int32_t b) { return -floor_div(-a, b); }

static inline bool same(const Dims& a, const Dims& b) { return a.c == b.c && a.h == b.h && a.w == b.w; }

// Row y of channel c of a full-width window whose rows are W wide.
static inline const int8_t* row_ptr(const View& v, int32_t W, int32_t c, int32_t y) {
  return v.data + (int64_t(c - v.c0) * v.nh + (y - v.h0)) * W;
}

// Rows [h0,h1) of the input that output rows [oy0, oy1) read with a window of
// k taps, stride s, dilation d and top padding p, clipped to the input.
static inline void window_rows(int32_t oy0, int32_t oy1, int32_t k, int32_t s, int32_t d, int32_t p, int32_t H,
                        int32_t* h0, int32_t* h1) {
  *h0 = maxi(0, oy0 * s - p);
  *h1 = mini(H, (oy1 - 1) * s - p + (k - 1) * d + 1);
  if (*h1 < *h0) *h1 = *h0;
}

// The same channels and rows as the output box: elementwise ops.
static inline Box same_box(const OutBox& b) { return Box{b.c0, b.c1, b.y0, b.y1}; }

static inline bool no_data(const LayerDesc&) { return true; }
static inline uint64_t one_mac(const LayerDesc&) { return 1; }

}  // namespace opk
}  // namespace core
}  // namespace ts
