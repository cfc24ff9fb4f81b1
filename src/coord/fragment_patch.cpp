#include "coord/fragment_patch.h"

#include <algorithm>
#include <cstring>

#include "core/wire.h"

namespace ts::coord {

namespace {

constexpr size_t kBlock = 32;
constexpr uint64_t kMul = 0x100000001b3ull;  // odd: the rolling hash's base

// Polynomial hash of p[0, kBlock), mod 2^64.
uint64_t block_hash(const uint8_t* p) {
  uint64_t h = 0;
  for (size_t i = 0; i < kBlock; ++i) h = h * kMul + p[i];
  return h;
}

// Base offsets of every kBlock-aligned block, by hash: open addressing,
// one offset per slot (the first block of a hash wins; a miss only costs a
// copy not found).
class BlockIndex {
 public:
  explicit BlockIndex(const std::vector<uint8_t>& base) {
    const size_t blocks = base.size() / kBlock;
    size_t cap = 16;
    while (cap < 2 * blocks) cap *= 2;
    mask_ = cap - 1;
    slots_.assign(cap, Slot{});
    for (size_t b = 0; b < blocks; ++b) {
      const uint64_t h = block_hash(base.data() + b * kBlock);
      for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].used && slots_[i].hash == h) break;
        if (!slots_[i].used) {
          slots_[i] = Slot{h, uint32_t(b * kBlock), true};
          break;
        }
      }
    }
  }
  // Offset of a block with hash h, or -1.
  int64_t find(uint64_t h) const {
    for (size_t i = size_t(h) & mask_; slots_[i].used; i = (i + 1) & mask_)
      if (slots_[i].hash == h) return slots_[i].at;
    return -1;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t at = 0;
    bool used = false;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Packs ops into frames of at most kMaxPayload bytes, each starting with
// the base's digest prefix, splitting new bytes across frames as needed.
class FramePacker {
 public:
  FramePacker(const uint8_t base_sha256[32], Patch* out) : out_(out) {
    std::memcpy(prefix_, base_sha256, wire::kPatchBaseBytes);
  }
  void copy(uint32_t from, uint32_t len) {
    out_->copied += len;
    while (len) {
      const uint32_t n = std::min(len, kMaxCopyOp);
      wire::PatchOp op;
      op.copy = true;
      op.from = from;
      op.len = n;
      room(wire::kPatchOpHeader + 1);
      put(op, nullptr);
      from += n;
      len -= n;
    }
  }
  void literal(const uint8_t* p, uint32_t len) {
    out_->literal += len;
    while (len) {
      room(wire::kPatchOpHeader + 1);
      const uint32_t n = std::min<uint32_t>(len, uint32_t(wire::kMaxPayload - cur().payload.size() - wire::kPatchOpHeader));
      wire::PatchOp op;
      op.len = n;
      put(op, p);
      p += n;
      len -= n;
    }
  }
  void finish() {
    for (const auto& f : out_->frames) out_->bytes += int64_t(f.payload.size());
  }

 private:
  PatchFrame& cur() { return out_->frames.back(); }
  // Starts a new frame unless the current one has `need` bytes free.
  void room(size_t need) {
    if (!out_->frames.empty() && cur().payload.size() + need <= wire::kMaxPayload) return;
    PatchFrame f;
    f.offset = at_;
    f.payload.assign(prefix_, prefix_ + wire::kPatchBaseBytes);
    out_->frames.push_back(std::move(f));
  }
  void put(const wire::PatchOp& op, const uint8_t* data) {
    auto& p = cur().payload;
    const size_t o = p.size();
    p.resize(o + wire::kPatchOpHeader);
    wire::encode_patch_op(op, p.data() + o, wire::kPatchOpHeader);
    if (data) p.insert(p.end(), data, data + op.len);
    at_ += op.len;
  }

  Patch* out_;
  uint8_t prefix_[wire::kPatchBaseBytes];
  uint32_t at_ = 0;
};

}  // namespace

Patch make_patch(const std::vector<uint8_t>& base, const uint8_t base_sha256[32], const std::vector<uint8_t>& next) {
  Patch out;
  FramePacker pack(base_sha256, &out);
  const BlockIndex index(base);
  uint64_t top = 1;  // kMul^(kBlock-1): the weight of the byte leaving the window
  for (size_t i = 1; i < kBlock; ++i) top *= kMul;
  size_t lit = 0;  // first byte of `next` not yet sent
  size_t i = 0;
  uint64_t h = next.size() >= kBlock ? block_hash(next.data()) : 0;
  while (i + kBlock <= next.size()) {
    const int64_t at = index.find(h);
    if (at >= 0 && std::memcmp(base.data() + at, next.data() + i, kBlock) == 0) {
      // Grow the match both ways: back over bytes not yet sent, then forward.
      size_t from = size_t(at), to = i, len = kBlock;
      while (to > lit && from > 0 && base[from - 1] == next[to - 1]) --from, --to, ++len;
      while (to + len < next.size() && from + len < base.size() && base[from + len] == next[to + len]) ++len;
      if (to > lit) pack.literal(next.data() + lit, uint32_t(to - lit));
      pack.copy(uint32_t(from), uint32_t(len));
      i = lit = to + len;
      if (i + kBlock <= next.size()) h = block_hash(next.data() + i);
      continue;
    }
    if (i + kBlock < next.size()) h = (h - next[i] * top) * kMul + next[i + kBlock];
    ++i;
  }
  if (lit < next.size()) pack.literal(next.data() + lit, uint32_t(next.size() - lit));
  pack.finish();
  return out;
}

}  // namespace ts::coord
