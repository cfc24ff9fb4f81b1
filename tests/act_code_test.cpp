// Tests of the activation coder (core/act_code.h): lossless on every mode and
// every kind of data, sizes as the format says, and every malformed run of
// bytes refused.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/act_code.h"

namespace {

using ts::core::CodeParams;
using ts::core::CodeReader;
using ts::core::CodeWriter;
using Bytes = std::vector<uint8_t>;

CodeParams params(uint8_t fill, bool flag, bool zigzag, bool mask = false) {
  CodeParams p;
  p.fill = fill;
  p.flag = flag;
  p.zigzag = zigzag;
  p.mask = mask;
  return p;
}

Bytes code(const Bytes& v, CodeParams p) {
  Bytes out(v.size() * 3 + 8);
  CodeWriter w(out.data(), out.size(), p);
  EXPECT_TRUE(w.put(v.data(), v.size()));
  out.resize(w.finish());
  return out;
}

bool decode(const Bytes& c, size_t n, CodeParams p, Bytes* out) {
  out->assign(n, 0);
  CodeReader r(c.data(), c.size(), p);
  return r.get(out->data(), n) && r.finish();
}

// Activations as a layer makes them: mostly near the fill, some on it.
Bytes activations(std::mt19937& rng, size_t n, uint8_t fill, double on_fill, double spread, bool both_sides) {
  std::bernoulli_distribution is_fill(on_fill);
  std::exponential_distribution<double> mag(1.0 / spread);
  std::bernoulli_distribution neg(0.5);
  Bytes v(n);
  for (auto& x : v) {
    if (is_fill(rng)) {
      x = fill;
      continue;
    }
    int m = 1 + int(mag(rng));
    if (m > 127) m = 127;
    x = uint8_t(fill + ((both_sides && neg(rng)) ? -m : m));
  }
  return v;
}

TEST(ActCode, EveryModeRoundTripsEveryKindOfData) {
  std::mt19937 rng(7);
  for (int mode = 0; mode < 5; ++mode)
    for (int fill : {0, 128, 3, 250})
      for (int kind = 0; kind < 4; ++kind)
        for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(64), size_t(65), size_t(1000)}) {
          Bytes v;
          if (kind == 0) v = activations(rng, n, uint8_t(fill), 0.5, 6, false);
          if (kind == 1) v = activations(rng, n, uint8_t(fill), 0.05, 20, true);
          if (kind == 2) {  // uniform: the worst case
            v.resize(n);
            for (auto& x : v) x = uint8_t(rng());
          }
          if (kind == 3) v.assign(n, uint8_t(fill));
          const CodeParams p = mode == 4 ? params(uint8_t(fill), false, false, true)
                                         : params(uint8_t(fill), mode & 1, (mode & 2) != 0);
          const Bytes c = code(v, p);
          EXPECT_EQ(c.size(), ts::core::coded_bytes(v.data(), v.size(), p));
          EXPECT_LE(c.size() * 8, n * ts::core::kCodeMaxBits + 7);
          Bytes back;
          ASSERT_TRUE(decode(c, n, p, &back)) << "mode " << mode << " kind " << kind << " n " << n;
          EXPECT_EQ(back, v) << "mode " << mode << " kind " << kind << " n " << n;
        }
}

TEST(ActCode, ClampedOutputsShrinkAndSignedOnesToo) {
  std::mt19937 rng(11);
  const Bytes relu = activations(rng, 4096, 0x80, 0.5, 6, false);  // zero point -128
  const CodeParams pr = ts::core::code_params_for(-128, -128);
  EXPECT_TRUE(pr.flag);
  EXPECT_FALSE(pr.zigzag);
  EXPECT_EQ(pr.fill, 0x80);
  EXPECT_LT(code(relu, pr).size(), relu.size() * 6 / 10);
  const Bytes lin = activations(rng, 4096, 5, 0.03, 4, true);
  const CodeParams pl = ts::core::code_params_for(5, -128);
  EXPECT_FALSE(pl.flag);
  EXPECT_TRUE(pl.zigzag);
  EXPECT_LT(code(lin, pl).size(), lin.size() * 8 / 10);
  // A clamp above the zero point flags the clamp value.
  EXPECT_EQ(ts::core::code_params_for(-128, -100).fill, uint8_t(int8_t(-100)));
  // The mask coding: a byte per 8 values and the values off the fill.
  const CodeParams pm = ts::core::code_params_for(-128, -128, true);
  EXPECT_TRUE(pm.mask);
  size_t off_fill = 0;
  for (uint8_t x : relu) off_fill += x != 0x80;
  EXPECT_EQ(code(relu, pm).size(), relu.size() / 8 + off_fill);
}

TEST(ActCode, MaskGroupsSurviveATakenBackPut) {
  const CodeParams p = params(0, false, false, true);
  const Bytes v = {0, 5, 0, 0, 7, 0, 0, 0, 0, 9, 0};
  for (size_t first = 0; first <= v.size(); ++first) {
    // Room for the first values only: the rest is refused, taken back, and
    // the stream ends after the first ones.
    const size_t need = ts::core::coded_bytes(v.data(), first, p);
    Bytes out(need);
    CodeWriter w(out.data(), out.size(), p);
    ASSERT_TRUE(w.put(v.data(), first));
    // The rest fits only if it adds no byte (fill values in the open group).
    const bool all = w.put(v.data() + first, v.size() - first);
    EXPECT_EQ(all, ts::core::coded_bytes(v.data(), v.size(), p) == need);
    const size_t n = all ? v.size() : first;
    out.resize(w.finish());
    Bytes back;
    ASSERT_TRUE(decode(out, n, p, &back)) << first;
    EXPECT_EQ(back, Bytes(v.begin(), v.begin() + long(n)));
  }
}

