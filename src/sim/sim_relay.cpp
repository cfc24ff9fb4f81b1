// The relay route's driver of the simulator (sim.h): the coordinator
// between every layer, a barrier per layer; the shared core is sim/core.h.
#include <algorithm>
#include <cmath>

#include "core/fragment.h"
#include "core/wire.h"
#include "sim/core.h"

namespace ts::sim {

namespace {

using wire::MsgType;

constexpr int32_t kHeader = int32_t(wire::kHeaderSize);

// A frame as the simulator needs it: what it is, not its bytes. For an ACK,
// `seq` carries the acknowledged sequence number (the payload's ack_seq).
struct Frame {
  MsgType type = MsgType::Ack;
  uint16_t flags = 0;
  uint32_t seq = 0;
  int32_t payload = 0;
  int32_t bytes() const { return kHeader + payload; }
};

int32_t fixed_payload(MsgType t) {
  switch (t) {
    case MsgType::Ack: return int32_t(wire::AckPayload::kSize);
    case MsgType::Done: return int32_t(wire::DonePayload::kSize);
    default: return 0;
  }
}

enum class Ev : uint8_t {
  BoardDeliver,   // a frame has fully arrived at a board
  BoardWake,      // a board finished what it was doing and reads its link again
  CoordArrive,    // a board's frame reaches the coordinator's link
  CoordDeliver,   // ... and has crossed it: the coordinator handles it
};

struct Event {
  double t;
  uint64_t order;  // FIFO among equal times: determinism
  int32_t board;
  Ev kind;
  Frame f;
};

// The coordinator's side of one board link, and its per-layer "thread".
struct CoordSide {
  wire::SendWindow win;
  wire::AckTracker acks;
  // Cursor over the layer's outgoing INPUT frames.
  size_t k = 0, run = 0;
  int64_t off = 0;
  bool run_sent = false;
  bool active = false;
};

// One board: its protocol state, its inbox, its links.
struct BoardSide {
  wire::SendWindow win;
  wire::AckTracker acks;
  std::vector<Frame> inbox;
  size_t head = 0;
  bool busy = false;
  // Results being sent.
  bool sending = false, done_pending = false;
  const plan::LayerShare* out_share = nullptr;  // its sends, one OUTPUT message each
  size_t out_send = 0;
  int64_t out_sent = 0;
  // Links: FIFO servers, one per direction.
  core_sim::Fifo tx, rx;
};

class Simulator {
 public:
  Simulator(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m,
            std::vector<TraceEvent>* trace)
      : q_(q), p_(p), m_(m), trace_(trace), n_(p.n_workers()), links_(t, m, p.n_workers()), cpm_(core_sim::layer_cycles_per_mac(q, m)), wake_(m.wake_quantiles_s, m.timer_slack_s, m.wake_seed, m.wake_slot_s) {
    coord_.resize(size_t(n_));
    boards_.resize(size_t(n_));
    for (int b = 0; b < n_; ++b) {
      CoordSide& c = coord_[size_t(b)];
      c.win.reset(uint16_t(m.window), 1);
      c.acks.reset(uint16_t(m.coord_ack_every), 1);
      BoardSide& s = boards_[size_t(b)];
      s.win.reset(uint16_t(m.window), 1);
      s.acks.reset(uint16_t(m.board_ack_every), 1);
      s.tx.spb = s.rx.spb = links_.board_spb[size_t(b)];
    }
    op_delay_ = links_.op_delay;
    coord_s_per_byte_ = ctx_.spb = crx_.spb = links_.coord_spb;
    res_.workers = n_;
    res_.board_layers.assign(size_t(n_), std::vector<BoardLayer>(q.nodes.size()));
    res_.layers.resize(q.nodes.size());
  }

  SimResult run() {
    start_layer(0, 0.0);
    while (!events_.empty()) {
      const Event e = events_.pop();
      ++res_.events;
      switch (e.kind) {
        case Ev::BoardDeliver: board_deliver(e.board, e.f, e.t); break;
        case Ev::BoardWake: board_wake(e.board, e.t); break;
        case Ev::CoordArrive: coord_arrive(e.board, e.f, e.t); break;
        case Ev::CoordDeliver: coord_handle(e.board, e.f, e.t); break;
      }
    }
    if (layer_ != int(q_.nodes.size())) throw Error("simulator: the inference stalled at layer " + std::to_string(layer_));
    finish();
    return std::move(res_);
  }

