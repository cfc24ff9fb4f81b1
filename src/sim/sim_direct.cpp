// The direct route's driver of the simulator (sim.h, "Direct route"): boards
// send to boards through a switch; the shared core is sim/core.h.
#include <algorithm>
#include <cmath>

#include "core/fragment.h"
#include "core/wire.h"
#include "plan/frames.h"
#include "sim/core.h"

namespace ts::sim {

namespace {

constexpr int64_t kHeader = int64_t(wire::kHeaderSize);
constexpr int64_t kAckBytes = int64_t(wire::kAckFrameBytes);
constexpr int64_t kDoneBytes = kHeader + int64_t(wire::DonePayload::kSize);
constexpr int kCoord = -1;

struct Event {
  double t;
  uint64_t order;
  int dest;       // board, or kCoord
  int layer;      // consumer layer the payload is for (-1: DONE / output)
  int64_t payload;
  int64_t bytes;
  bool delivered;  // false: reaches the destination's link; true: handled
  int src = -1;    // sending board (-1: the coordinator)
  bool ack_req = false;
  int64_t ack = -1;  // >= 0: an ACK frame, the frames from dest it acknowledges in all
  double decode_s = 0;  // a coded frame: the receiver's CPU to decode it
};

// One pending or batched frame at a board.
struct Got {
  int layer;       // virtual layer of a data frame, -1 for an ACK
  int64_t payload;
  int src;
  bool ack_req;
  int64_t ack;
  double decode_s;
};

// One frame a board sends for a layer: to a board (INPUTS, gathered as the
// worker packs them, plan/frames.h) or to the coordinator (OUTPUT).
struct OutFrame {
  int dest;        // board, or kCoord
  int layer;       // consumer layer (to a board)
  int64_t data;    // activation bytes it carries
  int64_t bytes;   // on the wire, header included
  plan::Codec codec = plan::Codec::Plain;  // its values' coding (plan/coding.h): CPU at both ends
};

class DirectSim {
 public:
  DirectSim(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m)
      : q_(q), p_(p), m_(m), n_(p.n_workers()), L_(int(q.nodes.size())), K_(std::max(1, m.images)),
        links_(t, m, p.n_workers()), cpm_(core_sim::layer_cycles_per_mac(q, m)), peers_(m), coord_acks_(m.board_ack_every),
        wake_(m.wake_quantiles_s, m.timer_slack_s, m.wake_seed, m.wake_slot_s),
        pool_(p.n_workers(), m.host_cores > 0 ? m.host_cores : t.host_cores) {
    comp_start_.assign(size_t(n_), 0.0);
    comp_target_.assign(size_t(n_), 0.0);
    // Layer n of image i is "virtual layer" i * L + n; a board runs them in order.
    expected_.assign(size_t(n_), std::vector<int64_t>(size_t(L_) * size_t(K_), 0));
    arrived_.assign(size_t(n_), std::vector<int64_t>(size_t(L_) * size_t(K_), 0));
    sums_expected_ = sums_ = arrived_;
    sum_wait_.assign(size_t(n_), -1);
    for (int b = 0; b < n_; ++b)
      for (int n = 0; n < L_; ++n) {
        const plan::LayerShare& ls = p.workers[size_t(b)].layers[size_t(n)];
        if (ls.active())
          for (const plan::InputNeed& in : ls.inputs)
            for (int i = 0; i < K_; ++i) expected_[size_t(b)][size_t(i) * size_t(L_) + size_t(n)] += in.recv_elems;
      }
    out_frames_.assign(size_t(n_), std::vector<std::vector<OutFrame>>(size_t(L_)));
    for (int b = 0; b < n_; ++b)
      for (int n = 0; n < L_; ++n) {
        const std::vector<core::Send>& sends = p.workers[size_t(b)].layers[size_t(n)].sends;
        std::vector<OutFrame>& fr = out_frames_[size_t(b)][size_t(n)];
        plan::for_each_send_run(sends, [&](size_t i, size_t k) {
          if (sends[i].peer == core::kPeerCoordinator) {
            for (size_t e = i; e < i + k; ++e)
              for (int64_t off = 0, pay = 0; off < int64_t(sends[e].count); off += pay) {
                pay = int64_t(wire::frame_payload(sends[e].count, size_t(off)));
                fr.push_back(OutFrame{kCoord, n, pay, kHeader + pay});
              }
            return;
          }
          for (const plan::GatheredFrame& g : plan::gather_frames(plan::pieces_of(sends, i, k), p.coding.coded(size_t(n))))
            fr.push_back(OutFrame{int(sends[i].peer), int(sends[i].layer), g.data, kHeader + g.payload,
                                  p.coding.at(size_t(n))});
        });
        // Partial sums of a reduced layer (strategy `reduce`) to the owners
        // of the output blocks, after its compute; frames marked by a layer
        // offset of L * K. An owner waits for its sums before its next layer
        // (its outputs of the reduced layer itself leave at once here: an
        // approximation, the worker sends them once the sums are added).
        const plan::PartialShare& ps = p.workers[size_t(b)].layers[size_t(n)].psum;
        plan::for_each_send_group(ps.sends, [&](size_t first, size_t k) {
          for (const plan::GatheredFrame& g : plan::gather_frames(plan::pieces_of(ps.sends, first, k)))
            fr.push_back(OutFrame{int(ps.sends[first].peer), L_ * K_ + n, g.data, kHeader + g.payload});
        });
        if (ps.recv_bytes > 0)
          for (int i = 0; i < K_; ++i) sums_expected_[size_t(b)][size_t(i) * size_t(L_) + size_t(n)] = ps.recv_bytes;
      }
    // Halos first (core/halo_first.h): the share of the layer's MACs a
    // board computes before its sends to other boards (< 0: one compute).
    first_part_.assign(size_t(n_), std::vector<double>(size_t(L_), -1.0));
    inner_part_.assign(size_t(n_), std::vector<double>(size_t(L_), 0.0));
    for (int b = 0; b < n_; ++b)
      for (int n = 0; n < L_; ++n) {
        const plan::LayerShare& ls = p.workers[size_t(b)].layers[size_t(n)];
        if (ls.macs <= 0) continue;
        const core::LayerDesc d = q.desc(n);
        const core::HaloSplit hs = plan::halo_split_of(d, ls);
        if (hs.on()) first_part_[size_t(b)][size_t(n)] = double(core::halo_macs(d, hs)) / double(ls.macs);
        // Inner rows first: the share of the MACs computed before the
        // inputs from other boards are all in.
        const core::HaloSplit is = plan::inner_split_of(d, ls);
        if (is.on()) inner_part_[size_t(b)][size_t(n)] = 1.0 - double(core::halo_macs(d, is)) / double(ls.macs);
      }
    inner_v_.assign(size_t(n_), -1);
    stage_.assign(size_t(n_), Stage::All);
    second_s_.assign(size_t(n_), 0.0);
    image_end_.assign(size_t(K_), 0.0);
    cursor_.assign(size_t(n_), 0);
    free_at_.assign(size_t(n_), 0.0);
    busy_.assign(size_t(n_), false);
    pending_.resize(size_t(n_));
    batch_.resize(size_t(n_));
    sending_.assign(size_t(n_), 0);
    send_v_.assign(size_t(n_), 0);
    send_i_.assign(size_t(n_), 0);
    send_off_.assign(size_t(n_), 0);
    tx_.resize(size_t(n_));
    rx_.resize(size_t(n_));
    for (int b = 0; b < n_; ++b) tx_[size_t(b)].spb = rx_[size_t(b)].spb = links_.board_spb[size_t(b)];
    crx_.spb = links_.coord_spb;
    layer_end_.assign(size_t(L_), 0.0);
    res_.workers = n_;
    res_.layers.resize(size_t(L_));
    res_.board_layers.assign(size_t(n_), std::vector<BoardLayer>(size_t(L_)));
  }

