// The simulator's core, shared by both routes (sim_relay.cpp: the
// coordinator between every layer; sim_direct.cpp: board to board): the
// event queue, the links as FIFO servers, the boards' compute, the windows
// and ACKs of the engine (the real wire::SendWindow and wire::AckTracker),
// and the per-layer and per-board figures. A route's driver says only who
// sends which frame when. Internal to src/sim.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

#include "core/wire.h"
#include "plan/coding.h"
#include "plan/plan.h"
#include "plan/testbed.h"
#include "sim/host.h"
#include "sim/sim.h"

namespace ts::sim::core_sim {

// Events in time order, equal times first in, first out (determinism). E
// has a double `t` and a uint64_t `order` (set here).
template <class E>
class EventQueue {
 public:
  void push(E e) {
    e.order = order_++;
    q_.push(e);
  }
  bool empty() const { return q_.empty(); }
  E pop() {
    E e = q_.top();
    q_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const E& a, const E& b) const { return a.t > b.t || (a.t == b.t && a.order > b.order); }
  };
  std::priority_queue<E, std::vector<E>, Later> q_;
  uint64_t order_ = 0;
};

// One direction of a link: frames are served one after another, each for
// its bytes times the link's seconds per byte.
struct Fifo {
  double free = 0;  // when the link is free again
  double spb = 0;   // seconds per byte
  // A frame of `bytes` handed over at t: when it has crossed.
  double pass(double t, double bytes) {
    free = std::max(t, free) + bytes * spb;
    return free;
  }
};

// The timing figures every route reads from the model and the testbed.
struct Links {
  std::vector<double> board_spb;  // eq. 1's (d + 1/B) per byte, per board
  std::vector<double> clock_hz;
  double coord_spb = 0;           // the coordinator's link; 0 = unlimited
  double op_delay = 0;            // board delay per receive and per send, overshoot included
  // Per board: seconds to code a value and decode it (plan/coding.h), per coding.
  std::vector<double> rice_spv, mask_spv;
  double code_spv(int b, plan::Codec c) const {
    return c == plan::Codec::Rice ? rice_spv[size_t(b)] : c == plan::Codec::Mask ? mask_spv[size_t(b)] : 0.0;
  }
  Links(const plan::Testbed& t, const TimingModel& m, int boards);
};

// A sleep that ends at t wakes late: host boards by a drawn delay, else by
// the model's overshoot.
inline double sleep_overshoot(WakeSampler& wake, double t, const TimingModel& m) {
  return wake.enabled() ? wake.sleep(t) : m.sleep_overshoot_s;
}

// Cycles per MAC of every layer of q under m (TimingModel::costs).
std::vector<double> layer_cycles_per_mac(const QGraph& q, const TimingModel& m);

// A board's compute of one share: the emulated time (MACs x cycles per MAC
// over its clock, plus the layer overhead) and, for host boards, the
// kernels' real CPU work; it takes the longer of the two.
struct Compute {
  double emulated = 0, work = 0;
  double protocol = 0;  // of emulated: the board's CPU outside the kernel (TimingModel::protocol)
  Compute(const plan::LayerShare& ls, double clock_hz, double cycles_per_mac, const TimingModel& m)
      : emulated(double(ls.macs) * cycles_per_mac / clock_hz + m.layer_overhead_s),
        work(double(ls.macs) * m.host_s_per_mac),
        protocol(m.protocol.zero() ? 0.0 : m.protocol.instructions(plan::layer_work(ls)) / clock_hz) {
    emulated += protocol;
  }
  double busy() const { return std::max(emulated, work); }
  // A share f of its kernel (a part of the layer's positions); the protocol
  // part only with the part that ends the layer (`last`), as a board pays it
  // once per layer.
  Compute part(double f, bool last = true) const {
    Compute c = *this;
    c.emulated = (emulated - protocol) * f + (last ? protocol : 0.0);
    c.protocol = last ? protocol : 0.0;
    c.work *= f;
    return c;
  }
  // An emulated compute (started at c) ends in a sleep up to its time,
  // which wakes late.
  double overshoot(double c, WakeSampler& wake, const TimingModel& m) const {
    return emulated > work ? sleep_overshoot(wake, c + emulated, m) : 0.0;
  }
};

// The engine's windows between boards, on its own classes: for every
// ordered pair (from, to) the sender's SendWindow and the receiver's
// AckTracker. The frame that fills a window asks for an ACK; the receiver
// ACKs every ack_every frames or on that request.
class PeerWindows {
 public:
  explicit PeerWindows(const TimingModel& m)
      : window_(uint16_t(m.window)), ack_every_(uint16_t(m.board_ack_every)) {}
  // `from` hands a data frame to `to`: false if the window is full (nothing
  // changes); else *ack_req says whether the frame asks for an ACK.
  bool send(int from, int to, bool* ack_req);
  // `to` handled a data frame from `from`: the cumulative ACK it then owes
  // (> 0), or 0 when none is due.
  uint32_t receive(int to, int from, bool ack_req);
  // An ACK from `to` for `from`'s frames.
  void acked(int from, int to, uint32_t ack_seq) { (void)window(from, to).on_ack(ack_seq); }

 private:
  // Made when a pair first talks: most pairs never do.
  wire::SendWindow& window(int from, int to);
  wire::AckTracker& tracker(int to, int from);
  uint16_t window_, ack_every_;
  std::unordered_map<uint64_t, wire::SendWindow> win_;   // (from, to)
  std::unordered_map<uint64_t, wire::AckTracker> acks_;  // (to, from)
};

// ACKs of frames that are counted, not windowed (the direct route's frames
// to and from the coordinator): one ACK per ack_every frames of each ordered
// pair of ends (-1 = the coordinator).
class CountedAcks {
 public:
  explicit CountedAcks(int ack_every) : ack_every_(uint16_t(ack_every)) {}
  // One more frame from `from` to `to`: true if it makes an ACK due.
  bool frame(int from, int to);

 private:
  uint16_t ack_every_;
  std::unordered_map<uint64_t, wire::AckTracker> acks_;  // (from, to), made when first used
};

// The per-layer and per-board figures from res.board_layers, once each
// layer's wall_s (and start_s) is set: per layer the bytes and frames of
// every board, the active boards, the slowest compute (at most the wall
// time), the peak; the totals; per board its sums, K1, Kc and eq. 1. The
// driver sets each board's active_s and comm_s.
void summarise(SimResult& res, const plan::Plan& p, const Links& links, const TimingModel& m);

// The routes' drivers, after simulate()'s checks (sim_relay.cpp, sim_direct.cpp).
SimResult simulate_relay(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m,
                         std::vector<TraceEvent>* trace);
SimResult simulate_direct(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m);

}  // namespace ts::sim::core_sim
