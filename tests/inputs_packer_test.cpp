// Tests of core's INPUTS packer (core/inputs_packer.h) and of the one rule
// that cuts a message into frames (wire::frame_payload, frames_needed).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "core/inputs_packer.h"
#include "core/wire.h"

namespace {

using namespace ts;
using core::PackPiece;

// Packs a group for real from `out`, checks that every frame is a valid
// INPUTS payload whose blocks carry exactly the sends' bytes at their
// offsets, in order, and returns the frames' payload sizes.
std::vector<uint16_t> pack_and_check(const std::vector<PackPiece>& pieces, const std::vector<uint8_t>& out) {
  const core::PieceArray src(pieces.data(), pieces.size());
  core::PackCursor cur;
  std::vector<uint16_t> sizes;
  // What the receiver reconstructs: element -> byte.
  std::map<uint32_t, uint8_t> got;
  uint8_t payload[wire::kMaxPayload];
  for (bool last = false; !last;) {
    const core::PackedFrame f = core::pack_inputs_frame(src, &cur, out.data(), payload);
    EXPECT_GT(f.payload, 0);
    EXPECT_LE(size_t(f.payload), wire::kMaxPayload);
    EXPECT_TRUE(wire::input_blocks_ok(payload, f.payload));
    size_t pos = 0;
    wire::InputBlock b;
    uint32_t data = 0;
    while (wire::next_input_block(payload, f.payload, &pos, &b))
      for (uint32_t j = 0; j < b.count; ++j)
        for (uint32_t i = 0; i < b.len; ++i) {
          EXPECT_TRUE(got.emplace(b.first + j * b.stride + i, b.data[j * b.len + i]).second);
          ++data;
        }
    EXPECT_EQ(data, f.data);
    sizes.push_back(f.payload);
    last = f.last;
  }
  std::map<uint32_t, uint8_t> want;
  for (const PackPiece& p : pieces)
    for (uint32_t i = 0; i < p.count; ++i) want.emplace(p.offset + i, out[p.pos + i]);
  EXPECT_EQ(got, want);
  return sizes;
}

TEST(InputsPacker, RealFramesCarryTheSendsAndTheDryRunCountsThem) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    // Rows of a band (equal lengths at a constant stride, which become
    // strided blocks), then a few long and short sends (pieces).
    std::vector<PackPiece> pieces;
    uint32_t at = 0, pos = 0;
    const uint32_t len = 1 + rng() % 40, stride = len + rng() % 30, rows = rng() % 120;
    for (uint32_t r = 0; r < rows; ++r, at += stride, pos += len) pieces.push_back(PackPiece{at, len, pos});
    for (uint32_t k = rng() % 4; k > 0; --k) {
      const uint32_t n = 1 + rng() % 4000;
      at += 1 + rng() % 50;
      pieces.push_back(PackPiece{at, n, pos});
      at += n;
      pos += n;
    }
    if (pieces.empty()) continue;
    std::vector<uint8_t> out(pos);
    for (uint8_t& b : out) b = uint8_t(rng());
    const std::vector<uint16_t> sizes = pack_and_check(pieces, out);
    const core::PackTally t = core::count_inputs_frames(core::PieceArray(pieces.data(), pieces.size()));
    EXPECT_EQ(t.frames, sizes.size());
    uint64_t payload = 0;
    for (uint16_t s : sizes) payload += s;
    EXPECT_EQ(t.payload, payload);
    EXPECT_EQ(t.data, uint64_t(pos));
    EXPECT_EQ(t.wire_bytes(), payload + sizes.size() * wire::kHeaderSize);
  }
}

