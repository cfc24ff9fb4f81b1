#include "net/host_board.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <cerrno>
#include <thread>
#include <unistd.h>

#include "core/crc32.h"
#include "core/layer_work.h"
#include "net/keyfile.h"
#include "net/tcp.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/input_file.h"

namespace ts::net {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

FileFlash::FileFlash(uint32_t capacity, std::string dir) : capacity_(capacity), dir_(std::move(dir)) {
  if (dir_.empty()) return;
  // The folder is checked (and made) at start: a board whose store cannot
  // keep a fragment says so before it serves anyone.
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw Error("store '" + dir_ + "' is not a folder");
  fs::create_directories(dir_, ec);
  if (ec) throw Error("store '" + dir_ + "': cannot make the folder (" + ec.message() + ")");
  const std::string path = (fs::path(dir_) / "fragment.bin").string();
  if (!fs::exists(path, ec)) return;
  // A fragment larger than this flash (kept by a board with more) is none.
  if (check_input_file(path, "stored fragment", uint64_t(1) << 32) > capacity_) return;
  const std::string bytes = read_input_file(path, "stored fragment", capacity_);
  current_.assign(bytes.begin(), bytes.end());
  have_ = !current_.empty();
}

bool FileFlash::stage(uint32_t offset, const uint8_t* data, uint32_t len) {
  if (uint64_t(offset) + len > capacity_) return false;
  if (staging_.size() < size_t(offset) + len) staging_.resize(size_t(offset) + len);
  std::copy(data, data + len, staging_.begin() + offset);
  return true;
}

bool FileFlash::commit(uint32_t size, uint32_t crc) {
  commit_error_ = nullptr;
  if (size > capacity_ || size > staging_.size()) return false;
  if (ts::crc32(staging_.data(), size) != crc) return false;
  std::vector<uint8_t> next(staging_.begin(), staging_.begin() + size);
  if (!dir_.empty()) {
    // Written beside, fsynced and renamed over (util/atomic_file.h): a failed
    // write leaves the previous fragment as it was and no temporary.
    const int err = try_write_file_atomic((fs::path(dir_) / "fragment.bin").string(), next.data(), next.size());
    if (err != 0) {
      commit_error_ = store_error_text(err);
      return false;
    }
  }
  current_ = std::move(next);
  have_ = true;
  ++generation_;
  staging_.clear();
  staging_.shrink_to_fit();
  return true;
}

const char* FileFlash::store_error_text(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT: return "store full: no space left on device";
    case ENOTDIR:
    case EEXIST: return "store is not a folder";
    case EIO: return "store I/O error";
    case EROFS: return "store is on a read-only file system";
    case EACCES:
    case EPERM: return "store not writable: permission denied";
    default: return "store write failed";
  }
}

const uint8_t* FileFlash::current(uint32_t* size) const {
  *size = have_ ? uint32_t(current_.size()) : 0;
  return have_ ? current_.data() : nullptr;
}

// Bytes held by an emulated link (opt_.link) until `due`.
struct Timed {
  Clock::time_point due;
  std::vector<uint8_t> bytes;
};

struct HostBoard::Link {
  std::unique_ptr<Transport> t;
  std::vector<uint8_t> out;      // frames the worker queued for this link
  bool urgent = false;           // `out` holds more than DONE telemetry
  std::vector<uint8_t> pending;  // received bytes the worker holds back
  bool dead = false;             // closed; the slot is freed (drop_dead)
  Clock::time_point last_bytes;  // for the idle limit
  // Bytes the socket has not taken yet (HostBoard::write), from wq_off on,
  // and when it last took some while any waited (the write deadline).
  std::vector<uint8_t> wq;
  size_t wq_off = 0;
  Clock::time_point write_since;
  bool queued() const { return wq_off < wq.size(); }
  // Emulated links: frames the worker sent, each until its link has
  // serialised it; bytes read, until they have crossed.
  std::deque<Timed> out_q, in_q;
};

