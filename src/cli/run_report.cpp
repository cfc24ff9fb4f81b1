// `tinysplit run`'s reports: --json and text, from what the session did
// (cli/run_session.h).
#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/run_session.h"
#include "cli/run_throughput.h"
#include "model/pipeline.h"
#include "plan/board_kind.h"

namespace ts::cli {

namespace {

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= 10 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1024.0 * 1024.0));
  else if (b >= 10 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)b);
  return buf;
}

// One failover as the text reports give it (`where`: "" or "group G: ").
void print_failover(const QGraph& q, const coord::FailoverEvent& f, const std::string& where) {
  if (f.boards_left == 0) {  // a throughput group's last board
    std::printf("%sfailover: board %d (%s) dropped in inference %d: %s; no board left to re-plan on\n", where.c_str(),
                f.board_id, f.address.c_str(), f.inference, f.reason.c_str());
    return;
  }
  std::printf("%sfailover: board %d (%s) dropped %s%s: %s; re-planned on %d boards in %.2f s, %s re-deployed "
              "(%.0f %% of the new fragments), %s\n",
              where.c_str(), f.board_id, f.address.c_str(),
              f.inference < 0 ? "during deploy" : ("in inference " + std::to_string(f.inference)).c_str(),
              f.layer >= 0 ? (" at layer " + std::to_string(f.layer) + " '" + f.layer_name + "'").c_str() : "",
              f.reason.c_str(), f.boards_left, f.recover_s, human_bytes(f.redeployed_bytes).c_str(),
              f.full_deploy_bytes ? 100.0 * double(f.redeployed_bytes) / double(f.full_deploy_bytes) : 0.0,
              f.inference < 0 ? "before any inference"
              : f.resumed_at > 0 ? ("the inference resumed at layer " + std::to_string(f.resumed_at) + " '" +
                                    q.nodes[size_t(f.resumed_at)].name + "'").c_str()
                                 : "the inference run again from its first layer");
}

// A run's failovers as the JSON reports give them.
nlohmann::json rejoins_json(const std::vector<coord::RejoinEvent>& events) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : events)
    out.push_back({{"board", e.board_id}, {"index", e.board}, {"address", e.address}, {"inference", e.inference},
                   {"boards", e.boards}, {"rejoin_s", e.rejoin_s}, {"redeployed_bytes", e.redeployed_bytes},
                   {"full_deploy_bytes", e.full_deploy_bytes}});
  return out;
}

void print_rejoin(const coord::RejoinEvent& e, const std::string& where) {
  std::printf("%srejoin: board %d (%s) back before inference %d; re-planned on %d boards in %.2f s\n", where.c_str(),
              e.board_id, e.address.c_str(), e.inference, e.boards, e.rejoin_s);
}

// Boards whose links were learned from their HELLO (RunResult::links_learned).
nlohmann::json links_learned_json(const RunResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const RunResult::LearnedLinks& l : r.links_learned)
    out.push_back({{"board", l.board}, {"assumed", l.assumed}, {"told", l.told}});
  return out;
}

