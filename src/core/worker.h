// The board worker: a heap-free, event-driven state machine that speaks the
// wire protocol (core/wire.h), keeps its fragment in flash (read in place),
// and computes its share of each layer from a fixed RAM arena.
//
// It sees the world only through three small interfaces: a Port (send bytes
// on a link, open a link to another board, read a microsecond clock), a
// FlashStore, and the arena memory handed to init(). The host worker process
// and the Cortex-M7 firmware each provide those; the logic here is the same
// code on both. A board holds several links: one to the coordinator, and
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
// Deploy: C->B COMMIT(size, crc) answers DONE at once if that fragment is
// already committed (cached), else ERROR(HashMismatch); then STORE* + COMMIT.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/auth.h"
#include "core/fragment.h"
#include "core/layer.h"
#include "core/wire.h"

namespace ts {
namespace core {

// INPUT offsets (operand << 28 | element) are wire encoding: wire.h.
using wire::input_offset;
using wire::kElementMask;
using wire::kOperandShift;

// A bump allocator over a fixed block with an exact high-water mark.
class Arena {
 public:
  void init(uint8_t* mem, uint32_t size) {
    mem_ = mem;
    size_ = size;
    used_ = 0;
    high_ = 0;
  }
  // Returns nullptr when the block is exhausted (never crashes).
  uint8_t* alloc(uint32_t n) {
    const uint32_t b = arena_block(n);
    if (b < n || b > size_ - used_) return nullptr;
    uint8_t* p = mem_ + used_;
    used_ += b;
    if (used_ > high_) high_ = used_;
    return p;
  }
  uint32_t mark() const { return used_; }
  void release(uint32_t mark) { used_ = mark < used_ ? mark : used_; }
  uint32_t used() const { return used_; }
  uint32_t high_water() const { return high_; }
  // Starts a new measurement window at the current use.
  void reset_high_water() { high_ = used_; }
  uint32_t capacity() const { return size_; }

 private:
  uint8_t* mem_ = nullptr;
  uint32_t size_ = 0, used_ = 0, high_ = 0;
};

class Port {
 public:
  // Sends all bytes on link `link` or returns false (the link is then
  // considered broken). Link ids are the ones the transport passed to
  // Worker::on_connect / on_bytes, or that open_link returned. A port with
  // one connection implements the two-argument form (link 0).
  virtual bool send(int link, const uint8_t* data, size_t len) { return link == 0 && send(data, len); }
  virtual bool send(const uint8_t* data, size_t len) {
    (void)data;
    (void)len;
    return false;
  }
  virtual uint32_t now_us() = 0;
  // A port may gather the frames sent on a link and write them together.
  // The worker calls flush(link) for its links to other boards before it
  // starts computing a layer, so that halos and ACKs a neighbour is waiting
  // for leave before the compute, not after the next layers that happen to
  // have their inputs. A port that writes at once ignores it.
  virtual void flush(int link) { (void)link; }
  // Called after each layer's compute with its MAC count and measured time;
  // an emulated clock may stretch the time here. Returns the compute time to
  // report (microseconds).
  virtual uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) {
    (void)layer;
    (void)macs;
    return elapsed_us;
  }
  // Guest instructions the last layer's compute took (the same bracket as
  // after_compute's time), if the port counts them exactly (the firmware
  // under QEMU -icount); 0 = not counted. Reported in DONE.
  virtual uint32_t compute_instructions() { return 0; }
  // Where board `e.worker` (plan index) listens, from a PEERS message.
  virtual void peer_address(const wire::PeerEntry& e) { (void)e; }
  // Opens a connection to board `worker` (plan index) and returns its link
  // id (0 <= id < kMaxLinks), or -1 if the port cannot (single-link ports,
  // unknown address, refused). The worker then sends HELLO on it.
  virtual int open_link(uint16_t worker) {
    (void)worker;
    return -1;
  }
  // Up to `cap` bytes that differ from boot to boot (a hardware random
  // source, or at least a boot counter and timer jitter); returns how many
  // it wrote. Only used for the nonces of a board that holds a key.
  virtual size_t entropy(uint8_t* out, size_t cap) {
    (void)out;
    (void)cap;
    return 0;
  }

 protected:
  ~Port() = default;
};

class FlashStore {
 public:
  virtual uint32_t capacity() const = 0;
  // Writes into the staging area (not yet visible). False if out of bounds.
  virtual bool stage(uint32_t offset, const uint8_t* data, uint32_t len) = 0;
  // The first `size` staged bytes, read in place (the worker checks that
  // they are a fragment before committing them), or nullptr if fewer are
  // staged.
  virtual const uint8_t* staged(uint32_t size) const = 0;
  // Verifies that the first `size` staged bytes have CRC32 `crc` and makes
  // them the current fragment atomically. False leaves the current one.
  virtual bool commit(uint32_t size, uint32_t crc) = 0;
  // The committed fragment (in place), or nullptr.
  virtual const uint8_t* current(uint32_t* size) const = 0;