// The board's mutable state: guarded by `mu` (the board has one thread, serve(); the
// lock keeps the state consistent should another thread ever look at it).
class HostBoard::HostPort final : public core::Port, public FaultPort::Actions {
 public:
  HostPort(HostBoard& b) : board(b), t0_(Clock::now()) {}
  HostBoard& board;
  std::mutex mu;
  std::map<uint16_t, wire::PeerEntry> peers;

  // Frames the worker emits while handling one chunk of input are gathered
  // per link and written when the chunk is done (flush_all); the worker never
  // waits inside a call, so nothing is held back across a wait.
  bool send(int link, const uint8_t* data, size_t len) override {
    if (link < 0 || size_t(link) >= board.links_.size() || !board.links_[size_t(link)]->t) return false;
    delay();  // the injected delay is per frame sent, as the paper's was per send
    Link& l = *board.links_[size_t(link)];
    if (board.shaper_) {  // an emulated link: the frame leaves once the link has serialised it
      l.out_q.push_back(Timed{board.shaper_->depart(Clock::now(), len), std::vector<uint8_t>(data, data + len)});
      return true;
    }
    std::vector<uint8_t>& out = l.out;
    const size_t at = out.size();
    if (at == 0) l.urgent = false;
    wire::FrameHeader fh;
    // (An authentication tag, sent on its own after its frame, does not
    // decode as a header and leaves the frame's urgency.)
    if (!l.urgent && wire::decode_header(data, len, &fh) == wire::WireError::Ok)
      l.urgent = !(fh.type == wire::MsgType::Done && fh.dst == wire::kCoordinatorId && !(fh.flags & wire::kFlagAckReq));
    out.insert(out.end(), data, data + len);
    return true;
  }
  // With `mu` held (the worker runs under it).
  void flush(int link) override {
    if (board.shaper_) return board.release_due(Clock::now());
    if (link < 0 || size_t(link) >= board.links_.size()) return;
    Link& l = *board.links_[size_t(link)];
    if (!l.t || l.out.empty() || l.dead) return;
    board.write(l, l.out.data(), l.out.size());  // a failure: close_dead() closes it when the worker returns
    l.out.clear();
  }
  void peer_address(const wire::PeerEntry& e) override { peers[e.worker] = e; }
  int open_link(uint16_t worker) override {
    auto it = peers.find(worker);
    if (it == peers.end()) return -1;
    const uint32_t ip = it->second.ipv4;
    const std::string host = std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
                             std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
    try {
      // Peers listen before the coordinator sends PEERS: a refusal means the
      // peer is gone, and is final (no retries while holding the board).
      Endpoint at;
      at.host = host;
      at.port = it->second.port;
      at.family = Endpoint::Family::IPv4;
      at.ipv4 = ip;
      std::unique_ptr<Transport> t = network("tcp").connect(at, Millis(3000), kForever);
      return board.attach(t);
    } catch (const std::exception&) {
      return -1;
    }
  }
  size_t describe_link(int link, char* out, size_t cap) override {
    if (link < 0 || size_t(link) >= board.links_.size() || !board.links_[size_t(link)]->t || cap == 0) return 0;
    const std::string& who = board.links_[size_t(link)]->t->peer();
    const size_t n = std::min(who.size(), cap - 1);
    std::copy(who.begin(), who.begin() + long(n), out);
    out[n] = 0;
    return n;
  }
  // A coordinator that closed its end is gone even if this loop has not
  // read the close yet (a new session may follow it at once).
  bool link_alive(int link) override {
    if (link < 0 || size_t(link) >= board.links_.size()) return false;
    const Link& l = *board.links_[size_t(link)];
    if (!l.t || l.dead) return false;
    pollfd p{l.t->poll_handle(), POLLIN | POLLRDHUP, 0};
    if (p.fd < 0 || ::poll(&p, 1, 0) <= 0) return true;
    return !(p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
  }
  size_t entropy(uint8_t* out, size_t cap) override {
    try {
      random_bytes(out, cap);
      return cap;
    } catch (const std::exception&) {
      return 0;  // the nonce still differs by clock and connection count
    }
  }
  uint32_t now_us() override {
    return uint32_t(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0_).count());
  }
  // The emulated clock: the layer takes its MACs x its cycles per MAC over
  // the clock. Meanwhile an emulated link goes on sending and receiving.
  uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    return emulate(layer, macs, elapsed_us, true);
  }
  // The first part of a layer computed halos first (core/halo_first.h):
  // its own MACs' time, so its sends leave when the board's would.
  uint32_t compute_part(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    return emulate(layer, macs, elapsed_us);
  }
  uint32_t emulate(uint32_t layer, uint64_t macs, uint32_t elapsed_us, bool last = false) {
    const HostBoardOptions& o = board.opt_;
    if (!o.cycles_per_mac) return elapsed_us;
    const double cycles = double(macs) * layer_cycles(layer) + (last ? layer_protocol(layer) : 0.0);
    const double target = cycles / double(o.cfg.clock_mhz);  // us
    if (target > elapsed_us) {
      const auto until = Clock::now() + std::chrono::microseconds(int64_t(target - elapsed_us));
      if (board.shaper_) board.serve_links_until(until);
      else std::this_thread::sleep_until(until);
    }
    return uint32_t(std::ceil(std::max<double>(target, elapsed_us)));  // never below the emulated time
  }
  // Cycles per MAC of layer `layer` of the committed fragment (a table made
  // once per fragment from its descriptors).
  double layer_cycles(uint32_t layer) {
    tables();
    return layer < cycles_.size() ? cycles_[layer] : 0.0;
  }
  // The protocol cycles of layer `layer` of the committed fragment.
  double layer_protocol(uint32_t layer) {
    tables();
    return layer < protocol_.size() ? protocol_[layer] : 0.0;
  }
  void tables() {
    if (board.flash_.generation() == cycles_gen_) return;
    cycles_gen_ = board.flash_.generation();
    cycles_.clear();
    protocol_.clear();
    uint32_t size = 0;
    const uint8_t* p = board.flash_.current(&size);
    core::FragmentReader r;
    core::FragLayer e;
    if (p && r.open(p, size) == core::FragStatus::Ok)
      for (uint32_t i = 0; i < r.layer_count(); ++i) {
        const bool ok = r.layer(i, &e) == core::FragStatus::Ok;
        cycles_.push_back(ok ? board.opt_.cycles_per_mac(e.desc) : 0.0);
        protocol_.push_back(ok ? board.opt_.protocol.instructions(core::layer_work(e)) : 0.0);
      }
  }
  // The injected fault's actions (net/fault_port.h), called by the fault
  // decorator with `mu` held: a stall holds it, so the whole board hangs
  // (no reads, no sends, no new connections).
  void kill() override { std::raise(SIGKILL); }
  void stall() override {
    // The board's one thread stops here: only the end of the board, or of
    // the coordinator that spawned it, ends the stall.
    while (!board.stop_.load() && !(board.opt_.exit_with_parent && getppid() == 1))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> cycles_, protocol_;
  uint32_t cycles_gen_ = ~0u;
  void delay() const {
    if (board.opt_.delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(int64_t(board.opt_.delay_ms * 1000)));
  }

 private:
  Clock::time_point t0_;
};

