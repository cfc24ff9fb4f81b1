// Small helpers shared by the op files (src/core/ops/*.cpp). Internal to the
// kernels; portable C++17, header-only.
#pragma once

#include <stdint.h>

#include "core/layer.h"
#include "core/op.h"

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
static inline DataLayout no_arrays(const LayerDesc&, int32_t) { return DataLayout{}; }
static inline Access same_access(const LayerDesc&, int) { return Access{}; }

static inline Why ok() { return Why{}; }
static inline Why refuse(const char* field, int64_t value, const char* what) { return Why{field, value, what}; }

// Output length of a window of k taps, stride s, dilation d over n + p0 + p1.
static inline int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  const int64_t span = n + p0 + p1 - ((k - 1) * d + 1);
  return span < 0 ? 0 : span / s + 1;
}

// The output size a window of the descriptor's geometry gives (dilation
// dh, dw; 1 for pools), or the field that disagrees.
static inline Why window_agrees(const LayerDesc& L, int32_t dh, int32_t dw) {
  const Dims& x = L.in[0];
  static const char* const kWhat = "output size disagrees with the window geometry";
  if (L.out.h != window_out(x.h, L.kh, L.sh, dh, L.pad_t, L.pad_b)) return refuse("out.h", L.out.h, kWhat);
  if (L.out.w != window_out(x.w, L.kw, L.sw, dw, L.pad_l, L.pad_r)) return refuse("out.w", L.out.w, kWhat);
  return ok();
}

}  // namespace opk
}  // namespace core
}  // namespace ts
