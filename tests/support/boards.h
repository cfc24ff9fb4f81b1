// Test support: a pseudo-random int8 input for a model, and one inference of
// a plan on local host boards (spawned `tinysplit worker` processes) through
// a plain Coordinator, no failover.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "coord/boards.h"
#include "coord/coordinator.h"
#include "model/qgraph.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::testing {

// The same values for the same seed on every machine (a linear congruential
// sequence, top byte).
inline std::vector<int8_t> random_int8_input(const QGraph& q, uint32_t seed) {
  std::vector<int8_t> x(size_t(q.shape(q.input).size()));
  for (auto& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = int8_t(seed >> 24);
  }
  return x;
}

// Starts tb's local boards, deploys p and runs `inferences` inferences of x;
// returns the last result. `each` (if given) sees every result.
template <typename Each>
coord::InferenceResult infer_on_host_boards(const QGraph& q, const plan::Plan& p, const plan::Testbed& tb,
                                            const std::vector<int8_t>& x, int inferences, Each each) {
  coord::SpawnOptions so;
  so.exe = TS_TINYSPLIT;
  coord::BoardSet boards(tb, so);
  const auto tmo = std::chrono::milliseconds(20000);
  coord::CoordOptions copt;
  copt.timeout = tmo;
  coord::Coordinator c(q, p, boards.links(tmo), copt);
  c.handshake();
  c.deploy();
  coord::InferenceResult r;
  for (int i = 0; i < inferences; ++i) {
    r = c.infer(x);
    each(r);
  }
  c.close();
  return r;
}

inline coord::InferenceResult infer_on_host_boards(const QGraph& q, const plan::Plan& p, const plan::Testbed& tb,
                                                   const std::vector<int8_t>& x) {
  return infer_on_host_boards(q, p, tb, x, 1, [](const coord::InferenceResult&) {});
}

}  // namespace ts::testing
