// `run`'s injected faults, --inject-fault KIND:BOARD[:LAYER] (net/fault.h:
// kill | stall | corrupt | flip): parsed once, checked against the testbed
// and then the plan, and handed to the boards (coord::SpawnOptions::faults).
#pragma once

#include <string>
#include <vector>

#include "coord/boards.h"
#include "model/qgraph.h"
#include "net/fault.h"
#include "plan/plan.h"

namespace ts::cli {

// A fault as given (for error lines) and as parsed.
struct BoardFault {
  std::string text;
  net::FaultSpec spec;
};

// Every fault of one run.
struct RunFaults {
  std::vector<BoardFault> board;
  bool any() const { return !board.empty(); }
};

// The --inject-fault specs checked against the testbed alone (syntax, board
// numbers, local boards, one fault per board, one flip per run): before the
// model is loaded and planned, so a mistyped spec is one line at once.
RunFaults faults_on_testbed(const std::vector<std::string>& specs, const plan::Testbed& tb);

// The faults of testbed boards [first, first + count) (one throughput group),
// numbered from 0 as that group's testbed numbers them.
RunFaults group_faults(const RunFaults& f, int first, int count);

// Throws ts::Error (one line) unless each flip fault's board and layer exist
// in the plan and the board computes part of that layer.
void check_flip_faults(const RunFaults& f, const QGraph& q, const plan::Plan& p);

// The faults as the boards are started with them (SpawnOptions::faults) and,
// per testbed board, the layer of its kill | stall | corrupt fault (-1: none;
// SwarmOptions::fault_layer).
void apply_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q, const plan::Plan& p,
                  coord::SpawnOptions* so, std::vector<int>* fault_layer);

}  // namespace ts::cli
