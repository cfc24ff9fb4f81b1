// The output digest (core/digest.h) that boards report per layer in DONE and
// the coordinator recomputes from the reference: its value is pinned (the
// Cortex-M7 firmware and the host must agree), any split of the bytes gives
// the same digest, and a change of any single byte is always detected.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/digest.h"

namespace {

using ts::core::Digest64;
using ts::core::digest64;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Values computed from the definition in docs/protocol.md by a separate
// transcription of it (Python integers, not this code): they pin the
// definition, and a change here is a protocol change.
TEST(Digest, PinnedValues) {
  EXPECT_EQ(digest64(nullptr, 0), 0xfec8a968128a4a9bu) << std::hex << digest64(nullptr, 0);
  const uint8_t abc[3] = {'a', 'b', 'c'};
  EXPECT_EQ(digest64(abc, 3), 0xac527a2fd203f961u) << std::hex << digest64(abc, 3);
  std::vector<uint8_t> ramp(1000);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = uint8_t(i * 7 + 3);
  EXPECT_EQ(digest64(ramp.data(), ramp.size()), 0xad42260a3d48716du) << std::hex << digest64(ramp.data(), ramp.size());
}

TEST(Digest, AnySplitGivesTheDigestOfTheWhole) {
  const auto v = random_bytes(777, 1);
  const uint64_t whole = digest64(v.data(), v.size());
  std::mt19937 rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    Digest64 d;
    size_t at = 0;
    while (at < v.size()) {
      const size_t n = std::min<size_t>(v.size() - at, rng() % 20);
      d.update(v.data() + at, n);
      at += n;
    }
    EXPECT_EQ(d.finish(), whole) << "trial " << trial;
    EXPECT_EQ(d.bytes(), v.size());
  }
}

TEST(Digest, EverySingleByteChangeIsDetected) {
  for (size_t n : {1u, 7u, 8u, 9u, 64u, 301u}) {
    const auto v = random_bytes(n, uint32_t(n));
    const uint64_t ref = digest64(v.data(), v.size());
    for (size_t i = 0; i < n; ++i)
      for (int bit = 0; bit < 8; ++bit) {
        auto w = v;
        w[i] ^= uint8_t(1u << bit);
        EXPECT_NE(digest64(w.data(), w.size()), ref) << "length " << n << " byte " << i << " bit " << bit;
      }
  }
}

// Faults that repeat with a period (a stuck bit in every row or plane of a
// buffer, a bad lane of a vector kernel) change words the same way many
// times over: the changes must not cancel.
TEST(Digest, PeriodicChangesAreDetected) {
  const auto v = random_bytes(1024, 5);
  const uint64_t ref = digest64(v.data(), v.size());
  for (size_t period : {4u, 8u, 16u, 32u, 36u, 64u, 128u, 196u})
    for (size_t first : {0u, 1u, 3u})
      for (int bit : {0, 3, 7})
        for (size_t times : {2u, 3u, 1024u}) {
          auto w = v;
          for (size_t i = first, k = 0; i < w.size() && k < times; i += period, ++k) w[i] ^= uint8_t(1u << bit);
          EXPECT_NE(digest64(w.data(), w.size()), ref) << "period " << period << " first " << first << " bit " << bit << " times " << times;
        }
}

// The build's form of the lanes (SSE2 on x86) against the portable one (the
// boards' form), from random states over random blocks.
TEST(Digest, FastLanesEqualThePortableOnes) {
  std::mt19937 rng(11);
  for (size_t blocks : {0u, 1u, 2u, 3u, 17u, 100u}) {
    const auto data = random_bytes(32 * blocks, uint32_t(blocks) + 1);
    uint32_t fast[16], portable[16];
    for (int j = 0; j < 16; ++j) fast[j] = portable[j] = uint32_t(rng());
    ts::core::digest_blocks(fast, data.data(), blocks);
    ts::core::digest_blocks_portable(portable, data.data(), blocks);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(fast[j], portable[j]) << "blocks " << blocks << " word " << j;
  }
}

TEST(Digest, LengthMatters) {
  // Trailing zero bytes pad the last word: the length must still tell them apart.
  std::vector<uint8_t> z(16, 0);
  for (size_t a = 0; a < z.size(); ++a)
    for (size_t b = a + 1; b <= z.size(); ++b) EXPECT_NE(digest64(z.data(), a), digest64(z.data(), b)) << a << " " << b;
}

TEST(Digest, SwappedValuesAreDetected) {
  auto v = random_bytes(512, 9);
  const uint64_t ref = digest64(v.data(), v.size());
  int same = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    if (v[i] == v[i + 1]) continue;
    std::swap(v[i], v[i + 1]);
    same += digest64(v.data(), v.size()) == ref;
    std::swap(v[i], v[i + 1]);
  }
  EXPECT_EQ(same, 0);
}

}  // namespace
