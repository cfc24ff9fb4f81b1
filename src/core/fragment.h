// A board's fragment: its share of the quantised model, where its inputs come
// from, where its outputs go, and where every buffer lives in its RAM arena,
// as one binary blob that lives in the board's flash and is read in place
// (no copy, no heap).
//
// Format version 4 (3 is still read: v3 is v4 without partial-sum entries,
// and its reserved entry word must be 0). The byte layout is declared once, in `namespace frag`
// below: every field has a named offset, and the writer
// (src/plan/fragment_writer.cpp) and the reader (fragment.cpp) both use those
// names, never literal numbers. All integers little-endian; every section
// 4-byte aligned; offsets are from the start of the fragment.
//
//   header                          frag::kHeaderBytes
//   entry[n_layers]                 frag::kEntryBytes each, one per model
//                                   layer in execution order; a layer this
//                                   board does not compute has no regions
//   data section                    weights / bias / mult / shift / lut
//                                   arrays, regions, sends, input runs and
//                                   local runs, referenced from the entries
//   crc32                           over every byte before it
//
// The model behind it (docs/architecture.md):
//   - a board's share of a layer is a list of output *regions*: runs of the
//     flat C-H-W index, or channel x row x column boxes. The outputs are kept
//     in one arena buffer, region after region, each region's elements in
//     flat order;
//   - every input operand is held in a window (Box: channels x rows, full
//     width) at a planned arena offset, filled from the network (INPUT frames
//     from the coordinator or from other boards, within the listed runs) and
//     from *local runs*: elements this board computed itself in an earlier
//     layer, copied from that layer's output buffer (a fused step: no round
//     trip);
//   - every output element goes where it is consumed: a list of *sends*, each
//     a run of the output to one peer (the coordinator, as OUTPUT frames, or
//     another board's input operand of a later layer, as INPUT frames);
//   - the arena is planned ahead: every buffer has an offset and a lifetime
//     (the layers during which it is in use); buffers whose lifetimes overlap
//     never overlap in memory. Frames for a layer's input are accepted once
//     the board has reached the layer that produces them (`avail_from`).
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/bytes.h"
#include "core/layer.h"
#include "core/wire.h"

