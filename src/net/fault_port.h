// The one fault mechanism on a board: a Port decorator (FaultPort) that makes
// a board faulty on purpose at one layer (node index), as `run
// --inject-fault KIND:BOARD[:LAYER]` asks (net/fault.h parses the spec once
// and hands each board its BoardFault in the board's form, KIND:LAYER, see
// board_fault_arg). Everything the fault does not touch goes to the board's
// own port unchanged. The kinds:
//   kill     right after computing the layer, before any of its results
//            leave: the board ends at once (Actions::kill; the host board
//            raises SIGKILL, as a board losing power would). Once.
//   stall    right after computing the layer: the board hangs
//            (Actions::stall; the host board's one thread stops there, so it
//            neither reads, sends nor accepts). Once.
//   corrupt  right after computing the layer: the board's next frame to the
//            coordinator (OUTPUT or DONE) has its last byte changed (in the
//            payload, or the CRC field of an empty one), so its CRC no longer
//            matches. Once.
//   flip     every inference: the board hands on one changed value of the
//            layer behind valid CRCs; the per-layer verification must name it.
//            Which value: the first output (its lowest bit); on a reduced
//            layer (strategy `reduce`) whose board sends partial sums, the
//            first sum it sends instead (bit 16, large enough to survive
//            requantisation), so the owner of that block reports outputs
//            that differ.
// Kinds without Actions (nullptr: kill and stall) do nothing.
//
// Header-only portable C++17 (no heap, no exceptions, no RTTI, no OS): the
// host board (net/host_board.cpp) and the firmware (firmware/src/
// net_worker.cpp) both use it, and parse the board's form with
// parse_board_fault below.
#pragma once

#include <stdint.h>
#include <string.h>

#include "core/worker.h"

namespace ts {
namespace net {

enum class FaultKind : int { None = 0, Kill, Stall, Corrupt, Flip };

// The kinds by name, in the order error lines list them.
struct FaultKindName {
  FaultKind kind;
  const char* name;
};
constexpr FaultKindName kFaultKinds[] = {
    {FaultKind::Kill, "kill"}, {FaultKind::Stall, "stall"}, {FaultKind::Corrupt, "corrupt"}, {FaultKind::Flip, "flip"}};

inline const char* fault_kind_name(FaultKind k) {
  for (const auto& e : kFaultKinds)
    if (e.kind == k) return e.name;
  return "none";
}

// The kind named by the `len` characters at `word`; None if none is.
inline FaultKind find_fault_kind(const char* word, size_t len) {
  for (const auto& e : kFaultKinds)
    if (strlen(e.name) == len && memcmp(e.name, word, len) == 0) return e.kind;
  return FaultKind::None;
}

// One fault in the board's form: its kind and the layer it acts at.
struct BoardFault {
  FaultKind kind = FaultKind::None;
  int32_t layer = -1;
  bool on() const { return kind != FaultKind::None; }
};

// How a fault spec's text failed to parse (FaultField::Ok: it did not).
enum class FaultField : int { Ok = 0, Shape, Kind, Number };

// The fields of "KIND:N[:N...]": the kind, then between 1 and `max_nums`
// decimal numbers 0..65535 (boards and layers are 16-bit on the wire) into
// nums (*n_nums of them). Checked in this order: the count of fields
// (Shape), the kind (Kind), each number (Number, *bad = its index from 1).
// The one parser of both forms of a fault spec.
inline FaultField parse_fault_fields(const char* text, FaultKind* kind, int32_t* nums, int max_nums, int* n_nums,
                                     int* bad) {
  *n_nums = 0;
  *bad = 0;
  int colons = 0;
  for (const char* c = text; *c; ++c) colons += *c == ':';
  if (colons < 1 || colons > max_nums) return FaultField::Shape;
  const char* at = strchr(text, ':');
  *kind = find_fault_kind(text, size_t(at - text));
  if (*kind == FaultKind::None) return FaultField::Kind;
  while (*at == ':') {
    ++at;
    *bad = *n_nums + 1;
    int32_t v = 0;
    int digits = 0;
    for (; *at >= '0' && *at <= '9'; ++at, ++digits)
      if (digits < 6) v = v * 10 + (*at - '0');
    if (digits == 0 || digits > 5 || v > 65535 || (*at != ':' && *at != '\0')) return FaultField::Number;
    nums[(*n_nums)++] = v;
  }
  *bad = 0;
  return FaultField::Ok;
}

// The board's form, "KIND:LAYER". Ok, or how it failed.
inline FaultField parse_board_fault(const char* text, BoardFault* out, int* bad) {
  int32_t layer = -1;
  int n = 0;
  const FaultField r = parse_fault_fields(text, &out->kind, &layer, 1, &n, bad);
  if (r != FaultField::Ok) return r;
  out->layer = layer;
  return FaultField::Ok;
}

class FaultPort final : public core::Port {
 public:
  // What a board does to die or hang: the host board's process, the
  // firmware's loop.
  class Actions {
   public:
    virtual void kill() = 0;
    virtual void stall() = 0;