nlohmann::json failovers_json(const std::vector<coord::FailoverEvent>& events) {
  nlohmann::json jf = nlohmann::json::array();
  for (const auto& f : events)
    jf.push_back({{"board", f.board_id}, {"index", f.board}, {"address", f.address}, {"layer", f.layer},
                  {"layer_name", f.layer_name}, {"inference", f.inference}, {"reason", f.reason},
                  {"boards_left", f.boards_left}, {"recover_s", f.recover_s}, {"redeployed_bytes", f.redeployed_bytes},
                  {"full_deploy_bytes", f.full_deploy_bytes}, {"resumed_at_layer", f.resumed_at},
                  {"kept_layers", f.kept_layers},
                  {"kept_held_by_index", f.kept_held_by >= 0 ? nlohmann::json(f.kept_held_by) : nlohmann::json()}});
  return jf;
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The last inference's answer: the output as probabilities (or values, for
// a model without Softmax), its classes best first, their labels.
struct Answer {
  std::vector<float> probs, logits;
  std::vector<int> order;
  int top = 0;
  const QGraph* q = nullptr;
  std::string label(int i) const { return i < int(q->labels.size()) ? q->labels[size_t(i)] : std::to_string(i); }
};

Answer answer(const QGraph& q, const std::vector<int8_t>& output) {
  Answer a;
  a.q = &q;
  a.probs = output_probs(q, output);
  a.top = int(std::max_element(a.probs.begin(), a.probs.end()) - a.probs.begin());
  a.logits = dequantize_output(q, output);
  a.order.resize(a.probs.size());
  for (size_t i = 0; i < a.order.size(); ++i) a.order[i] = int(i);
  std::sort(a.order.begin(), a.order.end(), [&](int x, int y) { return a.probs[size_t(x)] > a.probs[size_t(y)]; });
  return a;
}

// The coding of the run's plan: the mode, the layers coded, the estimate's
// input, and the plan's activation bytes plain and with the coded layers at
// their estimated size (the measured bytes are result_bytes).
nlohmann::json coding_json(const plan::PlanOptions& po, const plan::Plan& p) {
  return {{"mode", plan::coding_name(po.coding)},
          {"mask_layers", p.coding.layers(plan::Codec::Mask)},
          {"rice_layers", p.coding.layers(plan::Codec::Rice)},
          {"estimated_on", po.code.source},
          {"planned_plain_bytes", p.plain_bytes},
          {"planned_coded_bytes", p.coded_bytes}};
}

// The plan's activation bytes from board to board (plain; with --route
// direct the coordinator's links do not carry them).
int64_t board_to_board_payload(const RunResult& r) {
  int64_t n = 0;
  for (const auto& wp : r.plan.workers)
    for (const auto& ls : wp.layers)
      for (const auto& s : ls.sends)
        if (s.peer != core::kPeerCoordinator) n += s.count;
  return n;
}

nlohmann::json estimate_json(const BoardTypeEstimate& e) {
  nlohmann::json j = {{"board_type", e.board_type}, {"total_s", e.total_s}, {"compute_s", e.compute_s},
                      {"communication_s", e.comm_s}, {"cycles_per_mac", e.cycles_per_mac},
                      {"costs", e.costs.empty() ? nlohmann::json(nullptr) : nlohmann::json("data/costs/" + e.costs + ".json")},
                      {"window", e.window},
                      {"source", "tinysplit simulate of this plan"}};
  j["paper"] = e.paper ? nlohmann::json{{"figure", "Fig. 9"}, {"total_s", e.paper->total_s},
                                        {"compute_s", e.paper->compute_s}, {"communication_s", e.paper->comm_s}}
                       : nlohmann::json(nullptr);
  return j;
}

// "3 boards (host: local processes standing in for Teensy 4.1 boards)", or
// with their kinds counted: "4 boards (2 qemu-m7, 2 host: ...)".
std::string boards_text(const RunResult& r) {
  std::vector<std::pair<std::string, int>> kinds;
  for (int w : r.used) {
    const std::string k = plan::kind_of(r.testbed.boards[size_t(w)]).name;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == k; });
    if (it == kinds.end()) kinds.push_back({k, 1});
    else ++it->second;
  }
  std::string s = std::to_string(r.used.size()) + " boards (";
  bool host = false;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds.size() > 1) s += (i ? ", " : "") + std::to_string(kinds[i].second) + " ";
    s += kinds[i].first;
    host = host || kinds[i].first == "host";
  }
  return s + (host ? ": local processes standing in for Teensy 4.1 boards)" : ")");
}

}  // namespace

