// tinysplit plan: split a quantised model over a testbed, report per worker
// and per layer, and optionally write one fragment per worker.
#include "cli/plan_cmd.h"

#include "model/pipeline.h"
#include "plan/fragment_writer.h"
#include "plan/names.h"

namespace ts::cli {

PlanConfig make_plan_config(const PlanCmdOptions& o) {
  if (o.workers == 0 && o.testbed.empty()) throw Error("plan: give --workers N or --testbed FILE");
  check_choice("--cost-model", plan::kCostModels, o.cost_model);
  const bool host = o.cost_model == "host";
  const char* why_host = "the host model has its own measured prices";
  refuse_idle(o.cli, "plan", "--cycles-per-mac", host, "with --cost-model host", why_host);
  refuse_idle(o.cli, "plan", "--frame-latency-us", host, "with --cost-model host", why_host);
  refuse_idle(o.cli, "plan", "--op-cycles", host, "with --cost-model host", why_host);
  refuse_idle(o.cli, "plan", "--host-costs", !host, "without --cost-model host", "it is the host model's price file");
  refuse_idle(o.cli, "plan", "--cores", !host, "without --cost-model host", "it is the host model's core count");
  PlanConfig c;
  if (!o.testbed.empty()) {
    c.testbed = plan::load_testbed(o.testbed);
    for (auto& b : c.testbed.boards) {
      if (given(o.cli, "--ram")) b.ram_bytes = plan::parse_bytes(o.ram);
      if (given(o.cli, "--flash")) b.flash_bytes = plan::parse_bytes(o.flash);
    }
  } else {
    c.testbed = plan::default_testbed(o.workers, "local", plan::parse_bytes(o.ram), plan::parse_bytes(o.flash));
  }
  plan::PlanOptions& po = c.plan;
  po.alloc = plan::parse_allocation(o.alloc);
  refuse_idle(o.cli, "plan", "--k1", po.alloc != plan::Allocation::Rating, "without --allocation rating",
              "K1 is a term of the rating, eq. 5");
  po.k1 = o.k1;
  po.strategy = o.strategy;
  po.route = plan::parse_route(o.route);
  po.route_fallback = !given(o.cli, "--route");  // a named route is kept (plan::PlanOptions::route_fallback)
  po.coding = plan::parse_coding(o.code);
  po.stream = plan::streams::parse(o.stream);
  po.routing = false;  // the report needs the traffic totals only
  po.cost.default_cycles_per_mac = o.cycles_per_mac;
  po.cost.frame_latency_s = o.frame_latency_us * 1e-6;
  if (!o.op_cycles.empty()) plan::parse_op_cycles(o.op_cycles, &po.cost);
  check_choice("--protocol-cpu", plan::kProtocolCpu, o.protocol_cpu);
  po.cost.protocol_cpu = o.protocol_cpu == "on";
  if (host) {
    po.cost = plan::host_cost_model(plan::load_host_costs(o.host_costs.empty() ? plan::host_costs_path() : o.host_costs));
    if (o.cores > 0) po.cost.cores = o.cores;
  }
  plan::check_strategy_name(o.strategy);
  c.model = o.model;
  c.size = o.size;
  c.cost_model = o.cost_model;
  c.out = o.out;
  c.cycles_per_mac = o.cycles_per_mac;
  c.frame_latency_us = o.frame_latency_us;
  c.json = o.json;
  return c;
}

PlanResult run_plan(const PlanConfig& c) {
  PlanResult r;
  r.q = quantized_model(c.model, c.size, QuantizeOptions{});
  plan::PlanOptions po = c.plan;
  plan::estimate_code_ratios(r.q, &po);
  r.code_source = po.code.source;
  r.plan = plan::make_plan_or_count(r.q, c.testbed, po);
  if (!c.out.empty()) r.paths = plan::write_fragments(r.q, r.plan, c.out);
  return r;
}

namespace {

int cmd_plan(const PlanConfig& c) {
  const PlanResult r = run_plan(c);
  if (c.json) print_plan_json(c, r);
  else print_plan_text(c, r);
  return 0;
}

}  // namespace

void register_plan(CLI::App& app) {
  auto o = std::make_shared<PlanCmdOptions>();
  CLI::App* sub = &add_command(app, "plan", "Split a model over boards: shares, RAM, flash, traffic; write fragments",
                               [o] { return cmd_plan(make_plan_config(*o)); });
  o->cli = sub;
  add_model_options(*sub, o->model, o->size, true);
  auto* w_opt = sub->add_option("--workers,-n", o->workers, "number of identical boards")->check(CLI::Range(1, plan::kMaxBoards));
  auto* t_opt = sub->add_option("--testbed,-t", o->testbed, "testbed JSON file (boards, clocks, links, budgets)");
  w_opt->excludes(t_opt);
  t_opt->excludes(w_opt);
  sub->add_option("--allocation,-a", o->alloc, "even, frequency or rating")->capture_default_str();
  sub->add_option("--ram", o->ram, "RAM budget per board (e.g. 512K); overrides a testbed's")->capture_default_str();
  sub->add_option("--flash", o->flash, "flash budget per board (e.g. 8M); overrides a testbed's")->capture_default_str();
  sub->add_option("--k1", o->k1, "K1 of eq. 5, KB of output per Mcycle")->capture_default_str();
  add_strategy_option(*sub, o->strategy);
  sub->add_option("--cycles-per-mac", o->cycles_per_mac, "cost model: board cycles per MAC (default for every op)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--op-cycles", o->op_cycles,
                  "cost model: per-op cycles per MAC, e.g. Conv=1.5,depthwise=3,Gemm=2 (others: --cycles-per-mac)");
  sub->add_option("--protocol-cpu", o->protocol_cpu,
                  "cost model: on prices each board's CPU outside its kernels (its type's measured prices per layer, "
                  "piece and byte, data/costs/), off prices none")
      ->capture_default_str();
  sub->add_option("--frame-latency-us", o->frame_latency_us, "cost model: one-way latency per message, us")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  sub->add_option("--cost-model", o->cost_model, "the planner's prices: " + plan::names_help(plan::kCostModels))
      ->capture_default_str();
  sub->add_option("--host-costs", o->host_costs, "host cost file for --cost-model host (default data/costs/host.json)");
  sub->add_option("--cores", o->cores, "host cost model: boards computing at once (default: this machine's cores)")
      ->check(CLI::Range(1, 4096));
  add_route_option(*sub, o->route, "is made on the relay route");
  add_code_option(*sub, o->code);
  add_stream_option(*sub, o->stream);
  sub->add_option("--out,-o", o->out, "write DIR/worker-<id>.tsfg fragments");
  add_json_flag(*sub, o->json);
}

}  // namespace ts::cli
