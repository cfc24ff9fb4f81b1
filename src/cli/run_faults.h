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

// Checks the faults against the plan `p` made with `*popt`. When the
// host-priced plan leaves a board named by a fault without a share of its
// layer and `cost_auto` (the cost model was the default's choice), re-plans
// with the Teensy prices and returns a note saying so; else "".
std::string plan_where_faults_act(const RunFaults& f, const QGraph& q, const plan::Testbed& tb, bool cost_auto,
                                  plan::PlanOptions* popt, plan::Plan* p);

// Throws ts::Error (one line) unless each flip fault's board and layer exist
// in the plan and the board computes part of that layer (again after a
// re-plan).
void check_flip_faults(const RunFaults& f, const QGraph& q, const plan::Plan& p);

// The faults as the boards are started with them (SpawnOptions::faults) and,
// per testbed board, the layer of its kill | stall | corrupt fault (-1: none;
// SwarmOptions::fault_layer).
void apply_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q, const plan::Plan& p,
                  coord::SpawnOptions* so, std::vector<int>* fault_layer);

}  // namespace ts::cli
