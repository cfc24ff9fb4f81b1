#include "core/auth.h"

namespace ts {
namespace auth {

namespace {

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

void derive_one(const uint8_t key[kKeyBytes], const char* label, const uint8_t coord_nonce[kNonceBytes],
                const uint8_t* hello, size_t hello_len, uint8_t out[kKeyBytes]) {
  HmacSha256 m(key, kKeyBytes);
  size_t n = 0;
  while (label[n]) ++n;
  const uint8_t zero = 0;
  m.update(label, n);
  m.update(&zero, 1);
  m.update(coord_nonce, kNonceBytes);
  m.update(hello, hello_len);
  m.finish(out);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

void derive_session(const uint8_t key[kKeyBytes], const uint8_t coord_nonce[kNonceBytes], const uint8_t* hello,
                    size_t hello_len, SessionKeys* out) {
  derive_one(key, "tinysplit/1 c2b", coord_nonce, hello, hello_len, out->c2b);
  derive_one(key, "tinysplit/1 b2c", coord_nonce, hello, hello_len, out->b2c);
}

void derive_peer(const uint8_t key[kKeyBytes], uint32_t deployment, uint16_t opener, uint16_t acceptor,
                 const uint8_t* hello_opener, size_t opener_len, const uint8_t* hello_acceptor, size_t acceptor_len,
                 PeerKeys* out) {
  uint8_t ctx[8];
  for (int i = 0; i < 4; ++i) ctx[i] = uint8_t(deployment >> (8 * i));
  ctx[4] = uint8_t(opener);
  ctx[5] = uint8_t(opener >> 8);
  ctx[6] = uint8_t(acceptor);
  ctx[7] = uint8_t(acceptor >> 8);
  const uint8_t lens[2] = {uint8_t(opener_len), uint8_t(acceptor_len)};
  const char* labels[2] = {"tinysplit/1 peer o2a", "tinysplit/1 peer a2o"};
  uint8_t* outs[2] = {out->o2a, out->a2o};
  for (int d = 0; d < 2; ++d) {
    HmacSha256 m(key, kKeyBytes);
    size_t n = 0;
    while (labels[d][n]) ++n;
    const uint8_t zero = 0;
    m.update(labels[d], n);
    m.update(&zero, 1);
    m.update(ctx, sizeof ctx);
    m.update(lens, sizeof lens);  // the HELLO lengths, so the two cannot shift into each other
    m.update(hello_opener, opener_len);
    m.update(hello_acceptor, acceptor_len);
    m.finish(outs[d]);
  }
}

void make_nonce(const uint8_t key[kKeyBytes], const uint8_t* entropy, size_t entropy_len, uint64_t counter,
                uint8_t out[kNonceBytes]) {
  HmacSha256 m(key, kKeyBytes);
  static const char kLabel[] = "tinysplit/1 nonce";
  m.update(kLabel, sizeof kLabel);  // with its NUL, as a separator
  uint8_t c[8];
  put_le64(c, counter);
  m.update(c, sizeof c);
  m.update(entropy, entropy_len);
  uint8_t d[kSha256Bytes];
  m.finish(d);
  for (size_t i = 0; i < kNonceBytes; ++i) out[i] = d[i];
}

void FrameMac::start(const uint8_t key[kKeyBytes]) {
  mac_.set_key(key, kKeyBytes);
  counter_ = 0;
  active_ = true;
}

void FrameMac::stop() {
  mac_.wipe();
  counter_ = 0;
  active_ = false;
}

void FrameMac::tag(const uint8_t* frame, size_t body_len, uint8_t out[kSha256Bytes]) {
  uint8_t c[8];
  put_le64(c, counter_);
  mac_.begin();
  mac_.update(c, sizeof c);
  mac_.update(frame, body_len);
  mac_.finish(out);
}

void FrameMac::seal(const uint8_t* body, size_t body_len, uint8_t* out) {
  uint8_t d[kSha256Bytes];
  tag(body, body_len, d);
  for (size_t i = 0; i < wire::kTagSize; ++i) out[i] = d[i];
  ++counter_;
}

bool FrameMac::check(const uint8_t* frame, size_t len) {
  if (!active_ || len < wire::kHeaderSize + wire::kTagSize) return false;
  uint8_t d[kSha256Bytes];
  tag(frame, len - wire::kTagSize, d);
  if (!equal_ct(d, frame + len - wire::kTagSize, wire::kTagSize)) return false;
  ++counter_;
  return true;
}

bool parse_key_hex(const char* text, size_t len, uint8_t out[kKeyBytes]) {
  size_t i = 0;
  while (i < len && is_space(text[i])) ++i;
  for (size_t k = 0; k < kKeyBytes; ++k) {
    if (i + 1 >= len + 1 || i + 2 > len) return false;
    const int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[k] = uint8_t(hi * 16 + lo);
    i += 2;
  }
  while (i < len && is_space(text[i])) ++i;
  return i == len;
}

}  // namespace auth
}  // namespace ts
