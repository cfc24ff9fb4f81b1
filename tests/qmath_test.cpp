// Fixed-point requantisation primitives (src/core/qmath.h) and the host-side
// quantize_multiplier (src/model/qgraph.h).
//
// Three kinds of checks:
//  1. Known values worked out by hand, including the rounding direction at
//     exact ties and the single saturating case.
//  2. Randomised comparison against references written here with 128-bit
//     integer arithmetic:
//       - an exact model of the two-step gemmlowp rounding (bit-exact), and
//       - the exact rational x * M_q (M_q = mult * 2^(shift-31)), for which we
//         verify the documented error bound of the double rounding:
//           |result - x*M_q| <= 1/2 + 2^-(r+1)        (r = right shift)
//         and that result == round(x*M_q) whenever x*M_q is further than
//         2^-(r+1) from a half-integer. Against the real multiplier M (long
//         double) the bound gains |x| * |M - M_q| <= |x| * M * 2^-31.
//  3. quantize_multiplier edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "core/qmath.h"
#include "model/graph.h"
#include "model/qgraph.h"

namespace {

using ts::core::multiply_by_quantized_multiplier;
using ts::core::rounding_divide_by_pot;
using ts::core::sat_round_doubling_high_mul;
using i128 = __int128;

constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();

// floor(n / d) for d > 0, on 128-bit integers.
i128 floor_div(i128 n, i128 d) {
  i128 q = n / d;
  if ((n % d != 0) && (n < 0)) --q;
  return q;
}

// Reference SRDHM: nearest integer to a*b/2^31, ties toward +infinity
// (what gemmlowp's nudge-and-truncate and NEON's VQRDMULH compute), and the
// one overflow saturated.
int32_t ref_srdhm(int32_t a, int32_t b) {
  const i128 v = floor_div(i128(a) * b * 2 + (i128(1) << 31), i128(1) << 32);
  return v > kMax ? kMax : int32_t(v);
}

// Reference rounding divide: nearest integer to x/2^e, ties away from zero.
int32_t ref_rdbp(int32_t x, int e) {
  if (e == 0) return x;
  const i128 mag = x < 0 ? -i128(x) : i128(x);
  const i128 r = (mag + (i128(1) << (e - 1))) >> e;
  return int32_t(x < 0 ? -r : r);
}

int32_t ref_mbqm(int32_t x, int32_t m, int shift) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  i128 xs = i128(x) << left;
  if (xs > kMax) xs = kMax;
  if (xs < kMin) xs = kMin;
  return ref_rdbp(ref_srdhm(int32_t(xs), m), right);
}

// ---------------------------------------------------------------- known values

TEST(QMath, RoundingDivideByPotTiesAwayFromZero) {
  // x / 2^e with exact halves: positive ties go up, negative ties go down.
  EXPECT_EQ(rounding_divide_by_pot(1, 1), 1);    //  0.5 ->  1
  EXPECT_EQ(rounding_divide_by_pot(-1, 1), -1);  // -0.5 -> -1
  EXPECT_EQ(rounding_divide_by_pot(5, 1), 3);    //  2.5 ->  3
  EXPECT_EQ(rounding_divide_by_pot(-5, 1), -3);  // -2.5 -> -3
  EXPECT_EQ(rounding_divide_by_pot(6, 2), 2);    //  1.5 ->  2
  EXPECT_EQ(rounding_divide_by_pot(-6, 2), -2);  // -1.5 -> -2
  EXPECT_EQ(rounding_divide_by_pot(-2, 2), -1);  // -0.5 -> -1
  EXPECT_EQ(rounding_divide_by_pot(2, 2), 1);    //  0.5 ->  1
  // Not ties: nearest.
  EXPECT_EQ(rounding_divide_by_pot(7, 2), 2);    //  1.75
  EXPECT_EQ(rounding_divide_by_pot(-7, 2), -2);  // -1.75
  EXPECT_EQ(rounding_divide_by_pot(5, 2), 1);    //  1.25
  EXPECT_EQ(rounding_divide_by_pot(-5, 2), -1);  // -1.25
  EXPECT_EQ(rounding_divide_by_pot(-4, 1), -2);
  // Exponent 0 is the identity; the extremes of the range.
  EXPECT_EQ(rounding_divide_by_pot(-12345, 0), -12345);
  EXPECT_EQ(rounding_divide_by_pot(kMin, 31), -1);  // exactly -1
  EXPECT_EQ(rounding_divide_by_pot(kMax, 31), 1);   // 0.99999...
  EXPECT_EQ(rounding_divide_by_pot(kMin, 1), -(1 << 30));
  EXPECT_EQ(rounding_divide_by_pot(kMax, 1), 1 << 30);  // 2^30 - 0.5 -> away
  EXPECT_EQ(rounding_divide_by_pot(1 << 30, 31), 1);    // 0.5 -> 1
  EXPECT_EQ(rounding_divide_by_pot(-(1 << 30), 31), -1);
  EXPECT_EQ(rounding_divide_by_pot((1 << 30) - 1, 31), 0);
}

