#include "core/digest.h"

#include <string.h>

namespace ts {
namespace core {

namespace {

constexpr uint64_t kMul1 = 0x9fb21c651e98df25ull;
constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kLenMul = 0x165667b19e3779f9ull;
constexpr uint64_t kLaneStep = 0x9e3779b97f4a7c15ull;
constexpr size_t kBlock = 8 * kDigestLanes;

inline uint64_t mix(uint64_t v) {
  v *= kMul1;
  v ^= v >> 29;
  return v * kMul2;
}

inline uint64_t load_le64(const uint8_t* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;  // one unaligned load (x86, the Cortex-M7)
  memcpy(&v, p, sizeof v);
  return v;
#else
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
#endif
}

// One block: word j of it goes to lane j.
inline void block(uint64_t* h, const uint8_t* p) {
  uint64_t a = h[0], b = h[1], c = h[2], d = h[3];
  a = mix(a ^ load_le64(p));
  b = mix(b ^ load_le64(p + 8));
  c = mix(c ^ load_le64(p + 16));
  d = mix(d ^ load_le64(p + 24));
  h[0] = a, h[1] = b, h[2] = c, h[3] = d;
}

}  // namespace

Digest64::Digest64() {
  for (int j = 0; j < kDigestLanes; ++j) h_[j] = kDigestSeed + uint64_t(j) * kLaneStep;
}

void Digest64::update(const void* data, size_t len) {
  static_assert(kDigestLanes == 4, "block() unrolls four lanes");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += len;
  if (tail_n_) {
    const size_t take = len < kBlock - tail_n_ ? len : kBlock - tail_n_;
    memcpy(tail_ + tail_n_, p, take);
    tail_n_ += uint32_t(take);
    p += take;
    len -= take;
    if (tail_n_ < kBlock) return;
    block(h_, tail_);
    tail_n_ = 0;
  }
  uint64_t h[kDigestLanes] = {h_[0], h_[1], h_[2], h_[3]};
  while (len >= kBlock) {
    block(h, p);
    p += kBlock;
    len -= kBlock;
  }
  for (int j = 0; j < kDigestLanes; ++j) h_[j] = h[j];
  if (len) memcpy(tail_, p, len);
  tail_n_ = uint32_t(len);
}

uint64_t Digest64::finish() const {
  uint64_t h[kDigestLanes];
  for (int j = 0; j < kDigestLanes; ++j) h[j] = h_[j];
  // The words waiting in the tail continue the lanes in order; the last
  // partial word is zero-padded.
  for (uint32_t w = 0; 8 * w < tail_n_; ++w) {
    uint8_t word[8] = {};
    memcpy(word, tail_ + 8 * w, tail_n_ - 8 * w < 8 ? tail_n_ - 8 * w : 8);
    h[w] = mix(h[w] ^ load_le64(word));
  }
  uint64_t v = kDigestSeed;
  for (int j = 0; j < kDigestLanes; ++j) v = mix(v ^ h[j]);
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
