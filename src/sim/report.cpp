#include "sim/report.h"

namespace ts::sim {

namespace {

nlohmann::json protocol_json(const core::ProtocolCost& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const core::ProtocolPrice& p : core::kProtocolPrices) j[p.name] = c.*p.price;
  return j;
}

}  // namespace

nlohmann::json to_json(const TimingModel& m) {
  return {{"window", m.window},
          {"board_ack_every", m.board_ack_every},
          {"coord_ack_every", m.coord_ack_every},
          {"cycles_per_mac", m.cycles_per_mac},
          {"layer_overhead_s", m.layer_overhead_s},
          {"protocol_cycles", protocol_json(m.protocol)},
          {"frame_latency_s", m.frame_latency_s},
          {"coord_bandwidth_kbps", m.coord_bandwidth_kbps},
          {"board_bandwidth_kbps", m.board_bandwidth_kbps},
          {"board_delay_s_per_kb", m.board_delay_s_per_kb},
          {"board_op_delay_s", m.board_op_delay_s},
          {"coord_frame_s", m.coord_frame_s},
          {"sleep_overshoot_s", m.sleep_overshoot_s},
          {"host_cores", m.host_cores},
          {"host_s_per_mac", m.host_s_per_mac},
          {"timer_slack_s", m.timer_slack_s},
          {"wake_values", m.wake_quantiles_s.size()},
          {"wake_slot_s", m.wake_slot_s}};
}

nlohmann::json to_json(const RunRecord& r, bool per_board) {
  const SimResult& s = r.result;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerResult& l : s.layers)
    layers.push_back({{"node", l.node},
                      {"name", l.name},
                      {"strategy", size_t(l.node) < r.layer_strategy.size() ? r.layer_strategy[size_t(l.node)] : ""},
                      {"start_s", l.start_s},
                      {"wall_s", l.wall_s},
                      {"compute_s", l.compute_s},
                      {"communication_s", l.comm_s},
                      {"payload_bytes", l.payload_bytes},
                      {"wire_bytes", l.wire_bytes},
                      {"frames", l.frames},
                      {"max_peak_ram_bytes", l.max_peak_ram_bytes},
                      {"active_boards", l.active_boards}});
  nlohmann::json j = {{"workers", r.workers},
                      {"fits_budget", r.fits},
                      {"route", plan::route_name(r.route)},
                      {"route_note", r.route_note},
                      {"latency_s", {{"total", s.total_s}, {"compute", s.compute_s}, {"communication", s.comm_s}}},
                      {"wire_bytes", s.wire_bytes},
                      {"payload_bytes", s.payload_bytes},
                      {"plan_wire_bytes", r.plan_wire_bytes},
                      {"est_latency_s", r.est_latency_s},
                      {"frames", s.frames},
                      {"max_peak_ram_bytes", r.max_peak_ram_bytes},
                      {"mean_peak_ram_bytes", r.mean_peak_ram_bytes},
                      {"min_peak_ram_bytes", r.min_peak_ram_bytes},
                      {"max_exact_need_bytes", r.max_exact_need_bytes},
                      {"ram_budget_bytes", r.ram_budget_bytes},
                      {"max_flash_bytes", r.max_flash_bytes},
                      {"macs", r.total_macs},
                      {"recomputed_macs", r.recomputed_macs},
                      {"events", s.events},
                      {"host_seconds", {{"plan", r.plan_s}, {"simulate", r.sim_s}}},
                      {"per_layer", layers}};
  if (!r.fits) j["budget_error"] = r.budget_error;
  if (r.images_per_s > 0) j["images_per_s"] = r.images_per_s;
  if (!r.throughput_mode.empty()) {
    j["throughput"] = {{"mode", r.throughput_mode},
                       {"group_boards", r.group_boards},
                       {"groups", r.groups},
                       {"idle_boards", r.idle_boards},
                       {"est_images_per_s", r.est_images_per_s}};
  }
  if (!r.throughput_error.empty()) j["throughput_error"] = r.throughput_error;
  if (per_board && !s.boards.empty()) {
    nlohmann::json boards = nlohmann::json::array();
    for (size_t b = 0; b < s.boards.size(); ++b) {
      const BoardResult& br = s.boards[b];
      std::vector<int64_t> peak;
      std::vector<double> compute, done;
      for (const BoardLayer& bl : s.board_layers[b]) {
        peak.push_back(bl.peak_ram_bytes);
        compute.push_back(bl.compute_s);
        done.push_back(bl.done_s);
      }
      nlohmann::json protocol = nlohmann::json::object();
      for (int i = 0; i < core::kNumProtocolPrices; ++i) protocol[core::kProtocolPrices[i].name] = br.protocol_s[i];
      boards.push_back({{"id", br.board_id},
                        {"clock_mhz", br.clock_mhz},
                        {"compute_s", br.compute_s},
                        {"protocol_s", protocol},
                        {"communication_s", br.comm_s},
                        {"active_s", br.active_s},
                        {"macs", br.macs},
                        {"bytes_in", br.bytes_in},
                        {"bytes_out", br.bytes_out},
                        {"wire_bytes", br.wire_bytes},
                        {"frames", br.frames},
                        {"peak_ram_bytes", br.peak_ram_bytes},
                        {"k1_kb_per_mcycle", br.k1},
                        {"kc", br.kc},
                        {"eq1_s", br.eq1_s},
                        {"layer_peak_ram_bytes", peak},
                        {"layer_compute_s", compute},
                        {"layer_done_s", done}});
    }
    j["per_board"] = boards;
  }
  return j;
}

