#include "plan/frames.h"

#include <algorithm>

#include "core/wire.h"

namespace ts::plan {

namespace {

// The coded estimate of a group that packs plain as `plain` (module comment).
core::PackTally coded_tally(const core::PackTally& plain, double coded) {
  const uint64_t blocks = (plain.payload - plain.data) / wire::kInputBlockHeader;
  const uint64_t bytes = uint64_t(double(plain.data) * coded + 0.5);
  const uint64_t room = wire::kMaxPayload - wire::kCodedBlockHeader;
  core::PackTally t;
  t.frames = uint32_t(std::max<uint64_t>(1, (bytes + room - 1) / room));
  // As many blocks as the plain packing needs per frame, at most, in fewer frames.
  const uint64_t coded_blocks = std::max<uint64_t>(t.frames, (blocks + plain.frames - 1) / plain.frames * t.frames);
  t.data = plain.data;
  t.payload = bytes + std::min(coded_blocks, blocks) * wire::kCodedBlockHeader;
  if (t.payload > uint64_t(t.frames) * wire::kMaxPayload) ++t.frames;
  return t;
}

}  // namespace

std::vector<GatheredFrame> gather_frames(const Piece* s, size_t n, double coded) {
  std::vector<GatheredFrame> out;
  if (n == 0) return out;
  const core::PieceArray src(s, n);
  if (coded > 0) {
    const core::PackTally t = coded_tally(core::count_inputs_frames(src), coded);
    for (uint32_t f = 0; f < t.frames; ++f)
      out.push_back(GatheredFrame{int32_t(t.data * (f + 1) / t.frames - t.data * f / t.frames),
                                  int32_t(t.payload * (f + 1) / t.frames - t.payload * f / t.frames)});
    return out;
  }
  core::PackCursor cur;
  for (;;) {
    const core::PackedFrame f = core::pack_inputs_frame(src, &cur, nullptr, nullptr);
    out.push_back(GatheredFrame{int32_t(f.data), int32_t(f.payload)});
    if (f.last) return out;
  }
}

FrameCount count_gathered(const Piece* pieces, size_t n, double coded) {
  core::PackTally t = core::count_inputs_frames(core::PieceArray(pieces, n));
  if (coded > 0 && t.frames > 0) t = coded_tally(t, coded);
  FrameCount c;
  c.frames = int64_t(t.frames);
  c.wire_bytes = int64_t(t.wire_bytes());
  c.data = int64_t(t.data);
  return c;
}

FrameCount count_message(int64_t count) {
  FrameCount c;
  c.frames = int64_t(wire::frames_needed(size_t(count)));
  c.wire_bytes = int64_t(wire::message_wire_bytes(size_t(count)));
  c.data = count;
  return c;
}

std::vector<Piece> pieces_of(const std::vector<core::Send>& sends, size_t first, size_t n) {
  std::vector<Piece> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Piece{sends[first + i].offset, sends[first + i].count, 0};
  return v;
}

}  // namespace ts::plan
