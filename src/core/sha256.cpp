#include "core/sha256.h"

#include <mbedtls/platform_util.h>

namespace ts {

// The *_ret functions of Mbed TLS 2.28 return 0 for SHA-256 (the only error
// they know is a null argument, which these wrappers never pass).

void Sha256::reset() {
  mbedtls_sha256_init(&ctx_);
  mbedtls_sha256_starts_ret(&ctx_, /*is224=*/0);
}

void Sha256::update(const void* data, size_t len) {
  if (len == 0) return;
  mbedtls_sha256_update_ret(&ctx_, static_cast<const unsigned char*>(data), len);
}

void Sha256::finish(uint8_t out[kSha256Bytes]) { mbedtls_sha256_finish_ret(&ctx_, out); }

void Sha256::wipe() {
  mbedtls_sha256_free(&ctx_);  // zeroes the context
  reset();
}

void sha256(const void* data, size_t len, uint8_t out[kSha256Bytes]) {
  Sha256 s;
  s.update(data, len);
  s.finish(out);
  s.wipe();
}

// HMAC per RFC 2104: H((K' ^ opad) || H((K' ^ ipad) || m)), where K' is the
// key padded with zeros to one block, or the key's digest when it is longer
// than a block. The two keyed states are kept, so a message costs its own
// blocks plus the two finishing compressions.
void HmacSha256::set_key(const uint8_t* key, size_t key_len) {
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
  mbedtls_platform_zeroize(k, sizeof k);
  mbedtls_platform_zeroize(pad, sizeof pad);
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
  inner_.wipe();
  outer_.wipe();
  cur_.wipe();
}

void hmac_sha256(const uint8_t* key, size_t key_len, const void* msg, size_t len, uint8_t out[kSha256Bytes]) {
  HmacSha256 m(key, key_len);
  m.update(msg, len);
  m.finish(out);
  m.wipe();
}

bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff = uint8_t(diff | (a[i] ^ b[i]));
  return diff == 0;
}

}  // namespace ts
