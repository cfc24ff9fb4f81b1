// The planner's steps after the split (internal to src/plan): the route
// pass and routing map (route.cpp), the arena plan of a worker (arena.cpp);
// the exact needs are needs.h. plan.cpp runs them in order (build_plan).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "plan/fuse.h"
#include "plan/plan.h"

namespace ts::plan::steps {

// Distinct elements of operand k of node n needed by anyone, and the most
// workers any one element goes to (`diff`: scratch).
struct SweepResult {
  int64_t unique = 0;
  int max_fanout = 0;
};
SweepResult count_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<int32_t>& diff);

// Who owns each element of a node's output: the segments of the workers'
// owned regions in offset order (they tile the output; LayerShare::tiles()),
// each with its worker and where it starts in that worker's output buffer. A send never
// crosses a segment (it is contiguous in the producer's buffer). Storage is
// kept between build() calls; the cost is the segments', not the tensor's.
class Owners {
 public:
  struct Segment {
    int64_t begin, end;
    int32_t worker;
    int64_t pos;  // the segment's first element in the worker's outputs
  };
  // From the workers' owned regions (LayerShare::tiles()).
  void build(const QGraph& q, const Plan& p, int node);
  // f(segment, b, e) for the pieces [b, e) of [off, off + n), one per
  // segment, in order; false (and no more calls) at an element that no
  // segment holds. `at` is where the search starts and where the last
  // piece's segment is left (runs walked in offset order often start in it
  // or the next); elsewhere a bucket of the offsets finds it.
  template <class F>
  bool walk(int64_t off, int64_t n, size_t& at, F&& f) const {
    const int64_t end = off + n;
    if (off >= end) return true;
    size_t i = at;
    if (!holds(i, off)) i = holds(i + 1, off) ? i + 1 : find(off);
    for (; off < end; ++i) {
      if (i >= segs_.size() || off < segs_[i].begin || off >= segs_[i].end) return false;
      const int64_t stop = std::min(end, segs_[i].end);
      f(segs_[i], off, stop);
      off = stop;
      at = i;
    }
    return true;
  }

 private:
  bool holds(size_t i, int64_t off) const { return i < segs_.size() && segs_[i].begin <= off && off < segs_[i].end; }
  // The segment holding off, else one that does not (walk then stops):
  // from off's bucket, a binary search among the few segments it spans.
  size_t find(int64_t off) const;
  void add_owned(const core::Dims& d, const LayerShare& ls, int32_t w);
  std::vector<Segment> segs_, tmp_;
  // bucket_[j]: the first segment ending past j << shift_ (build).
  std::vector<uint32_t> bucket_;
  int shift_ = 0;
  std::vector<size_t> first_;                     // build's scratch
  std::vector<Computed::Segment> computed_, owned_;  // add_owned's scratch
};

// The route pass: where every input comes from (the coordinator, another
// worker, this worker's own earlier output) and where every output goes.
// Without `peer_sends` the sends board to board, and the runs a receiver
// takes from other boards (InputNeed::recv; recv_elems is kept), are left
// out: plans_for_pricing, whose reader (`auto`, cost.cpp) prices them from
// the pieces instead (price::TransferCpu). On the relay route every
// received run comes from the coordinator and is kept.
// Whether every worker holds the same regions of node n (the ones it owns
// included) in plans a and b of the same boards.
bool splits_alike(const Plan& a, const Plan& b, size_t n);

// `alike` (direct route, without peer_sends): a plan routed so before, made
// from the same shares and needs but where fuse_layers widened shares (the
// spatial candidate of a fused one): the inputs of a layer split alike in
// both, made by a layer split alike in both, are routed as in it.
void route_plan(const QGraph& q, Plan& p, Route route, bool peer_sends = true, const Plan* alike = nullptr);

// The arena plan of one worker: in-place outputs, then an offset for every
// buffer such that buffers in use at the same layer never overlap; each
// layer's ram_bytes and the worker's peak.
void layout_worker(const QGraph& q, WorkerPlan& wp);

}  // namespace ts::plan::steps
