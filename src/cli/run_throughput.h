// `tinysplit run --objective throughput`: many images through the boards,
// side by side (cmd_run.cpp calls this; kept apart so the run path of
// the default objective stays as it is).
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

namespace ts::cli {

struct ThroughputRunOptions {
  plan::Testbed testbed;
  plan::PlanOptions plan;
  coord::SpawnOptions spawn;
  coord::SwarmOptions swarm;
  int repeat = 1;
  int in_flight = 2;           // images in flight inside one group; 1 = one after another
  bool json = false;
  std::string model;           // for the report
  double reference_s = 0;      // median warm single-process inference
};

// Runs and reports; returns the exit code (2: an output differs from the
// reference). Throws ts::Error (one line) when no grouping fits.
int run_throughput(const QGraph& q, const std::vector<std::vector<int8_t>>& inputs,
                   const std::vector<std::vector<int8_t>>& refs, const ThroughputRunOptions& o);

}  // namespace ts::cli
