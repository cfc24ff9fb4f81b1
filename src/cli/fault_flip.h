// `run --inject-fault flip:BOARD:LAYER`: board BOARD (plan index, as in
// `run --json` per_worker) changes one output value of layer LAYER (node
// index, as in `plan --json` per_layer) after computing it, behind valid
// frame CRCs; the per-layer verification (coord/verify.h) must name it.
#pragma once

#include <string>

#include "model/qgraph.h"
#include "plan/plan.h"

namespace ts::cli {

struct FlipFault {
  int board = -1, layer = -1;
  bool on() const { return board >= 0; }
};

// Parses a fault spec of the flip form. Returns false if `spec` is not
// "flip:..." (another kind of fault); throws ts::Error (one line) if it is
// but is malformed.
bool parse_flip_fault(const std::string& spec, FlipFault* out);

// Throws ts::Error unless the board and layer exist in the plan and the
// board computes part of that layer.
void check_flip_fault(const FlipFault& f, const QGraph& q, const plan::Plan& p);

}  // namespace ts::cli
