// SHA-256 and HMAC-SHA-256 (src/core/sha256.h) against published vectors:
// FIPS 180-4's examples (via NIST's example documents) and RFC 4231; and our
// RFC 2104 composition of HMAC against Mbed TLS's own HMAC (mbedtls_md_hmac,
// which the firmware cannot use because it allocates) on random inputs.
#include <gtest/gtest.h>
#include <mbedtls/md.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/sha256.h"

namespace {

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string digest(const std::string& m) {
  uint8_t out[32];
  ts::sha256(m.data(), m.size(), out);
  return hex(out, 32);
}

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> v;
  for (size_t i = 0; i + 1 < s.size(); i += 2) v.push_back(uint8_t(std::stoul(s.substr(i, 2), nullptr, 16)));
  return v;
}

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAsInOddPieces) {
  ts::Sha256 s;
  const std::string a(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = left < a.size() ? left : a.size();
    s.update(a.data(), n);
    left -= n;
  }
  uint8_t out[32];
  s.finish(out);
  EXPECT_EQ(hex(out, 32), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEveryBoundary) {
  std::string m;
  for (int i = 0; i < 200; ++i) m += char(i * 7 + 3);
  for (size_t len = 0; len <= m.size(); ++len) {
    uint8_t one[32], two[32];
    ts::sha256(m.data(), len, one);
    for (size_t cut = 0; cut <= len; cut += 13) {
      ts::Sha256 s;
      s.update(m.data(), cut);
      s.update(m.data() + cut, len - cut);
      s.finish(two);
      ASSERT_EQ(hex(one, 32), hex(two, 32)) << "len " << len << " cut " << cut;
    }
  }
}

struct HmacCase {
  std::string key_hex, data_hex, mac_hex;
};

TEST(HmacSha256, Rfc4231) {
  const std::vector<HmacCase> cases = {
      {std::string(40, '0').replace(0, 40, "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), "4869205468657265",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(40, 'a'), std::string(100, 'd'), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {"0102030405060708090a0b0c0d0e0f10111213141516171819", std::string(100, 'c').replace(0, 100, std::string(50, 'c') + std::string(50, 'd')).replace(0, 100, [] {
         std::string s;
         for (int i = 0; i < 50; ++i) s += "cd";
         return s;
       }()),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      // Key longer than a block (131 bytes of 0xaa).
      {std::string(262, 'a'), "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
  };
  for (const auto& c : cases) {
    const auto k = unhex(c.key_hex), d = unhex(c.data_hex);
    uint8_t out[32];
    ts::hmac_sha256(k.data(), k.size(), d.data(), d.size(), out);
    EXPECT_EQ(hex(out, 32), c.mac_hex) << c.key_hex;
    // The precomputed-key form gives the same, twice in a row.
    ts::HmacSha256 m(k.data(), k.size());
    for (int rep = 0; rep < 2; ++rep) {
      m.begin();
      m.update(d.data(), d.size() / 2);
      m.update(d.data() + d.size() / 2, d.size() - d.size() / 2);
      m.finish(out);
      EXPECT_EQ(hex(out, 32), c.mac_hex);
    }
  }
}

// Random keys of every length from 0 to 200 bytes (below, at and above the
// 64-byte block, where the key is hashed first) with random messages of
// lengths around the block and padding boundaries, one-shot and streamed in
// random pieces through one keyed HmacSha256 reused for several messages.
TEST(HmacSha256, AgreesWithMbedtlsHmacOnRandomInputs) {
  const mbedtls_md_info_t* md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  ASSERT_NE(md, nullptr);
  std::mt19937 rng(20261201);
  auto bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
  };
  const size_t msg_lens[] = {0, 1, 31, 32, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 1416};
  int compared = 0;
  for (size_t key_len = 0; key_len <= 200; ++key_len) {
    const auto key = bytes(key_len);
    ts::HmacSha256 keyed(key.data(), key.size());
    for (size_t len : msg_lens) {
      const auto msg = bytes(len + rng() % 3);  // some lengths one or two past the boundary
      uint8_t want[32], one_shot[32], streamed[32];
      ASSERT_EQ(mbedtls_md_hmac(md, key.data(), key.size(), msg.data(), msg.size(), want), 0);
      ts::hmac_sha256(key.data(), key.size(), msg.data(), msg.size(), one_shot);
      ASSERT_EQ(hex(one_shot, 32), hex(want, 32)) << "key " << key_len << " bytes, message " << msg.size();
      keyed.begin();
      for (size_t at = 0; at < msg.size();) {
        const size_t n = std::min<size_t>(msg.size() - at, 1 + rng() % 97);
        keyed.update(msg.data() + at, n);
        at += n;
      }
      keyed.finish(streamed);
      ASSERT_EQ(hex(streamed, 32), hex(want, 32)) << "streamed, key " << key_len << " bytes, message " << msg.size();
      ++compared;
    }
  }
  EXPECT_EQ(compared, 201 * 16);
  // A different key gives a different tag (the comparison above is not vacuous).
  uint8_t a[32], b[32];
  const uint8_t k1[1] = {1}, k2[1] = {2};
  ts::hmac_sha256(k1, 1, "m", 1, a);
  ts::hmac_sha256(k2, 1, "m", 1, b);
  EXPECT_NE(hex(a, 32), hex(b, 32));
}

TEST(HmacSha256, WipeForgetsTheKey) {
  const uint8_t key[32] = {7, 7, 7};
  uint8_t before[32], after[32], unkeyed[32];
  ts::HmacSha256 m(key, sizeof key);
  m.begin();
  m.update("x", 1);
  m.finish(before);
  m.wipe();
  m.begin();
  m.update("x", 1);
  m.finish(after);
  EXPECT_NE(hex(before, 32), hex(after, 32));
  // After wipe() the states are plain SHA-256 starts: the result is
  // SHA-256(SHA-256("x")), no key involved.
  ts::sha256("x", 1, unkeyed);
  ts::sha256(unkeyed, 32, unkeyed);
  EXPECT_EQ(hex(after, 32), hex(unkeyed, 32));
}

TEST(HmacSha256, ConstantTimeCompare) {
  uint8_t a[16] = {1, 2, 3}, b[16] = {1, 2, 3};
  EXPECT_TRUE(ts::equal_ct(a, b, 16));
  b[15] ^= 1;
  EXPECT_FALSE(ts::equal_ct(a, b, 16));
}

}  // namespace
