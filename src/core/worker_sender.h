// The sender of a board (core/worker.h): the results of the layer it last
// computed going out while the send windows allow: OUTPUT messages to the
// coordinator (cut by wire::frame_payload), INPUTS frames to the boards that
// consume them (packed by core/inputs_packer.h), partial sums of a reduced
// layer's phase 1, and the layer's DONE.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/inputs_packer.h"
#include "core/worker_api.h"

namespace ts {
namespace core {

class LinkSet;
class Worker;

// What a layer's DONE reports (wire::DonePayload).
struct LayerReport {
  uint32_t seq = 0;  // the RUN's sequence number (0 without one)
  uint32_t us = 0, peak = 0, instructions = 0;
  uint32_t ready_at_us = 0, wait_us = 0;  // board clock when it was ready for the layer; ready -> start
  uint64_t digest = 0;
};

class Sender {
 public:
  void init(const WorkerConfig* cfg, Port* port, LinkSet* links, Worker* worker, const uint8_t* base);
  void reset();
  bool busy() const { return sending_; }
  // The results being sent are partial sums (phase 1 of a reduced layer).
  bool sums() const { return ps_phase_; }
  // The scheduler took note that the sums went out.
  void sums_sent() { ps_phase_ = false; }
  uint16_t layer() const { return layer_; }

  // Sends layer e's partial sums (its ps_sends, from ps_at); `us` is their
  // compute time, added to the layer's in its DONE (sums_us()).
  void send_sums(const FragLayer& e, uint32_t us);
  uint32_t sums_us() const { return report_.us; }
  // Sends layer e's outputs to other boards, computed first (halos first,
  // core/halo_first.h); send_results for the same layer then goes on with
  // them and adds its outputs to the coordinator and its DONE.
  void send_halos(const FragLayer& e);
  // Sends layer e's outputs, then its DONE.
  void send_results(const FragLayer& e, const LayerReport& r);
  // Sends while the windows allow; false if a link failed (the layer was
  // dropped when a peer could not be reached or its link failed).
  bool pump();

 private:
  bool send_inputs(int link, const Send& s);
  bool send_done(int coord);

  const WorkerConfig* cfg_ = nullptr;
  Port* port_ = nullptr;
  LinkSet* links_ = nullptr;
  Worker* worker_ = nullptr;
  const uint8_t* base_ = nullptr;  // planned buffers start here
  bool sending_ = false;
  bool done_pending_ = false;
  bool ps_phase_ = false;
  // Which sends a pass over the layer's sends takes: all of them in order,
  // or (halos first) those to other boards, then those to the coordinator.
  enum class Pass : uint8_t { All, Peers, Coordinator };
  Pass pass_ = Pass::All;
  bool then_coord_ = false;  // the peer pass is followed by the coordinator's (send_results came)
  uint16_t layer_ = 0;
  // What is sent, taken from the layer's entry when its sending starts (the
  // entry cache may reuse the entry meanwhile; a whole FragLayer would be
  // copied for these few fields): its send records (its sum sends in phase
  // 1) and where the bytes they index lie.
  struct Outgoing {
    const uint8_t* sends = nullptr;
    uint32_t n_sends = 0;
    uint32_t out_at = 0;
    uint32_t outputs = 0;  // the layer's out_elems, for its DONE
    uint8_t flags = 0;     // its kEntry* flags
    CodeParams code;       // its outputs' coding (kEntryCoded, kEntryMasked)
  };
  void take(const FragLayer& e);
  Outgoing out_;
  PackCursor cur_;  // the next send and its bytes already sent
  uint32_t frames_ = 0;  // frames the results took (a reduced layer counts its sums' too)
  uint32_t bytes_ = 0;   // and their bytes, headers included
  LayerReport report_;
};

}  // namespace core
}  // namespace ts
