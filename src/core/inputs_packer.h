// The INPUTS packer: how a board puts the sends of one group (one peer,
// consumer layer and operand) into INPUTS frames (wire.h, "INPUTS blocks"),
// written once. The worker packs real frames with it (core/worker_sender.cpp);
// the planner's cost model and the simulator run it without data to count
// the frames and wire bytes a run really sends (plan/frames.h adapts it to
// the planner's send lists).
//
// Packing, frame by frame: blocks with a wire::kInputBlockHeader-byte header
// each fill the frame up to wire::kMaxPayload payload bytes; consecutive
// sends of equal length at a constant distance become one strided block; a
// send longer than the room left is cut into pieces that fill the frame.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/act_code.h"

namespace ts {
namespace core {

// One send as the packer sees it: its first element in the consumer's
// operand, its bytes, and where they are in the sender's output buffer
// (`pos`, read only when packing real frames).
struct PackPiece {
  uint32_t offset = 0, count = 0, pos = 0;
};

// The sends of one group, by index in send order.
class PieceSource {
 public:
  // Sets *p to send i and returns true, or returns false when i is past the
  // group (the end of the list, or a send of another group).
  virtual bool piece(uint32_t i, PackPiece* p) const = 0;

 protected:
  ~PieceSource() = default;
};

// Where the packing of a group stands: the next send and how many of its
// bytes are packed already.
struct PackCursor {
  uint32_t i = 0, off = 0;
};

// One INPUTS frame: its payload bytes (blocks and their headers), the data
// bytes it carries, and whether it is the group's last.
struct PackedFrame {
  uint16_t payload = 0;
  uint32_t data = 0;
  bool last = false;
};

// Packs the next frame of a group from *cur on (cur->i must be a send of the
// group) and advances *cur. With `out` (the sender's buffer the sends' `pos`
// index) and `payload` (room for wire::kMaxPayload bytes) it writes the
// blocks; with both nullptr it only counts (a dry run).
PackedFrame pack_inputs_frame(const PieceSource& src, PackCursor* cur, const uint8_t* out, uint8_t* payload);

// The same with every block coded (wire.h "Coded INPUTS", core/act_code.h):
// blocks of whole sends, or a piece of one, as their codes fill the frame.
// Writes only (out and payload given); the frame goes with wire::kFlagCoded.
PackedFrame pack_coded_inputs_frame(const PieceSource& src, PackCursor* cur, const uint8_t* out, uint8_t* payload,
                                    CodeParams code);

// A whole group's frames counted (dry run from its first send, index
// `first`): frames, payload bytes, data bytes; wire bytes add one frame
// header per frame (untagged).
struct PackTally {
  uint32_t frames = 0;
  uint64_t payload = 0, data = 0;
  uint64_t wire_bytes() const;
};
PackTally count_inputs_frames(const PieceSource& src, uint32_t first = 0);
// The same for a group of one send of `count` > 0 bytes, in closed form
// (the planner prices millions of them).
PackTally count_one_send(uint32_t count);

// A PieceSource over an array of pieces (all of one group).
class PieceArray final : public PieceSource {
 public:
  PieceArray(const PackPiece* p, size_t n) : p_(p), n_(n) {}
  bool piece(uint32_t i, PackPiece* p) const override {
    if (i >= n_) return false;
    *p = p_[i];
    return true;
  }

 private:
  const PackPiece* p_;
  size_t n_;
};

}  // namespace core
}  // namespace ts
