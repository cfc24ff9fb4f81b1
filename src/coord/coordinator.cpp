#include "coord/coordinator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "core/crc32.h"
#include "core/sha256.h"
#include "core/worker.h"
#include "plan/fragment_writer.h"
#include "util/endpoint.h"

namespace ts::coord {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Coordinator::Coordinator(const QGraph& q, const plan::Plan& p, std::vector<std::unique_ptr<BoardLink>> links,
                         CoordOptions opt)
    : q_(q), pp_(&p), links_(std::move(links)), opt_(opt) {
  if (int(links_.size()) != plan().n_workers())
    throw Error("plan has " + std::to_string(plan().n_workers()) + " workers but " + std::to_string(links_.size()) +
                " boards are connected");
  if (q_.nodes.size() > 0xFFFF) throw Error("model has more layers than the wire format can number");
  producer_.assign(q_.tensors.size(), -1);
  for (size_t n = 0; n < q_.nodes.size(); ++n) producer_[size_t(q_.nodes[n].output)] = int(n);
}

Coordinator::~Coordinator() { close(); }

void Coordinator::close() {
  stop_pool();
  for (auto& l : links_)
    if (l) l->close();
}

// One long-lived thread per board link: a layer hands each active board its
// job and waits for all of them, without creating threads per layer.
struct Coordinator::Pool {
  std::mutex mu;
  std::condition_variable cv_job, cv_done;
  std::vector<std::thread> threads;
  std::vector<const std::function<void(int)>*> job;  // per board; null = idle
  std::vector<uint64_t> gen;                          // job generation per board
  int pending = 0;
  bool stop = false;
  std::exception_ptr first;
};

void Coordinator::start_pool() {
  pool_ = std::make_unique<Pool>();
  Pool& p = *pool_;
  const size_t n = links_.size();
  p.job.assign(n, nullptr);
  p.gen.assign(n, 0);
  for (size_t b = 0; b < n; ++b)
    p.threads.emplace_back([this, b, &p] {
      uint64_t seen = 0;
      for (;;) {
        const std::function<void(int)>* fn;
        {
          std::unique_lock<std::mutex> lock(p.mu);
          p.cv_job.wait(lock, [&] { return p.stop || p.gen[b] != seen; });
          if (p.stop) return;
          seen = p.gen[b];
          fn = p.job[b];
        }
        try {
          (*fn)(int(b));
        } catch (...) {
          std::lock_guard<std::mutex> lock(p.mu);
          if (!p.first) p.first = std::current_exception();
          // Unblock the other boards of this layer quickly: nothing they do
          // can save the inference now.
          for (auto& l : links_) l->set_timeout(std::chrono::milliseconds(200));
        }
        std::lock_guard<std::mutex> lock(p.mu);
        if (--p.pending == 0) p.cv_done.notify_all();
      }
    });
}

void Coordinator::stop_pool() {
  if (!pool_) return;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->stop = true;
  }
  pool_->cv_job.notify_all();
  for (auto& t : pool_->threads) t.join();
  pool_.reset();
}

// Runs fn(board) for every listed board, each on its own link's thread;
// rethrows the first failure once all of them have finished.
void Coordinator::parallel(const std::vector<int>& boards, const std::function<void(int)>& fn) {
  if (boards.size() == 1) {
    fn(boards[0]);
    return;
  }
  if (!pool_) start_pool();
  Pool& p = *pool_;
  std::unique_lock<std::mutex> lock(p.mu);
  p.first = nullptr;
  p.pending = int(boards.size());
  for (int b : boards) {
    p.job[b] = &fn;
    ++p.gen[b];
  }
  p.cv_job.notify_all();
  p.cv_done.wait(lock, [&] { return p.pending == 0; });
  if (p.first) {
    std::exception_ptr e = p.first;
    p.first = nullptr;
    std::rethrow_exception(e);
  }
}

// One board after the other in address order, each claimed (BoardLink::
// handshake) before the next: of two coordinators that want the same
// boards, the one that gets the first gets them all, and the other is
// refused there, holding none (no two sessions each hold a part).
std::vector<BoardInfo> Coordinator::handshake(bool links) {
  std::vector<BoardInfo> info(links_.size());
  std::vector<int> order(links_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return links_[size_t(a)]->peer() < links_[size_t(b)]->peer(); });
  for (int i : order) {
    BoardLink& l = *links_[size_t(i)];
    info[size_t(i)].index = i;
    info[size_t(i)].peer = l.peer();
    info[size_t(i)].hello = l.handshake();
  }
  info_ = info;
  check_budgets(links);
  return info;
}

std::vector<int> Coordinator::told_links() const {
  std::vector<int> out;
  for (const BoardInfo& b : info_) out.push_back(b.hello.links);
  return out;
}

std::chrono::milliseconds Coordinator::board_idle_limit() const {
  uint32_t least = 0;
  for (const BoardInfo& b : info_)
    if (b.hello.idle_ms > 0 && (least == 0 || b.hello.idle_ms < least)) least = b.hello.idle_ms;
  return std::chrono::milliseconds(least);
}

