// Frame authentication for board links: keys, session derivation, and the
// per-direction MAC state. Portable C++17 (no heap, no exceptions, no OS), the
// same on the host and on the Cortex-M7 boards.
//
// Construction (docs/protocol.md, "Authentication"):
//   - Coordinator and boards share a 32-byte key K (a key file on the host,
//     the firmware's provisioning on a board).
//   - A board that holds K sends a 36-byte HELLO ending in a nonce Nb, fresh
//     for every connection.
//   - The coordinator answers AUTH carrying its session nonce Nc, fresh for
//     every run. Both sides derive one key per direction:
//       K_c2b = HMAC-SHA-256(K, "tinysplit/1 c2b" || 0 || Nc || HELLO payload)
//       K_b2c = HMAC-SHA-256(K, "tinysplit/1 b2c" || 0 || Nc || HELLO payload)
//     (the HELLO payload holds Nb, the board id and its budgets, so a HELLO
//     altered on the way makes every later tag fail).
//   - From AUTH on, every frame in each direction carries kFlagMac and a
//     16-byte tag: HMAC-SHA-256(K_dir, counter || frame without its tag),
//     truncated to 16 bytes, where counter is a 64-bit little-endian count
//     of authenticated frames already sent in that direction (AUTH is 0).
//     The counter is never sent: TCP delivers in order, so both ends know it.
// A frame recorded in another session fails (other Nb or Nc, so other keys);
// a frame replayed, dropped or reordered within a session fails (the counter
// moved on); a forged frame fails (no K).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/sha256.h"
#include "core/wire.h"

namespace ts {
namespace auth {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 16;
static_assert(kNonceBytes == wire::HelloPayload::kNonceSize, "HELLO nonce size");
static_assert(kNonceBytes == wire::AuthPayload::kSize, "AUTH nonce size");

// The two directional keys of one coordinator-board session.
struct SessionKeys {
  uint8_t c2b[kKeyBytes];
  uint8_t b2c[kKeyBytes];
};

// Derives the session keys from the shared key, the coordinator's nonce and
// the board's HELLO payload (as sent, 32 bytes).
void derive_session(const uint8_t key[kKeyBytes], const uint8_t coord_nonce[kNonceBytes], const uint8_t* hello,
                    size_t hello_len, SessionKeys* out);

// The two directional keys of one board-to-board link (docs/protocol.md,
// "Board-to-board links"). The board that opened the connection is the
// opener, the one that accepted it the acceptor; each sent a 36-byte HELLO
// with a fresh nonce. Both derive
//   K_o2a = HMAC(K, "tinysplit/1 peer o2a" || 0 || deployment || opener ||
//                acceptor || HELLO_opener || HELLO_acceptor)
// and K_a2o with "a2o", where deployment is the plan id (u32 LE) and opener,
// acceptor the two boards' plan indices (u16 LE). A link of another plan,
// between other boards, or with a nonce of another connection has other keys.
struct PeerKeys {
  uint8_t o2a[kKeyBytes];
  uint8_t a2o[kKeyBytes];
};
void derive_peer(const uint8_t key[kKeyBytes], uint32_t deployment, uint16_t opener, uint16_t acceptor,
                 const uint8_t* hello_opener, size_t opener_len, const uint8_t* hello_acceptor, size_t acceptor_len,
                 PeerKeys* out);

// A fresh nonce: HMAC(K, "tinysplit/1 nonce" || entropy || counter). Unique as
// long as (entropy, counter) never repeats under one key.
void make_nonce(const uint8_t key[kKeyBytes], const uint8_t* entropy, size_t entropy_len, uint64_t counter,
                uint8_t out[kNonceBytes]);

// One direction of one link: the key and the frame counter.
class FrameMac {
 public:
  void start(const uint8_t key[kKeyBytes]);
  void stop();
  bool active() const { return active_; }
  uint64_t counter() const { return counter_; }

  // Computes the tag of a frame encoded with kFlagMac whose header and
  // payload are body[0..body_len) and writes its wire::kTagSize bytes to
  // `tag` (which may be body + body_len). The counter advances.
  void seal(const uint8_t* body, size_t body_len, uint8_t* tag);
  // Checks the tag of a received frame of `len` bytes (tag included). On
  // success the counter advances; on failure nothing changes.
  bool check(const uint8_t* frame, size_t len);

 private:
  void tag(const uint8_t* frame, size_t body_len, uint8_t out[kSha256Bytes]);
  HmacSha256 mac_;
  uint64_t counter_ = 0;
  bool active_ = false;
};

// Parses a key file's text: exactly 64 hexadecimal digits, optionally
// surrounded by white space (one line). False otherwise.
bool parse_key_hex(const char* text, size_t len, uint8_t out[kKeyBytes]);

}  // namespace auth
}  // namespace ts
