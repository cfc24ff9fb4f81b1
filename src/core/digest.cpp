#include "core/digest.h"

namespace ts {
namespace core {

namespace {

constexpr uint64_t kMul1 = 0x9fb21c651e98df25ull;
constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kLenMul = 0x165667b19e3779f9ull;

inline uint64_t mix(uint64_t v) {
  v *= kMul1;
  v ^= v >> 29;
  return v * kMul2;
}

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void Digest64::update(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += len;
  uint64_t h = h_;
  if (tail_n_) {
    while (len && tail_n_ < 8) {
      tail_[tail_n_++] = *p++;
      --len;
    }
    if (tail_n_ < 8) return;
    h = mix(h ^ load_le64(tail_));
    tail_n_ = 0;
  }
  while (len >= 8) {
    h = mix(h ^ load_le64(p));
    p += 8;
    len -= 8;
  }
  for (size_t i = 0; i < len; ++i) tail_[i] = p[i];
  tail_n_ = uint32_t(len);
  h_ = h;
}

uint64_t Digest64::finish() const {
  uint64_t h = h_;
  if (tail_n_) {
    uint8_t w[8] = {};
    for (uint32_t i = 0; i < tail_n_; ++i) w[i] = tail_[i];
    h = mix(h ^ load_le64(w));
  }
  h = mix(h ^ (total_ * kLenMul));
  return h ^ (h >> 32);
}

uint64_t digest64(const void* data, size_t len) {
  Digest64 d;
  d.update(data, len);
  return d.finish();
}

}  // namespace core
}  // namespace ts
