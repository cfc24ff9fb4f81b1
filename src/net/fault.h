// Injected faults for tests and demos: a board that dies, hangs or garbles a
// frame at a chosen layer (`tinysplit run --inject-fault KIND:BOARD[:LAYER]`,
// `tinysplit worker --inject-fault KIND:LAYER`). The coordinator side parses
// the spec and hands KIND:LAYER to the board it names; the board (host_board)
// acts once, right after it has computed its share of that layer, before it
// sends any of the results:
//   kill     the board process ends at once (SIGKILL: no goodbye, sockets
//            closed by the kernel), as a board losing power would
//   stall    the board hangs: it stops reading, sending and accepting (a
//            board stuck in a loop, SIGSTOP), and stays hung
//   corrupt  the board's next frame to the coordinator (OUTPUT or DONE) has
//            one payload byte flipped, so its CRC no longer matches
// Each parser is its own function so that other fault kinds can join the
// table in fault.cpp without touching the callers.
#pragma once

#include <string>
#include <vector>

namespace ts::net {

enum class FaultKind : int { None = 0, Kill, Stall, Corrupt };

const char* fault_kind_name(FaultKind k);
// "kill" | "stall" | "corrupt" -> kind; anything else throws ts::Error
// naming the known kinds.
FaultKind parse_fault_kind(const std::string& word, const std::string& spec);

// One fault as given to `run`: which board (index in the testbed, 0-based)
// and which layer (node index; -1 = not given, the caller picks one).
struct FaultSpec {
  FaultKind kind = FaultKind::None;
  int board = -1;
  int layer = -1;
};

// "KIND:BOARD" or "KIND:BOARD:LAYER" (decimal). Throws ts::Error with one
// line naming the spec on anything else.
FaultSpec parse_fault_spec(const std::string& text);

// The board's form, "KIND:LAYER" (the layer is required).
FaultSpec parse_board_fault(const std::string& text);

// The spec a spawned board is given: "KIND:LAYER".
std::string board_fault_arg(const FaultSpec& f);

}  // namespace ts::net
