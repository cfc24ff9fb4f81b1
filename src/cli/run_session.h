// `tinysplit run` executing its configuration (cli/run_config.h): the model,
// the inputs and their single-process int8 references (load_run_inputs), then
// the boards: planned, started, deployed, inferred and checked layer by layer
// against the reference (run_latency; --objective throughput:
// cli/run_throughput.h). The reports are cli/run_report.cpp's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/run_config.h"
#include "coord/coordinator.h"
#include "coord/failover.h"
#include "coord/verify.h"
#include "model/qgraph.h"
#include "model/text_map.h"
#include "sim/scenario.h"

namespace ts::cli {

// The model, the inputs and the single-process int8 references.
struct RunInputs {
  QGraph q;
  std::string input_name;                       // as reported
  std::string photo;                            // the photo's path, when the input is one
  std::vector<std::vector<int8_t>> xs, refs;    // inputs and their reference outputs
  std::vector<int> labels;                      // --dataset: each input's label
  double reference_s = 0;  // the median of --repeat warm single-process runs of the first input
  plan::PlanOptions plan;  // RunConfig::plan with the model's coded sizes estimated (plan/coding.h)
};
RunInputs load_run_inputs(const RunConfig& c);

// What the run's plan would take on the board type its boards are or stand
// in for (Teensy 4.1): the simulator (src/sim) on the plan's boards with the
// type's timing and the run's window; beside it the paper's figure when the
// run is the paper's setting (the bundled MobileNetV2 at 112, --strategy
// neuron --route relay, a board count the paper reports).
struct BoardTypeEstimate {
  std::string board_type;
  double total_s = 0, compute_s = 0, comm_s = 0;
  double cycles_per_mac = 0;  // for ops without a measured price (all ops when costs is "")
  std::string costs;          // the board type's measured per-op prices, data/costs/<costs>.json
  int window = 0;
  const sim::PaperFigure* paper = nullptr;
};

// What a latency run did.
struct RunResult {
  plan::Plan plan;                   // what the last inference ran on (after a failover, fewer boards)
  plan::Testbed testbed;             // with the probed links (--probe)
  std::vector<int> used;             // plan worker w is testbed board used[w]
  std::vector<std::string> addresses;  // per testbed board
  std::vector<coord::ProbeResult> probes;
  // Boards whose links the testbed left to their kind and that told another
  // number in HELLO: the plan was made again with the told one.
  struct LearnedLinks {
    int board = 0, assumed = 0, told = 0;
  };
  std::vector<LearnedLinks> links_learned;
  std::vector<coord::FailoverEvent> failovers;
  std::vector<coord::RejoinEvent> rejoins;
  coord::DeployResult deploy;
  coord::InferenceResult last;       // the last inference, with the median total, compute and communication times
  bool cost_host = false;            // the plan's prices were the host model's
  bool match = true;                 // every output and every layer's digest as the reference's
  int exact = 0, correct = 0, ref_correct = 0;  // per input: bit-exact in every repeat; top-1 right
  int inferences = 0, exact_inferences = 0;
  int verified_layers = 0;           // layers that matched on every board in every inference
  coord::Verification first_bad;     // the first layer that did not (board: testbed board)
  int first_bad_input = -1;
  double reference_s = 0;            // reference_s again, interleaved with the inferences
  BoardTypeEstimate estimate;        // of `plan` on the board type
  std::vector<TextBox> text_boxes;   // --save-overlay: the DB post-process's boxes, in photo pixels
};
RunResult run_latency(const RunConfig& c, const RunInputs& in);

// The reports (cli/run_report.cpp): --json or text on stdout.
void print_run_json(const RunConfig& c, const RunInputs& in, const RunResult& r);
void print_run_text(const RunConfig& c, const RunInputs& in, const RunResult& r);

// The whole command: inputs, session, outputs saved, report; the exit code
// (2: the result differs from the reference).
int cmd_run(const RunConfig& c);

}  // namespace ts::cli
