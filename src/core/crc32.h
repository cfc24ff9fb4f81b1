// CRC-32 as used by Ethernet, zlib and PNG (IEEE 802.3): reflected, polynomial
// 0xEDB88320, initial value and final XOR 0xFFFFFFFF. crc32("123456789") is
// 0xCBF43926.
//
// Shared by the wire format (every frame carries one), model files and
// fragments. Portable C++17: no heap, no OS; slicing-by-4 with its 4 KiB of
// tables built at compile time (on a board they live in flash). Host builds
// use zlib's crc32 instead (same values; see crc32.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ts {

// Incremental form, zlib style: `crc` is the CRC of all bytes seen so far
// (0 for no bytes), and the result is the CRC of those bytes followed by
// `data`. So crc32_update(crc32_update(0, a, na), b, nb) == crc32(a ++ b).
// Keeping the running value in its finished form (rather than an inverted
// internal state) means a caller never needs an init or a finish step.
uint32_t crc32_update(uint32_t crc, const void* data, size_t len);

// The portable slicing-by-4 implementation, whatever the build selects for
// crc32_update (tests compare the two).
uint32_t crc32_update_portable(uint32_t crc, const void* data, size_t len);

// One-shot CRC of a buffer; same as crc32_update(0, data, len).
inline uint32_t crc32(const void* data, size_t len) { return crc32_update(0, data, len); }

}  // namespace ts
