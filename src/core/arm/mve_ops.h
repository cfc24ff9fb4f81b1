// The handful of Helium (M-profile Vector Extension, MVE) instructions the
// Cortex-M55 kernels use (src/core/arm/helium.cpp), as inline functions. On
// a target with integer MVE (__ARM_FEATURE_MVE, -mcpu=cortex-m55) they are
// the ACLE intrinsics of <arm_mve.h>; anywhere else they are plain C++ with
// the same results, lane by lane, so the same kernel source runs in the host
// test suite (tests/arm_dsp_kernels_test.cpp, the "helium" table) as on the
// board.
//
// Vectors are 128 bits: 16 int8 lanes or 4 int32 lanes. A predicate (tail
// predication, VCTP) enables the first n lanes; disabled lanes of a load are
// zero and of a store are left alone.
#pragma once

#include <stdint.h>

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#include <arm_mve.h>
#define TS_MVE_NATIVE 1
#else
#define TS_MVE_NATIVE 0
#endif

#if defined(__GNUC__)
#define TS_MVE_INLINE inline __attribute__((always_inline))
#else
#define TS_MVE_INLINE inline
#endif

namespace ts {
namespace core {
namespace mve {

#if TS_MVE_NATIVE

using i8x16 = int8x16_t;
using u8x16 = uint8x16_t;
using i32x4 = int32x4_t;
using pred = mve_pred16_t;

// The first n (saturated at 16 / 4) byte / word lanes.
TS_MVE_INLINE pred first8(uint32_t n) { return vctp8q(n); }
TS_MVE_INLINE pred first32(uint32_t n) { return vctp32q(n); }
// 16 bytes from any address; the predicated form reads only enabled lanes.
TS_MVE_INLINE i8x16 ld8(const int8_t* p) { return vldrbq_s8(p); }
TS_MVE_INLINE i8x16 ld8_z(const int8_t* p, pred m) { return vldrbq_z_s8(p, m); }
TS_MVE_INLINE i32x4 ld32x4(const int32_t* p) { return vldrwq_s32(p); }
// 4 bytes sign-extended into the word lanes (VLDRB.S32); predicated: zero past m.
TS_MVE_INLINE i32x4 ld8x4(const int8_t* p) { return vldrbq_s32(p); }
TS_MVE_INLINE i32x4 ld8x4_z(const int8_t* p, pred m) { return vldrbq_z_s32(p, m); }
// Bytes p[0], p[2], p[4], p[6] sign-extended into the word lanes (VLDRB.S32 gather).
TS_MVE_INLINE i32x4 ld8x4_s2(const int8_t* p) { return vldrbq_gather_offset_s32(p, vidupq_n_u32(0u, 2)); }
// 16 bytes to any address; predicated: only the enabled lanes.
TS_MVE_INLINE void st8(int8_t* p, i8x16 v) { vstrbq_s8(p, v); }
TS_MVE_INLINE void st8_p(int8_t* p, i8x16 v, pred m) { vstrbq_p_s8(p, v, m); }
TS_MVE_INLINE i8x16 dup8(int32_t b) { return vdupq_n_s8(int8_t(b)); }
// acc + a * b per lane (VMLA.S32 by a scalar), wrapping.
TS_MVE_INLINE i32x4 mla_n(i32x4 acc, i32x4 a, int32_t b) { return vmlaq_n_s32(acc, a, b); }
// acc + sum of a[i] * b[i] over the 16 lanes (VMLADAVA.S8), wrapping int32.
TS_MVE_INLINE int32_t dot_acc(int32_t acc, i8x16 a, i8x16 b) { return vmladavaq_s8(acc, a, b); }
TS_MVE_INLINE int32_t dot(i8x16 a, i8x16 b) { return vmladavq_s8(a, b); }
// acc + sum of the 16 lanes (VADDVA.S8).
TS_MVE_INLINE int32_t sum_acc(int32_t acc, i8x16 a) { return vaddvaq_s8(acc, a); }
// base[off[i]] = v[i] (VSTRB scatter, byte offsets).
TS_MVE_INLINE void scatter8(int8_t* base, u8x16 off, i8x16 v) { vstrbq_scatter_offset_s8(base, off, v); }
// (0, 16, 32, ..., 240): one byte per 16-byte row.
TS_MVE_INLINE u8x16 rows16() { return vshlq_n_u8(vidupq_n_u8(0u, 1), 4); }
TS_MVE_INLINE i32x4 add_n(i32x4 a, int32_t b) { return vaddq_n_s32(a, b); }
TS_MVE_INLINE i32x4 add(i32x4 a, i32x4 b) { return vaddq_s32(a, b); }
TS_MVE_INLINE i32x4 sub_n(i32x4 a, int32_t b) { return vsubq_n_s32(a, b); }
// a << s (s >= 0), wrapping (VSHL by a register) / saturating (VQSHL).
TS_MVE_INLINE i32x4 shl_n(i32x4 a, int32_t s) { return vshlq_r_s32(a, s); }
TS_MVE_INLINE i32x4 qshl_n(i32x4 a, int32_t s) { return vqshlq_r_s32(a, s); }
// Saturating rounding doubling high multiply (VQRDMULH): sat((2ab + 2^31) >> 32).
TS_MVE_INLINE i32x4 qrdmulh_n(i32x4 a, int32_t b) { return vqrdmulhq_n_s32(a, b); }
// a >> 31 per lane: -1 where a < 0, else 0.
TS_MVE_INLINE i32x4 sign(i32x4 a) { return vshrq_n_s32(a, 31); }
// Rounding shift by a register (VRSHL): s < 0 shifts right by -s, adding
// 2^(-s-1) first (in full precision).
TS_MVE_INLINE i32x4 rshl_n(i32x4 a, int32_t s) { return vrshlq_n_s32(a, s); }
TS_MVE_INLINE i32x4 dup(int32_t b) { return vdupq_n_s32(b); }
TS_MVE_INLINE i32x4 max(i32x4 a, i32x4 b) { return vmaxq_s32(a, b); }
TS_MVE_INLINE i32x4 min(i32x4 a, i32x4 b) { return vminq_s32(a, b); }
TS_MVE_INLINE i32x4 max_n(i32x4 a, int32_t b) { return vmaxq_s32(a, vdupq_n_s32(b)); }
TS_MVE_INLINE i32x4 min_n(i32x4 a, int32_t b) { return vminq_s32(a, vdupq_n_s32(b)); }
// The low byte of each word lane to p[0..3] (VSTRB.32); predicated: only
// enabled lanes.
TS_MVE_INLINE void st8x4(int8_t* p, i32x4 v) { vstrbq_s32(p, v); }
TS_MVE_INLINE void st8x4_p(int8_t* p, i32x4 v, pred m) { vstrbq_p_s32(p, v, m); }

#else

struct i8x16 {
  int8_t v[16];
};
struct u8x16 {
  uint8_t v[16];
};
struct i32x4 {
  int32_t v[4];
};
using pred = uint16_t;  // one bit per byte, as the hardware's VPR.P0

TS_MVE_INLINE pred first8(uint32_t n) { return n >= 16 ? pred(0xFFFFu) : pred((1u << n) - 1u); }
TS_MVE_INLINE pred first32(uint32_t n) { return n >= 4 ? pred(0xFFFFu) : pred((1u << (4 * n)) - 1u); }
TS_MVE_INLINE i8x16 ld8(const int8_t* p) {
  i8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = p[i];
  return r;
}
TS_MVE_INLINE i8x16 ld8_z(const int8_t* p, pred m) {
  i8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = (m >> i) & 1u ? p[i] : int8_t(0);
  return r;
}
TS_MVE_INLINE i32x4 ld32x4(const int32_t* p) { return i32x4{{p[0], p[1], p[2], p[3]}}; }
TS_MVE_INLINE i32x4 ld8x4(const int8_t* p) { return i32x4{{p[0], p[1], p[2], p[3]}}; }
TS_MVE_INLINE i32x4 ld8x4_z(const int8_t* p, pred m) {
  i32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = (m >> (4 * i)) & 1u ? p[i] : 0;
  return r;
}
TS_MVE_INLINE i32x4 ld8x4_s2(const int8_t* p) { return i32x4{{p[0], p[2], p[4], p[6]}}; }
TS_MVE_INLINE void st8(int8_t* p, i8x16 v) {
  for (int i = 0; i < 16; ++i) p[i] = v.v[i];
}
TS_MVE_INLINE void st8_p(int8_t* p, i8x16 v, pred m) {
  for (int i = 0; i < 16; ++i)
    if ((m >> i) & 1u) p[i] = v.v[i];
}
TS_MVE_INLINE i8x16 dup8(int32_t b) {
  i8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = int8_t(b);
  return r;
}
TS_MVE_INLINE i32x4 mla_n(i32x4 acc, i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) acc.v[i] = int32_t(uint32_t(acc.v[i]) + uint32_t(a.v[i]) * uint32_t(b));
  return acc;
}
TS_MVE_INLINE int32_t dot_acc(int32_t acc, i8x16 a, i8x16 b) {
  uint32_t s = uint32_t(acc);
  for (int i = 0; i < 16; ++i) s += uint32_t(int32_t(a.v[i]) * int32_t(b.v[i]));
  return int32_t(s);
}
TS_MVE_INLINE int32_t dot(i8x16 a, i8x16 b) { return dot_acc(0, a, b); }
TS_MVE_INLINE int32_t sum_acc(int32_t acc, i8x16 a) {
  uint32_t s = uint32_t(acc);
  for (int i = 0; i < 16; ++i) s += uint32_t(int32_t(a.v[i]));
  return int32_t(s);
}
TS_MVE_INLINE void scatter8(int8_t* base, u8x16 off, i8x16 v) {
  for (int i = 0; i < 16; ++i) base[off.v[i]] = v.v[i];
}
TS_MVE_INLINE u8x16 rows16() {
  u8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = uint8_t(16 * i);
  return r;
}
TS_MVE_INLINE i32x4 add_n(i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) a.v[i] = int32_t(uint32_t(a.v[i]) + uint32_t(b));
  return a;
}
TS_MVE_INLINE i32x4 add(i32x4 a, i32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = int32_t(uint32_t(a.v[i]) + uint32_t(b.v[i]));
  return a;
}
TS_MVE_INLINE i32x4 sub_n(i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) a.v[i] = int32_t(uint32_t(a.v[i]) - uint32_t(b));
  return a;
}
TS_MVE_INLINE i32x4 shl_n(i32x4 a, int32_t s) {
  for (int i = 0; i < 4; ++i) a.v[i] = int32_t(uint32_t(a.v[i]) << s);
  return a;
}
TS_MVE_INLINE i32x4 qshl_n(i32x4 a, int32_t s) {
  for (int i = 0; i < 4; ++i) {
    const int64_t v = int64_t(a.v[i]) * (int64_t(1) << s);
    a.v[i] = int32_t(v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v));
  }
  return a;
}
TS_MVE_INLINE i32x4 qrdmulh_n(i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) {
    if (a.v[i] == INT32_MIN && b == INT32_MIN) {
      a.v[i] = INT32_MAX;
      continue;
    }
    a.v[i] = int32_t((2 * int64_t(a.v[i]) * b + (int64_t(1) << 31)) >> 32);
  }
  return a;
}
TS_MVE_INLINE i32x4 sign(i32x4 a) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] < 0 ? -1 : 0;
  return a;
}
TS_MVE_INLINE i32x4 rshl_n(i32x4 a, int32_t s) {
  for (int i = 0; i < 4; ++i) {
    if (s >= 0) {
      a.v[i] = int32_t(uint32_t(a.v[i]) << s);
    } else {
      const int32_t e = -s;
      a.v[i] = int32_t((int64_t(a.v[i]) + (int64_t(1) << (e - 1))) >> e);
    }
  }
  return a;
}
TS_MVE_INLINE i32x4 dup(int32_t b) { return i32x4{{b, b, b, b}}; }
TS_MVE_INLINE i32x4 max(i32x4 a, i32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
  return a;
}
TS_MVE_INLINE i32x4 min(i32x4 a, i32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
  return a;
}
TS_MVE_INLINE i32x4 max_n(i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] > b ? a.v[i] : b;
  return a;
}
TS_MVE_INLINE i32x4 min_n(i32x4 a, int32_t b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] < b ? a.v[i] : b;
  return a;
}
TS_MVE_INLINE void st8x4(int8_t* p, i32x4 v) {
  for (int i = 0; i < 4; ++i) p[i] = int8_t(v.v[i]);
}
TS_MVE_INLINE void st8x4_p(int8_t* p, i32x4 v, pred m) {
  for (int i = 0; i < 4; ++i)
    if ((m >> (4 * i)) & 1u) p[i] = int8_t(v.v[i]);
}

#endif

}  // namespace mve
}  // namespace core
}  // namespace ts
