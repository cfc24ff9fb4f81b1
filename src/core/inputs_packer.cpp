#include "core/inputs_packer.h"

#include <string.h>

#include "core/wire.h"

namespace ts {
namespace core {

using wire::kInputBlockHeader;
using wire::kMaxPayload;

// Partial sums (int32 values, sends of whole values: fragment.cpp) are
// packed like activations: with a payload and block headers of whole int32
// values, every piece of a long send is whole values too.
static_assert(kMaxPayload % 4 == 0 && kInputBlockHeader % 4 == 0, "pieces of int32 sends stay whole values");
// A block's len and count are 16 bits; a frame's room is below that.
static_assert(kMaxPayload - kInputBlockHeader < 0xFFFF, "a piece fits a block's len");

namespace {

// Whether send t joins the strided block of n equal sends from `first` to
// `last` (the block's stride so far: `stride`); sets *d to its distance.
inline bool joins(const PackPiece& first, const PackPiece& last, const PackPiece& t, uint32_t n, uint32_t stride,
                  uint32_t* d) {
  if (t.count != first.count || t.offset <= last.offset) return false;
  *d = t.offset - last.offset;
  return n == 1 ? *d >= first.count : *d == stride;
}

// After a block of n sends: the cursor past them, and *s the next send (t
// when it was read and not taken).
inline void after_block(const PieceSource& src, PackCursor* cur, uint32_t n, bool t_read, const PackPiece& t,
                        bool t_have, PackPiece* s, bool* have) {
  cur->i += n;
  if (t_read) {
    *s = t;
    *have = t_have;
  } else {
    *have = src.piece(cur->i, s);
  }
}

}  // namespace

PackedFrame pack_inputs_frame(const PieceSource& src, PackCursor* cur, const uint8_t* out, uint8_t* payload) {
  const bool write = payload != nullptr && out != nullptr;
  PackedFrame f;
  size_t used = 0;
  // Every send is read once: s is always send cur->i (when `have`).
  PackPiece s;
  bool have = src.piece(cur->i, &s);
  while (have) {
    const size_t room = kMaxPayload - used;
    if (room < kInputBlockHeader + 1) break;
    const size_t space = room - kInputBlockHeader;
    wire::InputBlock b;
    b.first = s.offset + cur->off;
    uint32_t rest = s.count - cur->off;
    if (cur->off > 0 || rest >= space) {
      // A piece of one long send.
      if (rest > space) rest = uint32_t(space);
      b.len = uint16_t(rest);
      b.count = 1;
      if (write) {
        wire::encode_input_block_header(b, payload + used, room);
        memcpy(payload + used + kInputBlockHeader, out + s.pos + cur->off, rest);
      }
      used += kInputBlockHeader + rest;
      f.data += rest;
      cur->off += rest;
      if (cur->off == s.count) {
        ++cur->i;
        cur->off = 0;
        have = src.piece(cur->i, &s);
      }
      continue;
    }
    // Whole sends: extend a strided block over the following ones, copying
    // each behind the block's header as it joins.
    uint8_t* data = write ? payload + used + kInputBlockHeader : nullptr;
    if (write) memcpy(data, out + s.pos, rest);
    b.len = uint16_t(rest);
    uint32_t n = 1;
    PackPiece p = s, t;
    bool t_read = false, t_have = false;  // t is send cur->i + n, read and not taken
    while (n < 0xFFFF && (n + 1) * size_t(rest) <= space) {
      t_have = src.piece(cur->i + n, &t);
      t_read = true;
      uint32_t d = 0;
      if (!t_have || !joins(s, p, t, n, b.stride, &d)) break;
      b.stride = d;
      if (write) memcpy(data + size_t(n) * rest, out + t.pos, rest);
      t_read = false;
      p = t;
      ++n;
    }
    b.count = uint16_t(n);
    if (n == 1) b.stride = 0;
    if (write) wire::encode_input_block_header(b, payload + used, room);
    used += kInputBlockHeader + size_t(n) * rest;
    f.data += n * rest;
    after_block(src, cur, n, t_read, t, t_have, &s, &have);
  }
  f.last = !have;
  f.payload = uint16_t(used);
  return f;
}

PackedFrame pack_coded_inputs_frame(const PieceSource& src, PackCursor* cur, const uint8_t* out, uint8_t* payload,
                                    CodeParams code) {
  constexpr size_t kHead = wire::kCodedBlockHeader;
  PackedFrame f;
  size_t used = 0;
  PackPiece s;
  bool have = src.piece(cur->i, &s);
  while (have && kMaxPayload - used >= kHead + 1) {
    CodeWriter w(payload + used + kHead, kMaxPayload - used - kHead, code);
    wire::InputBlock b;
    b.first = s.offset + cur->off;
    b.mode = code.mode();
    b.fill = code.fill;
    const uint32_t rest = s.count - cur->off;
    if (cur->off > 0 || rest > 0xFFFF || !w.put(out + s.pos, rest)) {
      // A piece of one send: as many of its values as the room codes.
      const size_t n = w.put_most(out + s.pos + cur->off, rest > 0xFFFF ? 0xFFFF : rest);
      if (n == 0) break;
      b.len = uint16_t(n);
      b.count = 1;
      b.coded = uint16_t(w.finish());
      wire::encode_input_block_header(b, payload + used, kHead);
      used += kHead + b.coded;
      f.data += uint32_t(n);
      cur->off += uint32_t(n);
      if (cur->off == s.count) {
        ++cur->i;
        cur->off = 0;
        have = src.piece(cur->i, &s);
      }
      continue;
    }
    // Whole sends: a strided block over the following ones while their
    // codes fit.
    b.len = uint16_t(rest);
    uint32_t n = 1;
    PackPiece p = s, t;
    bool t_read = false, t_have = false;  // t is send cur->i + n, read and not taken
    while (n < 0xFFFF) {
      t_have = src.piece(cur->i + n, &t);
      t_read = true;
      uint32_t d = 0;
      if (!t_have || !joins(s, p, t, n, b.stride, &d) || !w.put(out + t.pos, rest)) break;
      b.stride = d;
      t_read = false;
      p = t;
      ++n;
    }
    b.count = uint16_t(n);
    if (n == 1) b.stride = 0;
    b.coded = uint16_t(w.finish());
    wire::encode_input_block_header(b, payload + used, kHead);
    used += kHead + b.coded;
    f.data += n * rest;
    after_block(src, cur, n, t_read, t, t_have, &s, &have);
  }
  f.last = !have;
  f.payload = uint16_t(used);
  return f;
}

// One send alone is cut into frames of kMaxPayload - kInputBlockHeader data
// bytes, one block each, the last holding the rest (pack_inputs_frame's
// "piece of one long send"; a shorter one is one block of one send).
PackTally count_one_send(uint32_t count) {
  PackTally t;
  const uint32_t room = uint32_t(kMaxPayload - kInputBlockHeader);
  t.frames = (count + room - 1) / room;
  t.data = count;
  t.payload = uint64_t(count) + uint64_t(t.frames) * kInputBlockHeader;
  return t;
}

uint64_t PackTally::wire_bytes() const { return payload + uint64_t(frames) * wire::kHeaderSize; }

PackTally count_inputs_frames(const PieceSource& src, uint32_t first) {
  PackTally t;
  PackCursor cur;
  cur.i = first;
  PackPiece p, next;
  if (!src.piece(first, &p)) return t;
  if (p.count > 0 && !src.piece(first + 1, &next)) return count_one_send(p.count);
  for (;;) {
    const PackedFrame f = pack_inputs_frame(src, &cur, nullptr, nullptr);
    ++t.frames;
    t.payload += f.payload;
    t.data += f.data;
    if (f.last) return t;
  }
}

}  // namespace core
}  // namespace ts