namespace ts {
namespace core {

constexpr uint32_t kFragMagic = 0x47465354;  // "TSFG"
constexpr uint16_t kFragVersion = 4;
constexpr uint16_t kFragMinVersion = 3;  // oldest version read (no partial-sum entries)
// INPUTS frames whose operand field is this carry int32 partial sums of a
// reduced layer (kEntryPartial): byte offsets into the receiver's
// accumulator, 4-byte aligned, little-endian values that it adds.
constexpr uint32_t kPsumOperand = 15;

// Byte layout of format version 4: one name per field.
namespace frag {
// Header.
constexpr uint32_t kMagic = 0;        // u32 kFragMagic
constexpr uint32_t kVersion = 4;      // u16 kFragVersion
constexpr uint32_t kWorker = 6;       // u16 this board's index in the plan
constexpr uint32_t kNWorkers = 8;     // u16
constexpr uint32_t kReserved = 10;    // u16 0
constexpr uint32_t kPlanId = 12;      // u32 plan identity
constexpr uint32_t kNLayers = 16;     // u32 entries
constexpr uint32_t kTotalBytes = 20;  // u32 including the trailing CRC
constexpr uint32_t kArenaBytes = 24;  // u32 planned arena: fixed part + buffers
constexpr uint32_t kEntrySize = 28;   // u32 kEntryBytes (a reader check)
constexpr uint32_t kHeaderBytes = 32;

// Entry.
constexpr uint32_t kOp = 0;          // u8 QOp
constexpr uint32_t kNInputs = 1;     // u8
constexpr uint32_t kIncludePad = 2;  // u8 AvgPool count_include_pad
constexpr uint32_t kFlags = 3;       // u8 kEntry* flags
constexpr uint32_t kNode = 4;        // u32 layer index (== entry index)
constexpr uint32_t kOutBegin = 8;    // i32 smallest flat index of the regions
constexpr uint32_t kOutEnd = 12;     // i32 one past the largest
constexpr uint32_t kOcBase = 16;     // i32 per-channel data held for
constexpr uint32_t kOcCount = 20;    // i32   channels [oc_base, +oc_count)
constexpr uint32_t kScalars = 24;    // 20 x i32, in kScalarOrder
constexpr uint32_t kOutElems = 104;  // u32 outputs computed (sum of regions)
constexpr uint32_t kOutAt = 108;     // u32 arena offset of the output buffer
constexpr uint32_t kOutUntil = 112;  // u32 last layer that reads it locally
constexpr uint32_t kRamBytes = 116;  // u32 planned buffer bytes in use at this layer
constexpr uint32_t kArrays = 120;    // 5 x (u32 offset, u32 count): weights i8,
                                     // bias i32, mult i32, shift i32, lut i8
constexpr uint32_t kRegions = 160;   // u32 offset, u32 count of region records
constexpr uint32_t kSends = 168;     // u32 offset, u32 count of send records
constexpr uint32_t kSlots = 176;     // kMaxInputs input slots
// Input slot (one per operand).
constexpr uint32_t kInDims = 0;      // i32 c, h, w
constexpr uint32_t kInZp = 12;       // i32
constexpr uint32_t kInMult = 16;     // i32 (Add, Concat)
constexpr uint32_t kInShift = 20;    // i32
constexpr uint32_t kBox = 24;        // i32 c0, c1, h0, h1: window held
constexpr uint32_t kRuns = 40;       // u32 offset, u32 count: runs received
constexpr uint32_t kExpected = 48;   // u32 elements received from the network
constexpr uint32_t kLocal = 52;      // u32 offset, u32 count: local runs
constexpr uint32_t kLocalLayer = 60; // u32 layer whose output they come from; with no
                                     // local runs kNoLayer, or the host of a view (FragLayer::view)
constexpr uint32_t kBoxAt = 64;      // u32 arena offset of the window
constexpr uint32_t kAvailFrom = 68;  // u32 first layer at which frames are taken
constexpr uint32_t kSlotBytes = 72;
constexpr uint32_t kOutPitch = kSlots + kMaxInputs * kSlotBytes;  // 752: u32 output channel
                                     // pitch: 0 = outputs dense in their own buffer;
                                     // else computed in place (see FragLayer)
constexpr uint32_t kEntryReserved = kOutPitch + 4;  // v3: u32 0
// v4: the same word is the offset of the entry's partial-sum record (0 when
// the entry has none; set exactly when the kEntryPartial flag is); of a
// streamed entry (kEntryStreamed), the chain's step: rows of its last layer
// made per pass (core/stream.h).
constexpr uint32_t kPartial = kEntryReserved;
constexpr uint32_t kStreamStep = kEntryReserved;
constexpr uint32_t kEntryBytes = kEntryReserved + 4;  // 760

// Partial-sum record (v4, kEntryPartial): this board multiplies input
// channels [ci0, ci1) (its window, box [ci0, ci1) x all rows) for *every*
// output channel into int32 partial sums (no bias), sends the sums of other
// boards' output blocks to them and adds the sums it receives for its own
// block (its one region: whole output channels) before requantising. Of an
// op whose shares are of input rows (core/partial.h: GlobalAvgPool), [ci0,
// ci1) are input rows (its window every channel x those rows), summed.
constexpr uint32_t kPsCi0 = 0;       // i32 first input channel (row) of the share
constexpr uint32_t kPsCi1 = 4;       // i32 one past the last
constexpr uint32_t kPsAt = 8;        // u32 arena offset: int32 [out.c x positions] own sums
constexpr uint32_t kPsAccAt = 12;    // u32 arena offset: int32 [out_elems] sums received
constexpr uint32_t kPsExpected = 16; // u32 bytes of partial sums received per inference
constexpr uint32_t kPsSends = 20;    // u32 offset, u32 count of send records: peer,
                                     // layer (this one), operand kPsumOperand, offset
                                     // (byte in the peer's accumulator), count (bytes),
                                     // pos (byte in the own sums)
constexpr uint32_t kPsBytes = 28;

// Region record: u32 kind, then 6 x i32 (run: begin, end; box: c0, c1, y0,
// y1, x0, x1; unused fields 0).
constexpr uint32_t kRegionBytes = 28;
// Send record: u16 peer (plan index of a board, or kPeerCoordinator), u16
// layer (the consumer layer; for the coordinator this entry's own layer),
// u8 operand, 3 bytes 0, u32 offset (first element of the output tensor,
// flat), u32 count, u32 position of that element in the output buffer.
constexpr uint32_t kSendBytes = 20;
constexpr uint32_t kSendPeer = 0;     // u16
constexpr uint32_t kSendLayer = 2;    // u16
constexpr uint32_t kSendOperand = 4;  // u8
constexpr uint32_t kSendOffset = 8;   // u32
constexpr uint32_t kSendCount = 12;   // u32
constexpr uint32_t kSendPos = 16;     // u32
// Input / local run record: u32 offset, u32 count.
constexpr uint32_t kRunBytes = 8;

// Local layer / peer value meaning "none" / "the coordinator".
constexpr uint32_t kNoLayer = 0xFFFFFFFFu;
}  // namespace frag

constexpr uint8_t kEntryRunTrigger = 0x01;  // wait for the coordinator's RUN
constexpr uint8_t kEntryPartial = 0x02;     // input share with partial sums (v4)
// Its outputs go to other boards coded (wire.h "Coded INPUTS"): set by the
// planner where coding pays; a reader of any fragment version takes it.
constexpr uint8_t kEntryCoded = 0x04;
// The same with the mask coding (core/act_code.h); never with kEntryCoded.
constexpr uint8_t kEntryMasked = 0x08;
// Its outputs stream into the next entry's window, a line buffer of a few
// rows (core/stream.h): that entry reads only them, and the board computes
// the chain of such entries and the entry after them row by row. The
// entry's output is in place (out_pitch: the line buffer's channel pitch)
// and has no sends. Never with kEntryPartial.
constexpr uint8_t kEntryStreamed = 0x10;
constexpr uint8_t kKnownEntryFlags = kEntryRunTrigger | kEntryPartial | kEntryCoded | kEntryMasked | kEntryStreamed;
constexpr uint16_t kPeerCoordinator = 0xFFFF;

// Kept for code that names the v1 sizes.
constexpr uint32_t kFragHeaderBytes = frag::kHeaderBytes;
constexpr uint32_t kFragLayerBytes = frag::kEntryBytes;

// A run of consecutive elements [offset, offset + count) of one tensor (flat
// C-H-W index).
struct InputRun {
  uint32_t offset;
  uint32_t count;
};

enum class RegionKind : uint32_t { Run = 0, Box = 1 };

// One output region of a layer share.
struct Region {
  RegionKind kind = RegionKind::Run;
  int32_t v[6] = {};  // Run: begin, end. Box: c0, c1, y0, y1, x0, x1.
  static Region run(int32_t begin, int32_t end) {
    Region r;
    r.v[0] = begin;
    r.v[1] = end;
    return r;
  }
  static Region box(int32_t c0, int32_t c1, int32_t y0, int32_t y1, int32_t x0, int32_t x1) {
    Region r;
    r.kind = RegionKind::Box;
    r.v[0] = c0; r.v[1] = c1; r.v[2] = y0; r.v[3] = y1; r.v[4] = x0; r.v[5] = x1;
    return r;
  }
  // True if the region lies inside a tensor of shape d and is not empty.
  bool valid(const Dims& d) const;
  int64_t elems() const;
  // Calls fn(begin, end) for each maximal run of consecutive flat indices of
  // the region, in flat order (a full-width box gives one run per channel).
  // Stops and returns false as soon as fn does.
  template <class F>
  bool segments(const Dims& d, F&& fn) const {
    if (kind == RegionKind::Run) return fn(v[0], v[1]);
    const int32_t hw = d.h * d.w;
    for (int32_t c = v[0]; c < v[1]; ++c) {
      if (v[4] == 0 && v[5] == d.w) {
        if (!fn(c * hw + v[2] * d.w, c * hw + v[3] * d.w)) return false;
        continue;
      }
      for (int32_t y = v[2]; y < v[3]; ++y)
        if (!fn(c * hw + y * d.w + v[4], c * hw + y * d.w + v[5])) return false;
    }
    return true;
  }
};

// A send: output elements [offset, offset + count), found at `pos` in the
// output buffer, to `peer` for operand `operand` of layer `layer`.
struct Send {
  uint16_t peer = kPeerCoordinator;
  uint16_t layer = 0;
  uint8_t operand = 0;
  uint32_t offset = 0, count = 0, pos = 0;
};

// Send record i of the records at `records`, read in place (inline: a
// board reads each of its send records a few times per inference).
inline Send send_record(const uint8_t* records, uint32_t i) {
  const uint8_t* p = records + frag::kSendBytes * size_t(i);
  Send s;
  s.peer = le::get_u16(p + frag::kSendPeer);
  s.layer = le::get_u16(p + frag::kSendLayer);
  s.operand = p[frag::kSendOperand];
  s.offset = le::get_u32(p + frag::kSendOffset);
  s.count = le::get_u32(p + frag::kSendCount);
  s.pos = le::get_u32(p + frag::kSendPos);
  return s;
}

// Decoded view of one layer entry. Pointers point into the fragment bytes.
struct FragLayer {
  uint32_t node = 0;        // index of the layer in the quantised model
  uint8_t flags = 0;        // kEntry* flags
  int32_t run_begin = 0;    // bounds of the regions' flat indices
  int32_t run_end = 0;      //   (the run itself when there is one region)
  int32_t oc_count = 0;     // per-channel data held for channels [desc.oc_base, +oc_count)
  LayerDesc desc;           // pointers filled to the fragment's data
  uint32_t out_elems = 0;   // outputs computed here (0: idle in this layer)
  uint32_t out_at = 0;      // arena offsets (after the fixed part)
  uint32_t out_until = 0;
  // 0: the outputs sit dense in their own buffer at out_at, region after
  // region. Else the share is one region of whole rows (a full-width box, or
  // a run of whole channels) computed *in place* into the input window of
  // the last layer that reads it locally (out_until): channel c's rows start
  // at out_at + (c - c0) * out_pitch, the window's own layout, so that layer
  // needs no copy and the outputs need no buffer of their own.
  uint32_t out_pitch = 0;
  // kEntryStreamed: rows of the chain's last layer made per pass (the line
  // buffer, the next entry's window, holds box rows).
  uint32_t stream_step = 0;
  uint32_t ram_bytes = 0;   // planned buffer bytes in use at this layer
  Box box[kMaxInputs];      // input windows held in RAM while computing
  uint32_t box_at[kMaxInputs] = {};
  uint32_t avail_from[kMaxInputs] = {};
  const uint8_t* runs[kMaxInputs] = {};  // InputRun records received
  uint32_t n_runs[kMaxInputs] = {};
  uint32_t expected[kMaxInputs] = {};    // elements to receive per input
  const uint8_t* local[kMaxInputs] = {}; // InputRun records copied locally
  uint32_t n_local[kMaxInputs] = {};
  uint32_t local_layer[kMaxInputs] = {};
  const uint8_t* regions = nullptr;
  uint32_t n_regions = 0;
  const uint8_t* sends = nullptr;
  uint32_t n_sends = 0;
  // Partial sums (kEntryPartial, fragment.h kPs*): input channels (or rows,
  // core/partial.h) [ps_ci0, ps_ci1), own sums at ps_at (int32, out.c x
  // partial_positions), sums received at ps_acc_at (int32, out_elems),
  // ps_expected bytes of them.
  int32_t ps_ci0 = 0, ps_ci1 = 0;
  uint32_t ps_at = 0, ps_acc_at = 0, ps_expected = 0;
  const uint8_t* ps_sends = nullptr;
  uint32_t n_ps_sends = 0;

