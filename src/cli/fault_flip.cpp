#include "cli/fault_flip.h"

#include "util/error.h"

namespace ts::cli {

namespace {

// A decimal number of at most 6 digits, or -1.
int small_number(const std::string& s) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(s);
}

}  // namespace

bool parse_flip_fault(const std::string& spec, FlipFault* out) {
  if (spec.rfind("flip", 0) != 0 || (spec.size() > 4 && spec[4] != ':')) return false;
  const std::string rest = spec.size() > 5 ? spec.substr(5) : "";
  const size_t colon = rest.find(':');
  const int board = colon == std::string::npos ? -1 : small_number(rest.substr(0, colon));
  const int layer = colon == std::string::npos ? -1 : small_number(rest.substr(colon + 1));
  if (board < 0 || layer < 0)
    throw Error("--inject-fault: expected flip:BOARD:LAYER with two numbers (board and layer from 0), got '" + spec +
                "'");
  out->board = board;
  out->layer = layer;
  return true;
}

void check_flip_fault(const FlipFault& f, const QGraph& q, const plan::Plan& p) {
  if (!f.on()) return;
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

}  // namespace ts::cli
