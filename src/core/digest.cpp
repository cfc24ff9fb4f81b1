#include "core/digest.h"

#include <string.h>

#include "core/bytes.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ts {
namespace core {

namespace {

constexpr uint64_t kMul1 = 0x9fb21c651e98df25ull;
constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kLenMul = 0x165667b19e3779f9ull;
constexpr uint64_t kLaneStep = 0x9e3779b97f4a7c15ull;
constexpr uint32_t kWordMul = 0x9e3779b1u;
constexpr size_t kBlock = 4 * kDigestLanes;  // a word per lane

inline uint64_t mix(uint64_t v) {
  v *= kMul1;
  v ^= v >> 29;
  return v * kMul2;
}

// One word into a lane: a Feistel round keyed by the word.
inline void feistel(uint32_t& a, uint32_t& b, uint32_t w) {
  const uint32_t t = a ^ w;
  const uint64_t p = uint64_t(t) * kWordMul;
  a = b ^ uint32_t(p) ^ uint32_t(p >> 32);
  b = t;
}

// Four lanes over `n` whole blocks (lanes j..j+3 of s, words j..j+3 of each
// block at p): four chains whose state a 32-bit core keeps in registers.
inline void four_lanes(uint32_t* s, const uint8_t* p, size_t n) {
  uint32_t a0 = s[0], b0 = s[1], a1 = s[2], b1 = s[3], a2 = s[4], b2 = s[5], a3 = s[6], b3 = s[7];
  // Two blocks per pass: the halves trade places every round, so an even
  // count of rounds needs no moves.
  const uint8_t* const end2 = p + (n & ~size_t(1)) * kBlock;
  for (; p != end2; p += 2 * kBlock) {
    feistel(a0, b0, le::get_u32(p));
    feistel(a1, b1, le::get_u32(p + 4));
    feistel(a2, b2, le::get_u32(p + 8));
    feistel(a3, b3, le::get_u32(p + 12));
    feistel(a0, b0, le::get_u32(p + kBlock));
    feistel(a1, b1, le::get_u32(p + kBlock + 4));
    feistel(a2, b2, le::get_u32(p + kBlock + 8));
    feistel(a3, b3, le::get_u32(p + kBlock + 12));
  }
  if (n & 1) {
    feistel(a0, b0, le::get_u32(p));
    feistel(a1, b1, le::get_u32(p + 4));
    feistel(a2, b2, le::get_u32(p + 8));
    feistel(a3, b3, le::get_u32(p + 12));
  }
  s[0] = a0, s[1] = b0, s[2] = a1, s[3] = b1, s[4] = a2, s[5] = b2, s[6] = a3, s[7] = b3;
}

#if defined(__SSE2__)
// SSE2 (every x86-64): two lanes per register, in the low halves of its
// 64-bit slots (the high halves carry junk the multiplies ignore); four
// registers of chains overlap. Slot pairs: lanes (0, 2), (1, 3), (4, 6), (5, 7).
inline void round_sse2(__m128i& a, __m128i& b, __m128i w, __m128i m) {
  const __m128i t = _mm_xor_si128(a, w);
  const __m128i pr = _mm_mul_epu32(t, m);
  a = _mm_xor_si128(b, _mm_xor_si128(pr, _mm_srli_epi64(pr, 32)));
  b = t;
}

inline __m128i pair_in(const uint32_t* s, int j, int half) {  // lanes j, j + 2: a (half 0) or b
  return _mm_set_epi64x(s[2 * (j + 2) + half], s[2 * j + half]);
}

inline void pair_out(__m128i v, uint32_t* s, int j, int half) {
  s[2 * j + half] = uint32_t(_mm_cvtsi128_si32(v));
  s[2 * (j + 2) + half] = uint32_t(_mm_cvtsi128_si32(_mm_unpackhi_epi64(v, v)));
}

inline void lanes_sse2(uint32_t* s, const uint8_t* p, size_t n) {
  const __m128i m = _mm_set1_epi64x(kWordMul);
  __m128i a0 = pair_in(s, 0, 0), b0 = pair_in(s, 0, 1), a1 = pair_in(s, 1, 0), b1 = pair_in(s, 1, 1);
  __m128i a4 = pair_in(s, 4, 0), b4 = pair_in(s, 4, 1), a5 = pair_in(s, 5, 0), b5 = pair_in(s, 5, 1);
  for (; n; --n, p += kBlock) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    round_sse2(a0, b0, x0, m);                      // words 0, 2
    round_sse2(a1, b1, _mm_srli_epi64(x0, 32), m);  // words 1, 3
    round_sse2(a4, b4, x1, m);                      // words 4, 6
    round_sse2(a5, b5, _mm_srli_epi64(x1, 32), m);  // words 5, 7
  }
  pair_out(a0, s, 0, 0), pair_out(b0, s, 0, 1), pair_out(a1, s, 1, 0), pair_out(b1, s, 1, 1);
  pair_out(a4, s, 4, 0), pair_out(b4, s, 4, 1), pair_out(a5, s, 5, 0), pair_out(b5, s, 5, 1);
}
#endif

}  // namespace

