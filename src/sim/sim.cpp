// The simulator's entry (sim.h): the model's checks, then the route's
// driver (sim_relay.cpp, sim_direct.cpp) on the shared core (sim/core.h).
#include "sim/sim.h"

#include <cmath>

#include "core/wire.h"
#include "sim/core.h"

namespace ts::sim {

namespace {

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
  if (p.route == plan::Route::Direct) return core_sim::simulate_direct(q, p, t, m);
  return core_sim::simulate_relay(q, p, t, m, trace);
}

}  // namespace ts::sim
