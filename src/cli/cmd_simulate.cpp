// tinysplit simulate: the same plans `tinysplit run` executes, run against a
// timing model instead of boards (src/sim), for 1 to thousands of boards.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/pipeline.h"
#include "sim/host.h"
#include "sim/plot.h"
#include "sim/report.h"
#include "sim/scenario.h"

namespace ts::cli {

struct SimulateOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  int workers = 3;
  std::string sweep, testbed, alloc = "rating", board = "teensy41", ram, plot_dir, figures = "8,9,10,12,20,21,22", prefix;
  std::string strategy = "auto", route = "direct", op_cycles, objective = "latency", host_calibration;
  int images = 10;
  double clock_mhz = 0;
  sim::TimingModel tm;
  double layer_overhead_ms = 0, frame_latency_us = 0, delay_ms = 0, coord_frame_us = 0, overshoot_us = 0, board_frame_us = 0, wake_slot_us = 0;
  bool json = false, per_board = false, png = false;
};

int cmd_simulate(const SimulateOptions& o) {
  sim::TimingModel tm = o.tm;
  tm.layer_overhead_s = o.layer_overhead_ms * 1e-3;
  tm.frame_latency_s = o.frame_latency_us * 1e-6;
  tm.board_op_delay_s = o.delay_ms * 1e-3;
  tm.coord_frame_s = o.coord_frame_us * 1e-6;
  tm.board_frame_s = o.board_frame_us * 1e-6;
  tm.sleep_overshoot_s = o.overshoot_us * 1e-6;
  tm.wake_slot_s = o.wake_slot_us * 1e-6;
  if (!o.host_calibration.empty()) sim::load_host_calibration(o.host_calibration, tm);
  sim::validate(tm);
  if (o.objective != "latency" && o.objective != "throughput")
    throw Error("unknown objective '" + o.objective + "' (expected latency, throughput)");
  if (o.images < 2 || o.images > 1000) throw Error("--images must be between 2 and 1000 (got " + std::to_string(o.images) + ")");
  const plan::Allocation alloc = plan::parse_allocation(o.alloc);
  const std::vector<int> figures = o.plot_dir.empty() ? std::vector<int>{} : sim::parse_figures(o.figures);

  // What to simulate: a testbed file, or N preset boards for each count.
  std::vector<int> counts;
  plan::Testbed file_bed;
  sim::BoardPreset preset;
  std::string board_label;
  if (!o.testbed.empty()) {
    file_bed = plan::load_testbed(o.testbed);
    counts.push_back(int(file_bed.boards.size()));
    board_label = "testbed " + o.testbed;
  } else {
    preset = sim::board_preset(o.board);
    if (o.clock_mhz > 0) preset.clock_mhz = o.clock_mhz;
    if (!o.ram.empty()) preset.ram_bytes = plan::parse_bytes(o.ram);
    counts = o.sweep.empty() ? std::vector<int>{o.workers} : sim::parse_sweep(o.sweep);
    if (counts.front() < 1) throw Error("at least one board is needed (got " + std::to_string(counts.front()) + ")");
    board_label = preset.name;
  }

  const QGraph q = quantized_model(o.model, o.size, QuantizeOptions{});
  const int in_size = q.shape(q.input).h;

  std::vector<std::unique_ptr<sim::RunRecord>> runs;
  const sim::RunRecord* detail = nullptr;
  nlohmann::json jruns = nlohmann::json::array();
  Progress progress("simulate", int(counts.size()));
  for (int n : counts) {
    sim::Scenario sc;
    sc.testbed = o.testbed.empty() ? sim::preset_testbed(preset, n) : file_bed;
    sc.alloc = alloc;
    sc.strategy = o.strategy;
    sc.route = plan::parse_route(o.route);
    sc.op_cycles = o.op_cycles;
    sc.throughput_images =
        o.objective == "throughput" || std::find(figures.begin(), figures.end(), 22) != figures.end() ? o.images : 0;
    sc.timing = tm;
    // Board details: kept for the figure-8 run (the smallest count >= 3,
    // else the smallest) and for JSON per-board output.
    const bool want_json_boards = o.json && (o.per_board || n <= 64);
    const bool fig8_candidate = !detail && (n >= 3 || n == counts.back());
    auto r = std::make_unique<sim::RunRecord>(sim::run_scenario(q, sc, want_json_boards || fig8_candidate || counts.size() == 1));
    if (o.json) jruns.push_back(sim::to_json(*r, want_json_boards));
    if (fig8_candidate) detail = r.get();
    runs.push_back(std::move(r));
    progress.step(std::to_string(n) + " boards");
  }
  if (!detail) detail = runs.front().get();
  // Figures 20-21 draw the paper's mode (neuron, relay) beside these runs.
  std::vector<std::unique_ptr<sim::RunRecord>> paper;
  const bool want_paper = std::any_of(figures.begin(), figures.end(), [](int f) { return f == 20 || f == 21; }) &&
                          !(o.strategy == "neuron" && o.route == "relay");
  if (want_paper)
    for (int n : counts) {
      sim::Scenario sc;
      sc.testbed = o.testbed.empty() ? sim::preset_testbed(preset, n) : file_bed;
      sc.alloc = alloc;
      sc.strategy = "neuron";
      sc.route = plan::Route::Relay;
      sc.timing = tm;
      paper.push_back(std::make_unique<sim::RunRecord>(sim::run_scenario(q, sc, false)));
    }
  std::vector<const sim::RunRecord*> view;
  std::vector<int> nlist;
  std::vector<int64_t> peaks;
  for (const auto& r : runs) {
    view.push_back(r.get());
    nlist.push_back(r->workers);
    peaks.push_back(r->max_peak_ram_bytes);
  }

  std::vector<std::string> files;
  if (!o.plot_dir.empty()) {
    sim::FigureSet fs;
    fs.title = o.model + " " + std::to_string(in_size) + "x" + std::to_string(in_size) + ", " + board_label + ", window " +
                std::to_string(tm.window) + ", " + plan::to_string(alloc);
    fs.runs = view;
    fs.detail = detail;
    for (const auto& r : paper) fs.paper_runs.push_back(r.get());
    fs.run_label = o.strategy + ", " + o.route;
    fs.figures = figures;
    fs.png = o.png;
    fs.prefix = o.prefix;
    files = sim::write_figures(o.plot_dir, fs);
  }

  if (o.json) {
    nlohmann::json j = {{"model", o.model},
                        {"size", in_size},
                        {"board", board_label},
                        {"allocation", plan::to_string(alloc)},
                        {"strategy", o.strategy},
                        {"route", o.route},
                        {"timing", sim::to_json(tm)},
                        {"runs", jruns}};
    if (runs.size() > 1) j["ram_flattens_at"] = sim::flattening_point(nlist, peaks);
    if (!files.empty()) j["figures"] = files;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("tinysplit simulate: %s at %dx%d, %s, %s allocation, strategy %s, route %s, window %d, %.3g cycles/MAC%s\n",
              o.model.c_str(), in_size, in_size, board_label.c_str(), plan::to_string(alloc), o.strategy.c_str(),
              o.route.c_str(), tm.window, tm.cycles_per_mac,
              tm.board_op_delay_s > 0 ? ", injected board delays" : "");
  sim::print_summary(stdout, view);
  for (const auto& r : runs) {
    if (!r->fits) std::printf("  %d boards do not fit: %s\n", r->workers, r->budget_error.c_str());
    if (!r->throughput_mode.empty())
      std::printf("  %d boards, objective throughput: %s, %d group%s of %d board%s%s: %.1f images/s (planner's estimate %.1f)\n",
                  r->workers, r->throughput_mode.c_str(), r->groups, r->groups == 1 ? "" : "s", r->group_boards,
                  r->group_boards == 1 ? "" : "s",
                  r->idle_boards ? (", " + std::to_string(r->idle_boards) + " idle").c_str() : "", r->images_per_s,
                  r->est_images_per_s);
    if (!r->throughput_error.empty())
      std::printf("  %d boards, objective throughput: %s\n", r->workers, r->throughput_error.c_str());
  }
  if (runs.size() == 1) sim::print_details(stdout, *runs.front());
  else std::printf("peak RAM per board stops falling (within 5%% of its floor) at %d boards\n",
                   sim::flattening_point(nlist, peaks));
  for (const auto& f : files) std::printf("wrote %s\n", f.c_str());
  return 0;
}

void register_simulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App& sub = add_command(app, "simulate", "Simulate distributed inference on 1..thousands of boards (timing model, no hardware)",
                              [o] { return cmd_simulate(*o); });
  o->tm.window = 32;
  o->tm.cycles_per_mac = 2.0;
  add_model_options(sub, o->model, o->size, true);
  auto* wopt = sub.add_option("--workers,-n", o->workers, "number of identical boards (default 3)");
  auto* sopt = sub.add_option("--sweep", o->sweep, "board counts: A..B, A..B:STEP, N, comma-separated (e.g. 1..120:5,500,1000)")
                   ->excludes(wopt);
  auto* topt = sub.add_option("--testbed,-t", o->testbed, "testbed JSON: boards with their clock, RAM, link")
                   ->excludes(wopt)->excludes(sopt);
  sub.add_option("--allocation,-a", o->alloc, "even | frequency | rating")->capture_default_str();
  sub.add_option("--strategy", o->strategy, "split strategy: auto (by the cost model) | neuron (the paper) | spatial | channel | reduce | reduce-all")
      ->capture_default_str();
  sub.add_option("--route", o->route, "direct (boards send to boards) | relay (every activation via the coordinator, the paper)")
      ->capture_default_str();
  sub.add_option("--objective", o->objective,
                 "latency (one inference) | throughput (also --images images back to back: images_per_s)")
      ->capture_default_str();
  sub.add_option("--images", o->images, "images back to back for --objective throughput")->capture_default_str();
  sub.add_option("--op-cycles", o->op_cycles, "per-op cycles per MAC for auto's cost model, e.g. Conv=1.5,depthwise=3");
  sub.add_option("--board", o->board, "board type for --workers/--sweep (teensy41)")->capture_default_str()
      ->excludes(topt);
  sub.add_option("--clock-mhz", o->clock_mhz, "override the board type's clock (MHz)")->check(CLI::PositiveNumber)
      ->excludes(topt);
  sub.add_option("--ram", o->ram, "override the board type's RAM budget (e.g. 512K)")->excludes(topt);
  sub.add_option("--window,-w", o->tm.window, "frames in flight per link (1 = the paper's stop-and-wait)")
      ->capture_default_str();
  sub.add_option("--cycles-per-mac", o->tm.cycles_per_mac, "board cycles per MAC of its kernels")
      ->capture_default_str();
  sub.add_option("--layer-overhead-ms", o->layer_overhead_ms, "fixed compute cost per board per layer, ms")
      ->capture_default_str();
  sub.add_option("--frame-latency-us", o->frame_latency_us, "one-way latency of every frame (wire, switch, stacks), us")
      ->capture_default_str();
  sub.add_option("--coord-bandwidth-kbps", o->tm.coord_bandwidth_kbps,
                 "coordinator link, KB/s, shared by all boards (0 = unlimited)")->capture_default_str();
  sub.add_option("--bandwidth-kbps", o->tm.board_bandwidth_kbps, "every board's link, KB/s (default: testbed/board type)");
  sub.add_option("--delay-s-per-kb", o->tm.board_delay_s_per_kb, "every board's link delay d, s per KB (default: testbed)");
  sub.add_option("--delay-ms", o->delay_ms, "board software delay before each send and each receive, ms (as run --delay-ms)")
      ->capture_default_str();
  sub.add_option("--coord-frame-us", o->coord_frame_us, "coordinator CPU time per frame, us (one CPU for all boards)")
      ->capture_default_str();
  sub.add_option("--board-frame-us", o->board_frame_us,
                 "direct route: board CPU per data frame sent or received, us (host boards: syscalls, CRC)")
      ->capture_default_str();
  sub.add_option("--sleep-overshoot-us", o->overshoot_us,
                 "emulation only: extra time each emulated sleep takes on the host, us")->capture_default_str();
  sub.add_option("--host-calibration", o->host_calibration,
                 "host boards: calibration JSON from scripts/calibrate_host.sh (host time per MAC, wake-up delays, "
                 "cores shared by the boards = its nproc unless --host-cores)");
  sub.add_option("--host-cores", o->tm.host_cores,
                 "host boards: cores the boards share (0 = one CPU per board, or the testbed's host_cores)")
      ->capture_default_str();
  sub.add_option("--wake-slot-us", o->wake_slot_us,
                 "host boards: wake-ups within the same slot of this length share one delay (0 = independent)")
      ->capture_default_str();
  add_json_flag(sub, o->json);
  sub.add_flag("--per-board", o->per_board, "per-board details in --json for every count (default: up to 64 boards)");
  sub.add_option("--plot", o->plot_dir, "write figures (SVG, gnuplot) into this folder");
  sub.add_option("--figures", o->figures, "which figures --plot draws: 8,9,10,12 (the paper's), 20 latency, 21 wire bytes (paper mode against "
                 "these runs) and 22 throughput vs boards")->capture_default_str();
  sub.add_flag("--png", o->png, "with --plot, also write PNG files");
  sub.add_option("--plot-prefix", o->prefix, "with --plot, prepend this to every figure's file name");
}

}  // namespace ts::cli