void print_run_json(const RunConfig& c, const RunInputs& in, const RunResult& r) {
  const QGraph& q = in.q;
  const coord::InferenceResult& x = r.last;
  const int in_size = q.shape(q.input).h;
  const std::string note = size_note(c.model, in_size);
  const double n_in = double(in.xs.size());
  const Answer a = answer(q, x.output);
  const auto& probs = a.probs;
  const auto& logits = a.logits;
  const int top = a.top;
  auto label = [&](int i) { return a.label(i); };
  nlohmann::json jw = nlohmann::json::array(), jl = nlohmann::json::array();
  for (size_t i = 0; i < x.boards.size(); ++i) {
    const auto& b = x.boards[i];
    nlohmann::json e = {{"id", b.board_id}, {"address", r.addresses[size_t(r.used[i])]}, {"peak_ram_bytes", b.peak_ram_bytes},
                        {"planned_peak_ram_bytes", b.planned_peak_ram_bytes}, {"ram_budget_bytes", r.testbed.boards[size_t(r.used[i])].ram_bytes},
                        {"flash_bytes", b.flash_bytes}, {"compute_s", b.compute_s}, {"bytes_in", b.bytes_in},
                        {"bytes_out", b.bytes_out}, {"rating", r.plan.ratings[i]}, {"share", r.plan.shares[i]},
                        {"macs", r.plan.workers[i].macs},
                        // Exact under QEMU -icount (DONE's compute_instructions),
                        // null for boards that do not count them.
                        {"kernel_instructions", b.kernel_instructions >= 0 ? nlohmann::json(b.kernel_instructions)
                                                                           : nlohmann::json(nullptr)}};
    std::vector<int64_t> planned, measured;
    for (size_t n = 0; n < q.nodes.size(); ++n) {
      planned.push_back(r.plan.workers[i].computing_ram_bytes(n));
      measured.push_back(b.layer_peak[n]);
    }
    e["planned_layer_ram_bytes"] = planned;
    e["measured_layer_ram_bytes"] = measured;
    if (!r.probes.empty()) {
      const auto& pr = r.probes[size_t(r.used[i])];
      e["probe"] = {{"rtt_s", pr.rtt_s}, {"delay_s_per_kb", pr.delay_s_per_kb}, {"bandwidth_kbps", pr.bandwidth_kbps}};
    }
    jw.push_back(e);
  }
  for (const auto& l : x.layers)
    jl.push_back({{"name", l.name}, {"wall_s", l.wall_s}, {"compute_s", l.compute_s}, {"communication_s", l.comm_s},
                  {"wait_s", l.wait_s},
                  {"payload_bytes", l.payload_bytes}, {"wire_bytes", l.wire_bytes}, {"max_peak_ram_bytes", l.max_peak_ram},
                  {"result_frames", l.result_frames}});
  const nlohmann::json jf = failovers_json(r.failovers);
  const nlohmann::json jr = rejoins_json(r.rejoins);
  const int64_t board_to_board = board_to_board_payload(r);
  nlohmann::json j = {
      {"model", c.model_label}, {"size", in_size}, {"image", in.input_name},
      {"size_note", note},
      {"workers", r.plan.n_workers()}, {"allocation", plan::to_string(c.plan.alloc)}, {"strategy", r.plan.strategy},
      {"cost_model", r.cost_host ? "host" : "teensy"},
      {"route", plan::route_name(r.plan.route)}, {"route_note", r.plan.route_note}, {"window", c.window},
      {"links_learned", links_learned_json(r)},
      {"top1", {{"index", top}, {"label", label(top)}, {"prob", probs[top]}}}, {"logits", logits},
      {"logits_int8", std::vector<int>(x.output.begin(), x.output.end())}, {"probs", probs},
      {"match_reference", r.match}, {"reference_s", r.reference_s}, {"repeat", c.repeat},
      {"inferences", r.inferences}, {"bit_exact_inferences", r.exact_inferences},
      {"layers", q.nodes.size()}, {"verified_layers", r.verified_layers},
      {"first_mismatch", r.first_bad.ok() ? nlohmann::json(nullptr)
                                        : nlohmann::json{{"board", r.first_bad.board}, {"layer", r.first_bad.node},
                                                         {"name", q.nodes[size_t(r.first_bad.node)].name},
                                                         {"input", r.first_bad_input}}},
      {"latency_s", {{"total", x.total_s}, {"compute", x.compute_s}, {"communication", x.comm_s}}},
      {"board_type_estimate", estimate_json(r.estimate)},
      // total: every byte on the coordinator's links, measured; payload:
      // the plan's activation bytes, board-to-board ones included (with
      // --route direct the coordinator does not see those).
      {"wire_bytes", {{"total", x.wire_bytes}, {"payload", x.payload_bytes},
                      {"board_to_board_payload", board_to_board}}},
      // Frames the boards sent with their results (OUTPUT to the
      // coordinator, INPUT/INPUTS to other boards), from their DONE reports.
      {"result_frames", x.result_frames},
      // Their bytes as the boards sent them (headers included, coded or
      // not: DONE's bytes_sent), and the coding (plan/coding.h).
      {"result_bytes", x.result_bytes},
      {"coding", coding_json(in.plan, r.plan)},
      {"stream", stream_json(in.plan.stream, r.plan)},
      {"views", views_json(r.plan)},
      {"planned_wire_payload_bytes", r.plan.total_wire_bytes},
      {"deploy", {{"sent", r.deploy.sent}, {"cached", r.deploy.cached}, {"patched", r.deploy.patched},
                  {"bytes", r.deploy.bytes}, {"full_bytes", r.deploy.full_bytes}, {"seconds", r.deploy.seconds}}},
      {"authenticated", !c.key_file.empty()},
      {"emulation", {{"cycles_per_mac", c.cycles_per_mac}, {"delay_ms", c.delay_ms}, {"board_type", c.emulate}}},
      {"boards_started", r.testbed.boards.size()}, {"failover", c.failover}, {"failovers", jf}, {"rejoins", jr},
      {"per_worker", jw}, {"per_layer", jl}};
  if (!c.save_overlay.empty()) {
    nlohmann::json jb = nlohmann::json::array();
    // Each box: its four corners in photo pixels, rounded as PaddleOCR
    // rounds them (top-left, top-right, bottom-right, bottom-left), the
    // rectangle's angle in degrees and its sides in map pixels, its score.
    for (const TextBox& b : r.text_boxes) {
      nlohmann::json quad = nlohmann::json::array();
      for (const Point& p : b.quad) quad.push_back({std::lround(p.x), std::lround(p.y)});
      jb.push_back({{"quad", quad}, {"angle", b.rect.angle}, {"width", b.rect.width}, {"height", b.rect.height},
                    {"score", b.score}});
    }
    j["overlay"] = {{"file", c.save_overlay}, {"text_boxes", jb}};
  }
  if (!c.dataset.empty())
    j["dataset"] = {{"name", c.dataset}, {"split", "test"}, {"images", in.xs.size()}, {"bit_exact_images", r.exact},
                    {"accuracy", r.correct / n_in}, {"reference_accuracy", r.ref_correct / n_in}};
  std::printf("%s\n", j.dump(2).c_str());
}

