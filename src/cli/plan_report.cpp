// `tinysplit plan`'s reports: --json and text (cli/cmd_plan.cpp).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/plan_cmd.h"

namespace ts::cli {

namespace {

// The layer that moves the most bytes (in + out) for a single worker.
size_t heaviest_layer(const plan::Plan& p) {
  size_t heavy = 0;
  for (size_t n = 0; n < p.layers.size(); ++n)
    if (p.layers[n].max_worker_bytes_moved > p.layers[heavy].max_worker_bytes_moved) heavy = n;
  return heavy;
}

// The coding (plan/coding.h): mode, layers per coding, the activation bytes
// plain (total_wire_bytes) and with the coded layers at their estimated size.
nlohmann::json coding_json(const PlanConfig& c, const PlanResult& r, const plan::Plan& p) {
  return {{"mode", plan::coding_name(c.plan.coding)},
          {"mask_layers", p.coding.layers(plan::Codec::Mask)},
          {"rice_layers", p.coding.layers(plan::Codec::Rice)},
          {"estimated_on", r.code_source},
          {"plain_bytes", p.plain_bytes},
          {"coded_bytes", p.coded_bytes}};
}

}  // namespace

void print_plan_json(const PlanConfig& c, const PlanResult& r) {
  const QGraph& q = r.q;
  const plan::Plan& p = r.plan;
  const std::vector<std::string>& paths = r.paths;
  const size_t heavy = heaviest_layer(p);
  const int in_size = q.shape(q.input).h;
  const plan::EstimateParts parts = plan::estimate_parts(q, p, c.testbed, c.plan.cost);
  double share_sum = 0;
  for (const auto& w : p.workers) share_sum += w.share;
  nlohmann::json jw = nlohmann::json::array();
  for (const auto& w : p.workers)
    jw.push_back({{"id", w.board}, {"rating", w.rating}, {"share", w.share / share_sum},
                  {"flash_bytes", w.flash_bytes},
                  {"data_bytes", w.data_bytes}, {"peak_ram_bytes", w.peak_ram_bytes},
                  {"peak_layer", w.peak_layer >= 0 ? q.nodes[size_t(w.peak_layer)].name : ""},
                  {"macs", w.macs}, {"recomputed_macs", w.recomputed_macs}, {"bytes_in", w.bytes_in}, {"bytes_out", w.bytes_out}, {"kc", w.kc}});
  nlohmann::json jl = nlohmann::json::array();
  for (const auto& l : p.layers)
    jl.push_back({{"name", l.name}, {"op", core::qop_name(q.nodes[size_t(l.node)].op)},
                  {"stream_step", plan::stream_step(p, l.node)},
                  {"bytes_in", l.bytes_in}, {"bytes_out", l.bytes_out}, {"bytes_moved", l.bytes_moved},
                  {"strategy", p.layer_strategy[size_t(l.node)]},
                  {"est_latency_s", p.est_layer_s[size_t(l.node)]},
                  {"unique_in", l.unique_in}, {"max_worker_ram_bytes", l.max_worker_ram_bytes},
                  {"max_worker_bytes_moved", l.max_worker_bytes_moved},
                  {"workers_active", l.workers_active}, {"full_input_workers", l.full_input_workers},
                  {"max_fanout", l.max_fanout}, {"recomputed_outputs", l.recomputed}});
  nlohmann::json j = {{"model", c.model},
                      {"size", in_size},
                      {"strategy", p.strategy},
                      {"route", plan::route_name(p.route)},
                      {"route_note", p.route_note},
                      {"allocation", plan::to_string(p.alloc)},
                      {"plan_id", p.plan_id},
                      {"model_bytes", p.model_bytes},
                      {"fixed_arena_bytes", core::kWorkerFixedArena},
                      {"workers", jw},
                      {"total_wire_bytes", p.total_wire_bytes},
                      {"coding", coding_json(c, r, p)},
                      {"stream", stream_json(c.plan.stream, p)},
                      {"views", views_json(p)},
                      {"est_latency_s", p.est_latency_s},
                      {"cost_model", c.cost_model},
                      {"est_parts", {{"compute_s", parts.compute_s}, {"steps", parts.steps},
                                     {"bytes", parts.bytes}, {"byte_s", parts.byte_s},
                                     {"hidden_s", parts.hidden_s}}},
                      {"heaviest_layer", p.layers[heavy].name},
                      {"heaviest_layer_max_worker_bytes", p.layers[heavy].max_worker_bytes_moved},
                      {"per_layer", jl},
                      {"fragments", paths}};
  std::printf("%s\n", j.dump(2).c_str());
}

void print_plan_text(const PlanConfig& c, const PlanResult& r) {
  const QGraph& q = r.q;
  const plan::Plan& p = r.plan;
  const std::vector<std::string>& paths = r.paths;
  const size_t heavy = heaviest_layer(p);
  const int in_size = q.shape(q.input).h;
  std::printf("plan %08x: %s at %d, %d workers, allocation %s, strategy %s, route %s, model data %lld bytes\n",
              p.plan_id, c.model.c_str(), in_size, p.n_workers(), plan::to_string(p.alloc),
              p.strategy.c_str(), plan::route_name(p.route), (long long)p.model_bytes);
  if (!p.route_note.empty()) std::printf("note: %s\n", p.route_note.c_str());
  std::printf("\n%6s %10s %8s %10s %10s %-26s %10s %11s %11s %6s\n", "board", "rating", "share", "flash",
              "peak RAM", "(at layer)", "MMACs", "bytes in", "bytes out", "Kc");
  double share_sum = 0;
  for (const auto& w : p.workers) share_sum += w.share;
  for (const auto& w : p.workers)
    std::printf("%6d %10.4g %7.2f%% %10lld %10lld %-26.26s %10.2f %11lld %11lld %6.2f\n", w.board, w.rating,
                100.0 * w.share / share_sum, (long long)w.flash_bytes, (long long)w.peak_ram_bytes,
                w.peak_layer >= 0 ? q.nodes[size_t(w.peak_layer)].name.c_str() : "-", double(w.macs) / 1e6,
                (long long)w.bytes_in, (long long)w.bytes_out, w.kc);
  std::printf("\n%-28s %-13s %-8s %11s %11s %12s %12s %12s %6s %9s\n", "layer", "op", "split", "bytes in",
              "bytes out", "bytes moved", "max RAM/wkr", "max moved/wkr", "whole", "est ms");
  for (const auto& l : p.layers)
    std::printf("%-28.28s %-13s %-8s %11lld %11lld %12lld %12lld %12lld %6d %9.3f\n", l.name.c_str(),
                core::qop_name(q.nodes[size_t(l.node)].op), p.layer_strategy[size_t(l.node)].c_str(),
                (long long)l.bytes_in, (long long)l.bytes_out, (long long)l.bytes_moved,
                (long long)l.max_worker_ram_bytes, (long long)l.max_worker_bytes_moved, l.full_input_workers,
                1e3 * p.est_layer_s[size_t(l.node)]);
  std::printf("\n(\"whole\": workers receiving a whole input operand; RAM/wkr excludes the %u fixed frame bytes)\n",
              core::kWorkerFixedArena);
  std::printf("total wire bytes per inference (%s): %lld (%.2f MB)\n",
              p.route == plan::Route::Relay ? "every activation via the coordinator" : "board to board",
              (long long)p.total_wire_bytes, double(p.total_wire_bytes) / 1e6);
  if (p.coded_bytes != p.plain_bytes)
    std::printf("coded (--code %s, %d layers mask, %d rice): about %lld bytes (estimated on %s)\n",
                plan::coding_name(c.plan.coding), p.coding.layers(plan::Codec::Mask), p.coding.layers(plan::Codec::Rice),
                (long long)p.coded_bytes, r.code_source.c_str());
  int64_t recomputed = 0;
  for (const auto& l : p.layers) recomputed += l.recomputed;
  if (recomputed > 0)
    std::printf("outputs computed again by the board that reads them instead of sent (fused): %lld\n",
                (long long)recomputed);
  if (c.plan.cost.host)
    std::printf("estimated latency (host cost model, %.3g us per exchange, %d cores): %.4f s\n",
                c.plan.cost.frame_latency_s * 1e6, c.plan.cost.cores, p.est_latency_s);
  else
    std::printf("estimated latency (cost model, %.3g cycles/MAC, %.3g us per message): %.4f s\n", c.cycles_per_mac,
                c.frame_latency_us, p.est_latency_s);
  std::fputs(plan::streams::summary_line(p, c.plan.stream).c_str(), stdout);
  std::fputs(views_line(p).c_str(), stdout);
  std::printf("heaviest layer for one worker: %s, %lld bytes in+out\n", p.layers[heavy].name.c_str(),
              (long long)p.layers[heavy].max_worker_bytes_moved);
  if (!paths.empty()) std::printf("wrote %zu fragments to %s\n", paths.size(), c.out.c_str());
}

}  // namespace ts::cli