TEST(QMath, SatRoundDoublingHighMulKnownValues) {
  // The single overflow: (-1) * (-1) in Q31 would be +1.
  EXPECT_EQ(sat_round_doubling_high_mul(kMin, kMin), kMax);
  // (2^31-1)^2 / 2^31 = 2^31 - 2 + 2^-31 -> 2^31 - 2.
  EXPECT_EQ(sat_round_doubling_high_mul(kMax, kMax), kMax - 1);
  // -2^31 * (2^31-1) / 2^31 is exact.
  EXPECT_EQ(sat_round_doubling_high_mul(kMin, kMax), -kMax);
  EXPECT_EQ(sat_round_doubling_high_mul(kMax, kMin), -kMax);
  EXPECT_EQ(sat_round_doubling_high_mul(1 << 30, 1 << 30), 1 << 29);
  EXPECT_EQ(sat_round_doubling_high_mul(0, kMin), 0);
  // Ties: gemmlowp nudges by +2^30 for ab >= 0 and by 1-2^30 for ab < 0,
  // then truncates; that is round-half-UP (toward +inf) for both signs, the
  // same as NEON VQRDMULH. It is NOT half-away-from-zero for negatives.
  EXPECT_EQ(sat_round_doubling_high_mul(1, 1 << 30), 1);    //  0.5 ->  1
  EXPECT_EQ(sat_round_doubling_high_mul(-1, 1 << 30), 0);   // -0.5 ->  0
  EXPECT_EQ(sat_round_doubling_high_mul(3, 1 << 30), 2);    //  1.5 ->  2
  EXPECT_EQ(sat_round_doubling_high_mul(-3, 1 << 30), -1);  // -1.5 -> -1
  EXPECT_EQ(sat_round_doubling_high_mul(-5, 1 << 30), -2);  // -2.5 -> -2
  // Just off the tie rounds to nearest.
  EXPECT_EQ(sat_round_doubling_high_mul(-3, (1 << 30) + 1), -2);  // -1.5000000014
  EXPECT_EQ(sat_round_doubling_high_mul(3, (1 << 30) - 1), 1);    //  1.4999999986
}

