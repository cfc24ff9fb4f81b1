// A fragment sent as a delta of the one a board already holds (wire PATCH,
// core/wire.h): after a failover or a rejoin most of a board's new fragment
// is bytes its old one has too (weights of the layers it keeps, at other
// offsets), so those go as copies and only the rest travels.
//
// Pure code: no sockets. The coordinator knows the base because it deployed
// it; the board checks the base's digest and COMMIT checks the result, so a
// wrong guess costs one wasted patch and a full STORE, never a wrong fragment.
// The board applies the ops (core/worker_deploy.cpp, DeploySession::on_patch).
#pragma once

#include <cstdint>
#include <vector>

namespace ts::coord {

struct PatchFrame {
  uint32_t offset = 0;           // where the frame's first op writes
  std::vector<uint8_t> payload;  // base digest prefix + ops (wire PatchOp)
};

struct Patch {
  std::vector<PatchFrame> frames;
  int64_t bytes = 0;        // payload bytes of all frames (what the link carries, headers aside)
  int64_t copied = 0;       // bytes of `next` taken from the base
  int64_t literal = 0;      // bytes of `next` sent as they are
};

// Longest run one copy op stages (bounds a board's work per frame).
constexpr uint32_t kMaxCopyOp = 64 * 1024;

// The PATCH frames that build `next` from `base` (base_sha256: the base's
// SHA-256). Copies are found as in rsync: the base indexed in 32-byte
// blocks, `next` scanned with a rolling hash, each match grown both ways.
Patch make_patch(const std::vector<uint8_t>& base, const uint8_t base_sha256[32], const std::vector<uint8_t>& next);

}  // namespace ts::coord
