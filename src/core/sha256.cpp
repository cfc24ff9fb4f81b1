#include "core/sha256.h"

namespace ts {

namespace {

// First 32 bits of the fractional parts of the cube roots of the first 64
// primes (FIPS 180-4, 4.2.2).
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32u - n)); }
inline uint32_t load_be(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
inline void store_be(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

}  // namespace

void Sha256::reset() {
  // First 32 bits of the fractional parts of the square roots of the first 8
  // primes (FIPS 180-4, 5.3.3).
  h_[0] = 0x6a09e667;
  h_[1] = 0xbb67ae85;
  h_[2] = 0x3c6ef372;
  h_[3] = 0xa54ff53a;
  h_[4] = 0x510e527f;
  h_[5] = 0x9b05688c;
  h_[6] = 0x1f83d9ab;
  h_[7] = 0x5be0cd19;
  fill_ = 0;
  total_ = 0;
}

void Sha256::compress(const uint8_t* block) {
  // The message schedule kept as a rolling window of 16 words.
  uint32_t w[16];
  for (int i = 0; i < 16; ++i) w[i] = load_be(block + 4 * i);
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int t = 0; t < 64; ++t) {
    uint32_t wt;
    if (t < 16) {
      wt = w[t];
    } else {
      const uint32_t x = w[(t - 15) & 15], y = w[(t - 2) & 15];
      const uint32_t s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3);
      const uint32_t s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >> 10);
      wt = w[t & 15] = w[t & 15] + s0 + w[(t - 7) & 15] + s1;
    }
    const uint32_t big1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + big1 + choose + kRound[t] + wt;
    const uint32_t big0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = big0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void Sha256::update(const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += len;
  if (fill_ > 0) {
    while (len > 0 && fill_ < kSha256Block) {
      buf_[fill_++] = *p++;
      --len;
    }
    if (fill_ < kSha256Block) return;
    compress(buf_);
    fill_ = 0;
  }
  while (len >= kSha256Block) {
    compress(p);
    p += kSha256Block;
    len -= kSha256Block;
  }
  for (size_t i = 0; i < len; ++i) buf_[i] = p[i];
  fill_ = len;
}

void Sha256::finish(uint8_t out[kSha256Bytes]) {
  const uint64_t bits = total_ * 8u;
  // Padding: one 1 bit, zeros up to 56 mod 64, then the length in bits as a
  // big-endian 64-bit number.
  buf_[fill_++] = 0x80;
  if (fill_ > 56) {
    while (fill_ < kSha256Block) buf_[fill_++] = 0;
    compress(buf_);
    fill_ = 0;
  }
  while (fill_ < 56) buf_[fill_++] = 0;
  for (int i = 0; i < 8; ++i) buf_[56 + i] = uint8_t(bits >> (56 - 8 * i));
  compress(buf_);
  fill_ = 0;
  for (int i = 0; i < 8; ++i) store_be(out + 4 * i, h_[i]);
}

void sha256(const void* data, size_t len, uint8_t out[kSha256Bytes]) {
  Sha256 s;
  s.update(data, len);
  s.finish(out);
}

void HmacSha256::set_key(const uint8_t* key, size_t key_len) {
  // A key longer than a block is replaced by its digest; then it is padded
  // with zeros to one block and XORed with the inner and outer constants.
  uint8_t k[kSha256Block] = {};
  if (key_len > kSha256Block) {
    sha256(key, key_len, k);
  } else {
    for (size_t i = 0; i < key_len; ++i) k[i] = key[i];
  }
  uint8_t pad[kSha256Block];
  for (size_t i = 0; i < kSha256Block; ++i) pad[i] = uint8_t(k[i] ^ 0x36);
  inner_.reset();
  inner_.update(pad, sizeof pad);
  for (size_t i = 0; i < kSha256Block; ++i) pad[i] = uint8_t(k[i] ^ 0x5c);
  outer_.reset();
  outer_.update(pad, sizeof pad);
  for (size_t i = 0; i < kSha256Block; ++i) k[i] = pad[i] = 0;
  cur_ = inner_;
}

void HmacSha256::finish(uint8_t out[kSha256Bytes]) {
  uint8_t inner_digest[kSha256Bytes];
  cur_.finish(inner_digest);
  Sha256 o = outer_;
  o.update(inner_digest, sizeof inner_digest);
  o.finish(out);
}

void HmacSha256::wipe() {
  inner_.reset();
  outer_.reset();
  cur_.reset();
}

void hmac_sha256(const uint8_t* key, size_t key_len, const void* msg, size_t len, uint8_t out[kSha256Bytes]) {
  HmacSha256 m(key, key_len);
  m.update(msg, len);
  m.finish(out);
}

bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff = uint8_t(diff | (a[i] ^ b[i]));
  return diff == 0;
}

}  // namespace ts
