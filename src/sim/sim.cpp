#include "sim/host.h"
#include "sim/sim.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "core/fragment.h"
#include "core/wire.h"

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

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.t > b.t || (a.t == b.t && a.order > b.order);
  }
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
  double tx_free = 0, rx_free = 0;
  double s_per_byte = 0;
  double clock_hz = 0;
};

class Simulator {
 public:
  Simulator(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m,
            std::vector<TraceEvent>* trace)
      : q_(q), p_(p), m_(m), trace_(trace), n_(p.n_workers()), wake_(m.wake_quantiles_s, m.timer_slack_s, m.wake_seed, m.wake_slot_s) {
    coord_.resize(size_t(n_));
    boards_.resize(size_t(n_));
    for (int b = 0; b < n_; ++b) {
      const plan::Board& bd = t.boards[size_t(b)];
      CoordSide& c = coord_[size_t(b)];
      c.win.reset(uint16_t(m.window), 1);
      c.acks.reset(uint16_t(m.coord_ack_every), 1);
      BoardSide& s = boards_[size_t(b)];
      s.win.reset(uint16_t(m.window), 1);
      s.acks.reset(uint16_t(m.board_ack_every), 1);
      const double bw = m.board_bandwidth_kbps > 0 ? m.board_bandwidth_kbps : bd.bandwidth_kbps;
      const double d = m.board_delay_s_per_kb >= 0 ? m.board_delay_s_per_kb : bd.delay_s_per_kb;
      s.s_per_byte = (d + 1.0 / bw) / plan::kBytesPerKB;
      s.clock_hz = bd.clock_mhz * 1e6;
    }
    op_delay_ = m.board_op_delay_s > 0 ? m.board_op_delay_s + m.sleep_overshoot_s : 0.0;
    coord_s_per_byte_ = m.coord_bandwidth_kbps > 0 ? 1.0 / (m.coord_bandwidth_kbps * plan::kBytesPerKB) : 0.0;
    res_.workers = n_;
    res_.board_layers.assign(size_t(n_), std::vector<BoardLayer>(q.nodes.size()));
    res_.layers.resize(q.nodes.size());
  }

