#include "plan/frames.h"

#include <algorithm>

#include "core/wire.h"

namespace ts::plan {

std::vector<GatheredFrame> gather_frames(const Piece* s, size_t n) {
  constexpr size_t kMax = wire::kMaxPayload;
  constexpr size_t kHdr = wire::kInputBlockHeader;
  std::vector<GatheredFrame> out;
  size_t i = 0;
  uint32_t off = 0;  // bytes of s[i] already sent
  while (i < n) {
    size_t used = 0, data = 0;
    while (i < n) {
      const size_t room = kMax - used;
      if (room < kHdr + 1) break;
      const size_t space = room - kHdr;
      uint32_t rest = s[i].count - off;
      if (off > 0 || rest >= space || rest > 0xFFFF) {
        // A piece of one long send.
        rest = uint32_t(std::min<size_t>({size_t(rest), space, size_t(0xFFFF)}));
        used += kHdr + rest;
        data += rest;
        off += rest;
        if (off == s[i].count) {
          ++i;
          off = 0;
        }
        continue;
      }
      // Whole sends: one strided block over the following equal ones.
      uint32_t k = 1, stride = 0;
      while (i + k < n && k < 0xFFFF && size_t(k + 1) * rest <= space) {
        const Piece& t = s[i + k];
        const Piece& p = s[i + k - 1];
        if (t.count != s[i].count || t.offset <= p.offset) break;
        const uint32_t d = t.offset - p.offset;
        if (k == 1 ? d < s[i].count : d != stride) break;
        stride = d;
        ++k;
      }
      used += kHdr + size_t(k) * rest;
      data += size_t(k) * rest;
      i += k;
    }
    out.push_back(GatheredFrame{int32_t(data), int32_t(used)});
  }
  return out;
}

FrameCount count_gathered(const Piece* pieces, size_t n) {
  FrameCount c;
  for (const GatheredFrame& f : gather_frames(pieces, n)) {
    ++c.frames;
    c.wire_bytes += int64_t(wire::kHeaderSize) + f.payload;
    c.data += f.data;
  }
  return c;
}

FrameCount count_message(int64_t count) {
  FrameCount c;
  if (count <= 0) return c;
  c.frames = (count + int64_t(wire::kMaxPayload) - 1) / int64_t(wire::kMaxPayload);
  c.wire_bytes = count + c.frames * int64_t(wire::kHeaderSize);
  c.data = count;
  return c;
}

std::vector<Piece> pieces_of(const std::vector<core::Send>& sends, size_t first, size_t n) {
  std::vector<Piece> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Piece{sends[first + i].offset, sends[first + i].count};
  return v;
}

}  // namespace ts::plan
