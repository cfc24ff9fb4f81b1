// `tinysplit run --objective throughput`: many images through the boards,
// side by side (cli/run_session.cpp's cmd_run calls this for that objective).
//
// The planner groups the boards (plan/replicate.h, choose_groups): with
// `replicate` every board holds the whole model and is an independent
// one-board deployment; with groups, every group of g boards is an
// independent g-board deployment. Each group has its own boards, plan and
// coordinator (a coord::Swarm), and one thread per group drives it: the
// --repeat x inputs inferences are handed out one at a time to whichever
// group is free, so G groups run G images side by side. Every output is
// compared with the single-process int8 reference. images_per_s is the
// number of inferences over the wall time from the first one's start to
// the last one's end (deployment not included).
//
// Inside a group the images are pipelined (direct route, in_flight >= 2,
// the default 2): group g takes images g, g+G, g+2G, ... as one batch
// (coord::Coordinator::infer_pipelined): a board that is done with its part
// of image k starts image k+1 while the group's other boards are still on
// k, with at most in_flight images inside the group at once. in_flight 1,
// or the relay route, runs a group's images one after another (each group
// then takes the next free image). Either way every output is compared
// with the reference and every board's digest of every layer with the
// reference's (coord/verify.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/boards.h"
#include "coord/failover.h"
#include "coord/verify.h"
#include "model/qgraph.h"
#include "plan/plan.h"
#include "plan/replicate.h"

namespace ts::cli {

struct RunConfig;
struct RunInputs;

// What a throughput run did.
struct ThroughputResult {
  plan::GroupChoice groups;                  // the planner's grouping
  std::vector<std::vector<int>> group_ids;   // per group: its boards' ids
  std::vector<int> group_done;               // per group: inferences it ran
  std::vector<std::string> group_dropped;    // per group: why it stopped ("" if it ran to the end)
  std::vector<std::vector<coord::FailoverEvent>> group_failovers;  // per group: boards it lost and re-planned without
  std::vector<std::vector<coord::RejoinEvent>> group_rejoins;      // per group: boards it took back
  bool pipelined = false;
  int in_flight = 1;                         // as run (1 when not pipelined)
  std::string pipeline_note;                 // why not pipelined ("" when it is)
  int total = 0, n_exact = 0;                // inferences, bit-exact ones
  double wall_s = 0, median_s = 0, images_per_s = 0;
  int verified_layers = 0;
  bool match = true;
  coord::Verification first_bad;             // board: the testbed board's id
  int first_bad_input = -1;
  std::string first_bad_address;
};

// Runs the boards; throws ts::Error (one line) when no grouping fits or a
// group fails.
ThroughputResult run_throughput_session(const RunConfig& c, const RunInputs& in);

// The reports (cli/run_report.cpp).
void print_throughput_json(const RunConfig& c, const RunInputs& in, const ThroughputResult& r);
void print_throughput_text(const RunConfig& c, const RunInputs& in, const ThroughputResult& r);

// Runs and reports; returns the exit code (2: an output differs from the
// reference).
int run_throughput(const RunConfig& c, const RunInputs& in);

}  // namespace ts::cli
