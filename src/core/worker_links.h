// The link set of a board (core/worker.h): its connections (the
// coordinator's, and the board-to-board links it opened or accepted), each
// with its frame reader, send window, ACK tracker and authentication state;
// HELLO, frames out (sequenced through the window, tagged in a session),
// ERRORs and ACKs.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/worker_api.h"

namespace ts {
namespace core {

class DeploySession;
class Worker;

struct Link {
  bool open = false, held = false;
  int32_t worker = -1;  // plan index of the board at the other end (a peer link), else -1
  uint32_t deployment = 0;  // the deployment (plan id) under which `worker` was learnt
  wire::FrameReader reader;
  wire::SendWindow window;
  wire::AckTracker acks;
  auth::FrameMac rx, tx;  // active once the session is authenticated
  uint8_t hello[wire::HelloPayload::kAuthSize] = {};  // the HELLO we sent
  uint8_t hello_len = 0;
  bool dialled = false;  // we opened it (link_to): a peer link we are the opener of
  // A board that connected to us names itself in its HELLO; with a key the
  // link carries our sends to it only once its first tagged frame verified
  // (until then the name is only claimed).
  int32_t claimed = -1;
  uint32_t claimed_deployment = 0;
  // For the link's deadlines (Worker::link_overdue), on the port's clock
  // (us): when it opened, and when the frame being received began.
  uint32_t opened_us = 0, frame_us = 0;
  bool framing = false;  // a frame is partly received
};

class LinkSet {
 public:
  // `tx` is the board's one transmit frame buffer (wire::kMaxFrame bytes).
  void init(const WorkerConfig* cfg, Port* port, WorkerStats* stats, const DeploySession* deploy, Worker* worker,
            uint8_t* tx);

  static bool valid(int link) { return link >= 0 && link < kMaxLinks; }
  Link& operator[](int link) { return links_[link]; }
  const Link& operator[](int link) const { return links_[link]; }
  bool open(int link) const { return valid(link) && links_[link].open; }
  bool holding(int link) const { return valid(link) && links_[link].held; }
  void release_held();

  // The coordinator's link, or -1.
  int coord() const { return coord_; }
  void set_coord(int link) {
    coord_ = link;
    coord_held_ = false;
  }

  // A new connection on `link`: resets its state and sends HELLO (naming
  // this board by plan index when it dials a peer, link_to()).
  bool connect(int link);
  // `link` closed: tells the coordinator when it led to a board of the
  // current deployment and the board is in an inference (not `at_rest`):
  // ERROR PeerLost; and forgets it.
  void lost(int link, bool at_rest);
  // The link to board `worker` (plan index), opened through the port if
  // there is none; -1 if it cannot be opened.
  int link_to(uint16_t worker);
  // Before a compute: writes what the boards we exchange with wait for, and
  // what the coordinator's link holds (DONE reports of the layers finished
  // since the last compute), so that every layer this board finished has
  // been reported before it starts the next: a board that dies in a compute
  // has told the coordinator of every layer before it, and a failover
  // resumes at the layer it died in (docs/reliability.md). The coordinator
  // reads these reports in batches (coord::kTelemetryPause), so one write
  // per layer does not wake it once per layer.
  void flush_before_compute();

  // A sequenced frame may go out on `link` now: its window has room, and the
  // port has room for a whole frame (Port::room). When only the port lacks
  // it, take_port_full() says so once.
  bool can_send(int link) {
    if (!links_[link].window.can_send()) return false;
    if (port_->room(link) >= kFrameRoom) return true;
    port_full_ = true;
    return false;
  }
  bool take_port_full() {
    const bool was = port_full_;
    port_full_ = false;
    return was;
  }
  static constexpr size_t kFrameRoom = wire::kMaxFrameBuf;  // a frame and its tag

  // One frame of `len` payload bytes out on `link`, built in the transmit
  // buffer (the payload may already lie at tx() + wire::kHeaderSize).
  bool send_frame(int link, wire::MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                  uint16_t flags, bool sequenced);
  bool send_error(int link, wire::ErrorCode code, uint32_t seq, const char* text);
  bool send_ack_if_due(int link);
  // An ACK on `link` moved its window; false (and an ERROR) if it is bad.
  bool on_ack(int link, const uint8_t* payload, uint16_t len);
  uint8_t* tx() { return tx_; }
  // Inference tag the sends carry (wire.h FrameHeader::inference).
  void set_inference(uint16_t tag) { infer_ = tag; }
  uint16_t inference() const { return infer_; }

 private:
  void reset(int link);

  const WorkerConfig* cfg_ = nullptr;
  Port* port_ = nullptr;
  WorkerStats* stats_ = nullptr;
  const DeploySession* deploy_ = nullptr;
  Worker* worker_ = nullptr;
  uint8_t* tx_ = nullptr;
  Link links_[kMaxLinks];
  int coord_ = -1;
  // Frames for the coordinator written to the port but not flushed by us.
  bool coord_held_ = false;
  bool port_full_ = false;  // can_send found the port's queue full
  int32_t connecting_peer_ = -1;  // plan index of the peer link_to() is opening, else -1
  uint64_t nonces_ = 0;
  // Inference tag of the inference this board is on, or last finished: its
  // sends carry it (docs/protocol.md, "Pipelined inferences"). 0 = untagged.
  uint16_t infer_ = 0;
};

}  // namespace core
}  // namespace ts
