// Fused tiles (strategy `fused`, docs/planner.md "Fused tiles"): a band
// layer whose only reader is a fused layer as well also computes the outputs
// of its neighbours' bands that its reader's share needs, so the reader's
// halo (a 3x3 depthwise layer reading an expanded tensor: six times the
// channels of the block's input) never travels; the layer's own, narrower
// input halo does, and the halo is computed twice. Pure geometry, no plan
// state: plan.cpp widens the shares (LayerShare::owned keeps the tiling),
// route.cpp and cost.cpp find what a worker computed itself (Computed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/fragment.h"
#include "model/qgraph.h"

namespace ts::plan {

struct Plan;

namespace fuse {

// The one node that reads node n's output (-1: none, several, or it is the
// graph's output).
int sole_reader(const QGraph& q, int n);

// Regions covering `owned` (regions of a tensor of shape d) and the
// elements of `need` (flat runs): the union's runs of plane positions per
// channel, channels with the same runs grouped, each run as at most three
// boxes (a partial first row, whole rows, a partial last row). When `owned`
// is boxes of whole rows the runs are rounded out to whole rows: a band of
// rows and its halo stay one box, which the board computes in place into its
// reader's window. Empty when `need` lies inside `owned` (nothing to widen).
std::vector<core::Region> widened(const core::Dims& d, const std::vector<core::Region>& owned,
                                  const std::vector<core::InputRun>& need);

// Whether some worker's share of node n is widened (LayerShare::owned set).
bool any_widened(const Plan& p, int n);

// A widened share is only worth it while the halo is smaller than the share:
// true if every worker computes at most as many extra outputs as it owns.
bool worth_it(const std::vector<int64_t>& owned_elems, const std::vector<int64_t>& widened_elems);

}  // namespace fuse

// What each worker computes of one node (all of LayerShare::regions, owned
// or recomputed): its segments in offset order, each with its place in the
// worker's output buffer. build() keeps its storage between calls.
class Computed {
 public:
  struct Segment {
    int64_t begin, end, pos;
  };
  void build(const QGraph& q, const Plan& p, int node);
  // Whether any worker of the node recomputes outputs it does not own
  // (if not, build keeps no segments and split must not be called).
  bool any() const { return any_; }
  // Splits [off, off + n) into the pieces worker w computes, each inside one
  // of its segments (local(b, e)), and the rest (other(b, e)), in order.
  template <class L, class O>
  void split(int w, int64_t off, int64_t n, L&& local, O&& other) const {
    const std::vector<Segment>& s = segs_[size_t(w)];
    auto it = std::upper_bound(s.begin(), s.end(), off, [](int64_t v, const Segment& g) { return v < g.end; });
    const int64_t end = off + n;
    while (off < end) {
      if (it == s.end() || it->begin >= end) {
        other(off, end);
        return;
      }
      if (it->begin > off) {
        other(off, it->begin);
        off = it->begin;
      }
      const int64_t stop = std::min(end, it->end);
      local(off, stop);
      off = stop;
      ++it;
    }
  }

 private:
  std::vector<std::vector<Segment>> segs_;
  bool any_ = false;
};

// The segments of a list of regions in offset order, each with its place in
// the buffer that holds the regions one after another.
void region_segments(const core::Dims& d, const std::vector<core::Region>& regions,
                     std::vector<Computed::Segment>* out);

}  // namespace ts::plan
