// What `tinysplit simulate` simulates: board presets, worker-count sweeps,
// and the plan + simulation of one testbed. Kept out of the CLI so tests can
// check the parsing and the errors without a process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/qgraph.h"
#include "plan/plan.h"
#include "plan/testbed.h"
#include "sim/sim.h"

namespace ts::sim {

// A board type: what default_testbed needs to build N identical boards.
struct BoardPreset {
  std::string name;
  std::string description;
  double clock_mhz = 0;
  int64_t ram_bytes = 0;     // working RAM budget (the arena)
  int64_t flash_bytes = 0;
  double bandwidth_kbps = 0; // link, KB/s (1 KB = 1000 bytes)
  double delay_s_per_kb = 0;
  // The type's protocol, compute and software figures: what `simulate`
  // starts from and what `run` estimates its plan with.
  TimingModel timing;
};

// The paper's reported latency for its own setting (Fig. 9: MobileNetV2 at
// 112x112 on Teensy 4.1 boards, runs of output neurons relayed through the
// coordinator, stop-and-wait), by board count.
struct PaperFigure {
  int workers = 0;
  double total_s = 0, compute_s = 0, comm_s = 0;
};
// The figure for `workers` boards, nullptr where the paper reports none.
const PaperFigure* paper_figure(int workers);

// Known presets (currently "teensy41": Cortex-M7 at 600 MHz, the 512 KiB
// RAM budget the paper evaluates against, 8 MiB flash, 100 Mbit/s Ethernet).
const std::vector<BoardPreset>& board_presets();

// The preset called `name`; throws ts::Error naming it and the known names.
const BoardPreset& board_preset(const std::string& name);

// N boards of a preset (ids 0..N-1, address "sim"). Throws ts::Error if
// n < 1 ("at least one board").
plan::Testbed preset_testbed(const BoardPreset& b, int n);

// Worker counts of a sweep: comma-separated items, each "N", "A..B" or
// "A..B:S" (A, A+S, ... up to B). Counts are >= 1, an item's range must not
// be empty (A <= B), S >= 1. The result is sorted and without repeats.
// Throws ts::Error with one line naming the bad item. At most 100000 counts.
std::vector<int> parse_sweep(const std::string& spec);

// One simulated configuration.
struct Scenario {
  plan::Testbed testbed;
  plan::Allocation alloc = plan::Allocation::Rating;
  std::string strategy = "neuron";   // plan::make_strategy names, or "auto"
  plan::Route route = plan::Route::Relay;
  // As plan::PlanOptions::route_fallback (the route was not named, as in
  // `plan` and `run`): past the boards' links the plan may be the relay
  // route's, or the direct route's on fewer boards. Without it, a direct plan
  // over the links is simulated and reported over its budget.
  bool route_fallback = false;
  // As plan::PlanOptions::coding and code (plan/coding.h).
  plan::Coding coding = plan::Coding::Off;
  plan::Streaming stream = plan::Streaming::Auto;  // as plan::PlanOptions::stream
  plan::CodeEstimate code;
  TimingModel timing;
  // Per-op cycles per MAC for the planner's cost model (plan::parse_op_cycles);
  // empty = its defaults (plan/cost.h CostModel: each board type's measured
  // cycles, 325 us per message), as `plan` and `run` use, so the simulated
  // plan is the one they make.
  std::string op_cycles;
  // As plan::CostModel::protocol_cpu: the plan prices the boards' CPU outside
  // their kernels (`simulate --protocol-cpu off` plans and times without).
  bool protocol_cpu = true;
  // > 1: objective throughput: the planner groups the boards
  // (plan::choose_groups: replicate when one board holds the model, groups,
  // or all boards on every image), each group simulated with that many
  // images back to back (direct route: pipelined); reports images_per_s.
  // 0 or 1: latency only.
  int throughput_images = 0;
  // Shared by the scenarios of one sweep (plan::FirstBoardsMemo): they differ
  // only in their boards. Null: nothing shared.
  std::shared_ptr<plan::FirstBoardsMemo> first_boards;
};

struct RunRecord {
  int workers = 0;
  bool fits = true;          // every board within its RAM and flash budget
  std::string budget_error;  // the planner's one-line reason when not
  double plan_s = 0;         // host seconds to plan (not part of the latency)
  double sim_s = 0;          // host seconds to simulate
  int64_t ram_budget_bytes = 0;      // smallest board budget
  // Per-board peak RAM of the memory plan (fixed arena included), over boards.
  int64_t min_peak_ram_bytes = 0, max_peak_ram_bytes = 0;
  double mean_peak_ram_bytes = 0;
  // Lower bound: the most any board must hold at once if its arena kept only
  // the input elements it receives and its outputs (no bounding box).
  int64_t max_exact_need_bytes = 0;
  int64_t max_flash_bytes = 0;
  int64_t total_macs = 0;       // what the boards compute (recomputed halos included)
  int64_t recomputed_macs = 0;  // of which for outputs a board does not own (fused)
  int64_t plan_wire_bytes = 0;       // the plan's total_wire_bytes
  double est_latency_s = 0;          // the planner's cost-model estimate
  // Steady state of throughput_images back to back: (K - 1) images over the
  // time from the first output to the last (relay: 1 / latency). 0 if not asked.
  double images_per_s = 0;
  // Throughput: how the boards are used (plan/replicate.h): "split" (all
  // boards on every image, pipelined), "replicate" (one board per image,
  // side by side) or "groups"; boards per group, groups, boards left idle,
  // and the planner's own estimate of images_per_s.
  std::string throughput_mode;
  int group_boards = 0, groups = 0, idle_boards = 0;
  double est_images_per_s = 0;
  std::string throughput_error;      // no grouping fits (images_per_s stays 0)
  std::vector<std::string> layer_strategy;
  plan::Route route = plan::Route::Direct;  // the plan's route
  std::string route_note;                   // why not the one asked for (plan::Plan::route_note), or ""
  SimResult result;          // board details dropped unless keep_boards
};

// Plans (without the routing map, which the simulator does not need; budgets
// are checked and reported, not enforced, so a sweep can show where boards
// stop fitting) and simulates. The plan itself is not kept (at 1000 boards it
// holds millions of input runs); with keep_boards false the per-board parts
// of the result (boards, board_layers) are dropped too. Throws ts::Error on a
// bad scenario.
RunRecord run_scenario(const QGraph& q, const Scenario& s, bool keep_boards = true);

// Where per-board peak RAM stops falling: the smallest N of `counts` whose
// max peak is within `tolerance` (relative) of the value at the largest N
// simulated. -1 if counts is empty.
int flattening_point(const std::vector<int>& counts, const std::vector<int64_t>& max_peak, double tolerance = 0.05);

}  // namespace ts::sim
