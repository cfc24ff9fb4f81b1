#include "core/crc32.h"

// Two implementations of the same CRC:
//  - host builds that define TS_CRC32_ZLIB (CMake does, when zlib is found)
//    call zlib's crc32_z: the same CRC (reflected 0xEDB88320, init and final
//    XOR 0xFFFFFFFF, the running value kept in finished form, exactly this
//    file's crc32_update contract), in zlib's well-kept fast implementation;
//  - everything else (the Cortex-M7 firmware, hosts without zlib) uses the
//    portable slicing-by-8 below: eight 1 KiB tables built at compile time
//    (8 KiB of flash on a board), eight bytes per step.
// tests/wire_test.cpp checks both against a bitwise reference.
#if defined(TS_CRC32_ZLIB)
#include <zlib.h>
#endif

namespace ts {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // 0x04C11DB7 bit-reversed

struct Crc32Tables {
  uint32_t t[8][256];
};

// t[0][b] is the CRC register after shifting byte b through eight rounds of
// the reflected polynomial division; t[k][b] is the same for byte b followed
// by k zero bytes, so that t[k][b] = (t[k-1][b] >> 8) ^ t[0][t[k-1][b] & 0xFF].
// Then eight input bytes XORed into the register (the first four) and the
// next four bytes are folded by one lookup each, in any order.
constexpr Crc32Tables make_tables() {
  Crc32Tables s{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPoly : (r >> 1);
    s.t[0][b] = r;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) s.t[k][b] = (s.t[k - 1][b] >> 8) ^ s.t[0][s.t[k - 1][b] & 0xFFu];
  return s;
}

constexpr Crc32Tables kTables = make_tables();
static_assert(kTables.t[0][1] == 0x77073096u, "CRC-32 table is wrong");

}  // namespace

// Portable slicing-by-8; the reference the zlib path must equal.
uint32_t crc32_update_portable(uint32_t crc, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t r = ~crc;  // undo the previous final XOR to resume the register
  const auto& T = kTables.t;
  // Byte steps up to an 8-byte aligned address, 8 bytes per step, the tail.
  while (len && (reinterpret_cast<uintptr_t>(p) & 7u)) {
    r = T[0][(r ^ *p++) & 0xFFu] ^ (r >> 8);
    --len;
  }
  while (len >= 8) {
    // Little-endian assembly of the words (portable: no unaligned or
    // type-punned loads; compilers make these single loads).
    const uint32_t lo = r ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    r = T[7][lo & 0xFFu] ^ T[6][(lo >> 8) & 0xFFu] ^ T[5][(lo >> 16) & 0xFFu] ^ T[4][lo >> 24] ^ T[3][p[4]] ^
        T[2][p[5]] ^ T[1][p[6]] ^ T[0][p[7]];
    p += 8;
    len -= 8;
  }
  while (len--) r = T[0][(r ^ *p++) & 0xFFu] ^ (r >> 8);
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