  SimResult run() {
    // The coordinator sends the graph's input over its link at time 0.
    core_sim::Fifo ctx{0.0, links_.coord_spb};
    for (int i = 0; i < K_; ++i)
    for (int b = 0; b < n_; ++b)
      for (int n = 0; n < L_; ++n) {
        const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(n)];
        if (!ls.active()) continue;
        for (const plan::InputNeed& in : ls.inputs)
          for (const core::InputRun& r : in.coord_runs)
            for (int64_t off = 0, pay = 0; off < int64_t(r.count); off += pay) {
              pay = int64_t(wire::frame_payload(r.count, size_t(off)));
              const int64_t bytes = kHeader + pay;
              const double at = ctx.pass(0.0, double(bytes));
              count(b, n, bytes, pay, false);
              ack(kCoord, b, n);
              push(at + m_.frame_latency_s, b, i * L_ + n, pay, bytes, false);
            }
      }
    for (int b = 0; b < n_; ++b) try_start(b, 0.0);
    while (!ev_.empty()) {
      const Event e = ev_.pop();
      ++res_.events;
      if (!e.delivered) {
        // The destination's link serves frames in arrival order.
        core_sim::Fifo& rx = e.dest == kCoord ? crx_ : rx_[size_t(e.dest)];
        Event d = e;
        d.t = rx.pass(e.t, double(e.bytes));
        d.delivered = true;
        ev_.push(d);
        continue;
      }
      if (e.dest == kCoord) {
        end_ = std::max(end_, e.t);
        last_coord_ = e.t;
        image_end_[size_t(e.layer)] = std::max(image_end_[size_t(e.layer)], e.t);
        continue;
      }
      const int b = e.dest;
      if (e.layer == kCpuDone) {
        if (pool_.done(b, uint64_t(e.payload), e.t)) {
          push_due();
          // The board's CPU work is done; an emulated compute sleeps up to its
          // emulated time and wakes late by a scheduling delay.
          const double until = comp_start_[size_t(b)] + comp_target_[size_t(b)];
          push(until > e.t ? until + core_sim::sleep_overshoot(wake_, until, m_) : e.t, b, kWake, 0, 0, true);
        }
        continue;
      }
      if (e.layer != kWake) {
        pending_[size_t(b)].push_back(Got{e.layer, e.payload, e.src, e.ack_req, e.ack, e.decode_s});
        if (!busy_[size_t(b)]) receive(b, e.t, true);
        continue;
      }
      busy_[size_t(b)] = false;
      wake(b, e.t);
    }
    for (int b = 0; b < n_; ++b)
      if (cursor_[size_t(b)] < L_ * K_ || sending_[size_t(b)])
        throw Error("simulator: internal: board " + std::to_string(b) + " never received every input of layer '" +
                    q_.nodes[size_t(cursor_[size_t(b)] % L_)].name + "'");
    // The coordinator's thread waits in a receive for the last frame and wakes late.
    if (wake_.enabled()) {
      const double w = wake_.frame(last_coord_);
      end_ = std::max(end_, last_coord_ + w);
      for (double& e : image_end_) e += w;
    }
    finish();
    res_.image_done_s = image_end_;
    return std::move(res_);
  }