HostBoard::HostBoard(const HostBoardOptions& opt)
    : opt_(opt), arena_(opt.cfg.ram_bytes), flash_(opt.cfg.flash_bytes, opt.store_dir),
      port_(std::make_unique<HostPort>(*this)) {
  for (int i = 0; i < core::kMaxLinks; ++i) links_.push_back(std::make_unique<Link>());
  if (opt_.link.on()) shaper_ = std::make_unique<LinkShaper>(opt_.link);
  if (shaper_ || opt_.cycles_per_mac) precise_timers();  // an emulated board
  core::Port* port = port_.get();
  if (opt_.fault.on()) {
    fault_ = std::make_unique<FaultPort>(*port_, opt_.fault, port_.get());
    port = fault_.get();
  }
  // The idle limit this board's poll loop keeps (HELLO tells the coordinator).
  opt_.cfg.idle_ms = opt_.idle_timeout_s > 0 ? uint32_t(std::min(opt_.idle_timeout_s * 1000.0, 4.0e9)) : 0;
  if (!worker_.init(opt_.cfg, arena_.data(), uint32_t(arena_.size()), &flash_, port))
    throw NetError("board " + std::to_string(opt.cfg.id) + ": RAM budget too small for the worker");
}

HostBoard::~HostBoard() { stop_ = true; }