void print_run_text(const RunConfig& c, const RunInputs& in, const RunResult& r) {
  const QGraph& q = in.q;
  const coord::InferenceResult& x = r.last;
  const int in_size = q.shape(q.input).h;
  const std::string note = size_note(c.model, in_size);
  const double n_in = double(in.xs.size());
  const Answer a = answer(q, x.output);
  const auto& probs = a.probs;
  const auto& order = a.order;
  auto label = [&](int i) { return a.label(i); };
  std::printf("tinysplit run: %s at %dx%d on %s; strategy %s, %s route, %s prices, %s allocation, window %d%s%s%s\n",
              c.model_label.c_str(), in_size, in_size, boards_text(r).c_str(), r.plan.strategy.c_str(),
              plan::route_name(r.plan.route), r.cost_host ? "host" : "Teensy 4.1", plan::to_string(c.plan.alloc),
              c.window, c.cycles_per_mac > 0 && c.emulate.empty() ? ", emulated clocks" : "", c.delay_ms > 0 ? ", injected delays" : "",
              c.emulate.empty() ? "" : (", emulating " + c.emulate + " boards").c_str());
  if (!note.empty()) std::printf("note: %s\n", note.c_str());
  if (!r.plan.route_note.empty()) std::printf("note: %s\n", r.plan.route_note.c_str());
  // One line per (assumed, told) pair, naming its boards.
  std::map<std::pair<int, int>, std::string> learned;
  for (const RunResult::LearnedLinks& l : r.links_learned) {
    std::string& ids = learned[{l.assumed, l.told}];
    ids += (ids.empty() ? "" : ", ") + std::to_string(l.board);
  }
  for (const auto& [links, ids] : learned)
    std::printf("note: board%s %s told %d links in HELLO, not the %d of their kind the testbed assumed: planned with %d\n",
                ids.find(',') != std::string::npos ? "s" : "", ids.c_str(), links.second, links.first, links.second);
  if (!c.dataset.empty())
    std::printf("%s: distributed accuracy %.4f (int8 reference %.4f), %d of %zu bit-exact; last image:\n",
                in.input_name.c_str(), r.correct / n_in, r.ref_correct / n_in, r.exact, in.xs.size());
  else
    std::printf("%s %s\n", c.input.empty() ? "image" : "input", in.input_name.c_str());
  for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k)
    if (q.softmax_output)
      std::printf("  %-10s %6.2f%%\n", label(order[k]).c_str(), 100.0 * probs[order[k]]);
    else
      std::printf("  %-12s %8.4g (output value; the model has no Softmax)\n", label(order[k]).c_str(), probs[order[k]]);
  std::printf("bit-exact with the single-process int8 reference: %s (every board's outputs checked by digest: %d of "
              "%zu layers)\n",
              r.match ? "yes" : "NO", r.verified_layers, q.nodes.size());
  for (const auto& f : r.failovers) print_failover(q, f, "");
  for (const auto& e : r.rejoins) print_rejoin(e, "");
  std::printf("deploy: %d boards sent %s, %d cached, %.2f s\n", r.deploy.sent, human_bytes(r.deploy.bytes).c_str(), r.deploy.cached,
              r.deploy.seconds);
  if (!c.key_file.empty()) std::printf("links: authenticated (HMAC-SHA-256 tag on every frame, key %s)\n", c.key_file.c_str());
  std::printf("latency: %.3f s total = %.3f s compute + %.3f s communication (single process: %.3f s)\n", x.total_s,
              x.compute_s, x.comm_s, r.reference_s);
  const BoardTypeEstimate& e = r.estimate;
  char prices[160];
  if (e.costs.empty())
    std::snprintf(prices, sizeof prices, "%.1f cycles/MAC", e.cycles_per_mac);
  else
    std::snprintf(prices, sizeof prices, "per-op cycles of data/costs/%s.json", e.costs.c_str());
  std::printf("on %d %s boards (simulated, this plan, %s, window %d): %.3f s = %.3f s compute + "
              "%.3f s communication%s\n",
              r.plan.n_workers(), e.board_type.c_str(), prices, e.window, e.total_s, e.compute_s, e.comm_s,
              e.paper ? (("; the paper reports " + fixed2(e.paper->total_s) + " s = " + fixed2(e.paper->compute_s) +
                          " + " + fixed2(e.paper->comm_s) + " (Fig. 9)"))
                            .c_str()
                      : "");
  if (!c.save_overlay.empty())
    std::printf("text: %zu boxes (DB post-process on the host), drawn with the map over the photo in %s\n",
                r.text_boxes.size(), c.save_overlay.c_str());
  std::printf("wire: %s in frames on the coordinator's links; the plan moves %s of activations (%s board to "
              "board), before coding\n",
              human_bytes(x.wire_bytes).c_str(), human_bytes(x.payload_bytes).c_str(),
              human_bytes(board_to_board_payload(r)).c_str());
  const int masked = r.plan.coding.layers(plan::Codec::Mask), riced = r.plan.coding.layers(plan::Codec::Rice);
  if (masked + riced > 0)
    std::printf("coded (--code %s): %d layers' activations board to board with mask, %d with rice; the boards' results "
                "took %s on the wire\n",
                plan::coding_name(in.plan.coding), masked, riced, human_bytes(x.result_bytes).c_str());
  std::fputs(plan::streams::summary_line(r.plan, in.plan.stream).c_str(), stdout);
  std::fputs(views_line(r.plan).c_str(), stdout);
  std::printf("%-6s %-22s %12s %12s %10s %12s %12s  %s\n", "board", "address", "peak RAM", "planned", "budget",
              "flash", "compute s", "KiB from/to coordinator");
  for (size_t i = 0; i < x.boards.size(); ++i) {
    const auto& b = x.boards[i];
    std::printf("%-6d %-22s %12u %12lld %10lld %12lld %12.4f  %5lld/%-5lld\n", b.board_id,
                r.addresses[size_t(r.used[i])].c_str(), b.peak_ram_bytes, (long long)b.planned_peak_ram_bytes,
                (long long)r.testbed.boards[size_t(r.used[i])].ram_bytes,
                (long long)b.flash_bytes, b.compute_s, (long long)(b.bytes_in / 1024), (long long)(b.bytes_out / 1024));
  }
  std::printf("per layer, as the boards measured it (the slowest board's time; communication includes its wait for "
              "inputs):\n");
  std::printf("%-34s %10s %10s %10s %10s %12s\n", "layer", "time ms", "compute ms", "comm ms", "wait ms", "payload B");
  for (const auto& l : x.layers)
    std::printf("%-34.34s %10.3f %10.3f %10.3f %10.3f %12lld\n", l.name.c_str(), 1e3 * l.wall_s, 1e3 * l.compute_s,
                1e3 * l.comm_s, 1e3 * l.wait_s, (long long)l.payload_bytes);
}