 private:
  void push(double t, int board, Ev kind, const Frame& f = Frame{}) { events_.push(Event{t, 0, board, kind, f}); }

  void trace(double t, TraceKind kind, int board, const Frame* f = nullptr, uint32_t in_flight = 0) {
    if (!trace_) return;
    TraceEvent e;
    e.t = t;
    e.kind = kind;
    e.board = board;
    e.layer = layer_;
    if (f) {
      e.type = uint8_t(f->type);
      e.flags = f->flags;
      e.seq = f->seq;
      e.bytes = f->bytes();
      e.payload = f->payload;
    }
    e.in_flight = in_flight;
    trace_->push_back(e);
  }

  BoardLayer& bl(int b) { return res_.board_layers[size_t(b)][size_t(layer_)]; }

  void count_frame(int b, const Frame& f) {
    BoardLayer& r = bl(b);
    r.wire_bytes += f.bytes();
    r.frames += 1;
  }

  // ---- coordinator -------------------------------------------------------

  // Time at which the coordinator's CPU has handled one more frame.
  double coord_cpu(double t) {
    if (m_.coord_frame_s <= 0) return t;
    cpu_free_ = std::max(t, cpu_free_) + m_.coord_frame_s;
    return cpu_free_;
  }

  // Gives a frame that is not an ACK its sequence number from the sender's
  // window, as the real sender does; returns the frames then in flight.
  static uint32_t stamp(wire::SendWindow& win, Frame& f) {
    if (f.type == MsgType::Ack) return 0;
    uint32_t seq = 0;
    win.stamp(0, &seq, &f.flags);
    f.seq = seq;
    return win.in_flight();
  }

  // The coordinator hands a frame for board b to its link at time t (t is
  // non-decreasing across calls: it comes from the event clock or the CPU).
  void coord_send(int b, Frame f, double t) {
    t = coord_cpu(t);
    CoordSide& c = coord_[size_t(b)];
    const uint32_t in_flight = stamp(c.win, f);
    trace(t, TraceKind::CoordSend, b, &f, in_flight);
    count_frame(b, f);
    const double bytes = f.bytes();
    if (coord_s_per_byte_ > 0) t = ctx_.pass(t, bytes);
    t += m_.frame_latency_s;
    push(boards_[size_t(b)].rx.pass(t, bytes), b, Ev::BoardDeliver, f);
  }

  void start_layer(int node, double t) {
    layer_ = node;
    layer_start_ = t;
    layer_end_ = t;
    LayerResult& lr = res_.layers[size_t(node)];
    lr.node = node;
    lr.name = q_.nodes[size_t(node)].name;
    lr.start_s = t;
    trace(t, TraceKind::LayerStart, -1);
    remaining_ = 0;
    for (int b = 0; b < n_; ++b) {
      const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(node)];
      if (!ls.active()) continue;
      ++remaining_;
      CoordSide& c = coord_[size_t(b)];
      c.active = true;
      c.k = 0;
      c.run = 0;
      c.off = 0;
      c.run_sent = false;
      BoardLayer& r = bl(b);
      r.active = true;
      r.peak_ram_bytes = int64_t(core::kWorkerFixedArena) + ls.ram_bytes;
    }
    if (remaining_ == 0) throw Error("simulator: the plan gives layer '" + lr.name + "' to no board");
    for (int b = 0; b < n_; ++b)
      if (coord_[size_t(b)].active) coord_pump(b, t);
  }

  // Sends INPUT frames, then RUN, while the window allows.
  void coord_pump(int b, double t) {
    CoordSide& c = coord_[size_t(b)];
    const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(layer_)];
    while (!c.run_sent && c.win.can_send()) {
      // Skip operands with no runs.
      while (c.k < ls.inputs.size() && c.run >= ls.inputs[c.k].runs.size()) {
        ++c.k;
        c.run = 0;
        c.off = 0;
      }
      Frame f;
      if (c.k < ls.inputs.size()) {
        const core::InputRun& r = ls.inputs[c.k].runs[c.run];
        const int64_t n = int64_t(wire::frame_payload(r.count, size_t(c.off)));
        f.type = MsgType::Input;
        f.payload = int32_t(n);
        c.off += n;
        if (c.off >= int64_t(r.count)) {
          f.flags = wire::kFlagLast;
          ++c.run;
          c.off = 0;
        }
        bl(b).bytes_in += n;
      } else {
        f.type = MsgType::Run;
        f.flags = wire::kFlagLast;
        c.run_sent = true;
      }
      coord_send(b, f, t);
    }
  }