void Coordinator::check_budgets(bool check_links) const {
  const std::vector<int> links = plan::direct_links(plan());
  for (size_t i = 0; i < info_.size(); ++i) {
    const auto& w = plan().workers[i];
    const std::string who = links_[i]->who();
    if (check_links && links[i] > int(info_[i].hello.links))
      throw BoardError(who + ": holds " + std::to_string(info_[i].hello.links) + " links (its HELLO), the plan needs " +
                       std::to_string(links[i]) + " on it (coordinator, boards it sends to, boards that send to it)");
    if (int64_t(info_[i].hello.ram_bytes) < w.peak_ram_bytes)
      throw BoardError(who + ": has " + std::to_string(info_[i].hello.ram_bytes) + " bytes of RAM, the plan needs " +
                       std::to_string(w.peak_ram_bytes));
    if (int64_t(info_[i].hello.flash_bytes) < w.flash_bytes)
      throw BoardError(who + ": has " + std::to_string(info_[i].hello.flash_bytes) +
                       " bytes of flash, its fragment needs " + std::to_string(w.flash_bytes));
  }
}

void Coordinator::set_plan(const plan::Plan& p) {
  if (p.n_workers() != int(links_.size())) throw Error("new plan has a different number of boards");
  pp_ = &p;
  check_budgets();
}

ProbeResult Coordinator::probe(int board) {
  BoardLink& l = *links_.at(board);
  ProbeResult r;
  std::vector<uint8_t> small(16, 0xA5), big(wire::kMaxPayload, 0x5A);
  // Round trip of a small message, best of 5 (the least disturbed).
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t = Clock::now();
    l.send(MsgType::Probe, 0, uint32_t(i), small.data(), small.size(), wire::kFlagLast, plan().plan_id);
    Frame f = l.recv();
    if (f.h.type != MsgType::ProbeReply || f.payload != small) throw BoardError(l.who() + ": bad probe reply");
    best = std::min(best, seconds_since(t));
  }
  r.rtt_s = best;
  // Bulk: 16 full frames each way, one at a time (the reply is the echo).
  const int n = 16;
  const auto t = Clock::now();
  for (int i = 0; i < n; ++i) {
    l.send(MsgType::Probe, 0, uint32_t(i), big.data(), big.size(), wire::kFlagLast, plan().plan_id);
    Frame f = l.recv();
    if (f.h.type != MsgType::ProbeReply || f.payload.size() != big.size()) throw BoardError(l.who() + ": bad probe reply");
  }
  const double secs = seconds_since(t);
  const double kb = 2.0 * n * double(big.size()) / 1024.0;
  r.bandwidth_kbps = kb / std::max(secs, 1e-9);
  // d: the one-way latency of a small message, charged per KB (eq. 1's d).
  r.delay_s_per_kb = std::max(0.0, best / 2.0);
  return r;
}

// The coordinator's inputs of one layer for one board: its runs of the
// tensors the coordinator holds (relay: every input; direct: the graph's).
void Coordinator::send_runs(BoardLink& l, size_t node, size_t k, const std::vector<core::InputRun>& runs,
                            const std::vector<int8_t>& src, BoardRunStats& bs) const {
  for (const auto& run : runs) {
    l.send_message(MsgType::Input, uint16_t(node), core::input_offset(uint32_t(k), run.offset),
                   reinterpret_cast<const uint8_t*>(src.data()) + run.offset, run.count, plan().plan_id);
    bs.bytes_in += run.count;
  }
}

namespace {
// The flat runs of a share's regions of whole rows (an in-place share).
std::vector<core::InputRun> region_runs(const std::vector<core::Region>& regions, int64_t h, int64_t w) {
  std::vector<core::InputRun> out;
  const uint32_t hw = uint32_t(h * w);
  for (const core::Region& g : regions) {
    if (g.kind == core::RegionKind::Run) {
      out.push_back({uint32_t(g.v[0]), uint32_t(g.v[1] - g.v[0])});
      continue;
    }
    for (int32_t c = g.v[0]; c < g.v[1]; ++c)
      for (int32_t y = g.v[2]; y < g.v[3]; ++y) {
        const core::InputRun r{uint32_t(c) * hw + uint32_t(y) * uint32_t(w) + uint32_t(g.v[4]), uint32_t(g.v[5] - g.v[4])};
        if (!out.empty() && out.back().offset + out.back().count == r.offset)
          out.back().count += r.count;
        else
          out.push_back(r);
      }
  }
  return out;
}
}  // namespace

void Coordinator::send_inputs(BoardLink& l, size_t w, const plan::LayerShare& s, size_t node,
                              const std::vector<std::vector<int8_t>>& t, BoardRunStats& bs, int from) const {
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const auto& need = s.inputs[k];
    const auto& src = t[need.tensor];
    const int p = producer_[size_t(need.tensor)];
    if (from > 0 && p < from) {
      // Made before the resume point: every element the board needs, those
      // it receives and those it would have had from itself, each in the
      // runs the board checks them against (core/worker_schedule.h): its
      // local runs, or the outputs computed in place into this window, all
      // of them, as the board holds them (InPlaceCut).
      send_runs(l, node, k, need.recv, src, bs);
      const plan::LayerShare* made = p >= 0 ? &plan().workers[w].layers[size_t(p)] : nullptr;
      if (need.local_layer >= 0)
        send_runs(l, node, k, need.local, src, bs);
      else if (made && made->active() && made->out_pitch && made->out_until == int(node))
        send_runs(l, node, k, region_runs(made->regions, q_.shape(need.tensor).h, q_.shape(need.tensor).w), src, bs);
      continue;
    }
    send_runs(l, node, k, need.coord_runs, src, bs);
  }
}

