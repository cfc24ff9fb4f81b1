// An emulated board on the host: the portable core::Worker behind a TCP (or
// in-process) transport, with a file-backed flash store and a heap block as
// its RAM arena (allocated once, before serving).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "core/layer_work.h"
#include "core/worker.h"
#include "net/fault.h"
#include "net/fault_port.h"
#include "net/link_shaper.h"
#include "net/transport.h"

namespace ts::net {

struct HostBoardOptions {
  core::WorkerConfig cfg;
  std::string store_dir;  // committed fragment persists here; empty = memory only
  // Emulated clock: each layer's compute stretched to its MACs times the
  // layer's cycles per MAC (from its descriptor in the deployed fragment)
  // over the clock. Empty = off (host speed). `worker --cycles-per-mac X`
  // gives every layer X; `worker --costs TYPE` a board type's measured per-op
  // figures (plan/cost.h CostModel::type_cycles_per_mac, `run --emulate`).
  std::function<double(const core::LayerDesc&)> cycles_per_mac;
  // With the emulated clock: the board type's CPU outside its kernels
  // (core/layer_work.h, plan::CostModel::type_protocol), in cycles, added to
  // each layer's emulated time once (after its last part). Zero = none.
  core::ProtocolCost protocol;
  // Emulated link (`run --emulate`, net/link_shaper.h): this board's side of
  // every link it holds paced at the board type's figures. Off by default.
  LinkShape link;
  // Injected delay before each send and each receive, as in the paper's
  // Table 2 experiments. 0 = off.
  double delay_ms = 0.0;
  // Injected fault (`worker --inject-fault KIND:LAYER`), applied by the
  // fault decorator on the board's port (net/fault_port.h). None = off.
  BoardFault fault;
  // Exit when the parent process is gone (a board a coordinator spawned).
  // Off for a standalone board, whose parent may well be PID 1 (systemd, a
  // container's init, a shell that has exited).
  bool exit_with_parent = false;
  // A link that has carried no bytes for this long is closed, so idle or
  // half-open connections cannot hold the board's link slots for ever.
  // <= 0: never.
  double idle_timeout_s = 60.0;
  // The board never waits on a peer's window: what a socket does not take
  // at once is queued on its link. A link whose queue has not moved for
  // this long (a peer that does not read), or holds more than
  // kMaxQueuedBytes, is closed. <= 0: no time limit.
  double write_timeout_s = core::kWriteDeadlineMs / 1000.0;
};

// Most bytes a link may hold waiting for its peer to read (a board's
// sequenced sends are bounded by the window; ACKs and replies to a peer that
// sends but never reads are not).
constexpr size_t kMaxQueuedBytes = size_t(1) << 20;

// Flash emulated by memory, persisted to <dir>/fragment.bin on commit
// (write to a temporary file, fsync, rename: atomic). The folder is checked
// at construction (ts::Error if it is a file or cannot be made); a commit
// the store cannot keep says why (commit_error: full, not a folder, I/O).
class FileFlash final : public core::FlashStore {
 public:
  FileFlash(uint32_t capacity, std::string dir);
  uint32_t capacity() const override { return capacity_; }
  bool stage(uint32_t offset, const uint8_t* data, uint32_t len) override;
  const uint8_t* staged(uint32_t size) const override { return size <= staging_.size() ? staging_.data() : nullptr; }
  bool commit(uint32_t size, uint32_t crc) override;
  const uint8_t* current(uint32_t* size) const override;
  const char* commit_error() const override { return commit_error_; }
  // The line a commit failure with this errno is said as (on the wire too).
  static const char* store_error_text(int err);
  // Changes at every commit (a new fragment).
  uint32_t generation() const { return generation_; }

 private:
  const char* commit_error_ = nullptr;
  uint32_t capacity_;
  std::string dir_;
  std::vector<uint8_t> staging_, current_;
  bool have_ = false;
  uint32_t generation_ = 0;
};

class Listener;

// A whole board: arena, flash, worker, and its links: connections accepted
// from the coordinator and from boards that send to it, and connections it
// opens to the boards it sends to. One thread serves them all (serve():
// poll over the listener and every link, the worker in between); the
// worker's state is kept under one lock.
class HostBoard {
 public:
  explicit HostBoard(const HostBoardOptions& opt);
  ~HostBoard();
  // Accepts connections on `listener` until stop; at most core::kMaxLinks at
  // once (more are closed at once).
  void serve(Listener& listener, const std::atomic<bool>& stop, bool exit_with_parent);
  const core::Worker& worker() const { return worker_; }

 private:
  struct Link;
  class HostPort;
  // With mu_ held. Takes `t` into a free slot; -1 (and `t` left as it is)
  // if every slot is in use.
  int attach(std::unique_ptr<Transport>& t);
  void feed(int link, const uint8_t* data, size_t len);  // with mu_ held
  // With mu_ held: bytes out on `l` without waiting (the rest queued; a
  // link over its queue limit or whose socket failed is marked dead), and
  // the queued bytes the socket takes now.
  void write(Link& l, const uint8_t* data, size_t len);
  void pump(Link& l);
  // With mu_ held: closes links past a deadline (handshake, frame, write,
  // idle) and pushes out a connection that has not completed its handshake
  // when newcomers need the slot (core::Worker::link_to_evict).
  void enforce_deadlines(std::chrono::steady_clock::time_point now);
  void flush_all();                          // with mu_ held
  void close_dead();                         // with mu_ held
  void drop_dead();                          // with mu_ held
  // Emulated links (opt_.link), with mu_ held: writes the frames whose time
  // has come; feeds the worker what has arrived (not from inside a compute).
  void release_due(LinkShaper::Clock::time_point now);
  bool feed_due(LinkShaper::Clock::time_point now);  // true if it fed any
  // Reads every link into its arrival queue until `until` while releasing
  // frames (an emulated compute: the board's link works on meanwhile).
  void serve_links_until(LinkShaper::Clock::time_point until);
  // The next time a queued frame is due either way (max() if none).
  LinkShaper::Clock::time_point next_due() const;
  std::unique_ptr<LinkShaper> shaper_;  // set when opt_.link is on
  HostBoardOptions opt_;
  std::vector<uint8_t> arena_;
  FileFlash flash_;
  std::unique_ptr<HostPort> port_;
  std::unique_ptr<FaultPort> fault_;  // wraps port_ when opt_.fault is on
  core::Worker worker_;
  std::vector<std::unique_ptr<Link>> links_;
  std::atomic<bool> stop_{false};
  // Connections refused because every link slot was in use (each got an
  // ERROR saying so).
  std::atomic<uint32_t> refused_busy_{0};
};

// `tinysplit worker`: listen on host:port and serve coordinators forever (or
// until stop). Prints one line when ready.
int run_worker_process(const std::string& host, uint16_t port, const HostBoardOptions& opt);

}  // namespace ts::net