int HostBoard::attach(std::unique_ptr<Transport>& t) {
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    if (l.t) continue;
    l.t = std::move(t);
    l.out.clear();
    l.pending.clear();
    l.out_q.clear();
    l.in_q.clear();
    l.dead = false;
    l.last_bytes = Clock::now();
    l.wq.clear();
    l.wq_off = 0;
    return int(i);
  }
  return -1;
}

// What peers wait for goes first; DONE telemetry for the coordinator after
// it, in the same turn (the coordinator reads it in batches,
// coord::kTelemetryPause, so these writes do not wake it each time; held
// back here, the reports of a board that died with them would be lost).
void HostBoard::flush_all() {
  for (const bool telemetry : {false, true})
    for (size_t i = 0; i < links_.size(); ++i) {
      Link& l = *links_[i];
      if (!l.t || l.out.empty() || (!telemetry && !l.urgent && !l.dead)) continue;
      // A link the worker gave up on still gets what it queued last (the
      // ERROR saying why) before close_dead() closes it.
      const bool was_dead = l.dead;
      write(l, l.out.data(), l.out.size());
      if (l.dead && !was_dead) worker_.on_disconnect(int(i));
      l.out.clear();
    }
}

// Links the worker dropped (protocol errors) or whose socket failed.
void HostBoard::close_dead() {
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    if (l.t && (l.dead || !worker_.link_open(int(i)))) {
      // An emulated link still sends what the worker queued last (the ERROR saying why).
      for (const Timed& f : l.out_q)
        if (!l.dead) write(l, f.bytes.data(), f.bytes.size());
      l.out_q.clear();
      pump(l);  // what the socket takes now; the rest goes with the link
      l.dead = true;
      l.t->close();
    }
  }
}

// With mu held: frees the slots of dead links (the worker forgets them).
void HostBoard::drop_dead() {
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    if (!l.t || !l.dead) continue;
    worker_.on_disconnect(int(i));
    l.t->close();
    l.t.reset();
    l.out.clear();
    l.pending.clear();
    l.out_q.clear();
    l.in_q.clear();
    l.wq.clear();
    l.wq_off = 0;
  }
}

void HostBoard::write(Link& l, const uint8_t* data, size_t len) {
  if (!l.t || len == 0) return;
  try {
    if (!l.queued()) {  // (an empty queue holds nothing: pump, attach and drop_dead clear it)
      const size_t n = l.t->try_send(data, len);
      data += n;
      len -= n;
      if (len == 0) return;
      l.write_since = Clock::now();
    }
  } catch (const std::exception&) {
    l.dead = true;
    return;
  }
  if (l.wq.size() - l.wq_off + len > kMaxQueuedBytes) {  // a peer that does not read
    l.dead = true;
    return;
  }
  l.wq.insert(l.wq.end(), data, data + len);
}