TEST(InputsPacker, EqualRowsAtAStrideAreOneBlockAndALongSendFillsFrames) {
  // 30 rows of 10 bytes, 100 apart: one strided block in one frame.
  std::vector<PackPiece> rows;
  for (uint32_t r = 0; r < 30; ++r) rows.push_back(PackPiece{r * 100, 10, r * 10});
  const std::vector<uint8_t> out(4000, 0x5A);
  EXPECT_EQ(pack_and_check(rows, out), std::vector<uint16_t>{uint16_t(wire::kInputBlockHeader + 300)});
  // One send of 3000 bytes: full frames, then the rest.
  const std::vector<PackPiece> one{PackPiece{5, 3000, 0}};
  const uint16_t full = uint16_t(wire::kMaxPayload);
  const uint16_t rest = uint16_t(3000 - 2 * (wire::kMaxPayload - wire::kInputBlockHeader) + wire::kInputBlockHeader);
  EXPECT_EQ(pack_and_check(one, out), (std::vector<uint16_t>{full, full, rest}));
}

TEST(InputsPacker, WholeInt32SendsStayWholeValuesInEveryPiece) {
  // Partial sums: sends of whole int32 values; every piece a multiple of 4.
  std::vector<PackPiece> sums{PackPiece{0, 4 * 1000, 0}, PackPiece{8000, 4 * 3, 4000}, PackPiece{9000, 4 * 700, 4012}};
  const core::PieceArray src(sums.data(), sums.size());
  core::PackCursor cur;
  for (bool last = false; !last;) {
    const core::PackedFrame f = core::pack_inputs_frame(src, &cur, nullptr, nullptr);
    EXPECT_EQ(f.data % 4, 0u);
    EXPECT_EQ(cur.off % 4, 0u);
    last = f.last;
  }
}

// count_inputs_frames takes a closed form for a group of one send: it must
// count what packing frame by frame gives, at every length around the
// frame boundaries.
TEST(InputsPacker, OneSendCountedInClosedFormAsFrameByFrame) {
  const uint32_t room = uint32_t(wire::kMaxPayload - wire::kInputBlockHeader);
  std::vector<uint32_t> counts;
  for (uint32_t k = 0; k <= 5; ++k)
    for (int32_t d = -2; d <= 2; ++d)
      if (int64_t(k) * room + d > 0) counts.push_back(uint32_t(int64_t(k) * room + d));
  for (uint32_t c : {1u, 7u, 100000u, 3u * 1000u * 1000u}) counts.push_back(c);
  for (uint32_t c : counts) {
    const PackPiece one{5, c, 0};
    core::PackTally stepped;
    core::PackCursor cur;
    const core::PieceArray src(&one, 1);
    for (bool last = false; !last;) {
      const core::PackedFrame f = core::pack_inputs_frame(src, &cur, nullptr, nullptr);
      ++stepped.frames;
      stepped.payload += f.payload;
      stepped.data += f.data;
      last = f.last;
    }
    const core::PackTally closed = core::count_inputs_frames(src);
    EXPECT_EQ(closed.frames, stepped.frames) << c;
    EXPECT_EQ(closed.payload, stepped.payload) << c;
    EXPECT_EQ(closed.data, stepped.data) << c;
  }
}

TEST(MessageFrames, OneRuleForEveryMessage) {
  EXPECT_EQ(wire::frames_needed(0), 1u);  // an empty message still carries kFlagLast
  EXPECT_EQ(wire::frame_payload(0, 0), 0u);
  EXPECT_EQ(wire::message_wire_bytes(0), wire::kHeaderSize);
  EXPECT_EQ(wire::frames_needed(wire::kMaxPayload), 1u);
  EXPECT_EQ(wire::frames_needed(wire::kMaxPayload + 1), 2u);
  EXPECT_EQ(wire::message_wire_bytes(3000), 3000 + 3 * wire::kHeaderSize);
  // Walking a message with frame_payload gives frames_needed frames, the
  // last one shorter.
  for (size_t len : {size_t(1), wire::kMaxPayload, size_t(5000), size_t(112 * 112 * 3)}) {
    size_t frames = 0, pos = 0, n = 0;
    do {
      n = wire::frame_payload(len, pos);
      pos += n;
      ++frames;
    } while (pos < len);
    EXPECT_EQ(frames, wire::frames_needed(len));
    EXPECT_EQ(n, len - (frames - 1) * wire::kMaxPayload);
  }
  EXPECT_EQ(wire::kAckFrameBytes, wire::kHeaderSize + wire::AckPayload::kSize);
}

}  // namespace