TEST(QMath, MultiplyByQuantizedMultiplierKnownValues) {
  // M = 1 is (2^30, shift 1): identity, including where x*2 saturates (the
  // SRDHM of INT32_MAX by 1/2 rounds back up to 2^30).
  for (int32_t x : {0, 1, -1, 127, -128, 1000000, -1000000, (1 << 30) - 1, -(1 << 30)})
    EXPECT_EQ(multiply_by_quantized_multiplier(x, 1 << 30, 1), x) << x;
  EXPECT_EQ(multiply_by_quantized_multiplier(1 << 30, 1 << 30, 1), 1 << 30);
  // Beyond 2^30 the left shift saturates: M >= 1 is only exact for |x| < 2^30.
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax, 1 << 30, 1), 1 << 30);
  EXPECT_EQ(multiply_by_quantized_multiplier(kMin, 1 << 30, 1), kMin / 2);
  // M = 1/2 = (2^30, 0): the tie is decided by SRDHM (half up).
  EXPECT_EQ(multiply_by_quantized_multiplier(3, 1 << 30, 0), 2);
  EXPECT_EQ(multiply_by_quantized_multiplier(-3, 1 << 30, 0), -1);
  // M = 1/4 = (2^30, -1): SRDHM halves exactly for even x, then the
  // rounding shift decides ties away from zero.
  EXPECT_EQ(multiply_by_quantized_multiplier(6, 1 << 30, -1), 2);    //  1.5 ->  2
  EXPECT_EQ(multiply_by_quantized_multiplier(-6, 1 << 30, -1), -2);  // -1.5 -> -2
  EXPECT_EQ(multiply_by_quantized_multiplier(-2, 1 << 30, -1), -1);  // -0.5 -> -1
  // Double rounding: x = -3, M = 1/4: SRDHM gives -1.5 -> -1, then -1/2 ->
  // -1 (away). The exact value is -0.75 -> -1 anyway; x = -1 gives -0.25:
  // SRDHM(-1, 2^30) = 0 -> 0.
  EXPECT_EQ(multiply_by_quantized_multiplier(-1, 1 << 30, -1), 0);
  // M = 3 = (3*2^29, shift 2).
  EXPECT_EQ(multiply_by_quantized_multiplier(-7, 3 << 29, 2), -21);
  // Largest right shift.
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax, kMax, -31), 1);  // ~0.99999
  EXPECT_EQ(multiply_by_quantized_multiplier(kMin, 1 << 30, -31), -1);  // M = 2^-32: -0.5 -> -1
  // Exact value (2^31-1)/2^32 = 0.4999999998 but SRDHM rounds 2^30 - 1/2 up to
  // 2^30 and the shift rounds that exact half away: double rounding gives 1.
  EXPECT_EQ(multiply_by_quantized_multiplier(kMax, 1 << 30, -31), 1);
}

// ------------------------------------------------------- randomised vs 128-bit

int32_t random_x(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return int32_t(uint32_t(rng()));                          // full range
    case 1: return int32_t(int64_t(rng() % 2001) - 1000);             // small
    case 2: return int32_t(int64_t(rng() % (1u << 24)) - (1 << 23));  // typical accumulators
    default: {
      const int32_t edge[] = {kMin, kMin + 1, -1, 0, 1, kMax - 1, kMax, 1 << 30, -(1 << 30)};
      return edge[rng() % 9];
    }
  }
}

TEST(QMath, PrimitivesMatch128BitModelBitExactly) {
  std::mt19937_64 rng(12345);
  for (int it = 0; it < 2000000; ++it) {
    const int32_t a = random_x(rng);
    const int32_t b = (rng() % 8 == 0) ? random_x(rng) : int32_t(uint32_t(rng()));
    ASSERT_EQ(sat_round_doubling_high_mul(a, b), ref_srdhm(a, b)) << a << " * " << b;
    const int e = int(rng() % 32);
    ASSERT_EQ(rounding_divide_by_pot(a, e), ref_rdbp(a, e)) << a << " / 2^" << e;
  }
}

