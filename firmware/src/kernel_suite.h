// A fixed set of int8 layers, one per kernel kind, with MobileNetV2 shapes
// at 112x112 and deterministic pseudo-random data. The firmware's selftest
// computes them on the Cortex-M7 (and measures instructions per MAC); the
// host test (tests/firmware_test.cpp) computes the same layers with the same
// src/core code and compares the output checksums the firmware prints.
//
// Header-only, portable C++17 (no heap): both sides include it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/crc32.h"
#include "core/layer.h"

namespace ts {
namespace suite {

struct Spec {
  const char* name;
  const char* kind;  // conv | depthwise | pointwise | linear | add | pool | other
  core::QOp op;
  core::Dims in, out;
  int32_t k, stride, pad, groups;
  int32_t shift;  // requantisation exponent (outputs land mostly in range)
};

// The first convolution, a depthwise and a projection of an inverted
// residual block, and the classifier, as in MobileNetV2 at 112x112.
constexpr Spec kSpecs[] = {
    {"conv3x3_s2_3to32", "conv", core::QOp::Conv, {3, 112, 112}, {32, 56, 56}, 3, 2, 1, 1, -8},
    {"dw3x3_s1_144", "depthwise", core::QOp::Conv, {144, 28, 28}, {144, 28, 28}, 3, 1, 1, 144, -8},
    {"pw1x1_144to32", "pointwise", core::QOp::Conv, {144, 28, 28}, {32, 28, 28}, 1, 1, 0, 1, -9},
    {"fc_1280to1000", "linear", core::QOp::Gemm, {1280, 1, 1}, {1000, 1, 1}, 1, 1, 0, 1, -11},
    // Added with the Cortex-M7 DSP kernels (docs/kernels.md): the stride-2
    // depthwise, the residual Add, the global pool and a Pad (no weights).
    {"dw3x3_s2_64", "depthwise", core::QOp::Conv, {64, 56, 56}, {64, 28, 28}, 3, 2, 1, 64, -8},
    {"add_32x28x28", "add", core::QOp::Add, {32, 28, 28}, {32, 28, 28}, 1, 1, 0, 1, -19},
    {"gap_1280x7x7", "pool", core::QOp::GlobalAvgPool, {1280, 7, 7}, {1280, 1, 1}, 1, 1, 0, 1, -6},
    {"pad_32x28x28", "other", core::QOp::Pad, {32, 28, 28}, {32, 30, 30}, 1, 1, 1, 1, 0},
    // Added with the second round of M7 work: MobileNetV2's small late maps
    // (at 112: 7x7 and 4x4), where per-channel costs dominate, and the
    // 16-channel pointwise expansion of its first block.
    {"dw3x3_s1_576_7x7", "depthwise", core::QOp::Conv, {576, 7, 7}, {576, 7, 7}, 3, 1, 1, 576, -8},
    {"dw3x3_s1_960_4x4", "depthwise", core::QOp::Conv, {960, 4, 4}, {960, 4, 4}, 3, 1, 1, 960, -8},
    {"pw1x1_16to96", "pointwise", core::QOp::Conv, {16, 28, 28}, {96, 28, 28}, 1, 1, 0, 1, -9},
};
constexpr int kCount = int(sizeof kSpecs / sizeof kSpecs[0]);

// xorshift32: the same sequence on every platform.
struct Rng {
  uint32_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
  int8_t i8() { return int8_t(int32_t(next() >> 24) - 128); }
};

// Bump allocation from a caller's block; nullptr when it is exhausted.
struct Bump {
  uint8_t* base;
  size_t size, used;
  void* take(size_t n) {
    used = (used + 7u) & ~size_t(7);
    if (n > size - used) return nullptr;
    void* p = base + used;
    used += n;
    return p;
  }
};

struct Layer {
  core::LayerDesc desc;
  const int8_t* input = nullptr;  // whole input tensor, C-H-W
  const int8_t* input2 = nullptr;  // Add's second operand
  int32_t n_out = 0;
  int32_t oc_count = 0;
  uint64_t macs = 0;  // multiply-accumulates of the whole layer
};

inline uint64_t macs_of(const core::LayerDesc& L) { return core::range_macs(L, 0, L.out.size()); }

// Writes n bytes to flash-resident memory at dst; false on a flash error.
// nullptr: plain stores (the host, and any flash that is RAM).
using FlashPut = bool (*)(void* dst, const void* src, size_t n);

// Builds case i: the input goes to `ram` (a board's arena), weights and
// per-channel data to `flash` (read in place, as from a fragment). A board
// whose flash needs programming passes `put`; the bytes are the same.
inline bool build(int i, Bump& ram, Bump& flash, Layer* out, FlashPut put = nullptr) {
  if (i < 0 || i >= kCount) return false;
  const Spec& s = kSpecs[i];
  Rng rng{0x9E3779B9u ^ uint32_t(i * 7919 + 1)};
  core::LayerDesc L;
  L.op = s.op;
  L.n_inputs = 1;
  L.in[0] = s.in;
  L.out = s.out;
  L.in_zp[0] = -3;
  L.out_zp = 5;
  L.act_min = -128;
  L.act_max = 127;
  L.kh = L.kw = s.k;
  L.sh = L.sw = s.stride;
  L.pad_t = L.pad_l = L.pad_b = L.pad_r = s.pad;
  L.groups = s.groups;
  const int32_t oc = s.out.c;
  if (s.op != core::QOp::Conv && s.op != core::QOp::Gemm) {
    // No weights: inputs, and the op's own requantisation.
    int8_t* x = static_cast<int8_t*>(ram.take(size_t(s.in.size())));
    int8_t* x2 = s.op == core::QOp::Add ? static_cast<int8_t*>(ram.take(size_t(s.in.size()))) : nullptr;
    if (!x || (s.op == core::QOp::Add && !x2)) return false;
    for (int32_t j = 0; j < s.in.size(); ++j) x[j] = rng.i8();
    if (x2)
      for (int32_t j = 0; j < s.in.size(); ++j) x2[j] = rng.i8();
    L.groups = 1;
    L.kh = L.kw = 1;
    L.sh = L.sw = 1;
    if (s.op == core::QOp::Add) {
      L.n_inputs = 2;
      L.in[1] = s.in;
      L.in_zp[1] = 7;
      L.in_mult[0] = int32_t((1u << 30) | (rng.next() >> 2));
      L.in_mult[1] = int32_t((1u << 30) | (rng.next() >> 2));
      L.in_shift[0] = -2;
      L.in_shift[1] = -3;
      L.left_shift = 20;
    }
    L.out_mult = int32_t((1u << 30) | (rng.next() >> 2));
    L.out_shift = s.shift;
    out->desc = L;
    out->input = x;
    out->input2 = x2;
    out->n_out = s.out.size();
    out->oc_count = 0;
    out->macs = macs_of(L);
    return true;
  }
  const int32_t per = s.op == core::QOp::Gemm ? s.in.size() : (s.in.c / s.groups) * s.k * s.k;
  int8_t* x = static_cast<int8_t*>(ram.take(size_t(s.in.size())));
  int8_t* w = static_cast<int8_t*>(flash.take(size_t(oc) * size_t(per)));
  int32_t* bias = static_cast<int32_t*>(flash.take(size_t(oc) * 4u));
  int32_t* mult = static_cast<int32_t*>(flash.take(size_t(oc) * 4u));
  int32_t* shift = static_cast<int32_t*>(flash.take(size_t(oc) * 4u));
  if (!x || !w || !bias || !mult || !shift) return false;
  for (int32_t j = 0; j < s.in.size(); ++j) x[j] = rng.i8();
  const size_t mark = ram.used;
  // With `put`, the per-channel values are made in RAM first (they are
  // interleaved in the generator's order) and written after the weights.
  int32_t* b_out = put ? static_cast<int32_t*>(ram.take(size_t(oc) * 12u)) : bias;
  if (!b_out) return false;
  int32_t* m_out = put ? b_out + oc : mult;
  int32_t* s_out = put ? b_out + 2 * oc : shift;
  if (!put) {
    for (int32_t j = 0; j < oc * per; ++j) w[j] = rng.i8();
  } else {
    int8_t chunk[256];
    for (int32_t j = 0; j < oc * per; j += int32_t(sizeof chunk)) {
      const int32_t n = oc * per - j < int32_t(sizeof chunk) ? oc * per - j : int32_t(sizeof chunk);
      for (int32_t k = 0; k < n; ++k) chunk[k] = rng.i8();
      if (!put(w + j, chunk, size_t(n))) return false;
    }
  }
  for (int32_t o = 0; o < oc; ++o) {
    b_out[o] = int32_t(rng.next() % 4001u) - 2000;
    m_out[o] = int32_t((1u << 30) | (rng.next() >> 2));  // [2^30, 2^31)
    s_out[o] = s.shift - int32_t(rng.next() % 2u);
  }
  if (put) {
    if (!put(bias, b_out, size_t(oc) * 4u) || !put(mult, m_out, size_t(oc) * 4u) ||
        !put(shift, s_out, size_t(oc) * 4u))
      return false;
    ram.used = mark;
  }
  L.weights = w;
  L.bias = bias;
  L.mult = mult;
  L.shift = shift;
  L.oc_base = 0;
  out->desc = L;
  out->input = x;
  out->n_out = s.out.size();
  out->oc_count = oc;
  out->macs = macs_of(L);
  return true;
}

// Copies the window `b` of a whole C-H-W tensor into dst (as a board holds
// only the inputs it received) and returns the View over it.
inline core::View window(const int8_t* whole, const core::Dims& X, const core::Box& b, int8_t* dst) {
  core::View v;
  v.data = dst;
  v.c0 = b.c0;
  v.nc = b.c1 - b.c0;
  v.h0 = b.h0;
  v.nh = b.h1 - b.h0;
  size_t k = 0;
  for (int32_t c = b.c0; c < b.c1; ++c)
    for (int32_t y = b.h0; y < b.h1; ++y)
      for (int32_t x = 0; x < X.w; ++x) dst[k++] = whole[(size_t(c) * size_t(X.h) + size_t(y)) * size_t(X.w) + size_t(x)];
  return v;
}

// The whole-input views of a layer (one per operand).
inline int views(const Layer& lay, core::View* v) {
  v[0] = core::View{lay.input, 0, lay.desc.in[0].c, 0, lay.desc.in[0].h};
  if (lay.desc.n_inputs > 1) v[1] = core::View{lay.input2, 0, lay.desc.in[1].c, 0, lay.desc.in[1].h};
  return lay.desc.n_inputs;
}

// Output run r of n equal shares of [0, total) (the last takes the rest).
inline void share(int32_t total, int n, int r, int32_t* begin, int32_t* end) {
  const int32_t per = total / n;
  *begin = per * r;
  *end = r == n - 1 ? total : per * (r + 1);
}

}  // namespace suite
}  // namespace ts
