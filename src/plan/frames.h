// How many frames and wire bytes the runtime really sends, computed from a
// plan's send records: the host side of core's INPUTS packer
// (core/inputs_packer.h, the code the worker packs its frames with, run
// without data) and of the one rule that cuts a message into frames
// (wire::frames_needed). Used by the cost model (plan/estimate.cpp, plan/cost.cpp) and the
// simulator (src/sim) so that both count what `tinysplit run` puts on the
// wire instead of one message per send record.
//
// Board to board (the direct route), a worker packs the sends of one layer
// that go to the same peer, consumer layer and operand into INPUTS frames.
// Messages to and from the coordinator are not gathered: one message per run
// or send, cut into frames of at most wire::kMaxPayload payload bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/fragment.h"
#include "core/inputs_packer.h"

namespace ts::plan {

// One piece of data a worker sends in a group: an offset in the consumer's
// operand and a count of bytes (the order is the send order); core's
// packer's own record (its `pos`, where the bytes lie, is unused here).
using Piece = core::PackPiece;

// One INPUTS frame of a group: data bytes carried and its payload (data plus
// block headers); the frame on the wire is payload + wire::kHeaderSize.
struct GatheredFrame {
  int32_t data = 0;
  int32_t payload = 0;
};

// The frames the worker packs for one group of pieces, in order. With
// `coded` > 0 (plan/coding.h: the estimated coded bytes per value) the group
// goes coded (core::pack_coded_inputs_frame), which depends on the values:
// an estimate then, the plain packing's data at `coded` bytes a value with
// a coded block header per block, cut into frames of at most
// wire::kMaxPayload payload bytes of equal size.
std::vector<GatheredFrame> gather_frames(const Piece* pieces, size_t n, double coded = 0);
inline std::vector<GatheredFrame> gather_frames(const std::vector<Piece>& pieces, double coded = 0) {
  return gather_frames(pieces.data(), pieces.size(), coded);
}

// Frames and wire bytes (headers included) of one group.
struct FrameCount {
  int64_t frames = 0;
  int64_t wire_bytes = 0;
  int64_t data = 0;
};
FrameCount count_gathered(const Piece* pieces, size_t n, double coded = 0);

// Frames and wire bytes of one ungathered message of `count` bytes (to or
// from the coordinator): wire::frames_needed(count) frames, each a header
// and its payload (an empty message is one frame; no plan sends one).
FrameCount count_message(int64_t count);

// The groups of a layer's send list (consecutive sends with the same peer,
// layer and operand): calls f(first, n) for every group, the coordinator's
// included.
template <class F>
void for_each_send_run(const std::vector<core::Send>& sends, F&& f) {
  size_t i = 0;
  while (i < sends.size()) {
    size_t j = i + 1;
    while (j < sends.size() && sends[j].peer == sends[i].peer && sends[j].layer == sends[i].layer &&
           sends[j].operand == sends[i].operand)
      ++j;
    f(i, j - i);
    i = j;
  }
}

// The same for the groups of peer sends only (the ones packed into INPUTS
// frames; sends to the coordinator are skipped).
template <class F>
void for_each_send_group(const std::vector<core::Send>& sends, F&& f) {
  for_each_send_run(sends, [&](size_t first, size_t n) {
    if (sends[first].peer != core::kPeerCoordinator) f(first, n);
  });
}

// Pieces of sends[first, first + n).
std::vector<Piece> pieces_of(const std::vector<core::Send>& sends, size_t first, size_t n);

}  // namespace ts::plan
