// Test support: a board's flash in memory (core::FlashStore), of a given
// capacity; `full` makes every commit fail as a full disk would.
#pragma once

#include <cstring>
#include <vector>

#include "core/crc32.h"
#include "core/worker_api.h"

namespace ts::testing {

class MemFlash final : public ts::core::FlashStore {
 public:
  explicit MemFlash(uint32_t cap) : cap_(cap) {}
  uint32_t capacity() const override { return cap_; }
  bool stage(uint32_t off, const uint8_t* d, uint32_t n) override {
    if (uint64_t(off) + n > cap_) return false;
    if (staging_.size() < off + n) staging_.resize(off + n);
    std::memcpy(staging_.data() + off, d, n);
    return true;
  }
  const uint8_t* staged(uint32_t size) const override { return size <= staging_.size() ? staging_.data() : nullptr; }
  bool commit(uint32_t size, uint32_t crc) override {
    if (size > staging_.size() || ts::crc32(staging_.data(), size) != crc) return false;
    if (full) return false;  // a store that cannot write (a full disk)
    current_.assign(staging_.begin(), staging_.begin() + size);
    return true;
  }
  const uint8_t* current(uint32_t* size) const override {
    *size = uint32_t(current_.size());
    return current_.empty() ? nullptr : current_.data();
  }
  std::vector<uint8_t>& committed() { return current_; }  // to damage it in tests
  const char* commit_error() const override { return full ? "store full: no space left on device" : nullptr; }
  bool full = false;

 private:
  uint32_t cap_;
  std::vector<uint8_t> staging_, current_;
};

}  // namespace ts::testing