// The lanes are independent, so the order of their rounds is free: the
// portable form runs lanes 0-3 over the blocks and then lanes 4-7 (a 32-bit
// core keeps a pass's state in registers); on x86 all eight go at once in
// SSE2 registers.
void digest_blocks_portable(uint32_t* s, const uint8_t* p, size_t n) {
  four_lanes(s, p, n);
  four_lanes(s + 8, p + 16, n);
}

void digest_blocks(uint32_t* s, const uint8_t* p, size_t n) {
#if defined(__SSE2__)
  lanes_sse2(s, p, n);
#else
  digest_blocks_portable(s, p, n);
#endif
}

Digest64::Digest64() {
  for (int j = 0; j < kDigestLanes; ++j) {
    const uint64_t h = kDigestSeed + uint64_t(j) * kLaneStep;
    s_[2 * j] = uint32_t(h), s_[2 * j + 1] = uint32_t(h >> 32);
  }
}

void Digest64::update(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += len;
  if (tail_n_) {
    const size_t take = len < kBlock - tail_n_ ? len : kBlock - tail_n_;
    memcpy(tail_ + tail_n_, p, take);
    tail_n_ += uint32_t(take);
    p += take;
    len -= take;
    if (tail_n_ < kBlock) return;
    digest_blocks(s_, tail_, 1);
    tail_n_ = 0;
  }
  digest_blocks(s_, p, len / kBlock);
  p += len / kBlock * kBlock;
  len %= kBlock;
  if (len) memcpy(tail_, p, len);
  tail_n_ = uint32_t(len);
}

uint64_t Digest64::finish() const {
  uint32_t s[2 * kDigestLanes];
  for (int j = 0; j < 2 * kDigestLanes; ++j) s[j] = s_[j];
  // The words waiting in the tail continue the lanes in order; the last
  // partial word is zero-padded.
  for (uint32_t w = 0; 4 * w < tail_n_; ++w) {
    uint8_t word[4] = {};
    memcpy(word, tail_ + 4 * w, tail_n_ - 4 * w < 4 ? tail_n_ - 4 * w : 4);
    const int j = int(w % kDigestLanes);
    feistel(s[2 * j], s[2 * j + 1], le::get_u32(word));
  }
  uint64_t v = kDigestSeed;
  for (int j = 0; j < kDigestLanes; ++j) v = mix(v ^ (uint64_t(s[2 * j + 1]) << 32 | s[2 * j]));
  v = mix(v ^ (total_ * kLenMul));
  return v ^ (v >> 32);
}

uint64_t digest64(const void* data, size_t len) {
  Digest64 d;
  d.update(data, len);
  return d.finish();
}

}  // namespace core
}  // namespace ts