  bool active() const { return out_elems > 0; }
  bool partial() const { return (flags & kEntryPartial) != 0; }
  bool streamed() const { return (flags & kEntryStreamed) != 0; }
  // Operand k's window is a *view*: no bytes of its own, it lies inside a
  // window of the later layer local_layer[k] (its host), in use from before
  // this window is to after it; the data is there already (outputs computed
  // in place into it). Encoded as no local runs and local_layer naming a
  // later layer.
  bool view(int k) const { return n_local[k] == 0 && local_layer[k] != frag::kNoLayer; }
  Send ps_send(uint32_t i) const;
  // Bytes of the own partial sums (out.c x positions x 4), 0 if not partial.
  uint32_t ps_bytes() const;
  // Bytes the outputs span in the arena (out_elems when dense).
  uint32_t out_span_bytes() const;
  // The share's one region as channels [c0, c1) x rows [y0, y1) of full
  // width, if it is one (a full-width box, or a run of whole channels).
  bool whole_rows(int32_t* c0, int32_t* c1, int32_t* y0, int32_t* y1) const;
  InputRun run(int input, uint32_t i) const;
  InputRun local_run(int input, uint32_t i) const;
  Region region(uint32_t i) const;
  Send send(uint32_t i) const;
  // Position in the output buffer of flat output index e, or -1 if this
  // board does not compute it.
  int64_t position(int32_t e) const;
  // Whether outputs [off, off + n) lie inside one segment of the regions;
  // if so *pos is the position of `off` in the output buffer (a walk over
  // the regions; SpanFinder is the indexed form).
  bool span(uint32_t off, uint32_t n, uint32_t* pos) const;
};

// Whether a span of elements lies inside one of a sorted list of disjoint
// runs (InputRun records, as a FragLayer's runs), remembering where the last
// query ended: queries in increasing order (a frame's segments, in the order
// the sender walks them) cost O(1) each; any other order falls back to a
// binary search. The same answers as a scan of every run (the worker's per
// frame check of what arrives against its routing slice).
class RunFinder {
 public:
  RunFinder(const uint8_t* runs, uint32_t n) : runs_(runs), n_(runs ? n : 0) {}
  // Inline (a board asks once per segment it receives). First the run as
  // many runs on from the last one found as that was from the one before (a
  // frame's segments often skip the same number of runs each time): a run
  // that holds e0 is the first that ends after e0, whatever the guess; else
  // seek() finds that run.
  bool covers(uint32_t e0, uint32_t len) {
    uint32_t i = at_ + step_;  // (wraps when the last one was before: only checked)
    if (i >= n_ || e0 < off(i) || e0 - off(i) >= count(i)) i = seek(e0);
    if (i >= n_) return false;
    step_ = i - at_;
    at_ = i;
    return e0 >= off(i) && len <= count(i) - (e0 - off(i));
  }

