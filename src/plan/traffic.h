// The cost model's prices of a plan's transfers and layers (cost.h's
// estimates are their sums): shared by the estimate (estimate.cpp) and
// `auto`'s pricing of its candidates (cost.cpp). Internal to plan/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/layer_work.h"

#include "model/qgraph.h"
#include "plan/cost.h"
#include "plan/frames.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::plan::price {

// Traffic of one transfer step: per board the wire bytes (frame headers
// included, as plan/frames.h counts them) it receives and sends, and what
// crosses the coordinator's link.
struct Traffic {
  std::vector<double> in, out;
  double coord = 0;
  explicit Traffic(size_t n) : in(n, 0), out(n, 0) {}
  bool any() const {
    if (coord > 0) return true;
    for (size_t w = 0; w < in.size(); ++w)
      if (in[w] > 0 || out[w] > 0) return true;
    return false;
  }
  // One gathered group (or message) of `wire` bytes from board `from` to
  // board `to` (-1: the coordinator).
  void add(int from, int to, double wire) {
    if (from >= 0) out[size_t(from)] += wire;
    else coord += wire;
    if (to >= 0) in[size_t(to)] += wire;
    else coord += wire;
  }
};

// Seconds for a transfer step in which every board receives and sends on
// its own link at once (full duplex), the coordinator on its own.
double step_s(const Traffic& tr, const Testbed& t, const CostModel& m, EstimateParts* acc = nullptr);

// The slowest board's compute of node n; with a core limit, at least the
// boards' sum over the cores (boards sharing the cores take turns).
double compute_s(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m, int n,
                 EstimateParts* acc = nullptr);

// The partial sums a reduced share (strategy `reduce`) sends to the owners
// of the other output blocks, gathered into frames per owner.
void add_partial_sums(const LayerShare& ls, int w, Traffic* tr);

// Pieces and elements of one transfer (a producer's to one board, or all a
// board receives).
struct Tally {
  int64_t pieces = 0, elems = 0;
  static Tally of(const std::vector<Piece>& pcs) {
    Tally t{int64_t(pcs.size()), 0};
    for (const Piece& p : pcs) t.elems += p.count;
    return t;
  }
  void add(const Tally& o) { pieces += o.pieces, elems += o.elems; }
  Tally minus(const Tally& o) const { return {pieces - o.pieces, elems - o.elems}; }
};

// The boards' protocol CPU (core::ProtocolCost, per board) for one operand's
// transfers, from its pieces: a send record per piece and the bytes sent on
// the producer, a received run per piece on the reader. `auto` prices its
// candidates on plans without send records and received runs (the route
// pass makes them only for the plan chosen), where layer_work cannot count
// them; without this, splits into many pieces (bands of plane positions on
// small maps: a run per channel) looked cheaper to the block programme than
// to the plan's own estimate. prices == nullptr: no protocol CPU.
class TransferCpu {
 public:
  TransferCpu(const Testbed& t, const std::vector<core::ProtocolCost>* prices)
      : t_(t), prices_(prices), instr_(prices ? prices->size() : 0, 0.0) {}
  // Whether there are prices: without them the pieces need not be counted.
  bool on() const { return prices_ != nullptr; }
  // Board f sends t to `to` boards.
  void sends(size_t f, const Tally& t, size_t to) {
    if (!prices_ || !to) return;
    const core::ProtocolCost& c = (*prices_)[f];
    instr_[f] += double(to) * (c.per_send * double(t.pieces) + c.per_net_byte * double(t.elems));
  }
  void receives(size_t w, const Tally& t) {
    if (prices_) instr_[w] += (*prices_)[w].per_recv_run * double(t.pieces);
  }
  // The slowest board's seconds: what the transfer adds to its layer.
  double slowest_s() const {
    double worst = 0;
    for (size_t w = 0; w < instr_.size(); ++w)
      if (instr_[w] > 0) worst = std::max(worst, instr_[w] / (t_.boards[w].clock_mhz * 1e6));
    return worst;
  }

 private:
  const Testbed& t_;
  const std::vector<core::ProtocolCost>* prices_;
  std::vector<double> instr_;  // per board
};

// What crosses the links for one layer, from the plan alone (the
// coordinator is one more peer, -1): the layer's inputs (the coordinator's
// runs of them, and every gathered group a board sends it), the partial
// sums it reduces, its outputs to the coordinator, and whether the
// coordinator triggers it and waits for its DONE (RUN, relay).
struct LayerTraffic {
  Traffic in, psum, result;
  bool triggered = false;
  // Of the inputs' time, what goes on while their senders still compute
  // (halos first, core/halo_first.h; set by the plan's estimate).
  double hidden_s = 0;
  explicit LayerTraffic(size_t n) : in(n), psum(n), result(n) {}
};

std::vector<LayerTraffic> plan_traffic(const QGraph& q, const Plan& p);

// The cost model's one formula for a layer, on every route: its inputs
// arrive, it computes, a reduced layer's partial sums go to the owners,
// its outputs go to the coordinator; a layer the coordinator triggers
// also pays the RUN/DONE round trip.
double layer_s(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m, int n, const LayerTraffic& tr,
               EstimateParts* acc = nullptr);

}  // namespace ts::plan::price
