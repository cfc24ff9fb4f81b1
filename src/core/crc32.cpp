#include "core/crc32.h"

// Two implementations of the same CRC:
//  - host builds that define TS_CRC32_ZLIB (CMake does, when zlib is found)
//    call zlib's crc32_z: the same CRC (reflected 0xEDB88320, init and final
//    XOR 0xFFFFFFFF, the running value kept in finished form, exactly this
//    file's crc32_update contract), in zlib's well-kept fast implementation;
//  - everything else (the boards' firmware, hosts without zlib) uses the
//    portable slicing-by-4 below: four 1 KiB tables built at compile time
//    (4 KiB of flash on a board), two words per step. On the Cortex-M7 it
//    takes 3.63 instructions a byte against slicing-by-8's 4.38 (a lookup a
//    byte either way, less to assemble; the firmware selftest's `crc32`
//    line), in half the flash.
// tests/wire_test.cpp checks both against a bitwise reference.
#if defined(TS_CRC32_ZLIB)
#include <zlib.h>
#endif

namespace ts {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // 0x04C11DB7 bit-reversed

struct Crc32Tables {
  uint32_t t[4][256];
};

// t[0][b] is the CRC register after shifting byte b through eight rounds of
// the reflected polynomial division; t[k][b] is the same for byte b followed
// by k zero bytes, so that t[k][b] = (t[k-1][b] >> 8) ^ t[0][t[k-1][b] & 0xFF].
// Then four input bytes XORed into the register are folded by one lookup
// each, in any order.
constexpr Crc32Tables make_tables() {
  Crc32Tables s{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPoly : (r >> 1);
    s.t[0][b] = r;
  }
  for (int k = 1; k < 4; ++k)
    for (uint32_t b = 0; b < 256; ++b) s.t[k][b] = (s.t[k - 1][b] >> 8) ^ s.t[0][s.t[k - 1][b] & 0xFFu];
  return s;
}

constexpr Crc32Tables kTables = make_tables();
static_assert(kTables.t[0][1] == 0x77073096u, "CRC-32 table is wrong");

}  // namespace

// Portable slicing-by-4; the reference the zlib path must equal.
uint32_t crc32_update_portable(uint32_t crc, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t r = ~crc;  // undo the previous final XOR to resume the register
  // One base register per table (a 32-bit core indexes each with a scaled
  // register, no offset arithmetic in the loop).
  const uint32_t* const t0 = kTables.t[0];
  const uint32_t* const t1 = kTables.t[1];
  const uint32_t* const t2 = kTables.t[2];
  const uint32_t* const t3 = kTables.t[3];
  // Little-endian assembly of a word (portable: no unaligned or type-punned
  // load; compilers make it one load) and its four lookups.
  const auto word = [&](const uint8_t* q) {
    r ^= uint32_t(q[0]) | uint32_t(q[1]) << 8 | uint32_t(q[2]) << 16 | uint32_t(q[3]) << 24;
    r = t3[r & 0xFFu] ^ t2[(r >> 8) & 0xFFu] ^ t1[(r >> 16) & 0xFFu] ^ t0[r >> 24];
  };
  // Byte steps up to a 4-byte aligned address, two words per step, the tail.
  while (len && (reinterpret_cast<uintptr_t>(p) & 3u)) {
    r = t0[(r ^ *p++) & 0xFFu] ^ (r >> 8);
    --len;
  }
  for (; len >= 8; p += 8, len -= 8) {
    word(p);
    word(p + 4);
  }
  if (len >= 4) {
    word(p);
    p += 4;
    len -= 4;
  }
  while (len--) r = t0[(r ^ *p++) & 0xFFu] ^ (r >> 8);
  return ~r;
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t len) {
#if defined(TS_CRC32_ZLIB)
  if (len == 0) return crc;
  return uint32_t(crc32_z(crc, static_cast<const Bytef*>(data), len));
#else
  return crc32_update_portable(crc, data, len);
#endif
}

}  // namespace ts