void print_throughput_json(const RunConfig& c, const RunInputs& in, const ThroughputResult& r) {
  const QGraph& q = in.q;
  nlohmann::json per_group = nlohmann::json::array();
  for (size_t g = 0; g < r.group_ids.size(); ++g)
    per_group.push_back({{"boards", r.group_ids[g]},
                         {"inferences", r.group_done[g]},
                         {"dropped", r.group_dropped[g].empty() ? nlohmann::json(nullptr) : nlohmann::json(r.group_dropped[g])},
                         {"failovers", failovers_json(r.group_failovers[g])},
                         {"rejoins", rejoins_json(r.group_rejoins[g])}});
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& k : r.groups.candidates)
    cands.push_back({{"group_boards", k.group_boards}, {"groups", k.groups}, {"fits", k.fits},
                     {"est_images_per_s", k.est_images_per_s}, {"why_not", k.why_not}});
  const nlohmann::json j = {{"model", c.model_label},
                            {"objective", "throughput"},
                            {"workers", c.testbed.boards.size()},
                            {"strategy", c.plan.strategy},
                            {"route", plan::route_name(c.plan.route)},
                            {"mode", r.groups.mode},
                            {"group_boards", r.groups.group_boards},
                            {"groups", r.groups.groups},
                            {"idle_boards", r.groups.idle_boards},
                            {"pipelined", r.pipelined},
                            {"in_flight", r.in_flight},
                            {"pipeline_note", r.pipeline_note},
                            {"inferences", r.total},
                            {"bit_exact_inferences", r.n_exact},
                            {"layers", q.nodes.size()},
                            {"verified_layers", r.verified_layers},
                            {"first_mismatch", r.first_bad.ok() ? nlohmann::json(nullptr)
                                                              : nlohmann::json{{"board", r.first_bad.board},
                                                                               {"layer", r.first_bad.node},
                                                                               {"name", q.nodes[size_t(r.first_bad.node)].name},
                                                                               {"input", r.first_bad_input}}},
                            {"match_reference", r.match},
                            {"images_per_s", r.images_per_s},
                            {"wall_s", r.wall_s},
                            {"latency_s", {{"total", r.median_s}}},
                            {"reference_s", in.reference_s},
                            {"reference_images_per_s", in.reference_s > 0 ? 1.0 / in.reference_s : 0.0},
                            {"planner_est_images_per_s", r.groups.est_images_per_s},
                            {"per_group", per_group},
                            {"candidates", cands}};
  std::printf("%s\n", j.dump(2).c_str());
}