void HostBoard::pump(Link& l) {
  if (!l.t || !l.queued()) return;
  try {
    const size_t n = l.t->try_send(l.wq.data() + l.wq_off, l.wq.size() - l.wq_off);
    if (n == 0) return;
    l.wq_off += n;
    l.write_since = Clock::now();
  } catch (const std::exception&) {
    l.dead = true;
    return;
  }
  if (!l.queued()) {
    l.wq.clear();
    l.wq_off = 0;
  } else if (l.wq_off > 64 * 1024) {  // keep the queue's front near its start
    l.wq.erase(l.wq.begin(), l.wq.begin() + long(l.wq_off));
    l.wq_off = 0;
  }
}

void HostBoard::enforce_deadlines(Clock::time_point now) {
  const auto secs = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  int free_slots = 0;
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    if (!l.t) {
      ++free_slots;
      continue;
    }
    if (l.dead) continue;
    // Nothing from a peer for too long: free the slot. A coordinator
    // mid-inference always has frames in flight or answers to send well
    // within the idle limit.
    const bool idle = opt_.idle_timeout_s > 0 && l.pending.empty() && now - l.last_bytes > secs(opt_.idle_timeout_s);
    const bool stuck = opt_.write_timeout_s > 0 && l.queued() && now - l.write_since > secs(opt_.write_timeout_s);
    if (idle || stuck || worker_.link_overdue(int(i))) l.dead = true;
  }
  // A newcomer always finds a slot: the oldest connection that has not
  // completed its handshake gives way (at most one per turn; the loop turns
  // at every connection).
  const int v = worker_.link_to_evict(free_slots);
  if (v >= 0) links_[size_t(v)]->dead = true;
}

void HostBoard::release_due(Clock::time_point now) {
  std::vector<uint8_t> batch;
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    if (!l.t || l.dead || l.out_q.empty()) continue;
    batch.clear();
    while (!l.out_q.empty() && l.out_q.front().due <= now + kShapeSlack) {
      batch.insert(batch.end(), l.out_q.front().bytes.begin(), l.out_q.front().bytes.end());
      l.out_q.pop_front();
    }
    if (batch.empty()) continue;
    write(l, batch.data(), batch.size());  // a failure: close_dead() closes it when the worker returns
  }
}

bool HostBoard::feed_due(Clock::time_point now) {
  bool fed = false;
  for (size_t i = 0; i < links_.size(); ++i) {
    Link& l = *links_[i];
    while (l.t && !l.dead && l.pending.empty() && !l.in_q.empty() && l.in_q.front().due <= now + kShapeSlack) {
      const std::vector<uint8_t> bytes = std::move(l.in_q.front().bytes);
      l.in_q.pop_front();
      feed(int(i), bytes.data(), bytes.size());
      fed = true;
    }
  }
  return fed;
}

Clock::time_point HostBoard::next_due() const {
  Clock::time_point t = Clock::time_point::max();
  for (const auto& lp : links_) {
    if (!lp->t || lp->dead) continue;
    if (!lp->out_q.empty()) t = std::min(t, lp->out_q.front().due);
    if (!lp->in_q.empty() && lp->pending.empty()) t = std::min(t, lp->in_q.front().due);
  }
  return t;
}

namespace {

timespec to_timespec(Clock::duration d) {
  const auto ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  return timespec{time_t(ns / 1000000000), long(ns % 1000000000)};
}

}  // namespace

