// The cost model's estimates of a plan (cost.h; the prices themselves:
// cost_model.cpp; the transfer and layer prices: traffic.h).
#include "plan/traffic.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "plan/board_kind.h"
#include "plan/frames.h"
#include "plan/needs.h"

namespace ts::plan {

namespace {

double s_per_byte(const Board& b, const CostModel& m) {
  return m.host ? m.host_costs.s_per_byte : link_s_per_byte(b.delay_s_per_kb, b.bandwidth_kbps);
}

double coord_spb(const CostModel& m) {
  if (m.host) return m.host_costs.s_per_byte;
  return m.coord_bandwidth_kbps > 0 ? 1.0 / (m.coord_bandwidth_kbps * kBytesPerKB) : 0.0;
}

}  // namespace

namespace price {

double compute_s(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m, int n,
                 EstimateParts* acc) {
  double worst = 0, sum = 0;
  for (int w = 0; w < p.n_workers(); ++w) {
    const LayerShare& ls = p.workers[size_t(w)].layers[size_t(n)];
    if (!ls.active()) continue;
    const double s = double(ls.macs) * m.seconds_per_mac(q.desc(n), t.boards[size_t(w)]) + m.layer_overhead_s +
                     m.protocol_s(ls, t.boards[size_t(w)]);
    worst = std::max(worst, s);
    sum += s;
  }
  if (m.cores > 0) worst = std::max(worst, sum / m.cores);
  if (acc) acc->compute_s += worst;
  return worst;
}

double step_s(const Traffic& tr, const Testbed& t, const CostModel& m, EstimateParts* acc) {
  if (!tr.any()) return 0;
  double worst = tr.coord * coord_spb(m), bytes = tr.coord;
  for (size_t w = 0; w < tr.in.size(); ++w) {
    const double v = std::max(tr.in[w], tr.out[w]) * s_per_byte(t.boards[w], m);
    if (v > worst || (v == worst && std::max(tr.in[w], tr.out[w]) > bytes)) {
      worst = v;
      bytes = std::max(tr.in[w], tr.out[w]);
    }
  }
  if (acc) {
    acc->steps += 1;
    acc->byte_s += worst;
    acc->bytes += bytes;
  }
  return worst + m.frame_latency_s;
}

void add_partial_sums(const LayerShare& ls, int w, Traffic* tr) {
  for_each_send_group(ls.psum.sends, [&](size_t first, size_t k) {
    const std::vector<Piece> pcs = pieces_of(ls.psum.sends, first, k);
    tr->add(w, int(ls.psum.sends[first].peer), double(count_gathered(pcs.data(), pcs.size()).wire_bytes));
  });
}

std::vector<LayerTraffic> plan_traffic(const QGraph& q, const Plan& p) {
  const size_t N = size_t(p.n_workers());
  std::vector<LayerTraffic> tr(q.nodes.size(), LayerTraffic(N));
  for (size_t w = 0; w < N; ++w)
    for (const LayerShare& ls : p.workers[w].layers) {
      LayerTraffic& mine = tr[size_t(ls.node)];
      mine.triggered = mine.triggered || (ls.active() && ls.run_trigger);
      for (const InputNeed& need : ls.inputs)
        for (const core::InputRun& r : need.coord_runs) mine.in.add(-1, int(w), double(count_message(r.count).wire_bytes));
      for (const core::Send& s : ls.sends)
        if (s.peer == core::kPeerCoordinator) mine.result.add(int(w), -1, double(count_message(s.count).wire_bytes));
      // A coded layer's transfers at the longer of their bytes and the coder's CPU (plan/coding.h).
      const double coded = p.coding.priced(size_t(ls.node));
      for_each_send_group(ls.sends, [&](size_t first, size_t k) {
        const core::Send& s = ls.sends[first];
        const std::vector<Piece> pcs = pieces_of(ls.sends, first, k);
        tr[s.layer].in.add(int(w), int(s.peer), double(count_gathered(pcs.data(), pcs.size(), coded).wire_bytes));
      });
      add_partial_sums(ls, int(w), &mine.psum);
    }
  return tr;
}

double layer_s(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m, int n, const LayerTraffic& tr,
               EstimateParts* acc) {
  const double round_trip = tr.triggered ? 2 * m.frame_latency_s : 0.0;
  if (acc && tr.triggered) acc->steps += 2;
  const double in = step_s(tr.in, t, m, acc), hidden = std::min(in, tr.hidden_s);
  if (acc) acc->hidden_s += hidden;
  return in - hidden + compute_s(q, p, t, m, n, acc) + step_s(tr.psum, t, m, acc) + step_s(tr.result, t, m, acc) +
         round_trip;
}

}  // namespace price

using namespace price;


namespace {

// Overlap inside a layer (core/halo_first.h). Halos first: a board that
// splits its share sends to other boards before it computes the rest, so a
// layer's inputs from boards travel while the slowest-to-hide of their
// senders computes its rest (0 if one of them does not split). Inner rows
// first: they also travel while the receivers compute the positions that
// read none of them (the least of those among the boards that receive).
void hide_halos(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m, std::vector<LayerTraffic>* tr) {
  if (p.route != Route::Direct) return;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> hidden(q.nodes.size(), inf), inner(q.nodes.size(), inf);
  for (size_t w = 0; w < size_t(p.n_workers()); ++w)
    for (const LayerShare& ls : p.workers[w].layers) {
      if (!ls.active()) continue;
      const core::LayerDesc d = q.desc(ls.node);
      const double spm = m.seconds_per_mac(d, t.boards[w]);
      if (std::any_of(ls.inputs.begin(), ls.inputs.end(), [](const InputNeed& in) { return !in.recv.empty(); }))
        inner[size_t(ls.node)] = std::min(inner[size_t(ls.node)], inner_first_s(d, ls, inner_split_of(d, ls), spm));
      if (ls.sends.empty()) continue;
      const double rest = halo_second_s(d, ls, halo_split_of(d, ls), spm);
      for (const core::Send& s : ls.sends)
        if (s.peer != core::kPeerCoordinator) hidden[s.layer] = std::min(hidden[s.layer], rest);
    }
  for (size_t n = 0; n < q.nodes.size(); ++n)
    (*tr)[n].hidden_s = (hidden[n] == inf ? 0.0 : hidden[n]) + (inner[n] == inf ? 0.0 : inner[n]);
}

std::vector<double> estimate_layers(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m,
                                    EstimateParts* acc) {
  if (t.boards.size() != size_t(p.n_workers()))
    throw Error("estimate: the plan and the testbed have different board counts");
  std::vector<LayerTraffic> tr = plan_traffic(q, p);
  hide_halos(q, p, t, m, &tr);
  std::vector<double> out(q.nodes.size(), 0.0);
  for (size_t n = 0; n < q.nodes.size(); ++n) out[n] = layer_s(q, p, t, m, int(n), tr[n], acc);
  return out;
}

}  // namespace

std::vector<double> estimate_layer_seconds(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m) {
  return estimate_layers(q, p, t, m, nullptr);
}

double relay_floor_s(const QGraph& q, const CostModel& m) {
  double s = 0;
  std::vector<core::InputRun> runs;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    // The input elements some output reads, each sent once at least.
    NodeNeeds needs(q, int(n));
    const core::LayerDesc& d = needs.desc();
    double in = 0;
    for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) {
      runs.clear();
      needs.operand(int(k), 0, d.out.size(), &runs);
      std::sort(runs.begin(), runs.end(), [](const core::InputRun& a, const core::InputRun& b) { return a.offset < b.offset; });
      int64_t end = 0;
      for (const core::InputRun& r : runs) {
        const int64_t b = std::max<int64_t>(end, r.offset), e = int64_t(r.offset) + r.count;
        if (e > b) in += double(e - b);
        end = std::max(end, e);
      }
    }
    const double frames = in > 0 ? 4 : 3;  // inputs, results, RUN and DONE
    s += (in + double(d.out.size())) * coord_spb(m) + frames * m.frame_latency_s;
  }
  return s;
}

EstimateParts estimate_parts(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m) {
  EstimateParts parts;
  (void)estimate_layers(q, p, t, m, &parts);
  return parts;
}


}  // namespace ts::plan