 private:
  static constexpr int kWake = -2;
  static constexpr int kCpuDone = -3;  // payload: the CpuPool job version

  void push_due() {
    for (const CpuPool::Due& d : pool_.due()) push(d.t, d.board, kCpuDone, int64_t(d.version), 0, true);
  }

  // One receive of the worker loop on an idle board: it takes every frame
  // that has arrived and pays its software delay once (op_delay); frames
  // arriving meanwhile wait for the next receive. Without a delay the
  // frames count at once.
  // A board blocked in poll (`idle`) first wakes up (host boards: a
  // scheduling delay).
  void receive(int b, double t, bool idle = false) {
    auto& pend = pending_[size_t(b)];
    double cpu = (idle ? wake_.frame(t) : 0.0) + links_.op_delay + double(pend.size()) * m_.board_frame_s;
    for (const Got& g : pend) cpu += g.decode_s;
    batch_[size_t(b)].insert(batch_[size_t(b)].end(), pend.begin(), pend.end());
    pend.clear();
    if (cpu <= 0) {
      wake(b, t);
      return;
    }
    busy_[size_t(b)] = true;
    push(t + cpu, b, kWake, 0, 0, true);
  }

  // The board is free again (a receive, a compute or a burst of sends is
  // over): handle the received frames (ACKing as the AckTracker would), go
  // on sending, start the next layer, or read the link again.
  void wake(int b, double t) {
    double c = t;
    for (const Got& g : batch_[size_t(b)]) {
      if (g.ack >= 0) {
        peers_.acked(b, g.src, uint32_t(g.ack));  // b's frames to g.src
        continue;
      }
      if (g.layer >= L_ * K_) sums_[size_t(b)][size_t(g.layer - L_ * K_)] += g.payload;  // partial sums
      else arrived_[size_t(b)][size_t(g.layer)] += g.payload;
      if (g.src < 0) continue;  // the coordinator's frames: ACKs counted when sent
      const uint32_t got = peers_.receive(b, g.src, g.ack_req);
      if (got > 0) {
        c += links_.op_delay + m_.board_frame_s;
        const double sent = tx_[size_t(b)].pass(c, double(kAckBytes));
        BoardLayer& r = res_.board_layers[size_t(b)][size_t(std::min(cursor_[size_t(b)], L_ * K_ - 1) % L_)];
        r.wire_bytes += kAckBytes;
        r.frames += 1;
        Event a{sent + m_.frame_latency_s, 0, g.src, -1, 0, kAckBytes, false};
        a.src = b;
        a.ack = int64_t(got);
        ev_.push(a);
      }
    }
    batch_[size_t(b)].clear();
    if (c > t) {
      busy_[size_t(b)] = true;
      push(c, b, kWake, 0, 0, true);
      return;
    }
    if (sending_[size_t(b)]) pump(b, t);
    if (!busy_[size_t(b)] && !sending_[size_t(b)]) try_start(b, t);
    if (!busy_[size_t(b)] && !pending_[size_t(b)].empty()) receive(b, t);
  }