  void coord_arrive(int b, const Frame& f, double t) {
    if (coord_s_per_byte_ > 0) {
      const double at = crx_.pass(t, f.bytes());
      if (at > t) {
        push(at, b, Ev::CoordDeliver, f);
        return;
      }
    }
    coord_handle(b, f, t);
  }

  void coord_handle(int b, const Frame& f, double t) {
    t = coord_cpu(t);
    trace(t, TraceKind::CoordRecv, b, &f);
    CoordSide& c = coord_[size_t(b)];
    if (f.type == MsgType::Ack) {
      const auto r = c.win.on_ack(f.seq);
      if (r != wire::AckResult::Advanced && r != wire::AckResult::Duplicate)
        throw Error("simulator: internal: board " + std::to_string(b) + " acknowledged frames never sent");
      if (c.active && !c.run_sent) coord_pump(b, t);
      return;
    }
    if (c.acks.on_frame(f.seq, f.flags) != wire::SeqCheck::InOrder)
      throw Error("simulator: internal: frames from board " + std::to_string(b) + " out of order");
    if (!c.active) throw Error("simulator: internal: board " + std::to_string(b) + " sent outside a layer");
    if (c.acks.ack_due()) {
      Frame a;
      a.type = MsgType::Ack;
      a.payload = fixed_payload(MsgType::Ack);
      a.seq = c.acks.ack_seq();
      c.acks.ack_sent();
      coord_send(b, a, t);
      t = std::max(t, cpu_free_);
    }
    if (f.type == MsgType::Output) {
      bl(b).bytes_out += f.payload;
      return;
    }
    if (f.type != MsgType::Done) throw Error("simulator: internal: unexpected frame from board " + std::to_string(b));
    c.active = false;
    t += wake_.frame(t);  // host boards: the coordinator's thread for b waits for DONE in a receive
    bl(b).done_s = t - layer_start_;
    layer_end_ = std::max(layer_end_, t);
    if (--remaining_ > 0) return;
    const double end = layer_end_;
    trace(end, TraceKind::LayerEnd, -1);
    LayerResult& lr = res_.layers[size_t(layer_)];
    lr.wall_s = end - layer_start_;
    if (layer_ + 1 < int(q_.nodes.size())) {
      start_layer(layer_ + 1, end);
    } else {
      layer_ = int(q_.nodes.size());
      total_ = end;
    }
  }

  // ---- boards ------------------------------------------------------------

  void board_deliver(int b, const Frame& f, double t) {
    BoardSide& s = boards_[size_t(b)];
    s.inbox.push_back(f);
    if (!s.busy) board_receive(b, t + wake_.frame(t));  // host boards: blocked in poll, wakes late
  }

  void board_wake(int b, double t) {
    BoardSide& s = boards_[size_t(b)];
    s.busy = false;
    if (s.head < s.inbox.size()) board_receive(b, t);
  }

  // The board's hand-off of a frame to its link at time t.
  void board_send(int b, Frame f, double t) {
    BoardSide& s = boards_[size_t(b)];
    const uint32_t in_flight = stamp(s.win, f);
    trace(t, TraceKind::BoardSend, b, &f, in_flight);
    count_frame(b, f);
    push(s.tx.pass(t, f.bytes()) + m_.frame_latency_s, b, Ev::CoordArrive, f);
  }

