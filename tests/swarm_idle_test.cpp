// A swarm left idle longer than its boards' idle limit (`worker
// --idle-timeout`, which closes a silent connection, told in HELLO) goes on
// without a failover: its next inference opens the links again first
// (SwarmOptions::relink_after, or half the boards' limit if smaller), and
// every board still holds its fragment, so nothing is deployed. Without that the same pause costs a failover that drops a
// healthy board (shown here too, so the pause is known to close the links).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "coord/failover.h"
#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/quantize.h"
#include "plan/plan.h"
#include "support/boards.h"
#include "support/tiny_qgraph.h"
#include "support/worker_process.h"

namespace {

using namespace ts;

struct Model {
  QGraph q;
  plan::Testbed tb;
  plan::PlanOptions popt;
};

Model tiny_on(const ts::testing::Swarm3& s) {
  Model m;
  m.q = ts::testing::tiny_qgraph(2, 7);
  m.tb = plan::default_testbed(3);
  for (int i = 0; i < 3; ++i) m.tb.boards[size_t(i)].address = s.boards[size_t(i)]->address;
  m.popt.strategy = "spatial";
  m.popt.route = plan::Route::Direct;
  return m;
}

// Two inferences with a pause longer than the boards' idle limit between.
std::unique_ptr<coord::Swarm> pause_between(const Model& m, const ts::testing::Swarm3& s,
                                            std::chrono::milliseconds relink_after, std::vector<int8_t>* out2) {
  std::vector<std::string> addr;
  for (auto& b : s.boards) addr.push_back(b->address);
  coord::SwarmOptions o;
  o.timeout = std::chrono::milliseconds(5000);
  o.relink_after = relink_after;
  const plan::Plan p = plan::make_plan(m.q, m.tb, m.popt);
  auto swarm = std::make_unique<coord::Swarm>(m.q, m.tb, m.popt, addr, p, o);
  swarm->start();
  swarm->deploy();
  const auto x = ts::testing::random_int8_input(m.q, 5);
  const auto ref = run_int8_all(m.q, x);
  EXPECT_EQ(swarm->infer(x, &ref).output, ref[m.q.output]);
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  *out2 = swarm->infer(x, &ref).output;
  EXPECT_EQ(*out2, ref[m.q.output]);
  return swarm;
}

// The boards tell their 1 s idle limit in HELLO: with the default
// relink_after (20 s) the swarm opens its links again after half of it.
TEST(SwarmIdle, APauseLongerThanTheBoardsIdleLimitCostsNoFailover) {
  const ts::testing::Swarm3 s("swarm_idle", "--idle-timeout 1");
  ASSERT_TRUE(s.up());
  const Model m = tiny_on(s);
  std::vector<int8_t> out;
  const auto swarm = pause_between(m, s, coord::SwarmOptions{}.relink_after, &out);
  EXPECT_TRUE(swarm->failovers().empty()) << swarm->failovers().front().reason;
  EXPECT_EQ(swarm->boards().size(), 3u);
}

TEST(SwarmIdle, WithoutRelinkingThePauseLooksLikeAFailure) {
  const ts::testing::Swarm3 s("swarm_idle_off", "--idle-timeout 1");
  ASSERT_TRUE(s.up());
  const Model m = tiny_on(s);
  std::vector<int8_t> out;
  const auto swarm = pause_between(m, s, std::chrono::milliseconds(0), &out);
  EXPECT_EQ(swarm->failovers().size(), 1u);
}

}  // namespace