  void push(double t, int dest, int layer, int64_t payload, int64_t bytes, bool delivered) {
    ev_.push(Event{t, 0, dest, layer, payload, bytes, delivered});
  }

  // Frame bookkeeping on the board-layer that sends or receives it.
  void count(int b, int n, int64_t bytes, int64_t payload, bool out) {
    BoardLayer& r = res_.board_layers[size_t(b)][size_t(n)];
    r.wire_bytes += bytes;
    r.frames += 1;
    if (out) r.bytes_out += payload;
    else r.bytes_in += payload;
  }

  // One more data frame from `from` to `to` (kCoord = the coordinator): the
  // receiver acknowledges every board_ack_every frames (counted, on board b's
  // layer n).
  void ack(int from, int to, int n) {
    if (coord_acks_.frame(from, to)) {
      const int b = to >= 0 ? to : from;
      BoardLayer& r = res_.board_layers[size_t(b)][size_t(n)];
      r.wire_bytes += kAckBytes;
      r.frames += 1;
    }
  }

  void try_start(int b, double t) {
    if (busy_[size_t(b)] || sending_[size_t(b)]) return;
    int& v = cursor_[size_t(b)];
    while (v < L_ * K_ && !p_.workers[size_t(b)].layers[size_t(v % L_)].active()) ++v;
    if (v >= L_ * K_) return;
    const int w = sum_wait_[size_t(b)];
    if (w >= 0 && sums_[size_t(b)][size_t(w)] < sums_expected_[size_t(b)][size_t(w)]) return;
    // Inner rows first: the positions that read only this board's own
    // inputs while the others travel, once per layer.
    const double inner = inner_part_[size_t(b)][size_t(v % L_)];
    if (arrived_[size_t(b)][size_t(v)] < expected_[size_t(b)][size_t(v)]) {
      if (inner > 0 && inner_v_[size_t(b)] != v) start_inner(b, t, v, inner);
      return;
    }
    if (sums_expected_[size_t(b)][size_t(v)] > 0) sum_wait_[size_t(b)] = v;
    const int n = v % L_, image = v / L_;
    const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(n)];
    BoardLayer& r = res_.board_layers[size_t(b)][size_t(n)];
    r.active = true;
    r.peak_ram_bytes = int64_t(core::kWorkerFixedArena) + ls.ram_bytes;
    double c = std::max(t, free_at_[size_t(b)]);
    const bool rest = inner_v_[size_t(b)] == v;  // the inner rows are done
    if (!rest) r.run_at_s = c;
    // Host boards: the kernels' real CPU work is on the shared cores.
    const core_sim::Compute whole(ls, links_.clock_hz[size_t(b)], cpm_[size_t(n)], m_);
    const core_sim::Compute compute = rest ? whole.part(1.0 - inner) : whole;
    r.compute_s = whole.busy();
    sending_[size_t(b)] = true;
    stage_[size_t(b)] = Stage::All;
    send_v_[size_t(b)] = v;
    send_i_[size_t(b)] = 0;
    send_off_[size_t(b)] = 0;
    ++v;
    if (compute.work > 0 && pool_.shared()) {
      comp_start_[size_t(b)] = c;
      comp_target_[size_t(b)] = compute.emulated;
      busy_[size_t(b)] = true;
      pool_.start(b, compute.work, c);
      push_due();
      return;
    }
    const double part = first_part_[size_t(b)][size_t(n)];
    if (part >= 0) {
      // Halos first: the rows other boards read, their frames, then the rest
      // (pump, Stage).
      const double first = double(ls.macs) * part * cpm_[size_t(n)] / links_.clock_hz[size_t(b)];
      second_s_[size_t(b)] = compute.busy() - first;
      stage_[size_t(b)] = Stage::HalosBefore;
      c += first;
    } else {
      c += compute.busy() + compute.overshoot(c, wake_, m_);
    }
    if (c > t) {
      busy_[size_t(b)] = true;
      push(c, b, kWake, 0, 0, true);
    } else {
      pump(b, c);
    }
    (void)image;
  }

