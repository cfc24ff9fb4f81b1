// What a board gives the worker (core/worker.h) and what it gets: the Port
// (links, clock, the emulated clock's stretch, peer addresses, entropy), the
// FlashStore, the arena, the configuration and the statistics. The host
// board (src/net/host_board.cpp) and the Cortex-M7 firmware
// (firmware/src/net_worker.cpp) implement Port and FlashStore.
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

// What Port::results hands over.
enum class ResultKind : uint8_t { Outputs, PartialSums };

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
  // Bytes `link` can take now without the board waiting: a port whose sends
  // queue in bounded memory (the firmware) says how much room its queue has
  // left. The worker sends a frame of its results only when one whole frame
  // fits (LinkSet::can_send), and goes on when resume() is called after the
  // queue moved; a send that does not fit (an ACK or ERROR to a peer that
  // does not read) fails, and the link is closed. The default: no limit.
  virtual size_t room(int link) {
    (void)link;
    return ~size_t(0);
  }
  // Called after each layer's compute with its MAC count and measured time;
  // an emulated clock may stretch the time here. Returns the compute time to
  // report (microseconds).
  virtual uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) {
    (void)layer;
    (void)macs;
    return elapsed_us;
  }
  // A layer computed in two parts (core/halo_first.h): called after the
  // first, with its MACs and measured time, before its sends go out; an
  // emulated clock takes the part's time here. Returns the part's time;
  // after_compute then gets the whole layer's MACs and that time plus the
  // second part's (and a port that counts instructions adds both parts').
  virtual uint32_t compute_part(uint32_t layer, uint64_t macs, uint32_t elapsed_us) {
    (void)layer;
    (void)macs;
    return elapsed_us;
  }
  // Guest instructions the last layer's compute took (the same bracket as
  // after_compute's time), if the port counts them exactly (the firmware
  // under QEMU -icount); 0 = not counted. Reported in DONE.
  virtual uint32_t compute_instructions() { return 0; }
  // Called with a layer's results after its compute, before the board
  // digests or sends any of them: `data` is the first value that leaves
  // this board, an int8 output (Outputs), or the first int32 partial sum of
  // the first block it sends to another board (PartialSums, phase 1 of a
  // reduced layer that has sums to send). A port may look at them; a
  // fault-injecting decorator changes them (net/fault_port.h: the board that
  // `run --inject-fault flip:BOARD:LAYER` makes faulty).
  virtual void results(uint32_t layer, ResultKind kind, uint8_t* data) {
    (void)layer;
    (void)kind;
    (void)data;
  }
  // Where board `e.worker` (plan index) listens, from a PEERS message.
  virtual void peer_address(const wire::PeerEntry& e) { (void)e; }
  // Opens a connection to board `worker` (plan index) and returns its link
  // id (0 <= id < kMaxLinks), or -1 if the port cannot (single-link ports,
  // unknown address, refused). The worker then sends HELLO on it.
  virtual int open_link(uint16_t worker) {
    (void)worker;
    return -1;
  }
  // Who is at the other end of link `link` (e.g. "127.0.0.1:40112"), as
  // at most `cap` - 1 characters and a NUL in `out`; returns the length
  // written, 0 if the port cannot tell.
  virtual size_t describe_link(int link, char* out, size_t cap) {
    (void)link;
    (void)out;
    (void)cap;
    return 0;
  }
  // Whether open link `link` still works as far as the transport knows
  // without waiting (its peer has not closed it). A port that always hears
  // of a close at once (on_disconnect) keeps the default.
  virtual bool link_alive(int link) {
    (void)link;
    return true;
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
  // After a commit that returned false: why, when the store itself failed
  // (full, not a folder, an I/O error) rather than the fragment; nullptr if
  // the fragment was refused (or the store cannot fail so).
  virtual const char* commit_error() const { return nullptr; }

 protected:
  ~FlashStore() = default;
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

// A link whose queued sends have not moved for this long (its peer does not
// read) is closed, on host boards (HostBoardOptions::write_timeout_s) and the
// firmware alike.
constexpr uint32_t kWriteDeadlineMs = 10000;

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
  // Deadlines of a link (Worker::link_overdue), in ms; 0 = none. A
  // connection must become the session's coordinator or a known peer board
  // within handshake_ms of opening (with a key: proven by it), and a frame
  // must arrive whole within frame_ms of its first byte, so that a peer that
  // trickles bytes or never finishes cannot hold a slot by its goodwill.
  uint32_t handshake_ms = 30000;
  uint32_t frame_ms = 10000;
  // Connections that have not completed their handshake may hold at most
  // this many slots; past it, or with no slot free, the oldest of them is
  // pushed out (Worker::link_to_evict), so a real coordinator or peer board
  // always finds a slot.
  uint8_t unproven_links = uint8_t(kMaxLinks / 2);
  // What the board's port closes a silent connection after, in ms (0 =
  // never): told in HELLO, so that the coordinator opens its links again
  // before a pause reaches it.
  uint32_t idle_ms = 0;
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

// Layers whose inputs may be arriving at the same time.
constexpr int kMaxOpenLayers = 8;

// What the worker's parts answer for a frame: taken, held until the board
// progresses (the link stops until resume()), or the link must close.
enum class Verdict : uint8_t { Ok, Hold, Fail };

}  // namespace core
}  // namespace ts