void print_summary(std::FILE* out, const std::vector<const RunRecord*>& runs) {
  std::fprintf(out, "%7s %10s %10s %10s %12s %12s %10s %12s %10s %8s\n", "boards", "total s", "compute s", "comm s",
               "wire KB", "payload KB", "frames", "peak RAM", "budget", "fits");
  for (const RunRecord* r : runs) {
    const SimResult& s = r->result;
    std::fprintf(out, "%7d %10.4f %10.4f %10.4f %12.1f %12.1f %10lld %10.1fKi %8.0fKi %8s\n", r->workers, s.total_s,
                 s.compute_s, s.comm_s, double(s.wire_bytes) / 1000.0, double(s.payload_bytes) / 1000.0,
                 (long long)s.frames, double(r->max_peak_ram_bytes) / 1024.0, double(r->ram_budget_bytes) / 1024.0,
                 r->fits ? "yes" : "NO");
  }
}

void print_details(std::FILE* out, const RunRecord& r) {
  const SimResult& s = r.result;
  std::fprintf(out, "\n%-4s %-28s %10s %10s %10s %12s %12s %10s\n", "#", "layer", "wall ms", "compute ms", "comm ms",
               "payload B", "wire B", "peak RAM");
  for (const LayerResult& l : s.layers)
    std::fprintf(out, "%-4d %-28.28s %10.3f %10.3f %10.3f %12lld %12lld %10lld\n", l.node, l.name.c_str(),
                 1e3 * l.wall_s, 1e3 * l.compute_s, 1e3 * l.comm_s, (long long)l.payload_bytes,
                 (long long)l.wire_bytes, (long long)l.max_peak_ram_bytes);
  if (s.boards.empty()) return;
  std::fprintf(out, "\n%-6s %10s %10s %10s %12s %12s %10s %8s %6s %10s\n", "board", "compute s", "comm s", "active s",
               "in KB", "out KB", "peak RAM", "K1", "Kc", "eq.1 s");
  for (const BoardResult& b : s.boards)
    std::fprintf(out, "%-6d %10.4f %10.4f %10.4f %12.1f %12.1f %8.1fKi %8.4f %6.2f %10.4f\n", b.board_id, b.compute_s,
                 b.comm_s, b.active_s, double(b.bytes_in) / 1000.0, double(b.bytes_out) / 1000.0,
                 double(b.peak_ram_bytes) / 1024.0, b.k1, b.kc, b.eq1_s);
}

}  // namespace ts::sim