   protected:
    ~Actions() = default;
  };

  FaultPort(core::Port& inner, BoardFault fault, Actions* actions) : inner_(inner), fault_(fault), actions_(actions) {}
  void set_fault(BoardFault fault) {
    fault_ = fault;
    fired_ = corrupt_next_ = sums_changed_ = false;
  }

  uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    elapsed_us = inner_.after_compute(layer, macs, elapsed_us);
    if (fired_ || fault_.kind == FaultKind::Flip || !at_layer(layer)) return elapsed_us;
    fired_ = true;
    if (fault_.kind == FaultKind::Corrupt) corrupt_next_ = true;
    if (actions_ && fault_.kind == FaultKind::Kill) actions_->kill();
    if (actions_ && fault_.kind == FaultKind::Stall) actions_->stall();
    return elapsed_us;
  }

  uint32_t compute_part(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    return inner_.compute_part(layer, macs, elapsed_us);
  }

  void results(uint32_t layer, core::ResultKind kind, uint8_t* data) override {
    inner_.results(layer, kind, data);
    if (fault_.kind != FaultKind::Flip) return;
    if (!at_layer(layer)) {
      sums_changed_ = false;  // (a layer in between: the sums' inference was dropped)
      return;
    }
    if (kind == core::ResultKind::PartialSums) {
      uint32_t v;
      memcpy(&v, data, 4);
      v ^= 1u << 16;
      memcpy(data, &v, 4);
      sums_changed_ = true;  // the fault of this layer is in the sums
      return;
    }
    if (!sums_changed_) data[0] ^= 1;
    sums_changed_ = false;
  }

  bool send(int link, const uint8_t* data, size_t len) override {
    wire::FrameHeader h;
    if (!corrupt_next_ || len == 0 || len > sizeof frame_ || wire::decode_header(data, len, &h) != wire::WireError::Ok ||
        (h.type != wire::MsgType::Output && h.type != wire::MsgType::Done))
      return inner_.send(link, data, len);
    corrupt_next_ = false;
    memcpy(frame_, data, len);
    frame_[len - 1] ^= 0x5A;
    return inner_.send(link, frame_, len);
  }

  uint32_t now_us() override { return inner_.now_us(); }
  void flush(int link) override { inner_.flush(link); }
  size_t room(int link) override { return inner_.room(link); }
  uint32_t compute_instructions() override { return inner_.compute_instructions(); }
  void peer_address(const wire::PeerEntry& e) override { inner_.peer_address(e); }
  int open_link(uint16_t worker) override { return inner_.open_link(worker); }
  size_t entropy(uint8_t* out, size_t cap) override { return inner_.entropy(out, cap); }

 private:
  bool at_layer(uint32_t layer) const { return fault_.layer >= 0 && uint32_t(fault_.layer) == layer; }

  core::Port& inner_;
  BoardFault fault_;
  Actions* actions_;
  bool fired_ = false;         // kill, stall, corrupt act once
  bool corrupt_next_ = false;  // change the next OUTPUT/DONE frame
  bool sums_changed_ = false;  // flip: this layer's fault is in the sums
  uint8_t frame_[wire::kMaxFrame];
};

}  // namespace net
}  // namespace ts