TEST(QMath, MultiplyByQuantizedMultiplierErrorBound) {
  std::mt19937_64 rng(777);
  std::uniform_real_distribution<double> log2m(-32.0, 30.0);
  std::uniform_real_distribution<double> log2m_typical(-24.0, 3.0);
  int64_t checked = 0, off_by_one = 0, saturated = 0;
  long double worst_vs_real = 0;
  for (int it = 0; it < 1000000; ++it) {
    const double M = std::exp2(it % 4 == 0 ? log2m(rng) : log2m_typical(rng));
    int32_t m = 0, s = 0;
    ts::quantize_multiplier(M, &m, &s);
    if (m == 0) continue;  // below 2^-32: represented as zero (tested below)
    ASSERT_GE(m, 1 << 30);
    ASSERT_LE(s, 30);
    ASSERT_GE(s, -31);
    const int32_t x = random_x(rng);
    const int32_t got = multiply_by_quantized_multiplier(x, m, s);
    // Bit-exact against the two-step model.
    ASSERT_EQ(got, ref_mbqm(x, m, s)) << "x=" << x << " m=" << m << " s=" << s;
    const int left = s > 0 ? s : 0, r = s > 0 ? 0 : -s;
    if (s > 0 && (i128(x) << left > kMax || i128(x) << left < kMin)) {
      ++saturated;  // left shift saturated: no rounding bound applies
      continue;
    }
    // Exact v = x * m * 2^left / 2^(31+r) as num / den.
    const i128 num = (i128(x) * m) << left;
    const i128 den = i128(1) << (31 + r);
    // |got - v| <= 1/2 + 2^-(r+1)  <=>  |got*den - num| * 2^(r+1) <= den*2^r + den.
    const i128 diff = i128(got) * den - num;
    const i128 adiff = diff < 0 ? -diff : diff;
    if (r == 0) {
      // One rounding only: got = floor(v + 1/2) exactly.
      ASSERT_EQ(i128(got), floor_div(2 * num + den, 2 * den)) << "x=" << x << " m=" << m << " s=" << s;
    } else {
      ASSERT_LE(adiff * 2 * (i128(1) << r), den * (i128(1) << r) + den)
          << "x=" << x << " m=" << m << " s=" << s << " got=" << got;
    }
    // round-half-away(v) computed exactly.
    const i128 anum = num < 0 ? -num : num;
    i128 rv = (2 * anum + den) / (2 * den);
    if (num < 0) rv = -rv;
    // Distance of v to the nearest half-integer, times 2*den: |2*num - (2k+1)*den|.
    const i128 k = floor_div(num, den);
    const i128 dh = (2 * num - (2 * k + 1) * den) < 0 ? -(2 * num - (2 * k + 1) * den) : (2 * num - (2 * k + 1) * den);
    // dh / (2*den) > 2^-(r+1)  <=>  dh * 2^r > den
    if (r > 0 && dh * (i128(1) << r) > den) {
      ASSERT_EQ(i128(got), rv) << "x=" << x << " m=" << m << " s=" << s;
    } else {
      ASSERT_TRUE(i128(got) == k || i128(got) == k + 1) << "x=" << x << " m=" << m << " s=" << s;
    }
    if (i128(got) != rv) ++off_by_one;
    // Against the real multiplier in long double.
    const long double real = (long double)x * (long double)M;
    const long double bound = 0.5L + std::ldexp(0.5L, -r) + std::fabs((long double)x) * (long double)M * std::ldexp(1.0L, -31) + 1e-9L * std::fabs(real);
    const long double err = std::fabs((long double)got - real);
    ASSERT_LE(err, bound) << "x=" << x << " M=" << M;
    worst_vs_real = std::max(worst_vs_real, err - 0.5L);
    ++checked;
  }
  EXPECT_GT(checked, 500000);
  std::printf("[qmath] %lld products checked, %lld differ by 1 from round-half-away(x*M_q) "
              "(double rounding), %lld saturated left shifts\n",
              (long long)checked, (long long)off_by_one, (long long)saturated);
}

// The double rounding really can move a result by one against single
// rounding. M_q = (2^31-1)/2^31 * 2^-1 (just under 1/2), x = 3:
// x*M_q = 1.5 - 1.5*2^-31 rounds once to 1, but SRDHM first rounds
// 3*(2^31-1)/2^31 up to exactly 3 and the shift then rounds 3/2 away to 2.
TEST(QMath, DoubleRoundingCanDifferByOne) {
  EXPECT_EQ(multiply_by_quantized_multiplier(3, kMax, -1), 2);
  EXPECT_EQ(multiply_by_quantized_multiplier(-3, kMax, -1), -2);  // -1.4999.. -> -2
  // With shift 0 there is a single rounding: 3*(1 - 2^-31) -> 3.
  EXPECT_EQ(multiply_by_quantized_multiplier(3, kMax, 0), 3);
}

