// A Port decorator that makes a board faulty on purpose (`run --inject-fault
// flip:BOARD:LAYER`): after computing layer `layer` (node index) the board
// hands on one changed value, as a faulty board would, and the run must name
// that board and layer (its digest differs from the reference). Everything
// else goes to the board's own port unchanged.
//
// Which value: the first output (its lowest bit); on a reduced layer
// (strategy `reduce`) whose board sends partial sums to others, the first
// sum it sends instead (bit 16, large enough to survive requantisation), so
// the owner of that block reports outputs that differ.
//
// Used by the host board (net/host_board.cpp) and the firmware
// (firmware/src/net_worker.cpp); header-only portable C++17 (no heap, no
// exceptions, no RTTI, no OS), so the firmware compiles it too.
#pragma once

#include <string.h>

#include "core/worker.h"

namespace ts {
namespace net {

class FlipPort final : public core::Port {
 public:
  FlipPort(core::Port& inner, int32_t layer) : inner_(inner), layer_(layer) {}
  void set_layer(int32_t layer) { layer_ = layer; }

  void results(uint32_t layer, core::ResultKind kind, uint8_t* data) override {
    inner_.results(layer, kind, data);
    if (layer_ < 0 || uint32_t(layer_) != layer) {
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

  bool send(int link, const uint8_t* data, size_t len) override { return inner_.send(link, data, len); }
  uint32_t now_us() override { return inner_.now_us(); }
  void flush(int link) override { inner_.flush(link); }
  uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    return inner_.after_compute(layer, macs, elapsed_us);
  }
  uint32_t compute_instructions() override { return inner_.compute_instructions(); }
  void peer_address(const wire::PeerEntry& e) override { inner_.peer_address(e); }
  int open_link(uint16_t worker) override { return inner_.open_link(worker); }
  size_t entropy(uint8_t* out, size_t cap) override { return inner_.entropy(out, cap); }

 private:
  core::Port& inner_;
  int32_t layer_;
  bool sums_changed_ = false;
};

}  // namespace net
}  // namespace ts
