// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104 / FIPS 198-1) for the host
// and the Cortex-M7 boards: no heap, no exceptions, no OS calls.
//
// The SHA-256 itself is Mbed TLS's (mbedtls/sha256.h, 2.28 from Debian: the
// host links Debian's libmbedcrypto, the firmware compiles library/sha256.c
// from `apt-get source mbedtls` with firmware/src/port/mbedtls_config.h).
// HMAC is composed here per RFC 2104 over that SHA-256, because the
// library's HMAC (mbedtls_md_hmac_*) allocates its contexts with calloc,
// which the firmware must not do after init; tests/sha256_test.cpp checks
// it against mbedtls_md_hmac on random keys and messages.
//
// Uses: the deploy cache's fragment identity (a board keeps the digest of its
// committed fragment and the coordinator's COMMIT names the digest it wants),
// and the per-session frame authentication (core/auth.h).
//
// Test vectors from FIPS 180-4's examples and RFC 4231 are in
// tests/sha256_test.cpp.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <mbedtls/sha256.h>

namespace ts {

constexpr size_t kSha256Bytes = 32;
constexpr size_t kSha256Block = 64;

// A running digest. Copyable (the library's context is a plain struct with
// no pointers), which HmacSha256 uses to restart from the keyed states.
class Sha256 {
 public:
  Sha256() { reset(); }
  void reset();
  void update(const void* data, size_t len);
  // Writes the 32-byte digest. The object must be reset() before reuse.
  void finish(uint8_t out[kSha256Bytes]);
  // Overwrites the state (zeroes that the compiler keeps), then reset().
  void wipe();

 private:
  mbedtls_sha256_context ctx_;
};

// One-shot digest.
void sha256(const void* data, size_t len, uint8_t out[kSha256Bytes]);

// HMAC-SHA-256 with the key's inner and outer states computed once: each
// message then costs its own blocks plus two compressions.
class HmacSha256 {
 public:
  HmacSha256() = default;
  HmacSha256(const uint8_t* key, size_t key_len) { set_key(key, key_len); }
  void set_key(const uint8_t* key, size_t key_len);
  // Starts a message; then update() any number of times, then finish().
  void begin() { cur_ = inner_; }
  void update(const void* data, size_t len) { cur_.update(data, len); }
  void finish(uint8_t out[kSha256Bytes]);
  // Forgets the key material.
  void wipe();

 private:
  Sha256 inner_, outer_, cur_;
};

void hmac_sha256(const uint8_t* key, size_t key_len, const void* msg, size_t len, uint8_t out[kSha256Bytes]);

// Compares n bytes in time independent of where they differ.
bool equal_ct(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace ts
