// The board worker: a heap-free, event-driven state machine that speaks the
// wire protocol (core/wire.h), keeps its fragment in flash (read in place),
// and computes its share of each layer from a fixed RAM arena.
//
// It sees the world only through three small interfaces (core/worker_api.h):
// a Port (send bytes on a link, open a link to another board, read a
// microsecond clock), a FlashStore, and the arena memory handed to init().
// The host worker process and the Cortex-M7 firmware each provide those; the
// logic here is the same code on both. A board holds several links: one to the coordinator, and
// links to and from the boards it exchanges activations with.
//
// Message flow, per layer, for a board with a share (fragment.h):
//   ->B INPUT*  from the coordinator or from other boards (one message per
//               input run; offset = operand << 28 | element)
//   C->B RUN    (layer) when the entry is RUN-triggered (the paper's relay
//               mode); other entries start as soon as their inputs are in
//   B-> sends   OUTPUT* to the coordinator (offset = first output element)
//               and INPUTS* to the boards that consume the outputs (all the
//               runs for one peer, layer and operand gathered into as few
//               frames as their bytes need, as strided blocks)
//   B->C DONE   (elapsed compute microseconds, arena high-water mark, frames
//               the results took, the number of outputs and their digest:
//               core/digest.h)
// Layers run in order. A board takes inputs for a later layer once it has
// reached the layer that produces them (their buffers are then free in the
// planned arena); until then it holds the frame and does not acknowledge it,
// which stops the sender through its window. Pipelined runs tag every data
// frame with its inference (wire.h): a board on inference k holds a peer's
// frame of another inference the same way until it is done with k (never
// two inferences in its arena), and refuses one from the coordinator.
// One owner: the first coordinator link to speak owns the board (a
// session); another coordinator is refused ERROR(BoardInUse, naming the
// owner) until the owner's link closes (claim_session).
// Deploy: C->B COMMIT(size, crc) answers DONE at once if that fragment is
// already committed (cached), else ERROR(HashMismatch); then STORE* + COMMIT.
//
// Worker is the facade of four parts, each its own file:
//   DeploySession  (worker_deploy.h)    the fragment in flash, deploy, auth
//   LinkSet        (worker_links.h)     connections, windows, ACKs, frames out
//   LayerScheduler (worker_schedule.h)  which layer runs when, inputs, compute
//   Sender         (worker_sender.h)    a layer's results out, DONE
// and dispatches each received frame to them (worker.cpp).
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/worker_api.h"
#include "core/worker_deploy.h"
#include "core/worker_links.h"
#include "core/worker_schedule.h"
#include "core/worker_sender.h"

namespace ts {
namespace core {

class Worker {
 public:
  // `arena` must hold at least kWorkerFixedArena bytes. Returns false if not.
  bool init(const WorkerConfig& cfg, uint8_t* arena, uint32_t arena_size, FlashStore* flash, Port* port);

  // A new connection on link `link` (0 <= link < kMaxLinks): resets that
  // link's state and sends HELLO. Which peer it is shows in its frames: the
  // coordinator's carry src = kCoordinatorId. A coordinator speaking on a new
  // link starts a new session (work in progress is dropped).
  bool on_connect(int link);
  // Feeds received bytes of link `link`. Returns the number of bytes taken,
  // or -1 when the link must be closed (a malformed frame, a protocol
  // violation, a failed send; the reason was sent as ERROR when possible).
  // Fewer than `len` means the worker holds a frame it cannot take yet (a
  // board sent inputs for a layer this board has not reached): keep the rest
  // and offer it again after resume() released the link (holding(link)).
  int32_t on_bytes(int link, const uint8_t* data, size_t len);
  // The transport saw link `link` close.
  void on_disconnect(int link);
  // Retries held frames after progress, and sends results that waited for
  // room in the port's send queue (Port::room). False if a link failed on
  // the way (link_open() tells which).
  bool resume();
  bool holding(int link) const { return links_.holding(link); }
  // Between inferences: no layer open or sending results, none left to run.
  bool at_rest() const { return sched_.at_rest(); }
  bool link_open(int link) const { return links_.open(link); }
  // The link is the session's coordinator link, a board this one dialled,
  // or a board that named itself (with a key: and proved it).
  bool link_established(int link) const;
  // Why `link` has run out of time (WorkerConfig::handshake_ms, frame_ms),
  // or nullptr. The caller closes it.
  const char* link_overdue(int link) const;
  // The connection to push out so a newcomer finds a slot: the oldest that
  // has not completed its handshake, when no slot is free (`free_slots` 0)
  // or such connections hold more than WorkerConfig::unproven_links slots;
  // else -1. The caller closes it.
  int link_to_evict(int free_slots) const;
  // Inference tag the board is on or last finished (0 = untagged).
  uint16_t inference() const { return links_.inference(); }

  // Single-connection forms (link 0), as a host test or the firmware use.
  bool on_connect() {
    abort_layer();
    links_.set_coord(-1);
    return on_connect(0);
  }
  bool on_bytes(const uint8_t* data, size_t len) { return on_bytes(0, data, len) == int32_t(len); }

  const WorkerStats& stats() const { return stats_; }
  const Arena& arena() const { return arena_; }
  const WorkerConfig& config() const { return cfg_; }
  // Layer i's entry in the fragment the board holds, as the worker has it
  // decoded (a port reporting on the layer it just computed finds it there,
  // undecoded again), or nullptr.
  const FragLayer* layer_entry(uint32_t i) { return deploy_.entry_aside(i); }
  // Drops every layer in progress (e.g. when the coordinator disconnects).
  void abort_layer();
  // A coordinator frame (seq `seq`) on `link`, which is not the session's:
  // makes `link` the session's if the board has none, or its owner's link
  // is gone (Port::link_alive), and then closes the peer links of the
  // previous session; otherwise sends ERROR(BoardInUse) naming the owner
  // (Port::describe_link) and answers Fail (the caller closes `link`).
  Verdict claim_session(int link, uint32_t seq);

 private:
  Verdict handle(int link);
  Verdict on_control(int link, const wire::FrameHeader& h, const uint8_t* payload);
  Verdict on_hello(int link, const wire::FrameHeader& h);
  Verdict on_peers(int link, const wire::FrameHeader& h, const uint8_t* payload);

  WorkerConfig cfg_;
  Port* port_ = nullptr;
  Arena arena_;
  uint32_t fixed_mark_ = 0;
  DeploySession deploy_;
  LinkSet links_;
  LayerScheduler sched_;
  Sender sender_;
  WorkerStats stats_;
};

}  // namespace core
}  // namespace ts