TEST(ActCode, PutTakesWholeRunsOrNothingWithinTheRoom) {
  std::mt19937 rng(3);
  const Bytes v = activations(rng, 600, 0x80, 0.4, 8, false);
  const CodeParams p = params(0x80, true, false);
  const size_t whole = ts::core::coded_bytes(v.data(), v.size(), p);
  Bytes out(whole - 1);
  CodeWriter w(out.data(), out.size(), p);
  ASSERT_TRUE(w.put(v.data(), 100));
  const size_t after100 = w.bytes();
  EXPECT_FALSE(w.put(v.data() + 100, 500));  // does not fit: nothing taken
  EXPECT_EQ(w.bytes(), after100);
  const size_t more = w.put_most(v.data() + 100, 500);
  EXPECT_LT(more, 500u);
  EXPECT_GT(more, 400u);
  out.resize(w.finish());
  Bytes back;
  ASSERT_TRUE(decode(out, 100 + more, p, &back));
  EXPECT_EQ(back, Bytes(v.begin(), v.begin() + long(100 + more)));
}

TEST(ActCode, MalformedCodesAreRefused) {
  const CodeParams p = params(0, true, false);
  Bytes back;
  // Too short: 8 values need at least 8 flag bits; one byte of zero flags
  // codes values that each need more bits.
  EXPECT_FALSE(decode(Bytes{0x00}, 8, p, &back));
  // All ones: flagged fill values, 8 per byte; a second byte is left over.
  EXPECT_TRUE(decode(Bytes{0xFF}, 8, p, &back));
  EXPECT_FALSE(decode(Bytes{0xFF, 0xFF}, 8, p, &back));
  // Padding bits must be 0: 4 flagged values, then 4 stray one bits.
  EXPECT_FALSE(decode(Bytes{0xFF}, 4, p, &back));
  EXPECT_TRUE(decode(Bytes{0x0F}, 4, p, &back));
  // An escaped code of 255 names no value when the fill is flagged.
  Bytes esc(3, 0);
  {
    // flag 0, twelve ones, then 0xFF: bits 1..12 ones, 13..20 ones.
    uint32_t bits = 0;
    for (int i = 1; i <= 20; ++i) bits |= 1u << i;
    esc[0] = uint8_t(bits);
    esc[1] = uint8_t(bits >> 8);
    esc[2] = uint8_t(bits >> 16);
  }
  EXPECT_FALSE(decode(esc, 1, p, &back));
  // Unflagged, 255 is a value; escaped below the escape's quotient it is not
  // the code of its value (one code per value).
  Bytes unflagged(3, 0);
  {
    uint32_t bits = 0;
    for (int i = 0; i < 20; ++i) bits |= 1u << i;
    unflagged[0] = uint8_t(bits);
    unflagged[1] = uint8_t(bits >> 8);
    unflagged[2] = uint8_t(bits >> 16);
  }
  ASSERT_TRUE(decode(unflagged, 1, params(0, false, false), &back));
  EXPECT_EQ(back[0], 255);
  unflagged[1] = 0x0F;  // escape, then 0x00: quotient 0, not escaped
  unflagged[2] = 0x00;
  EXPECT_FALSE(decode(unflagged, 1, params(0, false, false), &back));
  // Mode bits other than flag, zigzag and mask, and mask with another, are refused.
  CodeParams q;
  EXPECT_FALSE(CodeParams::from_mode(8, 0, &q));
  EXPECT_FALSE(CodeParams::from_mode(5, 0, &q));
  EXPECT_TRUE(CodeParams::from_mode(4, 0, &q));
  EXPECT_TRUE(q.mask && !q.flag && !q.zigzag);
  EXPECT_TRUE(CodeParams::from_mode(3, 9, &q));
  EXPECT_TRUE(q.flag && q.zigzag && q.fill == 9);
  // Mask: a group's unused bits must be 0, and a value off the fill must be there.
  const CodeParams m = params(0, false, false, true);
  EXPECT_TRUE(decode(Bytes{0x07}, 3, m, &back));
  EXPECT_FALSE(decode(Bytes{0x0F}, 3, m, &back));
  EXPECT_FALSE(decode(Bytes{0x06}, 3, m, &back));
  EXPECT_TRUE(decode(Bytes{0x06, 0x2A}, 3, m, &back));
  EXPECT_EQ(back, (Bytes{0x2A, 0, 0}));
}

TEST(ActCode, RandomBytesNeverDecodeOutOfBounds) {
  std::mt19937 rng(5);
  for (int t = 0; t < 2000; ++t) {
    Bytes c(size_t(rng() % 40));
    for (auto& x : c) x = uint8_t(rng());
    const CodeParams p = t % 3 == 0 ? params(uint8_t(rng()), false, false, true)
                                    : params(uint8_t(rng()), rng() & 1, (rng() & 2) != 0);
    const size_t n = rng() % 80;
    Bytes back;
    if (!decode(c, n, p, &back)) continue;
    // What decodes is what codes: the same values give the same bytes back.
    EXPECT_EQ(code(back, p), c);
  }
}

}  // namespace