 private:
  uint32_t off(uint32_t i) const { return le::get_u32(runs_ + frag::kRunBytes * size_t(i)); }
  uint32_t count(uint32_t i) const { return le::get_u32(runs_ + frag::kRunBytes * size_t(i) + 4); }
  // The first run that ends after e0 (n_ if none): a few runs forward from
  // at_ when e0 is not before it, then a binary search.
  uint32_t seek(uint32_t e0) const;
  uint32_t first_ending_after(uint32_t lo, uint32_t hi, uint32_t e0) const;
  const uint8_t* runs_;
  uint32_t n_;
  uint32_t at_ = 0;    // the run the last query ended in
  uint32_t step_ = 0;  // runs from the one found before it to at_
};

// FragLayer::span for one layer, set up once (the in-place geometry, or the
// first regions decoded with their positions in the output buffer) and
// remembering the region of the last query, so a layer's local runs, in
// flat order, cost O(1) each instead of a walk over the regions. A layer of
// more regions than it holds answers through FragLayer::span.
class SpanFinder {
 public:
  static constexpr uint32_t kRegions = 8;
  explicit SpanFinder(const FragLayer& L);
  bool find(uint32_t off, uint32_t n, uint32_t* pos);
  // The same, for a caller that already knows the channel, row and column
  // of `off` in the output tensor (off = (c * h + y) * w + x).
  bool find_at(uint32_t off, uint32_t n, int32_t c, int32_t y, int32_t x, uint32_t* pos);
  // The span [off, off + n) when it is one of the last kFollow spans found
  // one channel on (same row, column and length): answered as find_at
  // would, from that span's region, in a few steps and without divisions (a
  // layer's local runs are mostly one or two per channel, in channel order).
  // Also gives the span's channel, row and column. False: not such a span,
  // or not the layer's (then ask find_at).
  static constexpr uint32_t kFollow = 4;
  bool follow(uint32_t off, uint32_t n, uint32_t* pos, int32_t* c, int32_t* y, int32_t* x);

