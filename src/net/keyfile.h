// Key files for authenticated board links (core/auth.h, docs/protocol.md):
// one line of 64 hexadecimal digits (a 256-bit key), readable by its owner
// only. `tinysplit keygen -o FILE` writes one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/auth.h"

namespace ts::net {

using Key = std::array<uint8_t, auth::kKeyBytes>;

// Reads and checks a key file: a regular file, no access for group or others
// (like ssh's private keys), exactly one key. Throws ts::Error with one line
// naming the file otherwise.
Key load_key_file(const std::string& path);

// Creates `path` (it must not exist) with mode 0600 and a fresh random key.
void write_key_file(const std::string& path);

// Bytes from the kernel's random source (getrandom). Throws on failure.
void random_bytes(uint8_t* out, size_t n);

}  // namespace ts::net
