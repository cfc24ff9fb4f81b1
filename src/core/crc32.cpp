#include "core/crc32.h"

namespace ts {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // 0x04C11DB7 bit-reversed

struct Crc32Table {
  uint32_t entry[256];
};

// entry[b] is the CRC register after shifting byte b through eight rounds of
// the reflected polynomial division. Built at compile time (C++17 constexpr).
constexpr Crc32Table make_table() {
  Crc32Table t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPoly : (r >> 1);
    t.entry[b] = r;
  }
  return t;
}

constexpr Crc32Table kTable = make_table();
static_assert(kTable.entry[1] == 0x77073096u, "CRC-32 table is wrong");

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t r = ~crc;  // undo the previous final XOR to resume the register
  for (size_t i = 0; i < len; ++i) r = kTable.entry[(r ^ p[i]) & 0xFFu] ^ (r >> 8);
  return ~r;
}

}  // namespace ts