  // The inner rows of virtual layer v (a share `inner` of its MACs), before
  // its inputs from other boards are all in; the rest when they are.
  void start_inner(int b, double t, int v, double inner) {
    const int n = v % L_;
    const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(n)];
    const double c = std::max(t, free_at_[size_t(b)]);
    res_.board_layers[size_t(b)][size_t(n)].run_at_s = c;
    inner_v_[size_t(b)] = v;
    const core_sim::Compute compute =
        core_sim::Compute(ls, links_.clock_hz[size_t(b)], cpm_[size_t(n)], m_).part(inner, false);
    busy_[size_t(b)] = true;
    if (compute.work > 0 && pool_.shared()) {
      comp_start_[size_t(b)] = c;
      comp_target_[size_t(b)] = compute.emulated;
      pool_.start(b, compute.work, c);
      push_due();
      return;
    }
    push(c + compute.busy() + compute.overshoot(c, wake_, m_), b, kWake, 0, 0, true);
  }

  // Hands the layer's frames to the link in order while the window to each
  // peer allows (W frames unacknowledged), then DONE. A board whose window is
  // full waits: it only reads its link (ACKs) until it can go on.
  void pump(int b, double t) {
    const int v = send_v_[size_t(b)];
    const int n = v % L_, image = v / L_;
    BoardLayer& r = res_.board_layers[size_t(b)][size_t(n)];
    double c = t;
    Stage& st = stage_[size_t(b)];
    bool blocked = hand_frames(b, n, image, &c);
    if (st == Stage::HalosBefore) {
      // The halos handed over (or the window full): the other rows, then
      // the halos left and the frames to the coordinator.
      const double rest = second_s_[size_t(b)];
      st = Stage::HalosAfter;
      c += rest + (rest > 0 ? core_sim::sleep_overshoot(wake_, c + rest, m_) : 0.0);
      busy_[size_t(b)] = true;
      push(c, b, kWake, 0, 0, true);
      return;
    }
    if (!blocked && st == Stage::HalosAfter) {
      st = Stage::Coordinator;
      send_i_[size_t(b)] = 0;
      blocked = hand_frames(b, n, image, &c);
    }
    if (!blocked) {
      finish_layer(b, c, n, image, r);
      return;
    }
    if (c > t) {
      busy_[size_t(b)] = true;
      push(c, b, kWake, 0, 0, true);
    } else if (!pending_[size_t(b)].empty()) {
      receive(b, c);
    }
  }

  // Board b's frames of layer n that its stage sends, from send_i_ on, to
  // its link from *c on; true if a window to a peer is full.
  bool hand_frames(int b, int n, int image, double* c) {
    size_t& i = send_i_[size_t(b)];
    const Stage st = stage_[size_t(b)];
    const std::vector<OutFrame>& frames = out_frames_[size_t(b)][size_t(n)];
    for (; i < frames.size(); ++i) {
      const OutFrame& f = frames[i];
      const bool to_coord = f.dest == kCoord;
      if ((to_coord && (st == Stage::HalosBefore || st == Stage::HalosAfter)) || (!to_coord && st == Stage::Coordinator))
        continue;
      const int dest = f.dest;
      bool ack_req = false;
      if (!to_coord && !peers_.send(b, dest, &ack_req)) return true;
      // A coded frame: half the coder's CPU per value here, half where it is decoded.
      *c += links_.op_delay + m_.board_frame_s + 0.5 * double(f.data) * links_.code_spv(b, f.codec);
      const double sent = tx_[size_t(b)].pass(*c, double(f.bytes));
      count(b, n, f.bytes, f.data, true);
      if (to_coord) ack(b, dest, n);
      Event e{sent + m_.frame_latency_s, 0, dest, to_coord ? image : image * L_ + f.layer,
              f.data, f.bytes, false};
      e.src = b;
      e.ack_req = ack_req;
      if (!to_coord) e.decode_s = 0.5 * double(f.data) * links_.code_spv(dest, f.codec);
      ev_.push(e);
    }
    return false;
  }

  void finish_layer(int b, double c0, int n, int image, BoardLayer& r) {
    double c = c0;
    sending_[size_t(b)] = false;
    // DONE to the coordinator (ACK_REQ: it acknowledges each one).
    c += links_.op_delay;
    const double sent = tx_[size_t(b)].pass(c, double(kDoneBytes));
    count(b, n, kDoneBytes, 0, true);
    r.wire_bytes += kAckBytes;
    r.frames += 1;
    push(sent + m_.frame_latency_s, kCoord, image, 0, kDoneBytes, false);
    r.done_s = c;
    layer_end_[size_t(n)] = std::max(layer_end_[size_t(n)], c);
    free_at_[size_t(b)] = c;
    if (c > c0) {
      busy_[size_t(b)] = true;
      push(c, b, kWake, 0, 0, true);
    } else {
      try_start(b, c);
      if (!busy_[size_t(b)] && !sending_[size_t(b)] && !pending_[size_t(b)].empty()) receive(b, c);
    }
  }

  // Per layer: wall = when its last board finished it minus the same for
  // the layers before (the output reaches the coordinator after the last
  // layer ends); then the shared figures (core.h), and a board's active
  // time is until it finished its last layer.
  void finish() {
    res_.total_s = end_;
    double prev = 0;
    for (int n = 0; n < L_; ++n) {
      LayerResult& lr = res_.layers[size_t(n)];
      lr.node = n;
      lr.name = q_.nodes[size_t(n)].name;
      const double end = n + 1 == L_ ? std::max(end_, layer_end_[size_t(n)]) : layer_end_[size_t(n)];
      lr.start_s = prev;
      lr.wall_s = std::max(0.0, end - prev);
      prev = std::max(prev, end);
    }
    core_sim::summarise(res_, p_, links_, m_);
    for (int b = 0; b < n_; ++b) {
      BoardResult& br = res_.boards[size_t(b)];
      br.active_s = free_at_[size_t(b)];
      br.comm_s = std::max(0.0, br.active_s - br.compute_s);
    }
  }

  const QGraph& q_;
  const plan::Plan& p_;
  TimingModel m_;
  int n_, L_, K_;
  std::vector<double> image_end_;
  core_sim::Links links_;
  std::vector<double> cpm_;          // cycles per MAC per layer
  core_sim::PeerWindows peers_;      // windows and ACKs between boards
  core_sim::CountedAcks coord_acks_;  // frames to and from the coordinator
  core_sim::Fifo crx_;               // the coordinator's link, incoming
  double end_ = 0;
  std::vector<std::vector<int64_t>> expected_, arrived_;
  std::vector<std::vector<int64_t>> sums_expected_, sums_;  // partial-sum bytes per virtual layer
  std::vector<int> sum_wait_;  // per board: the reduced virtual layer whose sums it waits for, or -1
  std::vector<int> cursor_;
  std::vector<double> free_at_;
  std::vector<bool> busy_;
  std::vector<std::vector<Got>> pending_, batch_;  // frames delivered / being received
  std::vector<uint8_t> sending_;
  std::vector<int> send_v_;
  std::vector<size_t> send_i_;
  std::vector<int64_t> send_off_;
  std::vector<core_sim::Fifo> tx_, rx_;  // each board's link, both ways
  std::vector<double> layer_end_;
  std::vector<std::vector<std::vector<OutFrame>>> out_frames_;  // [board][layer]
  core_sim::EventQueue<Event> ev_;
  WakeSampler wake_;
  CpuPool pool_;
  std::vector<double> comp_start_, comp_target_;
  double last_coord_ = 0;
  // Halos first: what a board's layer in progress sends next (pump).
  enum class Stage : uint8_t { All, HalosBefore, HalosAfter, Coordinator };
  std::vector<std::vector<double>> first_part_;  // [board][layer]: MACs before the halos' frames, or -1
  std::vector<Stage> stage_;
  std::vector<std::vector<double>> inner_part_;  // [board][layer]: MACs computed before all inputs are in, or 0
  std::vector<int> inner_v_;  // per board: the virtual layer whose inner rows are done, or -1
  std::vector<double> second_s_;  // per board: the rows after the halos, seconds
  SimResult res_;
};

}  // namespace

SimResult core_sim::simulate_direct(const QGraph& q, const plan::Plan& p, const plan::Testbed& t,
                                    const TimingModel& m) {
  DirectSim s(q, p, t, m);
  return s.run();
}

}  // namespace ts::sim
