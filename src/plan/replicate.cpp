#include "plan/replicate.h"

#include <algorithm>

#include "plan/frames.h"

namespace ts::plan {

const char* objective_name(Objective o) { return o == Objective::Throughput ? "throughput" : "latency"; }

Objective parse_objective(const std::string& s) {
  if (s == "latency") return Objective::Latency;
  if (s == "throughput") return Objective::Throughput;
  throw Error("unknown objective '" + s + "' (expected latency, throughput)");
}

std::vector<double> estimate_board_busy_seconds(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m) {
  const size_t N = size_t(p.n_workers());
  if (t.boards.size() != N) throw Error("estimate: the plan and the testbed have different board counts");
  std::vector<double> compute(N, 0), in(N, 0), out(N, 0);
  for (size_t w = 0; w < N; ++w)
    for (const LayerShare& ls : p.workers[w].layers) {
      if (!ls.active()) continue;
      compute[w] += double(ls.macs) * m.cycles_per_mac(q.desc(ls.node)) / (t.boards[w].clock_mhz * 1e6) +
                    m.layer_overhead_s + m.protocol_s(ls, t.boards[w]);
      for (const InputNeed& need : ls.inputs)
        for (const core::InputRun& r : need.coord_runs) in[w] += double(count_message(r.count).wire_bytes);
      for (const core::Send& s : ls.sends)
        if (s.peer == core::kPeerCoordinator) out[w] += double(count_message(s.count).wire_bytes);
      for_each_send_group(ls.sends, [&](size_t first, size_t k) {
        const std::vector<Piece> pcs = pieces_of(ls.sends, first, k);
        const double wire = double(count_gathered(pcs.data(), pcs.size()).wire_bytes);
        out[w] += wire;
        in[size_t(ls.sends[first].peer)] += wire;
      });
    }
  std::vector<double> busy(N, 0);
  for (size_t w = 0; w < N; ++w) {
    const Board& b = t.boards[w];
    const double spb = (b.delay_s_per_kb + 1.0 / b.bandwidth_kbps) / kBytesPerKB;
    busy[w] = std::max(compute[w], std::max(in[w], out[w]) * spb);
  }
  return busy;
}

Testbed group_testbed(const Testbed& t, int g, int index) {
  Testbed s = t;
  s.boards.assign(t.boards.begin() + long(g) * index, t.boards.begin() + long(g) * (index + 1));
  return s;
}

double coordinator_bytes_per_image(const Plan& p) {
  double bytes = 0;
  for (const WorkerPlan& wp : p.workers)
    for (const LayerShare& ls : wp.layers) {
      for (const InputNeed& need : ls.inputs)
        for (const core::InputRun& r : need.coord_runs) bytes += double(count_message(r.count).wire_bytes);
      for (const core::Send& s : ls.sends)
        if (s.peer == core::kPeerCoordinator) bytes += double(count_message(s.count).wire_bytes);
    }
  return bytes;
}

bool identical_boards(const Testbed& t) {
  for (const Board& b : t.boards) {
    const Board& a = t.boards.front();
    if (b.clock_mhz != a.clock_mhz || b.ram_bytes != a.ram_bytes || b.flash_bytes != a.flash_bytes ||
        b.bandwidth_kbps != a.bandwidth_kbps || b.delay_s_per_kb != a.delay_s_per_kb)
      return false;
  }
  return true;
}

GroupChoice choose_groups(const QGraph& q, const Testbed& t, const PlanOptions& opt, Objective objective) {
  const int N = int(t.boards.size());
  if (N < 1) throw Error("plan: the testbed has no boards");
  GroupChoice c;
  c.objective = objective;
  if (objective == Objective::Latency) {
    c.group_boards = N;
    c.groups = 1;
    c.mode = "split";
    return c;
  }
  PlanOptions po = opt;
  po.routing = false;
  po.check_budgets = true;
  std::vector<int> sizes;
  for (int k = 1; k <= N; ++k) sizes.push_back(N / k);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::string whole_error;
  int best = -1;
  for (int g : sizes) {
    GroupCandidate cand;
    cand.group_boards = g;
    cand.groups = N / g;
    double rate = 0, coord_bytes = 0;
    try {
      // Every group is planned (heterogeneous testbeds: their own shares).
      for (int i = 0; i < cand.groups; ++i) {
        const Testbed tg = group_testbed(t, g, i);
        const Plan p = make_plan(q, tg, po);
        const std::vector<double> busy = estimate_board_busy_seconds(q, p, tg, po.cost);
        const double interval = *std::max_element(busy.begin(), busy.end());
        if (i == 0) {
          cand.est_latency_s = p.est_latency_s;
          cand.est_interval_s = interval;
        }
        rate += interval > 0 ? 1.0 / interval : 0.0;
        coord_bytes = coordinator_bytes_per_image(p);
        if (identical_boards(t)) {  // every group the same: plan one
          rate *= cand.groups;
          break;
        }
      }
      cand.fits = true;
    } catch (const Error& e) {
      cand.why_not = e.what();
      if (g == N) whole_error = e.what();
    }
    if (cand.fits) {
      const double cap = po.cost.coord_bandwidth_kbps > 0 && coord_bytes > 0
                             ? po.cost.coord_bandwidth_kbps * kBytesPerKB / coord_bytes
                             : rate;
      cand.est_images_per_s = std::min(rate, cap);
      if (best < 0 || cand.est_images_per_s > c.candidates[size_t(best)].est_images_per_s)
        best = int(c.candidates.size());
    }
    c.candidates.push_back(cand);
  }
  if (best < 0) throw Error(whole_error.empty() ? "plan: no grouping of the boards fits" : whole_error);
  const GroupCandidate& b = c.candidates[size_t(best)];
  c.group_boards = b.group_boards;
  c.groups = b.groups;
  c.idle_boards = N - b.group_boards * b.groups;
  c.est_images_per_s = b.est_images_per_s;
  c.mode = b.groups == 1 ? "split" : b.group_boards == 1 ? "replicate" : "groups";
  return c;
}

}  // namespace ts::plan