  SimResult run() {
    start_layer(0, 0.0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
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
  void push(double t, int board, Ev kind, const Frame& f = Frame{}) { events_.push(Event{t, order_++, board, kind, f}); }

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

  // The coordinator hands a frame for board b to its link at time t (t is
  // non-decreasing across calls: it comes from the event clock or the CPU).
  void coord_send(int b, Frame f, double t) {
    t = coord_cpu(t);
    CoordSide& c = coord_[size_t(b)];
    uint32_t in_flight = 0;
    if (f.type != MsgType::Ack) {
      uint32_t seq = 0;
      c.win.stamp(0, &seq, &f.flags);
      f.seq = seq;
      in_flight = c.win.in_flight();
    }
    trace(t, TraceKind::CoordSend, b, &f, in_flight);
    count_frame(b, f);
    const double bytes = f.bytes();
    if (coord_s_per_byte_ > 0) {
      ctx_free_ = std::max(t, ctx_free_) + bytes * coord_s_per_byte_;
      t = ctx_free_;
    }
    t += m_.frame_latency_s;
    BoardSide& s = boards_[size_t(b)];
    s.rx_free = std::max(t, s.rx_free) + bytes * s.s_per_byte;
    push(s.rx_free, b, Ev::BoardDeliver, f);
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
      crx_free_ = std::max(t, crx_free_) + f.bytes() * coord_s_per_byte_;
      if (crx_free_ > t) {
        push(crx_free_, b, Ev::CoordDeliver, f);
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
    uint32_t in_flight = 0;
    if (f.type != MsgType::Ack) {
      uint32_t seq = 0;
      s.win.stamp(0, &seq, &f.flags);
      f.seq = seq;
      in_flight = s.win.in_flight();
    }
    trace(t, TraceKind::BoardSend, b, &f, in_flight);
    count_frame(b, f);
    s.tx_free = std::max(t, s.tx_free) + f.bytes() * s.s_per_byte;
    push(s.tx_free + m_.frame_latency_s, b, Ev::CoordArrive, f);
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
        const double compute = double(ls.macs) * m_.cycles_per_mac / s.clock_hz + m_.layer_overhead_s;
        // Host boards: the kernels' real CPU work (the relay route does not
        // share cores: a layer's boards compute side by side on their own).
        const double work = double(ls.macs) * m_.host_s_per_mac;
        BoardLayer& r = bl(b);
        r.run_at_s = c - layer_start_;
        r.compute_s = std::max(compute, work);
        trace(c, TraceKind::ComputeStart, b);
        c += std::max(compute, work) +
             (compute > work ? (wake_.enabled() ? wake_.sleep(c + compute) : m_.sleep_overshoot_s) : 0.0);
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

  void finish() {
    res_.total_s = total_;
    res_.boards.resize(size_t(n_));
    for (size_t n = 0; n < q_.nodes.size(); ++n) {
      LayerResult& lr = res_.layers[n];
      double slowest = 0;
      for (int b = 0; b < n_; ++b) {
        const BoardLayer& r = res_.board_layers[size_t(b)][n];
        if (!r.active) continue;
        lr.active_boards++;
        slowest = std::max(slowest, r.compute_s);
        lr.payload_bytes += r.bytes_in + r.bytes_out;
        lr.wire_bytes += r.wire_bytes;
        lr.frames += r.frames;
        lr.max_peak_ram_bytes = std::max(lr.max_peak_ram_bytes, r.peak_ram_bytes);
      }
      lr.compute_s = std::min(lr.wall_s, slowest);
      lr.comm_s = lr.wall_s - lr.compute_s;
      res_.compute_s += lr.compute_s;
      res_.payload_bytes += lr.payload_bytes;
      res_.wire_bytes += lr.wire_bytes;
      res_.frames += lr.frames;
      res_.max_peak_ram_bytes = std::max(res_.max_peak_ram_bytes, lr.max_peak_ram_bytes);
    }
    res_.comm_s = res_.total_s - res_.compute_s;
    for (int b = 0; b < n_; ++b) {
      BoardResult& br = res_.boards[size_t(b)];
      const plan::WorkerPlan& wp = p_.workers[size_t(b)];
      br.board_id = wp.board;
      br.clock_mhz = boards_[size_t(b)].clock_hz / 1e6;
      br.macs = wp.macs;
      for (size_t n = 0; n < q_.nodes.size(); ++n) {
        const BoardLayer& r = res_.board_layers[size_t(b)][n];
        if (!r.active) continue;
        br.compute_s += r.compute_s;
        br.active_s += r.done_s;
        br.bytes_in += r.bytes_in;
        br.bytes_out += r.bytes_out;
        br.wire_bytes += r.wire_bytes;
        br.frames += r.frames;
        br.peak_ram_bytes = std::max(br.peak_ram_bytes, r.peak_ram_bytes);
      }
      br.comm_s = br.active_s - br.compute_s;
      const double mcycles = double(br.macs) * m_.cycles_per_mac / 1e6;
      br.k1 = mcycles > 0 ? double(br.bytes_out) / plan::kBytesPerKB / mcycles : 0.0;
      br.kc = br.bytes_out > 0 ? double(br.bytes_in + br.bytes_out) / double(br.bytes_out) : 0.0;
      // Eq. 1: W/f + (d + 1/B) * K1*Kc*W, and K1*Kc*W is the KB moved.
      br.eq1_s = mcycles / br.clock_mhz +
                 boards_[size_t(b)].s_per_byte * double(br.bytes_in + br.bytes_out);
    }
  }

  const QGraph& q_;
  const plan::Plan& p_;
  TimingModel m_;
  std::vector<TraceEvent>* trace_;
  int n_;
  std::vector<CoordSide> coord_;
  std::vector<BoardSide> boards_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t order_ = 0;
  double cpu_free_ = 0, ctx_free_ = 0, crx_free_ = 0;
  double coord_s_per_byte_ = 0;
  double op_delay_ = 0;  // board delay per receive and per send, overshoot included
  WakeSampler wake_;
  int layer_ = 0;
  double layer_start_ = 0, layer_end_ = 0, total_ = 0;
  int remaining_ = 0;
  SimResult res_;
};

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

const char* trace_kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::LayerStart: return "layer-start";
    case TraceKind::CoordSend: return "coord-send";
    case TraceKind::BoardRecv: return "board-recv";
    case TraceKind::ComputeStart: return "compute-start";
    case TraceKind::ComputeEnd: return "compute-end";
    case TraceKind::BoardSend: return "board-send";
    case TraceKind::CoordRecv: return "coord-recv";
    case TraceKind::LayerEnd: return "layer-end";
  }
  return "?";
}

void validate(const TimingModel& m) {
  if (m.window < 1 || m.window > int(wire::kMaxWindow))
    throw Error("simulate: window must be between 1 and " + std::to_string(wire::kMaxWindow) + " (got " +
                std::to_string(m.window) + ")");
  if (m.board_ack_every < 1 || m.coord_ack_every < 1) throw Error("simulate: ACK intervals must be at least 1");
  if (!std::isfinite(m.cycles_per_mac) || m.cycles_per_mac <= 0)
    throw Error("simulate: cycles per MAC must be a positive number");
  if (!finite_nonneg(m.layer_overhead_s) || !finite_nonneg(m.frame_latency_s) || !finite_nonneg(m.board_op_delay_s) ||
      !finite_nonneg(m.coord_frame_s) || !finite_nonneg(m.board_frame_s) || !finite_nonneg(m.sleep_overshoot_s))
    throw Error("simulate: times must be finite and non-negative");
  if (!finite_nonneg(m.coord_bandwidth_kbps) || !finite_nonneg(m.board_bandwidth_kbps))
    throw Error("simulate: bandwidths must be finite and non-negative (0 = unlimited / from the testbed)");
  if (!std::isfinite(m.board_delay_s_per_kb)) throw Error("simulate: delay per KB must be finite");
  if (m.host_cores < 0 || m.host_cores > 4096) throw Error("simulate: host cores must be between 0 and 4096");
  if (!finite_nonneg(m.host_s_per_mac) || m.host_s_per_mac > 1e-3)
    throw Error("simulate: host time per MAC must be finite, non-negative and at most 1 ms");
  if (!finite_nonneg(m.timer_slack_s) || m.timer_slack_s > 1.0)
    throw Error("simulate: timer slack must be finite, non-negative and at most 1 s");
  if (!finite_nonneg(m.wake_slot_s) || m.wake_slot_s > 1.0)
    throw Error("simulate: the wake-up slot must be finite, non-negative and at most 1 s");
  if (m.wake_quantiles_s.size() > 10000) throw Error("simulate: at most 10000 wake-up delay values");
  for (size_t i = 0; i < m.wake_quantiles_s.size(); ++i) {
    const double w = m.wake_quantiles_s[i];
    if (!finite_nonneg(w) || w > 1.0) throw Error("simulate: wake-up delays must be finite, non-negative and at most 1 s");
    if (i > 0 && w < m.wake_quantiles_s[i - 1]) throw Error("simulate: wake-up delay quantiles must not decrease");
  }
  if (m.images < 1 || m.images > 1000) throw Error("simulate: images must be between 1 and 1000");
}

SimResult simulate(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m,
                   std::vector<TraceEvent>* trace) {
  validate(m);
  if (p.n_workers() == 0) throw Error("simulate: the plan has no boards");
  if (int(t.boards.size()) != p.n_workers())
    throw Error("simulate: the plan has " + std::to_string(p.n_workers()) + " boards but the testbed has " +
                std::to_string(t.boards.size()));
  if (q.nodes.empty()) throw Error("simulate: the model has no layers");
  for (int w = 0; w < p.n_workers(); ++w)
    if (p.workers[size_t(w)].layers.size() != q.nodes.size())
      throw Error("simulate: the plan was made for another model (layer count differs)");
  for (const auto& b : t.boards) {
    if (!(b.clock_mhz > 0) || !std::isfinite(b.clock_mhz))
      throw Error("simulate: board " + std::to_string(b.id) + " has no clock");
    if (m.board_bandwidth_kbps <= 0 && !(b.bandwidth_kbps > 0))
      throw Error("simulate: board " + std::to_string(b.id) + " has no bandwidth");
  }
  if (p.route == plan::Route::Direct) return simulate_direct(q, p, t, m);
  Simulator s(q, p, t, m, trace);
  return s.run();
}

}  // namespace ts::sim