void HostBoard::serve_links_until(Clock::time_point until) {
  std::vector<uint8_t> buf(64 * 1024);
  std::vector<pollfd> fds;
  std::vector<int> which;
  for (;;) {
    auto now = Clock::now();
    release_due(now);
    for (auto& lp : links_) pump(*lp);
    if (now >= until) return;
    fds.clear();
    which.clear();
    Clock::time_point wake = until;
    for (size_t i = 0; i < links_.size(); ++i) {
      const Link& l = *links_[i];
      if (!l.t || l.dead) continue;
      if (!l.out_q.empty()) wake = std::min(wake, l.out_q.front().due);
      if (!l.pending.empty() || l.t->poll_handle() < 0) continue;
      fds.push_back(pollfd{l.t->poll_handle(), POLLIN, 0});
      which.push_back(int(i));
    }
    const timespec ts = to_timespec(wake - now);
    const int r = ppoll(fds.data(), nfds_t(fds.size()), &ts, nullptr);
    now = Clock::now();
    for (size_t k = 0; r > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Link& l = *links_[size_t(which[k])];
      RecvResult rr;
      try {
        rr = l.t->recv(buf.data(), buf.size(), Millis(0));
      } catch (const std::exception&) {
        rr = {RecvStatus::Closed, 0};
      }
      if (rr.status == RecvStatus::Closed) l.dead = true;
      if (rr.status != RecvStatus::Data) continue;
      l.last_bytes = now;
      l.in_q.push_back(Timed{shaper_->arrive(now, rr.bytes), std::vector<uint8_t>(buf.begin(), buf.begin() + long(rr.bytes))});
    }
  }
}

// With mu held: one chunk received on `link` (or bytes held back earlier)
// goes to the worker.
void HostBoard::feed(int link, const uint8_t* data, size_t len) {
  Link& l = *links_[size_t(link)];
  HostPort& port = *port_;
  port.delay();
  const int32_t n = worker_.on_bytes(link, data, len);
  if (n < 0) {
    l.dead = true;
    l.pending.clear();
  } else if (size_t(n) < len) {
    // The worker holds a frame it cannot take yet: keep the rest, and stop
    // reading this link until it moves (the sender's window stops it).
    l.pending.assign(data + n, data + len);
  } else {
    l.pending.clear();
  }
}

