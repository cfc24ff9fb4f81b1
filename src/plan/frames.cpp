#include "plan/frames.h"

#include "core/wire.h"

namespace ts::plan {

std::vector<GatheredFrame> gather_frames(const Piece* s, size_t n) {
  std::vector<GatheredFrame> out;
  if (n == 0) return out;
  const core::PieceArray src(s, n);
  core::PackCursor cur;
  for (;;) {
    const core::PackedFrame f = core::pack_inputs_frame(src, &cur, nullptr, nullptr);
    out.push_back(GatheredFrame{int32_t(f.data), int32_t(f.payload)});
    if (f.last) return out;
  }
}

FrameCount count_gathered(const Piece* pieces, size_t n) {
  const core::PackTally t = core::count_inputs_frames(core::PieceArray(pieces, n));
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
