// The planner's steps after the split (internal to src/plan): the route
// pass and routing map (route.cpp), the arena plan of a worker (arena.cpp);
// the exact needs are needs.h. plan.cpp runs them in order (build_plan).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace ts::plan::steps {

// Distinct elements of operand k of node n needed by anyone, and the most
// workers any one element goes to (`diff`: scratch).
struct SweepResult {
  int64_t unique = 0;
  int max_fanout = 0;
};
SweepResult count_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<int32_t>& diff);

// The route pass: where every input comes from (the coordinator, another
// worker, this worker's own earlier output) and where every output goes.
// Without `peer_sends` the sends board to board are left out (everything a
// receiver records is still there): plan_for_pricing.
void route_plan(const QGraph& q, Plan& p, Route route, bool peer_sends = true);

// The arena plan of one worker: in-place outputs, then an offset for every
// buffer such that buffers in use at the same layer never overlap; each
// layer's ram_bytes and the worker's peak.
void layout_worker(const QGraph& q, WorkerPlan& wp);

}  // namespace ts::plan::steps
