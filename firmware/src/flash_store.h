// The worker's FlashStore on the board's flash region (0x60000000 on a
// Teensy 4.1; emulated by QEMU's PSRAM at the same address).
//
// Two slots (A/B), each a 4 KB header sector followed by data sectors. A
// deploy stages into the slot that does not hold the current fragment and
// commit() writes that slot's header last, with a generation number one
// higher, so a power cut at any point leaves the previous fragment intact.
// The committed fragment is read in place: current() returns a pointer into
// flash, never a RAM copy.
//
// Flash semantics are kept: a sector is erased (set to 0xFF) before its
// first program in a staging session, and only whole 4 KB sectors are
// erased. Erase and program are the board's (board.h): plain stores on QEMU,
// FlexSPI commands from RAM-resident code on a Teensy 4.1.
#pragma once

#include <stdint.h>

#include "core/worker.h"

class FlashRegionStore final : public ts::core::FlashStore {
 public:
  static constexpr uint32_t kSector = 4096;
  // [base, base + size) must be whole sectors.
  void init(uint8_t* base, uint32_t size);
  uint32_t capacity() const override { return slot_data_; }
  bool stage(uint32_t offset, const uint8_t* data, uint32_t len) override;
  const uint8_t* staged(uint32_t size) const override {
    return staging_ >= 0 && size <= slot_data_ ? slot(staging_) + kSector : nullptr;
  }
  bool commit(uint32_t size, uint32_t crc) override;
  const uint8_t* current(uint32_t* size) const override;
  uint32_t sectors_erased() const { return erased_total_; }
  // Generation of the committed fragment (0 = none); grows with each commit.
  uint32_t generation() const {
    const int c = current_slot();
    return c < 0 ? 0 : header(c)->generation;
  }

 private:
  struct Header {
    uint32_t magic, generation, size, crc, check;
  };
  uint8_t* slot(int i) const { return base_ + uint32_t(i) * slot_bytes_; }
  const Header* header(int i) const { return reinterpret_cast<const Header*>(slot(i)); }
  bool valid(int i) const;
  int current_slot() const;
  bool erase_sector(uint8_t* p);
  bool begin_staging();

  uint8_t* base_ = nullptr;
  uint32_t slot_bytes_ = 0, slot_data_ = 0;
  int staging_ = -1;  // slot being staged, -1 = none
  // Sectors of the staging slot erased in this session, one bit each.
  static constexpr uint32_t kMaxSectors = 8u * 1024u * 1024u / kSector;
  uint32_t erased_[kMaxSectors / 32u] = {};
  uint32_t erased_total_ = 0;
};