// The board's one thread: accepts connections and serves every link with
// poll(), so that bytes arriving while the worker computes wake nobody (they
// wait in the socket), and the worker, its sends and its receives all run
// on this thread in turn. A link whose frame the worker holds is not read
// until the worker releases it. Every wait is bounded (200 ms), so the
// idle limit, the parent check and `stop` are looked at regularly.
void HostBoard::serve(Listener& listener, const std::atomic<bool>& stop, bool exit_with_parent) {
  HostPort& port = *port_;
  std::vector<uint8_t> buf(256 * 1024);
  std::vector<pollfd> fds;
  std::vector<int> which;  // fds[i] is link which[i]; -1: the listener
  auto parent_checked = Clock::now();
  while (!stop.load() && !stop_.load()) {
    fds.clear();
    which.clear();
    fds.push_back(pollfd{listener.poll_handle(), POLLIN, 0});
    which.push_back(-1);
    {
      std::lock_guard<std::mutex> lock(port.mu);
      for (size_t i = 0; i < links_.size(); ++i) {
        const Link& l = *links_[i];
        if (!l.t || l.dead) continue;
        // A link whose frame the worker holds is not read; one with bytes
        // queued is woken when its peer has read some.
        const short events = short((l.pending.empty() ? POLLIN : 0) | (l.queued() ? POLLOUT : 0));
        const int fd = l.t->poll_handle();
        if (fd < 0 || events == 0) continue;
        fds.push_back(pollfd{fd, events, 0});
        which.push_back(int(i));
      }
    }
    const int wait_ms = 200;
    int r = 0;
    if (shaper_) {  // an emulated link: wake when a queued frame is due
      Clock::duration wait = std::chrono::milliseconds(wait_ms);
      {
        std::lock_guard<std::mutex> lock(port.mu);
        const Clock::time_point due = next_due();
        if (due != Clock::time_point::max()) wait = std::min(wait, due - Clock::now());
      }
      const timespec ts = to_timespec(wait);
      r = ppoll(fds.data(), nfds_t(fds.size()), &ts, nullptr);
    } else {
      r = poll(fds.data(), nfds_t(fds.size()), wait_ms);
    }
    if (r < 0 && errno != EINTR) throw NetError("board " + std::to_string(opt_.cfg.id) + ": poll failed");
    const auto now = Clock::now();
    if (exit_with_parent && now - parent_checked > std::chrono::seconds(1)) {
      // Exit when our parent (a coordinator that spawned us) is gone.
      parent_checked = now;
      if (getppid() == 1) break;
    }
    std::lock_guard<std::mutex> lock(port.mu);
    bool fed = false;
    for (size_t k = 1; r > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Link& l = *links_[size_t(which[k])];
      if (!l.t || l.dead) continue;
      if (fds[k].revents & POLLOUT) pump(l);
      if (!l.pending.empty() || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      RecvResult rr;
      try {
        rr = l.t->recv(buf.data(), buf.size(), Millis(0));
      } catch (const std::exception&) {
        rr = {RecvStatus::Closed, 0};
      }
      if (rr.status == RecvStatus::Timeout) continue;
      if (rr.status == RecvStatus::Closed) {
        l.dead = true;
        continue;
      }
      l.last_bytes = now;
      if (shaper_) {  // held until it has crossed the emulated link
        l.in_q.push_back(Timed{shaper_->arrive(now, rr.bytes), std::vector<uint8_t>(buf.begin(), buf.begin() + long(rr.bytes))});
        continue;
      }
      feed(which[k], buf.data(), rr.bytes);
      fed = true;
    }
    if (shaper_) {
      feed_due(Clock::now());
      fed = true;
    }
    // Held frames: offer them again while the worker makes progress.
    for (bool again = fed; again;) {
      again = false;
      worker_.resume();
      for (size_t i = 0; i < links_.size(); ++i) {
        Link& l = *links_[i];
        if (!l.t || l.dead || l.pending.empty() || worker_.holding(int(i))) continue;
        std::vector<uint8_t> rest;
        rest.swap(l.pending);
        feed(int(i), rest.data(), rest.size());
        again = again || l.pending.size() != rest.size();
      }
      if (shaper_) again = feed_due(Clock::now()) || again;
    }
    if (fds[0].revents) {
      std::unique_ptr<Transport> conn = listener.accept(Millis(0));
      if (conn) {
        const int link = attach(conn);
        if (link < 0) {  // every link in use: say so, then drop the connection
          ++refused_busy_;
          wire::ErrorPayload e =
              wire::ErrorPayload::make(wire::ErrorCode::NotReady, 0, "board busy: every connection slot in use");
          uint8_t p[wire::ErrorPayload::kMaxSize], f[wire::kMaxFrame];
          wire::FrameHeader h;
          h.type = wire::MsgType::Error;
          h.src = opt_.cfg.id;
          h.dst = wire::kCoordinatorId;
          const size_t n = wire::encode_frame(h, p, e.encode(p, sizeof p), f, sizeof f);
          try {
            conn->try_send(f, n);  // what the socket takes at once: never wait on a stranger
          } catch (const std::exception&) {
          }
          conn->close();
        } else if (!worker_.on_connect(link)) {
          links_[size_t(link)]->dead = true;
        }
      }
    }
    flush_all();
    if (shaper_) release_due(Clock::now());
    enforce_deadlines(Clock::now());
    close_dead();
    drop_dead();
  }
  stop_ = true;
}

int run_worker_process(const std::string& host, uint16_t port, const HostBoardOptions& opt) {
  HostBoard board(opt);
  Endpoint at;
  at.host = host;
  at.port = port;
  const std::unique_ptr<Listener> listener = network("tcp").listen(at);
  std::printf("board %u listening on %s:%u (ram %u, flash %u, clock %u MHz%s%s%s)\n", opt.cfg.id, host.c_str(),
              listener->port(), opt.cfg.ram_bytes, opt.cfg.flash_bytes, opt.cfg.clock_mhz,
              opt.cycles_per_mac ? ", emulated clock" : "", opt.link.on() ? ", emulated link" : "", opt.delay_ms > 0 ? ", injected delay" : "");
  std::fflush(stdout);
  std::atomic<bool> stop{false};
  board.serve(*listener, stop, opt.exit_with_parent);
  return 0;
}

}  // namespace ts::net
