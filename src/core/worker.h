// The board worker: a heap-free, event-driven state machine that speaks the
// wire protocol (core/wire.h), keeps its fragment in flash (read in place),
// and computes its share of each layer from a fixed RAM arena.
//
// It sees the world only through three small interfaces: a Port (send bytes,
// read a microsecond clock), a FlashStore, and the arena memory handed to
// init(). The host worker process and the Cortex-M7 firmware each provide
// those; the logic here is the same code on both.
//
// Message flow, per layer, for a board with a non-empty share:
//   C->B INPUT*  (one message per input run; offset = operand << 28 | element)
//   C->B RUN     (layer)
//   B->C OUTPUT* (the run's results, offset = first output element)
//   B->C DONE    (elapsed compute microseconds, arena high-water mark)
// Deploy: C->B COMMIT(size, crc) answers DONE at once if that fragment is
// already committed (cached), else ERROR(HashMismatch); then STORE* + COMMIT.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/fragment.h"
#include "core/layer.h"
#include "core/wire.h"

namespace ts {
namespace core {

// INPUT offsets carry the operand index in their top bits.
constexpr uint32_t kOperandShift = 28;
constexpr uint32_t kElementMask = (1u << kOperandShift) - 1u;
inline uint32_t input_offset(uint32_t operand, uint32_t element) { return (operand << kOperandShift) | element; }

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
  // Sends all bytes or returns false (the link is then considered broken).
  virtual bool send(const uint8_t* data, size_t len) = 0;
  virtual uint32_t now_us() = 0;
  // Called after each layer's compute with its MAC count and measured time;
  // an emulated clock may stretch the time here. Returns the compute time to
  // report (microseconds).
  virtual uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) {
    (void)layer;
    (void)macs;
    return elapsed_us;
  }

 protected:
  ~Port() = default;
};

class FlashStore {
 public:
  virtual uint32_t capacity() const = 0;
  // Writes into the staging area (not yet visible). False if out of bounds.
  virtual bool stage(uint32_t offset, const uint8_t* data, uint32_t len) = 0;
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
  uint16_t window = 32;                // frames in flight for OUTPUT
  uint16_t ack_every = 16;             // ACK after this many frames, or on LAST/ACK_REQ
};

struct WorkerStats {
  uint32_t frames_in = 0, frames_out = 0;
  uint32_t bytes_in = 0, bytes_out = 0;
  uint32_t errors_sent = 0;
  uint32_t layers_run = 0;
  uint32_t peak_arena = 0;  // over the board's life
};

class Worker {
 public:
  // `arena` must hold at least kWorkerFixedArena bytes. Returns false if not.
  bool init(const WorkerConfig& cfg, uint8_t* arena, uint32_t arena_size, FlashStore* flash, Port* port);
  // A (new) coordinator connection: resets link state and sends HELLO.
  bool on_connect();
  // Feeds received bytes. Returns false when the link must be closed (a
  // malformed frame, a protocol violation, or a failed send); the reason was
  // sent as ERROR when possible.
  bool on_bytes(const uint8_t* data, size_t len);
  const WorkerStats& stats() const { return stats_; }
  const Arena& arena() const { return arena_; }
  const WorkerConfig& config() const { return cfg_; }
  // Drops any layer in progress (e.g. on disconnect).
  void abort_layer();

 private:
  bool handle(const wire::FrameHeader& h, const uint8_t* payload);
  bool on_input(const wire::FrameHeader& h, const uint8_t* payload);
  bool on_run(const wire::FrameHeader& h);
  bool on_store(const wire::FrameHeader& h, const uint8_t* payload);
  bool on_commit(const wire::FrameHeader& h, const uint8_t* payload);
  bool begin_layer(uint16_t layer, uint32_t seq);
  bool enter_layer(const wire::FrameHeader& h);
  bool send_frame(wire::MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                  uint16_t flags, bool sequenced);
  bool send_error(wire::ErrorCode code, uint32_t seq, const char* text);
  bool send_ack_if_due();
  bool pump();  // sends queued OUTPUT/DONE frames while the window allows
  bool open_fragment();

  WorkerConfig cfg_;
  Port* port_ = nullptr;
  FlashStore* flash_ = nullptr;
  Arena arena_;
  uint8_t* tx_ = nullptr;  // one frame, from the arena
  uint32_t fixed_mark_ = 0;
  wire::FrameReader reader_;
  wire::SendWindow window_;
  wire::AckTracker acks_;
  FragmentReader frag_;
  bool have_frag_ = false;
  uint32_t plan_id_ = 0;

  // Layer in progress.
  bool active_ = false;
  uint16_t layer_ = 0;
  FragLayer fl_;
  uint8_t* box_[kMaxInputs] = {};
  uint32_t received_[kMaxInputs] = {};
  uint8_t* out_ = nullptr;

  // Queued results: OUTPUT frames of [out_, out_ + out_len_) then DONE.
  bool sending_ = false;
  uint32_t out_len_ = 0, out_sent_ = 0;
  uint32_t run_seq_ = 0, run_us_ = 0, run_peak_ = 0;
  bool done_pending_ = false;

  WorkerStats stats_;
};

}  // namespace core
}  // namespace ts
