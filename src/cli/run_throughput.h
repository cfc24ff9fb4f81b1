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
// the last one's end (deployment not included). With one group (the
// planner found nothing better than all boards on every image), the
// inferences run one after another: run does not pipeline images inside a
// deployment (the simulator does: simulate --objective throughput).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/boards.h"
#include "coord/failover.h"
#include "model/qgraph.h"
#include "plan/plan.h"

namespace ts::cli {

struct ThroughputRunOptions {
  plan::Testbed testbed;
  plan::PlanOptions plan;
  coord::SpawnOptions spawn;
  coord::SwarmOptions swarm;
  int repeat = 1;
  bool json = false;
  std::string model;           // for the report
  double reference_s = 0;      // median warm single-process inference
};

// Runs and reports; returns the exit code (2: an output differs from the
// reference). Throws ts::Error (one line) when no grouping fits.
int run_throughput(const QGraph& q, const std::vector<std::vector<int8_t>>& inputs,
                   const std::vector<std::vector<int8_t>>& refs, const ThroughputRunOptions& o);

}  // namespace ts::cli
