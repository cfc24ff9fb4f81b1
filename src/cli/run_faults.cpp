#include "cli/run_faults.h"

#include <cstdlib>

namespace ts::cli {

namespace {

// --inject-fault board failures, checked against the testbed alone (syntax,
// board number, a local board, one fault per board): before the model is
// loaded and planned, so a mistyped spec is one line at once.
std::vector<BoardFault> board_faults_on_testbed(const std::vector<std::string>& specs, const plan::Testbed& tb) {
  std::vector<BoardFault> out;
  std::vector<bool> taken(tb.boards.size(), false);
  for (const auto& text : specs) {
    const net::FaultSpec f = net::parse_fault_spec(text);
    if (f.board >= int(tb.boards.size()))
      throw Error("--inject-fault '" + text + "': there are only " + std::to_string(tb.boards.size()) + " boards (0.." +
                  std::to_string(tb.boards.size() - 1) + ")");
    if (tb.boards[size_t(f.board)].address != "local")
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) +
                  " is not a local board (faults are injected into boards this run starts)");
    if (taken[size_t(f.board)])
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " already has a fault");
    taken[size_t(f.board)] = true;
    out.push_back({text, f});
  }
  return out;
}

// --inject-fault board failures (board_faults_on_testbed) checked against
// the plan, and turned into each board's `worker --inject-fault KIND:LAYER`
// argument. A fault without a layer acts at the board's layer nearest the
// middle of the model; a layer the board has no share of would never fire:
// refused. `fault_layer` gets, per board, the layer of its fault (-1: none).
std::vector<std::vector<std::string>> fault_args(const std::vector<BoardFault>& faults, const plan::Testbed& tb,
                                                        const QGraph& q, const plan::Plan& p, std::vector<int>* fault_layer) {
  std::vector<std::vector<std::string>> args(tb.boards.size());
  fault_layer->assign(tb.boards.size(), -1);
  for (const auto& [text, spec] : faults) {
    net::FaultSpec f = spec;
    const auto& layers = p.workers[size_t(f.board)].layers;
    if (f.layer >= int(q.nodes.size()))
      throw Error("--inject-fault '" + text + "': the model has layers 0.." + std::to_string(q.nodes.size() - 1));
    if (f.layer < 0) {
      const int mid = int(q.nodes.size()) / 2;
      for (int n = 0; n < int(layers.size()); ++n)
        if (layers[size_t(n)].active() && (f.layer < 0 || std::abs(n - mid) < std::abs(f.layer - mid))) f.layer = n;
      if (f.layer < 0) throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of any layer");
    } else if (!layers[size_t(f.layer)].active()) {
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of layer " +
                  std::to_string(f.layer) + " '" + q.nodes[size_t(f.layer)].name + "', so the fault would never act");
    }
    args[size_t(f.board)] = {"--inject-fault", net::board_fault_arg(f)};
    (*fault_layer)[size_t(f.board)] = f.layer;
  }
  return args;
}

}  // namespace

RunFaults faults_on_testbed(const std::vector<std::string>& specs, const std::vector<int>& hooks, const plan::Testbed& tb) {
  RunFaults out;
  out.hooks = hooks;
  FlipFault& flip = out.flip;
  // --inject-fault: flip:BOARD:LAYER (cli/fault_flip.h) or a board failure
  // kill | stall | corrupt (net/fault.h, fault_args above).
  std::vector<std::string> failure_specs;
  for (const auto& f : specs) {
    FlipFault one;
    if (!parse_flip_fault(f, &one)) {
      failure_specs.push_back(f);
    } else {
      if (flip.on()) throw Error("--inject-fault: one flip:BOARD:LAYER per run, got a second one '" + f + "'");
      flip = one;
    }
  }
  // What can be checked before the model work (the rest needs the plan).
  out.board = board_faults_on_testbed(failure_specs, tb);
  if (flip.on() && flip.board >= int(tb.boards.size()))
    throw Error("--inject-fault flip: board " + std::to_string(flip.board) + " does not exist (the testbed has " +
                std::to_string(tb.boards.size()) + " boards, numbered from 0)");
  return out;
}

std::string plan_where_faults_act(const RunFaults& f, const QGraph& q, const plan::Testbed& tb, bool cost_auto,
                                  plan::PlanOptions* popt_out, plan::Plan* p_out) {
  plan::PlanOptions& popt = *popt_out;
  plan::Plan& p = *p_out;
  const FlipFault& flip = f.flip;
  const std::vector<BoardFault>& board_faults = f.board;
  // A fault is injected where a board computes: a fault on a board that the
  // host-priced plan leaves without a share of the fault's layer (on this
  // machine one board often computes everything) could never act. When the
  // cost model was the default's choice, such a run is planned with the
  // Teensy prices instead, which give every board a share of every layer
  // it can hold, and says so; an explicit --cost-model host keeps its plan
  // and the fault is refused below with one line.
  std::string cost_note;
  if (popt.cost.host && cost_auto && (flip.on() || !board_faults.empty())) {
    bool acts = true;
    try {
      check_flip_fault(flip, q, p);
      std::vector<int> unused;
      (void)fault_args(board_faults, tb, q, p, &unused);
    } catch (const Error&) {
      acts = false;
    }
    if (!acts) {
      popt.cost = plan::CostModel{};
      p = plan::make_plan(q, tb, popt);
      cost_note = "planned with the Teensy prices: the host-priced plan leaves a board named by --inject-fault "
                  "without a share of its layer";
    }
  }
  check_flip_fault(flip, q, p);
  return cost_note;
}

void apply_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q, const plan::Plan& p,
                  coord::SpawnOptions* so, std::vector<int>* fault_layer) {
  so->crash_board = f.hooks[0]; so->crash_layer = f.hooks[1];
  so->stall_board = f.hooks[2]; so->stall_layer = f.hooks[3];
  so->garble_board = f.hooks[4]; so->garble_layer = f.hooks[5];
  so->board_args = fault_args(f.board, tb, q, p, fault_layer);
  so->flip_board = f.flip.board; so->flip_layer = f.flip.layer;
}

}  // namespace ts::cli
