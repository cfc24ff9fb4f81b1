#include "cli/run_faults.h"

#include <cstdlib>

#include "plan/board_kind.h"

namespace ts::cli {

namespace {

bool is_flip(const BoardFault& f) { return f.spec.kind == net::FaultKind::Flip; }

// A flip fault against the testbed: its board exists (any kind of board but
// a running one can flip, coord/boards.cpp).
void flip_on_testbed(const net::FaultSpec& f, const plan::Testbed& tb) {
  if (f.board >= int(tb.boards.size()))
    throw Error("--inject-fault flip: board " + std::to_string(f.board) + " does not exist (the testbed has " +
                std::to_string(tb.boards.size()) + " boards, numbered from 0)");
}

// A kill | stall | corrupt fault against the testbed: its board exists and
// is one this run starts (a local or QEMU board).
void failure_on_testbed(const std::string& text, const net::FaultSpec& f, const plan::Testbed& tb) {
  if (f.board >= int(tb.boards.size()))
    throw Error("--inject-fault '" + text + "': there are only " + std::to_string(tb.boards.size()) + " boards (0.." +
                std::to_string(tb.boards.size() - 1) + ")");
  if (!plan::started_here(tb.boards[size_t(f.board)]))
    throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) +
                " is not a local board (faults are injected into boards this run starts)");
}

// The layer a kill | stall | corrupt fault acts at in plan `p`. A fault
// without a layer acts at the board's layer nearest the middle of the model;
// a layer the board has no share of would never fire: refused.
int failure_layer(const BoardFault& bf, const QGraph& q, const plan::Plan& p) {
  const std::string& text = bf.text;
  const net::FaultSpec& f = bf.spec;
  const auto& layers = p.workers[size_t(f.board)].layers;
  if (f.layer >= int(q.nodes.size()))
    throw Error("--inject-fault '" + text + "': the model has layers 0.." + std::to_string(q.nodes.size() - 1));
  int layer = f.layer;
  if (layer < 0) {
    const int mid = int(q.nodes.size()) / 2;
    for (int n = 0; n < int(layers.size()); ++n)
      if (layers[size_t(n)].active() && (layer < 0 || std::abs(n - mid) < std::abs(layer - mid))) layer = n;
    if (layer < 0) throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of any layer");
  } else if (!layers[size_t(layer)].active()) {
    throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of layer " +
                std::to_string(layer) + " '" + q.nodes[size_t(layer)].name + "', so the fault would never act");
  }
  return layer;
}

// Every fault in the board's form, per testbed board (None: no fault),
// checked against the plan.
std::vector<net::BoardFault> board_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q,
                                          const plan::Plan& p) {
  check_flip_faults(f, q, p);
  std::vector<net::BoardFault> out(tb.boards.size());
  for (const auto& bf : f.board) {
    net::BoardFault& b = out[size_t(bf.spec.board)];
    b = bf.spec.at_board();
    if (!is_flip(bf)) b.layer = failure_layer(bf, q, p);
  }
  return out;
}

}  // namespace

RunFaults faults_on_testbed(const std::vector<std::string>& specs, const plan::Testbed& tb) {
  RunFaults out;
  std::vector<bool> taken(tb.boards.size(), false);
  bool flip = false;
  for (const auto& text : specs) {
    const BoardFault bf{text, net::parse_fault_spec(text)};
    const net::FaultSpec& f = bf.spec;
    if (is_flip(bf)) {
      if (flip) throw Error("--inject-fault: one flip:BOARD:LAYER per run, got a second one '" + text + "'");
      flip = true;
      flip_on_testbed(f, tb);
    } else {
      failure_on_testbed(text, f, tb);
    }
    if (taken[size_t(f.board)])
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " already has a fault");
    taken[size_t(f.board)] = true;
    out.board.push_back(bf);
  }
  return out;
}

RunFaults group_faults(const RunFaults& f, int first, int count) {
  RunFaults out;
  for (const BoardFault& bf : f.board)
    if (bf.spec.board >= first && bf.spec.board < first + count) {
      out.board.push_back(bf);
      out.board.back().spec.board -= first;
    }
  return out;
}

void check_flip_faults(const RunFaults& faults, const QGraph& q, const plan::Plan& p) {
  for (const auto& bf : faults.board) {
    if (!is_flip(bf)) continue;
    const net::FaultSpec& f = bf.spec;
    if (f.board >= p.n_workers())
      throw Error("--inject-fault flip: board " + std::to_string(f.board) + " does not exist (the plan has " +
                  std::to_string(p.n_workers()) + " boards, numbered from 0)");
    if (f.layer >= int(q.nodes.size()))
      throw Error("--inject-fault flip: layer " + std::to_string(f.layer) + " does not exist (the model has " +
                  std::to_string(q.nodes.size()) + " layers, numbered from 0)");
    if (!p.workers[size_t(f.board)].layers[size_t(f.layer)].active())
      throw Error("--inject-fault flip: board " + std::to_string(f.board) + " computes nothing of layer " +
                  std::to_string(f.layer) + " '" + q.nodes[size_t(f.layer)].name + "'");
  }
}

void apply_faults(const RunFaults& f, const plan::Testbed& tb, const QGraph& q, const plan::Plan& p,
                  coord::SpawnOptions* so, std::vector<int>* fault_layer) {
  so->faults = board_faults(f, tb, q, p);
  fault_layer->assign(tb.boards.size(), -1);
  for (size_t b = 0; b < so->faults.size(); ++b)
    if (so->faults[b].on() && so->faults[b].kind != net::FaultKind::Flip) (*fault_layer)[b] = so->faults[b].layer;
}

}  // namespace ts::cli