// One board's answer for one layer, on both routes: OUTPUT frames (its sends
// to the coordinator: each must lie inside them, continue where the last
// ended, and all of them must be in before DONE), copied into `out`; then
// DONE, whose telemetry and digest go to `bs`. Returns the DONE.
wire::DonePayload Coordinator::collect_layer(BoardLink& l, const plan::LayerShare& s, size_t node,
                                             std::vector<int8_t>& out, BoardRunStats& bs) const {
  const std::string& name = q_.nodes[node].name;
  auto where = [&] { return " at layer " + std::to_string(node) + " '" + name + "'"; };
  // What this board returns to the coordinator: its sends to peer
  // kPeerCoordinator, sorted by offset; each element exactly once.
  std::vector<std::pair<int64_t, int64_t>> mine;
  int64_t expect = 0;
  for (const core::Send& sd : s.sends)
    if (sd.peer == core::kPeerCoordinator) {
      mine.emplace_back(sd.offset, int64_t(sd.offset) + sd.count);
      expect += sd.count;
    }
  std::sort(mine.begin(), mine.end());
  std::vector<int64_t> filled(mine.size(), 0);
  int64_t got = 0;
  for (;;) {
    Frame f = l.recv();
    if (f.h.layer != node) throw BoardError(l.who() + ": answered for layer " + std::to_string(f.h.layer) + where());
    if (f.h.inference != l.inference())
      throw BoardError(l.who() + ": sent a frame of inference tag " + std::to_string(f.h.inference) + ", expected " +
                       std::to_string(l.inference()) + where());
    if (f.h.type == MsgType::Output) {
      const int64_t off = f.h.offset, len = int64_t(f.payload.size());
      auto it = std::upper_bound(mine.begin(), mine.end(), std::make_pair(off, std::numeric_limits<int64_t>::max()));
      if (it == mine.begin() || off + len > std::prev(it)->second)
        throw BoardError(l.who() + ": sent outputs outside its share" + where());
      const size_t i = size_t(std::prev(it) - mine.begin());
      // Frames of a run arrive in order: each continues where the last ended.
      if (off != mine[i].first + filled[i]) throw BoardError(l.who() + ": sent outputs out of order or twice" + where());
      filled[i] += len;
      std::copy(f.payload.begin(), f.payload.end(), reinterpret_cast<uint8_t*>(out.data()) + off);
      got += len;
      bs.bytes_out += len;
      continue;
    }
    if (f.h.type == MsgType::Done) {
      wire::DonePayload d;
      if (!d.decode(f.payload.data(), f.payload.size())) throw BoardError(l.who() + ": malformed DONE" + where());
      if (got != expect)
        throw BoardError(l.who() + ": returned " + std::to_string(got) + " of " + std::to_string(expect) + " outputs" +
                         where());
      bs.layer_peak[node] = d.peak_ram_bytes;
      bs.layer_outputs[node] = d.outputs;
      bs.layer_digest[node] = d.output_digest;
      bs.peak_ram_bytes = std::max(bs.peak_ram_bytes, d.peak_ram_bytes);
      bs.compute_s += d.elapsed_us * 1e-6;
      bs.add_instructions(d.compute_instructions);
      return d;
    }
    throw BoardError(l.who() + ": sent " + wire::msg_type_name(f.h.type) + where());
  }
}

// A board's failure, named with the board and the layer (for the message and
// for failover).
void Coordinator::rethrow_at(const BoardError& e, const BoardLink& l, size_t node, int peer_node) const {
  int board = e.board >= 0 ? e.board : l.index();
  int layer = e.layer >= 0 ? e.layer : int(node);
  std::string m = e.what();
  if (e.lost_peer >= 0 && size_t(e.lost_peer) < links_.size()) {
    // A board lost its link to a peer: name the peer first (the suspect; the
    // coordinator's health check decides), then who reported it. The layer
    // is the one the coordinator was waiting on for that peer, when known
    // (the reporter may be many layers behind or ahead of it).
    const BoardLink& p = *links_[size_t(e.lost_peer)];
    board = p.index();
    m = p.who() + ": its link to " + l.who() + " closed (reported by that board)";
    if (peer_node >= 0 && size_t(peer_node) < q_.nodes.size()) {
      layer = peer_node;
      node = size_t(peer_node);
    }
  }
  if (m.find(" at layer ") != std::string::npos) throw BoardError(m, board, layer);
  throw BoardError(m + " at layer " + std::to_string(node) + " '" + q_.nodes[node].name + "'", board, layer);
}

}  // namespace ts::coord
