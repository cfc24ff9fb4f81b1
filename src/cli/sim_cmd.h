// `tinysplit simulate` as configuration: the options as given
// (SimulateOptions), one checked SimConfig built from them, the simulated
// runs (run_simulations) and the reports (cli/sim_report.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "model/qgraph.h"
#include "sim/scenario.h"

namespace ts::cli {

// The options as given.
struct SimulateOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  int workers = 3;
  std::string sweep, testbed, alloc = "rating", board = "teensy41", ram, plot_dir, figures = "8,9,10,12,20,21,22", prefix;
  std::string strategy = "auto", route = "direct", op_cycles, objective = "latency", host_calibration, code = "auto", stream = "auto";
  std::string protocol_cpu = "on";
  int images = 10;
  double clock_mhz = 0;
  sim::TimingModel tm;
  double layer_overhead_ms = 0, frame_latency_us = 0, delay_ms = 0, coord_frame_us = 0, overshoot_us = 0, board_frame_us = 0, wake_slot_us = 0;
  bool json = false, per_board = false, png = false;
  const CLI::App* cli = nullptr;  // which options were given (cli::given)
};

// What to simulate, checked.
struct SimConfig {
  std::string model;
  int size = 0;
  sim::TimingModel tm;
  plan::Allocation alloc = plan::Allocation::Rating;
  std::string strategy, route_text;  // as given (the reports name them so)
  plan::Route route = plan::Route::Direct;
  bool route_fallback = false;  // --route not given (sim::Scenario::route_fallback)
  plan::Coding coding = plan::Coding::Auto;
  plan::Streaming stream = plan::Streaming::Auto;
  std::string op_cycles;
  bool protocol_cpu = true;  // --protocol-cpu (sim::Scenario::protocol_cpu)
  int throughput_images = 0;         // images back to back per run (0: latency only)
  // Which boards: a testbed file, or N preset boards for each count.
  std::vector<int> counts;
  bool from_file = false;
  plan::Testbed file_bed;
  sim::BoardPreset preset;
  std::string board_label;
  // Output.
  bool json = false, per_board = false;
  std::string plot_dir, prefix;
  std::vector<int> figures;          // with --plot
  bool png = false;
  // The testbed of n boards.
  plan::Testbed testbed(int n) const { return from_file ? file_bed : sim::preset_testbed(preset, n); }
  // Whether runs of n boards keep per-board details in --json.
  bool json_boards(int n) const { return json && (per_board || n <= 64); }
};
SimConfig make_sim_config(const SimulateOptions& o);

// The simulated runs, one per board count, the paper's mode beside them
// (figures 20-21) and the figures written.
struct SimResult {
  QGraph q;
  std::vector<std::unique_ptr<sim::RunRecord>> runs, paper;
  const sim::RunRecord* detail = nullptr;  // the figure-8 run
  std::vector<std::string> files;
};
SimResult run_simulations(const SimConfig& c);

void print_sim_json(const SimConfig& c, const SimResult& r);
void print_sim_text(const SimConfig& c, const SimResult& r);

}  // namespace ts::cli
