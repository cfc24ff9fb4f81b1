// Little-endian integer codecs, byte by byte: the one definition every
// format of the project uses (wire frames, fragments, .tsqm, hashes), so
// padding, alignment and host byte order never leak into bytes that leave a
// process. Portable C++17, header-only.
#pragma once

#include <stdint.h>

namespace ts {
namespace le {

inline void put_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline void put_u32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}
inline uint16_t get_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline int32_t get_i32(const uint8_t* p) { return int32_t(get_u32(p)); }

}  // namespace le
}  // namespace ts
