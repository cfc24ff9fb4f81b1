// The simulator's shared core (sim/core.h).
#include "sim/core.h"

#include "plan/coding.h"
#include "plan/cost.h"

namespace ts::sim::core_sim {

Links::Links(const plan::Testbed& t, const TimingModel& m, int boards) {
  board_spb.resize(size_t(boards));
  clock_hz.resize(size_t(boards));
  for (int b = 0; b < boards; ++b) {
    const plan::Board& bd = t.boards[size_t(b)];
    const double bw = m.board_bandwidth_kbps > 0 ? m.board_bandwidth_kbps : bd.bandwidth_kbps;
    const double d = m.board_delay_s_per_kb >= 0 ? m.board_delay_s_per_kb : bd.delay_s_per_kb;
    board_spb[size_t(b)] = plan::link_s_per_byte(d, bw);
    clock_hz[size_t(b)] = bd.clock_mhz * 1e6;
  }
  // Coding a value and decoding it (plan/coding.h), per coding: the type's
  // measured cycles, else the default; host boards at the host's figure.
  double rice = plan::kDefaultRiceCyclesPerValue, mask = plan::kDefaultMaskCyclesPerValue;
  if (!m.costs.empty())
    if (const plan::MeasuredCosts* mc = plan::measured_costs("", m.costs)) {
      if (mc->rice_cycles_per_value > 0) rice = mc->rice_cycles_per_value;
      if (mc->mask_cycles_per_value > 0) mask = mc->mask_cycles_per_value;
    }
  const bool host = m.host_s_per_mac > 0;
  for (int b = 0; b < boards; ++b) {
    rice_spv.push_back(host ? plan::kHostRiceSPerValue : rice / clock_hz[size_t(b)]);
    mask_spv.push_back(host ? plan::kHostMaskSPerValue : mask / clock_hz[size_t(b)]);
  }
  coord_spb = m.coord_bandwidth_kbps > 0 ? 1.0 / (m.coord_bandwidth_kbps * plan::kBytesPerKB) : 0.0;
  op_delay = m.board_op_delay_s > 0 ? m.board_op_delay_s + m.sleep_overshoot_s : 0.0;
}

std::vector<double> layer_cycles_per_mac(const QGraph& q, const TimingModel& m) {
  plan::CostModel cm;
  cm.default_cycles_per_mac = m.cycles_per_mac;
  std::vector<double> v(q.nodes.size(), m.cycles_per_mac);
  if (!m.costs.empty())
    for (size_t n = 0; n < v.size(); ++n) v[n] = cm.type_cycles_per_mac(q.desc(int(n)), m.costs);
  return v;
}

namespace {

uint64_t pair_key(int a, int b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

// The entry of a pair, made as `fresh` when the pair is first used.
template <class T>
T& entry(std::unordered_map<uint64_t, T>& m, uint64_t key, const T& fresh) {
  auto it = m.find(key);
  if (it == m.end()) it = m.emplace(key, fresh).first;
  return it->second;
}

}  // namespace

wire::SendWindow& PeerWindows::window(int from, int to) {
  return entry(win_, pair_key(from, to), wire::SendWindow(window_, 1));
}

wire::AckTracker& PeerWindows::tracker(int to, int from) {
  return entry(acks_, pair_key(to, from), wire::AckTracker(ack_every_, 1));
}

bool PeerWindows::send(int from, int to, bool* ack_req) {
  uint32_t seq = 0;
  uint16_t flags = 0;
  if (!window(from, to).stamp(0, &seq, &flags)) return false;
  *ack_req = (flags & wire::kFlagAckReq) != 0;
  return true;
}

uint32_t PeerWindows::receive(int to, int from, bool ack_req) {
  wire::AckTracker& a = tracker(to, from);
  // Frames between two boards arrive in order: each is the expected one.
  (void)a.on_frame(a.expected_seq(), ack_req ? wire::kFlagAckReq : 0);
  if (!a.ack_due()) return 0;
  const uint32_t seq = a.ack_seq();
  a.ack_sent();
  return seq;
}

bool CountedAcks::frame(int from, int to) {
  wire::AckTracker& a = entry(acks_, pair_key(from, to), wire::AckTracker(ack_every_, 1));
  (void)a.on_frame(a.expected_seq(), 0);
  if (!a.ack_due()) return false;
  a.ack_sent();
  return true;
}

void summarise(SimResult& res, const plan::Plan& p, const Links& links, const TimingModel& m) {
  const int n = p.n_workers();
  const size_t L = res.layers.size();
  res.boards.resize(size_t(n));
  for (size_t node = 0; node < L; ++node) {
    LayerResult& lr = res.layers[node];
    double slowest = 0;
    for (int b = 0; b < n; ++b) {
      const BoardLayer& r = res.board_layers[size_t(b)][node];
      lr.payload_bytes += r.bytes_in + r.bytes_out;
      lr.wire_bytes += r.wire_bytes;
      lr.frames += r.frames;
      if (!r.active) continue;
      lr.active_boards++;
      slowest = std::max(slowest, r.compute_s);
      lr.max_peak_ram_bytes = std::max(lr.max_peak_ram_bytes, r.peak_ram_bytes);
    }
    lr.compute_s = std::min(lr.wall_s, slowest);
    lr.comm_s = lr.wall_s - lr.compute_s;
    res.compute_s += lr.compute_s;
    res.payload_bytes += lr.payload_bytes;
    res.wire_bytes += lr.wire_bytes;
    res.frames += lr.frames;
    res.max_peak_ram_bytes = std::max(res.max_peak_ram_bytes, lr.max_peak_ram_bytes);
  }
  res.comm_s = res.total_s - res.compute_s;
  for (int b = 0; b < n; ++b) {
    BoardResult& br = res.boards[size_t(b)];
    const plan::WorkerPlan& wp = p.workers[size_t(b)];
    br.board_id = wp.board;
    br.clock_mhz = links.clock_hz[size_t(b)] / 1e6;
    br.macs = wp.macs;
    for (size_t node = 0; node < L; ++node) {
      const BoardLayer& r = res.board_layers[size_t(b)][node];
      br.bytes_in += r.bytes_in;
      br.bytes_out += r.bytes_out;
      br.wire_bytes += r.wire_bytes;
      br.frames += r.frames;
      if (!r.active) continue;
      br.compute_s += r.compute_s;
      br.peak_ram_bytes = std::max(br.peak_ram_bytes, r.peak_ram_bytes);
      double counts[core::kNumProtocolPrices];
      core::price_counts(plan::layer_work(wp.layers[node]), counts);
      for (int i = 0; i < core::kNumProtocolPrices; ++i)
        br.protocol_s[i] += m.protocol.*core::kProtocolPrices[i].price * counts[i] / links.clock_hz[size_t(b)];
    }
    const double mcycles = double(br.macs) * m.cycles_per_mac / 1e6;
    br.k1 = mcycles > 0 ? double(br.bytes_out) / plan::kBytesPerKB / mcycles : 0.0;
    br.kc = br.bytes_out > 0 ? double(br.bytes_in + br.bytes_out) / double(br.bytes_out) : 0.0;
    // Eq. 1: W/f + (d + 1/B) * K1*Kc*W, and K1*Kc*W is the KB moved.
    br.eq1_s = mcycles / br.clock_mhz + links.board_spb[size_t(b)] * double(br.bytes_in + br.bytes_out);
  }
}

}  // namespace ts::sim::core_sim