  // One receive of the worker loop: take every frame that has arrived, pay
  // the receive delay, handle them in order (sending as it goes), then read
  // the link again when done.
  void board_receive(int b, double t) {
    BoardSide& s = boards_[size_t(b)];
    double c = t + op_delay_;
    const size_t end = s.inbox.size();
    for (; s.head < end; ++s.head) {
      const Frame f = s.inbox[s.head];
      trace(c, TraceKind::BoardRecv, b, &f);
      if (f.type == MsgType::Ack) {
        const auto r = s.win.on_ack(f.seq);
        if (r != wire::AckResult::Advanced && r != wire::AckResult::Duplicate)
          throw Error("simulator: internal: coordinator acknowledged frames board " + std::to_string(b) + " never sent");
        board_pump(b, c);
        continue;
      }
      if (s.acks.on_frame(f.seq, f.flags) != wire::SeqCheck::InOrder)
        throw Error("simulator: internal: frames to board " + std::to_string(b) + " out of order");
      board_ack_if_due(b, c);
      if (f.type == MsgType::Run) {
        const plan::LayerShare& ls = p_.workers[size_t(b)].layers[size_t(layer_)];
        // Host boards: the kernels' real CPU work (the relay route does not
        // share cores: a layer's boards compute side by side on their own).
        const core_sim::Compute compute(ls, links_.clock_hz[size_t(b)], cpm_[size_t(layer_)], m_);
        BoardLayer& r = bl(b);
        r.run_at_s = c - layer_start_;
        r.compute_s = compute.busy();
        trace(c, TraceKind::ComputeStart, b);
        c += compute.busy() + compute.overshoot(c, wake_, m_);
        trace(c, TraceKind::ComputeEnd, b);
        s.sending = true;
        s.done_pending = true;
        s.out_share = &ls;
        s.out_send = 0;
        s.out_sent = 0;
        board_pump(b, c);
      }
    }
    if (s.head == s.inbox.size()) {
      s.inbox.clear();
      s.head = 0;
    }
    if (c > t) {
      s.busy = true;
      push(c, b, Ev::BoardWake);
    } else if (s.head < s.inbox.size()) {
      board_receive(b, c);
    }
  }

  void board_ack_if_due(int b, double& c) {
    BoardSide& s = boards_[size_t(b)];
    if (!s.acks.ack_due()) return;
    Frame a;
    a.type = MsgType::Ack;
    a.payload = fixed_payload(MsgType::Ack);
    a.seq = s.acks.ack_seq();
    s.acks.ack_sent();
    c += op_delay_;
    board_send(b, a, c);
  }

  // Sends OUTPUT frames, then DONE, while the window allows.
  void board_pump(int b, double& c) {
    BoardSide& s = boards_[size_t(b)];
    while (s.sending && s.win.can_send()) {
      Frame f;
      if (s.out_send < s.out_share->sends.size()) {
        const int64_t len = s.out_share->sends[s.out_send].count;
        const int64_t n = int64_t(wire::frame_payload(size_t(len), size_t(s.out_sent)));
        f.type = MsgType::Output;
        f.payload = int32_t(n);
        s.out_sent += n;
        if (s.out_sent == len) {
          f.flags = wire::kFlagLast;
          ++s.out_send;
          s.out_sent = 0;
        }
      } else {
        f.type = MsgType::Done;
        f.payload = fixed_payload(MsgType::Done);
        f.flags = wire::kFlagLast | wire::kFlagAckReq;
        s.done_pending = false;
        s.sending = false;
      }
      c += op_delay_;
      board_send(b, f, c);
    }
  }

  // ---- results -----------------------------------------------------------

  // The shared figures (core.h); a board's active time is the sum over its
  // layers of the time from the layer's start to its DONE.
  void finish() {
    res_.total_s = total_;
    core_sim::summarise(res_, p_, links_, m_);
    for (int b = 0; b < n_; ++b) {
      BoardResult& br = res_.boards[size_t(b)];
      for (size_t n = 0; n < q_.nodes.size(); ++n) {
        const BoardLayer& r = res_.board_layers[size_t(b)][n];
        if (r.active) br.active_s += r.done_s;
      }
      br.comm_s = br.active_s - br.compute_s;
    }
  }

  const QGraph& q_;
  const plan::Plan& p_;
  TimingModel m_;
  std::vector<TraceEvent>* trace_;
  int n_;
  std::vector<CoordSide> coord_;
  std::vector<BoardSide> boards_;
  core_sim::Links links_;
  std::vector<double> cpm_;  // cycles per MAC per layer
  core_sim::EventQueue<Event> events_;
  double cpu_free_ = 0;
  core_sim::Fifo ctx_, crx_;  // the coordinator's link, both ways
  double coord_s_per_byte_ = 0;
  double op_delay_ = 0;  // board delay per receive and per send, overshoot included
  WakeSampler wake_;
  int layer_ = 0;
  double layer_start_ = 0, layer_end_ = 0, total_ = 0;
  int remaining_ = 0;
  SimResult res_;
};

}  // namespace

SimResult core_sim::simulate_relay(const QGraph& q, const plan::Plan& p, const plan::Testbed& t,
                                   const TimingModel& m, std::vector<TraceEvent>* trace) {
  Simulator s(q, p, t, m, trace);
  return s.run();
}

}  // namespace ts::sim
