// `run`'s injected faults (moved here from cmd_run.cpp as they were):
// --inject-fault kill | stall | corrupt:BOARD[:LAYER] (net/fault.h) and
// flip:BOARD:LAYER (cli/fault_flip.h), and the hidden --test-crash, --test-stall
// and --test-garble hooks.
#pragma once

#include <string>
#include <vector>

#include "cli/fault_flip.h"
#include "coord/boards.h"
#include "model/qgraph.h"
#include "net/fault.h"
#include "plan/plan.h"

namespace ts::cli {

// A kill | stall | corrupt fault as given (for error lines) and as parsed.
struct BoardFault {
  std::string text;
  net::FaultSpec spec;
};

// Every fault of one run.
struct RunFaults {
  FlipFault flip;
  std::vector<BoardFault> board;
  std::vector<int> hooks = std::vector<int>(6, -1);  // crash, stall, garble: board and layer
  bool any() const { return flip.on() || !board.empty(); }
};

// The --inject-fault specs checked against the testbed alone (syntax, board
// numbers, local boards, one fault per board): before the model is loaded
// and planned, so a mistyped spec is one line at once.
RunFaults faults_on_testbed(const std::vector<std::string>& specs, const std::vector<int>& hooks, const plan::Testbed& tb);

// Checks the faults against the plan `p` made with `*popt`. When the
// host-priced plan leaves a board named by a fault without a share of its
// layer and `cost_auto` (the cost model was the default's choice), re-plans
// with the Teensy prices and returns a note saying so; else "".
std::string plan_where_faults_act(const RunFaults& f, const QGraph& q, const plan::Testbed& tb, bool cost_auto,
                                  plan::PlanOptions* popt, plan::Plan* p);

// The faults as the boards are started with them (SpawnOptions) and, per
// testbed board, the layer of its fault (-1: none; SwarmOptions::fault_layer).
void apply_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q, const plan::Plan& p,
                  coord::SpawnOptions* so, std::vector<int>* fault_layer);

}  // namespace ts::cli
