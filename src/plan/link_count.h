// What `auto` (cost.cpp) counts of a plan's links on the direct route, per
// transfer: the boards each board hears from and sends to.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "plan/testbed.h"

namespace ts::plan {

// The links one transfer needs on each board of the direct route, counted
// as direct_links counts a plan's: the boards it sends to plus the boards it
// hears from, plus the coordinator's. A plan's links are the union over its
// transfers, so a transfer over a board's limit makes every plan that has
// it go over.
//
// LinkNeeds: the boards a transfer (or several, the most of each) has a
// board hear from (in) and send to (out), per board that takes part, in
// board order.
struct LinkNeed {
  uint32_t board, in, out;
};
using LinkNeeds = std::vector<LinkNeed>;

class PeerCount {
 public:
  // holds: if given, the links each board holds (over()).
  explicit PeerCount(size_t n, const std::vector<int>* holds = nullptr) : in_(n, 0), out_(n, 0), holds_(holds) {}
  void sends(size_t from, size_t peers) {
    out_[from] += uint32_t(peers);
    check(from);
  }
  void hears(size_t to, size_t peers) {
    in_[to] += uint32_t(peers);
    check(to);
  }
  // Whether the transfer so far needs more links on a board than it holds.
  bool over() const { return over_; }
  LinkNeeds needs() const {
    LinkNeeds out;
    for (size_t w = 0; w < in_.size(); ++w)
      if (in_[w] + out_[w] > 0) out.push_back({uint32_t(w), in_[w], out_[w]});
    return out;
  }

 private:
  void check(size_t w) {
    if (holds_ && 1 + int64_t(in_[w]) + out_[w] > (*holds_)[w]) over_ = true;
  }
  std::vector<uint32_t> in_, out_;
  const std::vector<int>* holds_;
  bool over_ = false;
};

// Raises need[w] (in, out; one entry per board) to every board's in `n`.
using PeerMost = std::vector<std::array<uint32_t, 2>>;
inline void raise_needs(const LinkNeeds& n, PeerMost* need) {
  for (const LinkNeed& l : n) {
    auto& m = (*need)[l.board];
    m[0] = std::max(m[0], l.in);
    m[1] = std::max(m[1], l.out);
  }
}

// Whether some board could need more links on the direct route than it
// holds: every other board sends to it and hears from it, plus the
// coordinator.
inline bool may_go_over_links(const Testbed& t) {
  const int most = 2 * (int(t.boards.size()) - 1) + 1;
  for (const Board& b : t.boards)
    if (most > board_links(b)) return true;
  return false;
}

}  // namespace ts::plan
