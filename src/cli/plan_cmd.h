// `tinysplit plan` as configuration: the options as given (PlanCmdOptions),
// one checked PlanConfig built from them (make_plan_config), the plan made
// from it (run_plan) and the reports (cli/plan_report.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli/cli.h"
#include "model/qgraph.h"
#include "plan/plan.h"

namespace ts::cli {

// The options as given.
struct PlanCmdOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  int workers = 0;  // 0: not given
  std::string testbed, alloc = "even", ram = "512K", flash = "8M";  // --ram, --flash override a testbed's budgets
  double k1 = plan::kDefaultK1;
  std::string strategy = "auto", route = "direct", out, op_cycles, code = "auto", stream = "auto";  // defaults of run (issue 10)
  double cycles_per_mac = 2.0, frame_latency_us = plan::kTeensyFrameLatencyS * 1e6;  // as plan/cost.h CostModel
  std::string protocol_cpu = "on";
  // teensy: the figures above (Teensy 4.1 boards); host: the measured model
  // of boards run as processes on this machine (plan/cost.h), as `run` uses.
  std::string cost_model = "teensy", host_costs;
  int cores = 0;  // host model: boards computing at once (0: this machine's cores)
  bool json = false;
  const CLI::App* cli = nullptr;  // which options were given (cli::given)
};

// What to plan, checked.
struct PlanConfig {
  plan::Testbed testbed;
  plan::PlanOptions plan;  // prices included
  std::string model, cost_model, out;
  int size = 0;
  double cycles_per_mac = 0, frame_latency_us = 0;  // as given, for the report
  bool json = false;
};
PlanConfig make_plan_config(const PlanCmdOptions& o);

// The plan and the fragments written (--out).
struct PlanResult {
  QGraph q;
  plan::Plan plan;
  std::vector<std::string> paths;
  std::string code_source;  // the input the coded sizes were estimated on (plan/coding.h)
};
PlanResult run_plan(const PlanConfig& c);

void print_plan_json(const PlanConfig& c, const PlanResult& r);
void print_plan_text(const PlanConfig& c, const PlanResult& r);

}  // namespace ts::cli
