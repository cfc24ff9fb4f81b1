// A board's fragment: its share of the quantised model, plus its routing
// slices, as one binary blob that lives in the board's flash and is read in
// place (no copy, no heap).
//
// Layout (all little-endian, every section 4-byte aligned, offsets are from
// the start of the fragment):
//
//   FragHeader                      fixed size (kFragHeaderBytes)
//   FragLayer[n_layers]             fixed size entries (kFragLayerBytes each),
//                                   one per model layer, in execution order;
//                                   a layer this board does not compute has
//                                   run_begin == run_end
//   data section                    weights / bias / mult / shift / lut arrays
//                                   and input routing runs, referenced by
//                                   offset from the layer entries
//   crc32                           over every byte before it
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/layer.h"

namespace ts {
namespace core {

constexpr uint32_t kFragMagic = 0x47465354;  // "TSFG"
constexpr uint16_t kFragVersion = 1;

// Fixed sizes of the layout (docs/planner.md has the byte table): the
// header, one layer entry, where an entry's input slots start, one slot.
constexpr uint32_t kFragHeaderBytes = 32;
constexpr uint32_t kFragLayerBytes = 568;
constexpr uint32_t kFragSlotsAt = 152;
constexpr uint32_t kFragInputSlotBytes = 52;
static_assert(kFragSlotsAt + kMaxInputs * kFragInputSlotBytes == kFragLayerBytes, "entry layout");

// A run of consecutive elements [offset, offset + count) of one input
// tensor (flat C-H-W index) that this board must receive for a layer.
struct InputRun {
  uint32_t offset;
  uint32_t count;
};

// Decoded view of one layer entry. Pointers point into the fragment bytes.
struct FragLayer {
  uint32_t node = 0;        // index of the layer in the quantised model
  int32_t run_begin = 0;    // outputs [run_begin, run_end) computed here
  int32_t run_end = 0;
  int32_t oc_count = 0;     // per-channel data held for channels [desc.oc_base, +oc_count)
  LayerDesc desc;           // pointers filled to the fragment's data
  Box box[kMaxInputs];      // input windows held in RAM while computing
  const uint8_t* runs[kMaxInputs] = {};  // InputRun records (8 bytes each, LE)
  uint32_t n_runs[kMaxInputs] = {};
  uint32_t expected[kMaxInputs] = {};    // elements to receive per input
  uint32_t ram_bytes = 0;   // planned arena bytes for this layer (inputs + output)

  InputRun run(int input, uint32_t i) const;
};

struct FragHeader {
  uint32_t magic = kFragMagic;
  uint16_t version = kFragVersion;
  uint16_t worker = 0;       // board index in the plan
  uint16_t n_workers = 0;
  uint32_t plan_id = 0;      // hash of the plan this fragment belongs to
  uint32_t n_layers = 0;
  uint32_t total_bytes = 0;  // including the trailing CRC
  uint32_t arena_bytes = 0;  // planned peak arena use over all layers
};

enum class FragStatus : int32_t {
  Ok = 0,
  TooShort = 1,
  BadMagic = 2,
  BadVersion = 3,
  BadSize = 4,
  BadChecksum = 5,
  BadLayer = 6,  // an entry points outside the fragment or is inconsistent
};

const char* frag_status_name(FragStatus s);

// Reads a fragment in place. Validation walks every entry once (bounds of
// every offset, sizes against geometry, CRC); afterwards layer() is cheap.
class FragmentReader {
 public:
  FragStatus open(const uint8_t* data, size_t size);
  const FragHeader& header() const { return hdr_; }
  uint32_t layer_count() const { return hdr_.n_layers; }
  // Decodes entry i (0 <= i < layer_count()). Returns BadLayer if i is out of
  // range.
  FragStatus layer(uint32_t i, FragLayer* out) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FragHeader hdr_;
};

// Arena bytes an allocation of n bytes takes (the arena rounds every block up
// to 8 bytes). The planner and the board both use this, so the planned and
// measured high-water marks are equal by definition of the same rule.
inline uint32_t arena_block(uint32_t n) { return (n + 7u) & ~7u; }

// Arena bytes a board holds for its whole life, whatever the layer: its
// transmit frame buffer (the wire format's maximum frame, 1400 bytes). The
// receive buffer lives inside the worker object (static RAM, like the stack),
// outside the arena. A layer's peak is this plus its inputs and output.
constexpr uint32_t kWorkerFixedArena = (1400u + 7u) & ~7u;

}  // namespace core
}  // namespace ts
