// Test support: a fragment with one little-endian u32 field changed and its
// trailing CRC-32 made good again, so that the reader's refusal names the
// field and not the checksum (the fragment reader's refusal tests).
#pragma once

#include <cstdint>
#include <vector>

#include "core/bytes.h"
#include "core/crc32.h"

namespace ts::testing {

inline std::vector<uint8_t> with_u32(std::vector<uint8_t> fragment, size_t at, uint32_t v) {
  ts::le::put_u32(fragment.data() + at, v);
  ts::le::put_u32(fragment.data() + fragment.size() - 4, ts::crc32(fragment.data(), fragment.size() - 4));
  return fragment;
}

}  // namespace ts::testing
