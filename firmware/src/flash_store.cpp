#include "flash_store.h"

#include <string.h>

#include "board.h"
#include "core/crc32.h"

namespace {
constexpr uint32_t kMagic = 0x534C4654;  // "TFLS"
uint32_t header_check(uint32_t magic, uint32_t gen, uint32_t size, uint32_t crc) {
  const uint32_t w[4] = {magic, gen, size, crc};
  return ts::crc32(w, sizeof w);
}
}  // namespace

void FlashRegionStore::init(uint8_t* base, uint32_t size) {
  base_ = base;
  slot_bytes_ = (size / 2u) & ~(kSector - 1u);
  slot_data_ = slot_bytes_ > kSector ? slot_bytes_ - kSector : 0;
  staging_ = -1;
}

bool FlashRegionStore::valid(int i) const {
  const Header* h = header(i);
  return h->magic == kMagic && h->size <= slot_data_ && h->check == header_check(h->magic, h->generation, h->size, h->crc);
}

int FlashRegionStore::current_slot() const {
  const bool a = valid(0), b = valid(1);
  if (a && b) return header(1)->generation > header(0)->generation ? 1 : 0;
  return a ? 0 : b ? 1 : -1;
}

bool FlashRegionStore::erase_sector(uint8_t* p) {
  erased_total_++;
  return board_flash_erase(p) != 0;
}

bool FlashRegionStore::begin_staging() {
  staging_ = current_slot() == 0 ? 1 : 0;
  memset(erased_, 0, sizeof erased_);
  return erase_sector(slot(staging_));  // invalidates the slot's old header first
}

bool FlashRegionStore::stage(uint32_t offset, const uint8_t* data, uint32_t len) {
  if (uint64_t(offset) + len > slot_data_) return false;
  // A deploy writes each byte once, from offset 0 up; a write at offset 0
  // starts a new staging session (a deploy cut off mid-way and restarted
  // must not program bytes that already hold data: NOR only clears bits).
  if (staging_ < 0 || offset == 0) {
    if (!begin_staging()) return false;
  }
  uint8_t* dst = slot(staging_) + kSector;
  for (uint32_t s = offset / kSector; len && s <= (offset + len - 1u) / kSector; ++s) {
    if (!(erased_[s / 32u] & (1u << (s % 32u)))) {
      if (!erase_sector(dst + s * kSector)) return false;
      erased_[s / 32u] |= 1u << (s % 32u);
    }
  }
  return board_flash_program(dst + offset, data, len) != 0;
}

bool FlashRegionStore::commit(uint32_t size, uint32_t crc) {
  if (staging_ < 0 || size > slot_data_) return false;
  const uint8_t* data = slot(staging_) + kSector;
  if (ts::crc32(data, size) != crc) return false;
  const int cur = current_slot();
  Header h;
  h.magic = kMagic;
  h.generation = cur >= 0 ? header(cur)->generation + 1u : 1u;
  h.size = size;
  h.crc = crc;
  h.check = header_check(h.magic, h.generation, h.size, h.crc);
  const int s = staging_;
  staging_ = -1;
  // The header sector was erased at begin_staging.
  return board_flash_program(slot(s), reinterpret_cast<const uint8_t*>(&h), sizeof h) != 0;
}

const uint8_t* FlashRegionStore::current(uint32_t* size) const {
  // A slot being staged has an erased header, so it is never current.
  const int c = current_slot();
  *size = c < 0 ? 0 : header(c)->size;
  return c < 0 ? nullptr : slot(c) + kSector;
}
