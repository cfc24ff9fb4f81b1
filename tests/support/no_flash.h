// Test support: a flash store that holds nothing and takes nothing, for
// tests of the portable worker that never deploy.
#pragma once

#include "core/worker_api.h"

namespace ts::testing {

class NoFlash final : public core::FlashStore {
 public:
  uint32_t capacity() const override { return 1u << 20; }
  bool stage(uint32_t, const uint8_t*, uint32_t) override { return false; }
  const uint8_t* staged(uint32_t) const override { return nullptr; }
  bool commit(uint32_t, uint32_t) override { return false; }
  const uint8_t* current(uint32_t* size) const override {
    *size = 0;
    return nullptr;
  }
};

}  // namespace ts::testing