 protected:
  ~FlashStore() = default;
};

struct WorkerConfig {
  uint16_t id = 0;
  uint16_t clock_mhz = 600;
  uint32_t ram_bytes = 512 * 1024;     // arena budget
  uint32_t flash_bytes = 8u << 20;
  uint16_t window = 32;                // frames in flight per link
  uint16_t ack_every = wire::kBoardAckEvery;  // ACK after this many frames, or on LAST/ACK_REQ
  // Shared key (core/auth.h). With a key the board accepts a coordinator
  // only after AUTH proves it holds the same key, and every frame after that
  // is authenticated both ways; without one it refuses AUTH.
  bool has_key = false;
  uint8_t key[auth::kKeyBytes] = {};
  // Test hook (`run --inject-fault flip:BOARD:LAYER`): after computing this
  // layer (node index), change one output value before the digest and the
  // sends, as a faulty board would. -1 = off.
  int32_t flip_layer = -1;
};

struct WorkerStats {
  uint32_t frames_in = 0, frames_out = 0;
  uint32_t bytes_in = 0, bytes_out = 0;
  uint32_t errors_sent = 0;
  uint32_t auth_failures = 0;  // frames refused by authentication (coordinator and peer links)
  uint32_t peer_auth_failures = 0;  // of those, on board-to-board links
  uint32_t peers_lost = 0;  // peer links of the current deployment that closed (reported to the coordinator)
  uint32_t layers_run = 0;
  uint32_t peak_arena = 0;  // over the board's life
};

// Connections a board holds at once (the coordinator, boards sending to it,
// boards it sends to; a link a board opened to us also carries our sends to
// it). Each costs one frame buffer of static RAM. 40 covers 16 boards that
// all exchange with each other (1 + 2 x 15 when every pair opens its own);
// the firmware builds with 16 (firmware/Makefile MAX_LINKS: 8 boards).
#ifndef TS_MAX_LINKS
#define TS_MAX_LINKS 40
#endif
constexpr int kMaxLinks = TS_MAX_LINKS;
// Layers whose inputs may be arriving at the same time.
constexpr int kMaxOpenLayers = 8;

// MACs a board spends on its share of a layer (the emulated clock's count).
uint64_t share_macs(const FragLayer& e);
// Top of the arena buffers of a layer's input windows (the end of the
// highest one, relative to the planned buffers; 0 if it holds none).
uint32_t windows_top(const FragLayer& e);

// Layers whose facts a board works out once, when it opens a fragment
// (LayerIndex); a fragment of more layers computes the rest per use.
#ifndef TS_MAX_INDEXED_LAYERS
#define TS_MAX_INDEXED_LAYERS 256
#endif
constexpr uint32_t kMaxIndexedLayers = TS_MAX_INDEXED_LAYERS;

// What the board would otherwise work out from a layer's entry at every
// inference (its MAC count, a walk over its regions' segments) or every
// frame (whether it has a share, where its windows end), computed once per
// fragment into a fixed table: the worker's per-inference bookkeeping.
class LayerIndex {
 public:
  // Indexes the first kMaxIndexedLayers layers of an opened fragment.
  void build(const FragmentReader& f);
  void clear() { n_ = 0; }
  bool indexed(uint32_t i) const { return i < n_; }
  // Valid for indexed layers only.
  bool active(uint32_t i) const { return f_[i].active; }
  uint64_t macs(uint32_t i) const { return f_[i].macs; }
  uint32_t windows_top(uint32_t i) const { return f_[i].windows_top; }

 private:
  struct Facts {
    uint64_t macs = 0;
    uint32_t windows_top = 0;
    bool active = false;
  };
  Facts f_[kMaxIndexedLayers];
  uint32_t n_ = 0;
};

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
  // Retries held frames after progress. False if a link failed on the way
  // (link_open() tells which).
  bool resume();
  bool holding(int link) const { return link >= 0 && link < kMaxLinks && links_[link].held; }
  // Between inferences: no layer open or sending results, none left to run.
  bool at_rest() const { return idle() && (!have_frag_ || cursor_ >= frag_.layer_count()); }
  bool link_open(int link) const { return link >= 0 && link < kMaxLinks && links_[link].open; }
  // Inference tag the board is on or last finished (0 = untagged).
  uint16_t inference() const { return infer_; }

  // Single-connection forms (link 0), as a host test or the firmware use.
  bool on_connect() {
    abort_layer();
    coord_link_ = -1;
    return on_connect(0);
  }
  bool on_bytes(const uint8_t* data, size_t len) { return on_bytes(0, data, len) == int32_t(len); }

  const WorkerStats& stats() const { return stats_; }
  const Arena& arena() const { return arena_; }
  const WorkerConfig& config() const { return cfg_; }
  // Drops every layer in progress (e.g. when the coordinator disconnects).
  void abort_layer();

