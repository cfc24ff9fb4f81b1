// tinysplit plan: split a quantised model over a testbed, report per worker
// and per layer, and optionally write one fragment per worker.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/pipeline.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"

namespace ts::cli {

struct PlanCmdOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  int workers = 0;  // 0: not given
  std::string testbed, alloc = "even", ram = "512K", flash = "8M";
  bool ram_given = false, flash_given = false;  // override a testbed's budgets
  double k1 = plan::kDefaultK1;
  std::string strategy = "auto", route = "direct", out, op_cycles;  // defaults of run (issue 10)
  bool route_named = false;  // --route given: no fallback to relay (plan::PlanOptions::route_fallback)
  double cycles_per_mac = 2.0, frame_latency_us = 30.0;
  // teensy: the figures above (Teensy 4.1 boards); host: the measured model
  // of boards run as processes on this machine (plan/cost.h), as `run` uses.
  std::string cost_model = "teensy", host_costs;
  int cores = 0;  // host model: boards computing at once (0: this machine's cores)
  bool json = false;
};

int cmd_plan(const PlanCmdOptions& o) {
  if (o.workers == 0 && o.testbed.empty()) throw Error("plan: give --workers N or --testbed FILE");
  plan::Testbed tb;
  if (!o.testbed.empty()) {
    tb = plan::load_testbed(o.testbed);
    for (auto& b : tb.boards) {
      if (o.ram_given) b.ram_bytes = plan::parse_bytes(o.ram);
      if (o.flash_given) b.flash_bytes = plan::parse_bytes(o.flash);
    }
  } else {
    tb = plan::default_testbed(o.workers, "local", plan::parse_bytes(o.ram), plan::parse_bytes(o.flash));
  }
  plan::PlanOptions po;
  po.alloc = plan::parse_allocation(o.alloc);
  po.k1 = o.k1;
  po.strategy = o.strategy;
  po.route = plan::parse_route(o.route);
  po.route_fallback = !o.route_named;
  po.routing = false;  // the report needs the traffic totals only
  po.cost.default_cycles_per_mac = o.cycles_per_mac;
  po.cost.frame_latency_s = o.frame_latency_us * 1e-6;
  if (!o.op_cycles.empty()) plan::parse_op_cycles(o.op_cycles, &po.cost);
  if (o.cost_model == "host") {
    po.cost = plan::host_cost_model(plan::load_host_costs(o.host_costs.empty() ? plan::host_costs_path() : o.host_costs));
    if (o.cores > 0) po.cost.cores = o.cores;
  } else if (o.cost_model != "teensy") {
    throw Error("--cost-model: expected teensy or host, got '" + o.cost_model + "'");
  }
  const QGraph q = quantized_model(o.model, o.size, QuantizeOptions{});
  const plan::Plan p = plan::make_plan(q, tb, po);
  std::vector<std::string> paths;
  if (!o.out.empty()) paths = plan::write_fragments(q, p, o.out);

  // Heaviest layer for a single worker (bytes in + out).
  size_t heavy = 0;
  for (size_t n = 0; n < p.layers.size(); ++n)
    if (p.layers[n].max_worker_bytes_moved > p.layers[heavy].max_worker_bytes_moved) heavy = n;
  const int in_size = q.shape(q.input).h;

  if (o.json) {
    const plan::EstimateParts parts = plan::estimate_parts(q, p, tb, po.cost);
    double share_sum = 0;
    for (const auto& w : p.workers) share_sum += w.share;
    nlohmann::json jw = nlohmann::json::array();
    for (const auto& w : p.workers)
      jw.push_back({{"id", w.board}, {"rating", w.rating}, {"share", w.share / share_sum},
                    {"flash_bytes", w.flash_bytes},
                    {"data_bytes", w.data_bytes}, {"peak_ram_bytes", w.peak_ram_bytes},
                    {"peak_layer", w.peak_layer >= 0 ? q.nodes[size_t(w.peak_layer)].name : ""},
                    {"macs", w.macs}, {"bytes_in", w.bytes_in}, {"bytes_out", w.bytes_out}, {"kc", w.kc}});
    nlohmann::json jl = nlohmann::json::array();
    for (const auto& l : p.layers)
      jl.push_back({{"name", l.name}, {"op", core::qop_name(q.nodes[size_t(l.node)].op)},
                    {"bytes_in", l.bytes_in}, {"bytes_out", l.bytes_out}, {"bytes_moved", l.bytes_moved},
                    {"strategy", p.layer_strategy[size_t(l.node)]},
                    {"est_latency_s", p.est_layer_s[size_t(l.node)]},
                    {"unique_in", l.unique_in}, {"max_worker_ram_bytes", l.max_worker_ram_bytes},
                    {"max_worker_bytes_moved", l.max_worker_bytes_moved},
                    {"workers_active", l.workers_active}, {"full_input_workers", l.full_input_workers},
                    {"max_fanout", l.max_fanout}});
    nlohmann::json j = {{"model", o.model},
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
                        {"est_latency_s", p.est_latency_s},
                        {"cost_model", o.cost_model},
                        {"est_parts", {{"compute_s", parts.compute_s}, {"steps", parts.steps},
                                       {"bytes", parts.bytes}, {"byte_s", parts.byte_s}}},
                        {"heaviest_layer", p.layers[heavy].name},
                        {"heaviest_layer_max_worker_bytes", p.layers[heavy].max_worker_bytes_moved},
                        {"per_layer", jl},
                        {"fragments", paths}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  std::printf("plan %08x: %s at %d, %d workers, allocation %s, strategy %s, route %s, model data %lld bytes\n",
              p.plan_id, o.model.c_str(), in_size, p.n_workers(), plan::to_string(p.alloc),
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
  if (po.cost.host)
    std::printf("estimated latency (host cost model, %.3g us per exchange, %d cores): %.4f s\n",
                po.cost.frame_latency_s * 1e6, po.cost.cores, p.est_latency_s);
  else
    std::printf("estimated latency (cost model, %.3g cycles/MAC, %.3g us per message): %.4f s\n", o.cycles_per_mac,
                o.frame_latency_us, p.est_latency_s);
  std::printf("heaviest layer for one worker: %s, %lld bytes in+out\n", p.layers[heavy].name.c_str(),
              (long long)p.layers[heavy].max_worker_bytes_moved);
  if (!paths.empty()) std::printf("wrote %zu fragments to %s\n", paths.size(), o.out.c_str());
  return 0;
}

void register_plan(CLI::App& app) {
  auto o = std::make_shared<PlanCmdOptions>();
  CLI::App* sub = &add_command(app, "plan", "Split a model over boards: shares, RAM, flash, traffic; write fragments",
                               [o] { return cmd_plan(*o); });
  add_model_options(*sub, o->model, o->size, true);
  auto* w_opt = sub->add_option("--workers,-n", o->workers, "number of identical boards")->check(CLI::Range(1, 65535));
  auto* t_opt = sub->add_option("--testbed,-t", o->testbed, "testbed JSON file (boards, clocks, links, budgets)");
  w_opt->excludes(t_opt);
  t_opt->excludes(w_opt);
  sub->add_option("--allocation,-a", o->alloc, "even, frequency or rating")->capture_default_str();
  sub->add_option("--ram", o->ram, "RAM budget per board (e.g. 512K); overrides a testbed's")->capture_default_str()
      ->each([o](const std::string&) { o->ram_given = true; });
  sub->add_option("--flash", o->flash, "flash budget per board (e.g. 8M); overrides a testbed's")->capture_default_str()
      ->each([o](const std::string&) { o->flash_given = true; });
  sub->add_option("--k1", o->k1, "K1 of eq. 5, KB of output per Mcycle")->capture_default_str();
  sub->add_option("--strategy", o->strategy,
                  "split strategy: neuron (the paper) | spatial (bands of rows) | channel (blocks of channels) | "
                  "whole (one board) | auto (per block, by the cost model) | "
                  "reduce (channel, with input channels and int32 partial sums summed on the output's board where the sums are smaller than the input; --route direct) | reduce-all (every Conv 1x1 and Gemm that way; tests)")
      ->capture_default_str();
  sub->add_option("--cycles-per-mac", o->cycles_per_mac, "cost model: board cycles per MAC (default for every op)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--op-cycles", o->op_cycles,
                  "cost model: per-op cycles per MAC, e.g. Conv=1.5,depthwise=3,Gemm=2 (others: --cycles-per-mac)");
  sub->add_option("--frame-latency-us", o->frame_latency_us, "cost model: one-way latency per message, us")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--cost-model", o->cost_model,
                  "teensy (Teensy 4.1 figures above) | host (boards as processes on this machine, "
                  "data/costs/host.json, as `run` prices local boards)")
      ->capture_default_str();
  sub->add_option("--host-costs", o->host_costs, "host cost file for --cost-model host (default data/costs/host.json)");
  sub->add_option("--cores", o->cores, "host cost model: boards computing at once (default: this machine's cores)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--route", o->route,
                  "relay (every activation through the coordinator, the paper) | direct (boards send to boards); "
                  "when not given, a direct plan that needs more links on a board than it holds is made on the "
                  "relay route, with a note")
      ->capture_default_str()
      ->each([o](const std::string&) { o->route_named = true; });
  sub->add_option("--out,-o", o->out, "write DIR/worker-<id>.tsfg fragments");
  add_json_flag(*sub, o->json);
}

}  // namespace ts::cli