 private:
  // One of the last kFollow spans found, as the span one channel on from it
  // (the next follow may ask): where it starts and lies, its channel, row and
  // column; it is the layer's while its channel is below c_end and its end
  // within end_limit (a run region's end, or the last channel's for dense
  // in-place outputs, where a span may cross channels; elsewhere a span one
  // channel on lies as the last within its channel: no limit).
  struct Next {
    uint32_t off = 0, n = 0, pos = 0, stride = 0;
    int32_t c = 0, c_end = 0, y = 0, x = 0;
    uint64_t end_limit = 0;
  };
  const FragLayer* L_;
  bool pitched_ = false, whole_ = false, indexed_ = false;
  int32_t c0_ = 0, c1_ = 0, y0_ = 0, y1_ = 0;
  uint32_t hw_ = 0;
  Region r_[kRegions];
  uint32_t base_[kRegions] = {};
  uint32_t hint_ = 0;
  Next next_[kFollow];
  uint32_t n_next_ = 0, slot_ = 0;
  // Records the span found (for follow) and answers it.
  bool found(const Next& after, uint32_t at, uint32_t* pos);
};

// Here, not in fragment_view.cpp: a board asks it once per local run, and
// inlined it costs a few loads and compares.
inline bool SpanFinder::follow(uint32_t off, uint32_t n, uint32_t* pos, int32_t* c, int32_t* y, int32_t* x) {
  for (uint32_t k = 0; k < n_next_; ++k) {
    Next& s = next_[k];
    if (s.off != off || s.n != n) continue;
    // find_at's checks that held for the span a channel before hold for
    // this one, but for those on the channel and on the end.
    if (s.c >= s.c_end || uint64_t(off) + n > s.end_limit) return false;
    *pos = s.pos;
    *c = s.c;
    *y = s.y;
    *x = s.x;
    s.off += hw_;  // and on to the channel after
    s.pos += s.stride;
    ++s.c;
    return true;
  }
  return false;
}

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

// Why the reader refused a fragment: the entry (layer index; -1 for the
// header or the fragment as a whole), the field (a LayerDesc or FragLayer
// member, or a header field), the value found there and a few words of why.
// Static strings: no heap, valid for the program's life.
struct FragRefusal {
  int64_t layer = -1;
  const char* field = nullptr;  // nullptr: nothing refused
  int64_t value = 0;
  const char* what = nullptr;
};

// Writes "layer <i> <field> = <value> (<what>)" (the parts known; "" when
// nothing was refused; the words of why only if with_what) into buf,
// NUL-terminated, truncated to cap - 1 characters; returns its length. For
// the one error line of whoever reports the refusal (heap-free: the board's
// ERROR reply to a deploy carries it).
size_t format_refusal(const FragRefusal& why, char* buf, size_t cap, bool with_what = true);

// The board's ERROR text for a fragment it will not commit: "fragment
// invalid", and for a refused entry (BadLayer) ": layer <i> <field> =
// <value>", truncated to cap - 1 characters. A fragment that reads but
// belongs to another deployment is s == Ok: the text is the bare phrase.
size_t fragment_invalid_text(FragStatus s, const FragRefusal& why, char* buf, size_t cap);

// Reads a fragment in place. Validation walks every entry once (bounds of
// every offset, sizes against geometry, regions, sends, runs, the arena
// plan, CRC); afterwards layer() is cheap.
class FragmentReader {
 public:
  FragStatus open(const uint8_t* data, size_t size);
  const FragHeader& header() const { return hdr_; }
  uint32_t layer_count() const { return hdr_.n_layers; }
  // Decodes entry i (0 <= i < layer_count()) into *out, in place: every
  // field is set, whatever *out held (a board decodes into the same few
  // FragLayers layer after layer). Returns BadLayer if i is out of range.
  // open() validated every entry: this decodes without checking again.
  FragStatus layer(uint32_t i, FragLayer* out) const;
  // The same entry decoded with the shallow checks of open() again (the
  // slow form, kept for tests that compare the two); *out is not to be used
  // after a BadLayer.
  FragStatus layer_checked(uint32_t i, FragLayer* out) const;
  // Why the last open() refused (field == nullptr after a success).
  const FragRefusal& refusal() const { return why_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FragHeader hdr_;
  FragRefusal why_;
};

// Arena bytes an allocation of n bytes takes (every buffer is rounded up to
// 8 bytes). The planner and the board both use this, so the planned and
// measured high-water marks are equal by definition of the same rule.
constexpr uint32_t arena_block(uint32_t n) { return (n + 7u) & ~7u; }

// Arena bytes a board holds for its whole life, whatever the layer: its
// transmit frame buffer (the wire format's maximum frame, wire::kMaxFrame). The
// receive buffers live inside the worker object (static RAM, like the
// stack), outside the arena. A layer's peak is this plus its buffers.
constexpr uint32_t kWorkerFixedArena = arena_block(uint32_t(wire::kMaxFrame));

}  // namespace core
}  // namespace ts