void print_throughput_text(const RunConfig& c, const RunInputs& in, const ThroughputResult& r) {
  const QGraph& q = in.q;
  std::printf("tinysplit run --objective throughput: %s on %zu boards: %s, %d group%s of %d board%s%s\n",
              c.model_label.c_str(), c.testbed.boards.size(), r.groups.mode.c_str(), r.groups.groups, r.groups.groups == 1 ? "" : "s",
              r.groups.group_boards, r.groups.group_boards == 1 ? "" : "s",
              r.groups.idle_boards ? (", " + std::to_string(r.groups.idle_boards) + " idle").c_str() : "");
  if (r.pipelined)
    std::printf("pipelined: up to %d images in flight in each group\n", r.in_flight);
  else
    std::printf("not pipelined: %s\n", r.pipeline_note.c_str());
  std::printf("%d inferences in %.3f s: %.2f images/s (single process: %.2f images/s); median latency %.4f s\n", r.total,
              r.wall_s, r.images_per_s, in.reference_s > 0 ? 1.0 / in.reference_s : 0.0, r.median_s);
  std::printf("bit-exact with the single-process int8 reference: %s (%d of %d; every board's outputs checked by "
              "digest: %d of %zu layers)\n",
              r.match ? "yes" : "NO", r.n_exact, r.total, r.verified_layers, q.nodes.size());
  for (size_t g = 0; g < r.group_failovers.size(); ++g) {
    const std::string where = "group " + std::to_string(g) + ": ";
    for (const auto& f : r.group_failovers[g]) print_failover(q, f, where);
    for (const auto& e : r.group_rejoins[g]) print_rejoin(e, where);
    if (!r.group_dropped[g].empty())
      std::printf("%sstopped (%s); its images went to the other groups\n", where.c_str(), r.group_dropped[g].c_str());
  }
}

}  // namespace ts::cli
