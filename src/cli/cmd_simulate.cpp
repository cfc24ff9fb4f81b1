// tinysplit simulate: the same plans `tinysplit run` executes, run against a
// timing model instead of boards (src/sim), for 1 to thousands of boards.
#include <algorithm>
#include <mutex>

#include "cli/sim_cmd.h"
#include "model/pipeline.h"
#include "plan/replicate.h"
#include "sim/host.h"
#include "sim/plot.h"
#include "sim/report.h"
#include "util/parallel.h"

namespace ts::cli {

namespace {

sim::TimingModel timing_model(const SimulateOptions& o) {
  sim::TimingModel tm = o.tm;
  tm.layer_overhead_s = o.layer_overhead_ms * 1e-3;
  tm.frame_latency_s = o.frame_latency_us * 1e-6;
  tm.board_op_delay_s = o.delay_ms * 1e-3;
  tm.coord_frame_s = o.coord_frame_us * 1e-6;
  tm.board_frame_s = o.board_frame_us * 1e-6;
  tm.sleep_overshoot_s = o.overshoot_us * 1e-6;
  tm.wake_slot_s = o.wake_slot_us * 1e-6;
  // The type's CPU outside the kernels (its measured prices), or none.
  check_choice("--protocol-cpu", plan::kProtocolCpu, o.protocol_cpu);
  if (o.protocol_cpu == "off") tm.protocol = core::ProtocolCost();
  // A flat --cycles-per-mac prices every layer alike (the type's per-op
  // figures are for its default).
  if (given(o.cli, "--cycles-per-mac")) tm.costs.clear();
  if (!o.host_calibration.empty()) sim::load_host_calibration(o.host_calibration, tm);
  sim::validate(tm);
  return tm;
}

// Output options that would do nothing: one line naming both.
void refuse_idle_outputs(const SimulateOptions& o, bool throughput, const std::vector<int>& figures) {
  const bool fig22 = std::find(figures.begin(), figures.end(), 22) != figures.end();
  refuse_idle(o.cli, "simulate", "--images", !throughput && !fig22, "without --objective throughput",
              "it sets the images back to back of a throughput run or of --plot's figure 22");
  refuse_idle(o.cli, "simulate", "--per-board", !o.json, "without --json", "per-board details are part of --json");
  const char* why_plot = "it chooses what --plot draws";
  refuse_idle(o.cli, "simulate", "--figures", o.plot_dir.empty(), "without --plot", why_plot);
  refuse_idle(o.cli, "simulate", "--png", o.plot_dir.empty(), "without --plot", why_plot);
  refuse_idle(o.cli, "simulate", "--plot-prefix", o.plot_dir.empty(), "without --plot", why_plot);
}

}  // namespace

SimConfig make_sim_config(const SimulateOptions& o) {
  SimConfig c;
  c.tm = timing_model(o);
  const bool throughput = plan::parse_objective(o.objective) == plan::Objective::Throughput;
  if (o.images < 2 || o.images > 1000) throw Error("--images must be between 2 and 1000 (got " + std::to_string(o.images) + ")");
  c.alloc = plan::parse_allocation(o.alloc);
  c.figures = o.plot_dir.empty() ? std::vector<int>{} : sim::parse_figures(o.figures);
  refuse_idle_outputs(o, throughput, c.figures);
  c.route = plan::parse_route(o.route);
  c.route_fallback = !given(o.cli, "--route");  // as `plan` and `run`: a named route is kept
  c.coding = plan::parse_coding(o.code);
  c.stream = plan::streams::parse(o.stream);
  plan::check_strategy_name(o.strategy);
  c.strategy = o.strategy;
  c.route_text = o.route;
  c.op_cycles = o.op_cycles;
  c.protocol_cpu = o.protocol_cpu == "on";
  c.throughput_images =
      throughput || std::find(c.figures.begin(), c.figures.end(), 22) != c.figures.end() ? o.images : 0;
  // What to simulate: a testbed file, or N preset boards for each count.
  if (!o.testbed.empty()) {
    c.from_file = true;
    c.file_bed = plan::load_testbed(o.testbed);
    c.counts.push_back(int(c.file_bed.boards.size()));
    c.board_label = "testbed " + o.testbed;
  } else {
    c.preset = sim::board_preset(o.board);
    if (o.clock_mhz > 0) c.preset.clock_mhz = o.clock_mhz;
    if (!o.ram.empty()) c.preset.ram_bytes = plan::parse_bytes(o.ram);
    c.counts = o.sweep.empty() ? std::vector<int>{o.workers} : sim::parse_sweep(o.sweep);
    if (c.counts.front() < 1) throw Error("at least one board is needed (got " + std::to_string(c.counts.front()) + ")");
    if (c.counts.back() > plan::kMaxBoards)
      throw Error("--workers: " + std::to_string(c.counts.back()) + " boards; at most " +
                  std::to_string(plan::kMaxBoards) + " are simulated");
    c.board_label = c.preset.name;
  }
  c.model = o.model;
  c.size = o.size;
  c.json = o.json;
  c.per_board = o.per_board;
  c.plot_dir = o.plot_dir;
  c.prefix = o.prefix;
  c.png = o.png;
  return c;
}

namespace {

// Each scenario planned and simulated on its own (they share only the
// model), on as many threads as the machine has cores; the records come
// back in the scenarios' order, and the first failure in that order is the
// one thrown.
std::vector<std::unique_ptr<sim::RunRecord>> run_scenarios_on_every_core(const QGraph& q,
                                                                         const std::vector<sim::Scenario>& scenarios,
                                                                         const std::vector<bool>& details) {
  std::vector<std::unique_ptr<sim::RunRecord>> out(scenarios.size());
  Progress progress("simulate", int(scenarios.size()));
  std::mutex mu;
  for_each_on_every_core(scenarios.size(), [&](size_t i) {
    out[i] = std::make_unique<sim::RunRecord>(sim::run_scenario(q, scenarios[i], details[i]));
    std::lock_guard<std::mutex> lock(mu);
    progress.step(std::to_string(scenarios[i].testbed.boards.size()) + " boards");
  });
  return out;
}

}  // namespace

SimResult run_simulations(const SimConfig& c) {
  SimResult res;
  res.q = quantized_model(c.model, c.size, QuantizeOptions{});
  const QGraph& q = res.q;
  // Board details: kept for the figure-8 run (the smallest count >= 3,
  // else the last) and for JSON per-board output.
  size_t fig8 = c.counts.size() - 1;
  for (size_t i = 0; i < c.counts.size(); ++i)
    if (c.counts[i] >= 3) {
      fig8 = i;
      break;
    }
  plan::PlanOptions coding;  // the coded sizes, estimated once for every count
  coding.coding = c.coding;
  plan::estimate_code_ratios(q, &coding);
  const auto first_boards = std::make_shared<plan::FirstBoardsMemo>();
  std::vector<sim::Scenario> scenarios(c.counts.size());
  std::vector<bool> details(c.counts.size());
  for (size_t i = 0; i < c.counts.size(); ++i) {
    details[i] = c.json_boards(c.counts[i]) || i == fig8 || c.counts.size() == 1;
    sim::Scenario& sc = scenarios[i];
    sc.testbed = c.testbed(c.counts[i]);
    sc.alloc = c.alloc;
    sc.strategy = c.strategy;
    sc.route = c.route;
    sc.route_fallback = c.route_fallback;
    sc.coding = c.coding;
    sc.stream = c.stream;
    sc.code = coding.code;
    sc.op_cycles = c.op_cycles;
    sc.protocol_cpu = c.protocol_cpu;
    sc.throughput_images = c.throughput_images;
    sc.timing = c.tm;
    sc.first_boards = first_boards;
  }
  res.runs = run_scenarios_on_every_core(q, scenarios, details);
  res.detail = res.runs[fig8].get();
  // Figures 20-21 draw the paper's mode (neuron, relay) beside these runs.
  const bool want_paper = std::any_of(c.figures.begin(), c.figures.end(), [](int f) { return f == 20 || f == 21; }) &&
                          !(c.strategy == "neuron" && c.route == plan::Route::Relay);
  if (want_paper)
    for (int n : c.counts) {
      sim::Scenario sc;
      sc.testbed = c.testbed(n);
      sc.alloc = c.alloc;
      sc.strategy = "neuron";
      sc.route = plan::Route::Relay;
      sc.timing = c.tm;
      res.paper.push_back(std::make_unique<sim::RunRecord>(sim::run_scenario(q, sc, false)));
    }
  if (!c.plot_dir.empty()) {
    const int in_size = q.shape(q.input).h;
    sim::FigureSet fs;
    fs.title = c.model + " " + std::to_string(in_size) + "x" + std::to_string(in_size) + ", " + c.board_label +
               ", window " + std::to_string(c.tm.window) + ", " + plan::to_string(c.alloc);
    for (const auto& r : res.runs) fs.runs.push_back(r.get());
    fs.detail = res.detail;
    for (const auto& r : res.paper) fs.paper_runs.push_back(r.get());
    fs.run_label = c.strategy + ", " + c.route_text;
    fs.figures = c.figures;
    fs.png = c.png;
    fs.prefix = c.prefix;
    res.files = sim::write_figures(c.plot_dir, fs);
  }
  return res;
}

namespace {

int cmd_simulate(const SimConfig& c) {
  const SimResult r = run_simulations(c);
  if (c.json) print_sim_json(c, r);
  else print_sim_text(c, r);
  return 0;
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App& sub = add_command(app, "simulate", "Simulate distributed inference on 1..thousands of boards (timing model, no hardware)",
                              [o] { return cmd_simulate(make_sim_config(*o)); });
  o->cli = &sub;
  o->tm = sim::board_preset(o->board).timing;  // --board's figures below replace the default type's
  o->frame_latency_us = o->tm.frame_latency_s * 1e6;
  add_model_options(sub, o->model, o->size, true);
  auto* wopt = sub.add_option("--workers,-n", o->workers, "number of identical boards (default 3)");
  auto* sopt = sub.add_option("--sweep", o->sweep, "board counts: A..B, A..B:STEP, N, comma-separated (e.g. 1..120:5,500,1000)")
                   ->excludes(wopt);
  auto* topt = sub.add_option("--testbed,-t", o->testbed, "testbed JSON: boards with their clock, RAM, link")
                   ->excludes(wopt)->excludes(sopt);
  sub.add_option("--allocation,-a", o->alloc, "even | frequency | rating")->capture_default_str();
  add_strategy_option(sub, o->strategy);
  add_route_option(sub, o->route, "");
  add_code_option(sub, o->code);
  add_stream_option(sub, o->stream);
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
  sub.add_option("--cycles-per-mac", o->tm.cycles_per_mac,
                 "board cycles per MAC of every layer (default: the board type's measured per-op figures, "
                 "data/costs/, this for ops without one)")
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
  sub.add_option("--protocol-cpu", o->protocol_cpu,
                 "on: each board's CPU outside its kernels at its type's measured prices per layer, piece and byte "
                 "(data/costs/, protocol_instructions); off: none (the ideal board), also for the plan")
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
