// Injected faults for tests and demos (`tinysplit run --inject-fault
// KIND:BOARD[:LAYER]`, `tinysplit worker --inject-fault KIND:LAYER`): the
// coordinator side parses the spec once (parse_fault_spec) and hands each
// board its fault in the board's form, KIND:LAYER (board_fault_arg), which
// the board parses with the same parser (parse_board_fault) and applies by
// the one decorator on its Port (net/fault_port.h, where the kinds are
// described: kill, stall, corrupt, flip).
#pragma once

#include <string>

#include "net/fault_port.h"

namespace ts::net {

// One fault as given to `run`: its kind, which board (index in the testbed,
// 0-based) and which layer (node index; -1 = not given, the caller picks
// one; flip needs one).
struct FaultSpec {
  FaultKind kind = FaultKind::None;
  int board = -1;
  int layer = -1;
  BoardFault at_board() const { return {kind, layer}; }
};

// "KIND:BOARD" or "KIND:BOARD:LAYER" (decimal), "flip:BOARD:LAYER". Throws
// ts::Error with one line naming the spec on anything else.
FaultSpec parse_fault_spec(const std::string& text);

// The board's form, "KIND:LAYER" (the layer is required). Throws ts::Error
// with one line naming the spec on anything else.
BoardFault parse_board_fault(const std::string& text);

// The spec a board is given: "KIND:LAYER".
std::string board_fault_arg(const BoardFault& f);

}  // namespace ts::net