// ------------------------------------------------------- quantize_multiplier

TEST(QuantizeMultiplier, PowersOfTwoAreExact) {
  for (int p = -31; p <= 29; ++p) {
    int32_t m = -1, s = -1;
    ts::quantize_multiplier(std::ldexp(1.0, p), &m, &s);
    EXPECT_EQ(m, 1 << 30) << "2^" << p;
    EXPECT_EQ(s, p + 1) << "2^" << p;
  }
  // 2^-32 is the smallest kept: mantissa 1/2, shift -31.
  int32_t m, s;
  ts::quantize_multiplier(std::ldexp(1.0, -32), &m, &s);
  EXPECT_EQ(m, 1 << 30);
  EXPECT_EQ(s, -31);
}

TEST(QuantizeMultiplier, TinyZeroNegativeAndNonFiniteBecomeZero) {
  for (double v : {0.0, -0.0, -1.0, -1e-3, std::ldexp(1.0, -33), std::ldexp(0.999, -32), 1e-20, 1e-300,
                   std::numeric_limits<double>::denorm_min(), std::nan(""),
                   std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    int32_t m = 7, s = 7;
    ts::quantize_multiplier(v, &m, &s);
    EXPECT_EQ(m, 0) << v;
    EXPECT_EQ(s, 0) << v;
    // A zero multiplier maps every accumulator to 0.
    EXPECT_EQ(multiply_by_quantized_multiplier(123456, m, s), 0);
  }
}

TEST(QuantizeMultiplier, AtLeastOneUsesPositiveShift) {
  int32_t m, s;
  ts::quantize_multiplier(1.0, &m, &s);
  EXPECT_EQ(m, 1 << 30);
  EXPECT_EQ(s, 1);
  ts::quantize_multiplier(1.5, &m, &s);
  EXPECT_EQ(m, 3 << 29);
  EXPECT_EQ(s, 1);
  ts::quantize_multiplier(3.0, &m, &s);
  EXPECT_EQ(m, 3 << 29);
  EXPECT_EQ(s, 2);
  EXPECT_EQ(multiply_by_quantized_multiplier(-41, m, s), -123);
  ts::quantize_multiplier(1000.0, &m, &s);
  EXPECT_EQ(s, 10);  // 1000 = 0.9765625 * 2^10
  EXPECT_EQ(multiply_by_quantized_multiplier(77, m, s), 77000);
  // Just below 1: the mantissa rounds up to 2^31 and is renormalised.
  ts::quantize_multiplier(1.0 - std::ldexp(1.0, -40), &m, &s);
  EXPECT_EQ(m, 1 << 30);
  EXPECT_EQ(s, 1);
  // Largest representable: below 2^30.
  ts::quantize_multiplier(std::ldexp(1.0, 30) * 0.75, &m, &s);
  EXPECT_EQ(s, 30);
  EXPECT_THROW(ts::quantize_multiplier(std::ldexp(1.0, 30), &m, &s), ts::Error);
  EXPECT_THROW(ts::quantize_multiplier(1e12, &m, &s), ts::Error);
}

TEST(QuantizeMultiplier, MantissaRelativeErrorAtMost2PowMinus31) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> log2m(-31.9, 29.9);
  for (int it = 0; it < 200000; ++it) {
    const double M = std::exp2(log2m(rng));
    int32_t m, s;
    ts::quantize_multiplier(M, &m, &s);
    ASSERT_GE(m, 1 << 30);
    const long double back = std::ldexp((long double)m, s - 31);
    ASSERT_LE(std::fabs(back - (long double)M), (long double)M * std::ldexp(1.0L, -31)) << M;
  }
}

}  // namespace