 private:
  enum class Verdict : uint8_t { Ok, Hold, Fail };
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
  };
  struct Open {
    bool used = false, run = false;
    uint16_t layer = 0;
    uint32_t run_seq = 0;
    uint32_t received[kMaxInputs] = {};
    // Partial sums (kEntryPartial): own sums computed and sent (phase 1),
    // the accumulator zeroed, bytes of sums received.
    bool ps_done = false, acc_ready = false;
    uint32_t ps_received = 0;
  };

  Verdict handle(int link);
  Verdict authenticate(int link);
  Verdict peer_session(int link);  // keyed board-to-board link: derive its keys from both HELLOs
  Verdict on_input(int link, const wire::FrameHeader& h, const uint8_t* payload);
  Verdict on_run(int link, const wire::FrameHeader& h);
  Verdict admit(int link, const wire::FrameHeader& h, const FragLayer& e, Open** slot);
  const FragLayer* entry(uint16_t layer, uint32_t seq, int link);
  // Entry i of the fragment, decoded once into a small cache (valid until
  // the next call that maps to the same place: layers i and i + kEntryCache).
  const FragLayer* layer_entry(uint32_t i);
  bool layer_active(uint32_t i);
  bool on_store(int link, const wire::FrameHeader& h, const uint8_t* payload);
  bool on_commit(int link, const wire::FrameHeader& h, const uint8_t* payload);
  bool send_frame(int link, wire::MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                  uint16_t flags, bool sequenced);
  bool send_error(int link, wire::ErrorCode code, uint32_t seq, const char* text);
  bool send_ack_if_due(int link);
  bool drive();  // starts ready layers and sends their results while the windows allow
  bool start(const FragLayer& e, Open* slot, bool* started);
  Verdict on_partial(int link, const wire::FrameHeader& h, const uint8_t* payload, const FragLayer& e, Open* slot);
  Open* new_slot(uint16_t layer);
  bool pump();
  uint16_t gather(const Send& first, bool* last);
  int link_to(uint16_t worker);
  void reset_link(int link);
  bool open_fragment();
  Open* find_open(uint16_t layer);
  bool idle() const;
  void touch(uint32_t at, uint32_t bytes);
  uint8_t* buffer(uint32_t at) { return base_ + at; }

  WorkerConfig cfg_;
  Port* port_ = nullptr;
  FlashStore* flash_ = nullptr;
  Arena arena_;
  uint8_t* tx_ = nullptr;  // one frame, from the arena
  uint8_t* base_ = nullptr;  // planned buffers start here
  uint32_t space_ = 0;
  uint32_t fixed_mark_ = 0;
  Link links_[kMaxLinks];
  int coord_link_ = -1;
  FragmentReader frag_;
  bool have_frag_ = false;
  LayerIndex index_;
  static constexpr uint32_t kEntryCache = 4;
  FragLayer cache_[kEntryCache];
  uint32_t cache_layer_[kEntryCache] = {~0u, ~0u, ~0u, ~0u};  // ~0u: empty
  uint8_t frag_digest_[kSha256Bytes] = {};  // SHA-256 of the committed fragment
  // Deploy in progress: SHA-256 of the STORE bytes staged so far, valid while
  // they arrive in order from offset 0 (stage_hashed_ bytes).
  Sha256 stage_sha_;
  uint32_t stage_hashed_ = 0;
  bool stage_in_order_ = true;
  uint64_t nonces_ = 0;
  uint32_t plan_id_ = 0;
  uint32_t first_active_ = 0;

  // Execution: the next layer to run, the layers receiving inputs, and the
  // results of the last layer computed while they go out.
  uint32_t cursor_ = 0;
  Open open_[kMaxOpenLayers];
  bool sending_ = false;
  bool done_pending_ = false;
  bool ps_phase_ = false;  // what is being sent are partial sums (phase 1 of a reduced layer)
  uint16_t layer_ = 0;
  FragLayer fl_;
  uint32_t send_i_ = 0, send_off_ = 0;
  uint32_t run_seq_ = 0, run_us_ = 0, run_peak_ = 0, run_frames_ = 0, run_instr_ = 0;
  int32_t connecting_peer_ = -1;  // plan index of the peer link_to() is opening, else -1
  uint64_t run_digest_ = 0;  // digest of the last computed layer's outputs (DONE)
  uint32_t touched_ = 0;  // top of the planned buffers used since the last layer's DONE
  // Inference tag (wire.h FrameHeader::inference) of the inference this
  // board is on, or last finished: its sends carry it; frames of another
  // tag wait until the board is at rest (docs/protocol.md, "Pipelined
  // inferences"). 0 = untagged.
  uint16_t infer_ = 0;

  WorkerStats stats_;
};

}  // namespace core
}  // namespace ts
