// The cost model for host testbeds (plan/cost.h): the host cost file's
// parser, which testbeds count as host ones, the `whole` strategy, what
// `auto` chooses when waits are dear or free, that the estimate's parts add
// up, and that a plan mixing `whole` with split blocks is bit-exact on host
// boards. No wall clock: every check is on plans and model figures.
// Runtime: about 10 s of CPU (MobileNetV2 at 112 planned a dozen times, one
// inference on 3 host boards).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "model/pipeline.h"
#include "plan/cost.h"
#include "plan/plan.h"
#include "support/boards.h"

namespace {

using namespace ts;

const QGraph& mobilenet112() {
  static const QGraph q =
      quantized_model(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v2.onnx", 0, QuantizeOptions{});
  return q;
}

const char* kGood = R"({"target": "host", "source": "test",
  "seconds_per_mac": {"conv": 2e-10, "pointwise": 1e-10, "depthwise": 4e-10, "linear": 1.5e-10, "Add": 1e-9,
                      "default": 1.6e-10},
  "exchange_s": 2e-4, "seconds_per_byte": 1e-9, "fit": [1, 2, 3]})";

plan::HostCosts costs(double exchange_s, double s_per_byte) {
  plan::HostCosts h = plan::parse_host_costs(kGood, "test");
  h.exchange_s = exchange_s;
  h.s_per_byte = s_per_byte;
  return h;
}

plan::Plan auto_plan(const plan::CostModel& m, int n = 3, const std::string& strategy = "auto") {
  plan::PlanOptions po;
  po.strategy = strategy;
  po.route = plan::Route::Direct;
  po.routing = false;
  po.cost = m;
  return plan::make_plan(mobilenet112(), plan::default_testbed(n, "local"), po);
}

int count(const plan::Plan& p, const std::string& s) {
  int k = 0;
  for (const auto& v : p.layer_strategy) k += v == s;
  return k;
}

}  // namespace

TEST(HostCosts, ParsesTheFile) {
  const plan::HostCosts h = plan::parse_host_costs(kGood, "test");
  EXPECT_DOUBLE_EQ(h.per_mac.conv, 2e-10);
  EXPECT_DOUBLE_EQ(h.per_mac.pointwise, 1e-10);
  EXPECT_DOUBLE_EQ(h.per_mac.depthwise, 4e-10);
  EXPECT_DOUBLE_EQ(h.per_mac.op[size_t(core::QOp::Gemm)], 1.5e-10);
  EXPECT_DOUBLE_EQ(h.per_mac.op[size_t(core::QOp::Add)], 1e-9);
  EXPECT_DOUBLE_EQ(h.default_s_per_mac, 1.6e-10);
  EXPECT_DOUBLE_EQ(h.exchange_s, 2e-4);
  EXPECT_DOUBLE_EQ(h.s_per_byte, 1e-9);
  EXPECT_EQ(h.source, "test");
  // The committed file parses too.
  EXPECT_NO_THROW(plan::load_host_costs(std::string(TS_SOURCE_DIR) + "/data/costs/host.json"));
}

TEST(HostCosts, RejectsBadFiles) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[1, 2]", "expected a JSON object"},
      {"{", "not JSON"},
      {R"({"target": "cortex-m7", "seconds_per_mac": {"default": 1e-10}, "exchange_s": 0, "seconds_per_byte": 0})",
       "\"target\" must be \"host\""},
      {R"({"exchange_s": 0, "seconds_per_byte": 0})", "seconds_per_mac"},
      {R"({"seconds_per_mac": {"conv": 1e-10}, "exchange_s": 0, "seconds_per_byte": 0})", "\"default\""},
      {R"({"seconds_per_mac": {"default": 1e-10, "warp": 1e-10}, "exchange_s": 0, "seconds_per_byte": 0})",
       "unknown kind \"warp\""},
      {R"({"seconds_per_mac": {"default": -1e-10}, "exchange_s": 0, "seconds_per_byte": 0})", "positive"},
      {R"({"seconds_per_mac": {"default": "fast"}, "exchange_s": 0, "seconds_per_byte": 0})", "positive"},
      {R"({"seconds_per_mac": {"default": 0.2}, "exchange_s": 0, "seconds_per_byte": 0})", "over 1e-6"},
      {R"({"seconds_per_mac": {"default": 1e-10}, "seconds_per_byte": 0})", "missing \"exchange_s\""},
      {R"({"seconds_per_mac": {"default": 1e-10}, "exchange_s": -1, "seconds_per_byte": 0})", "non-negative"},
      {R"({"seconds_per_mac": {"default": 1e-10}, "exchange_s": 200, "seconds_per_byte": 0})", "over 1 s"},
      {R"({"seconds_per_mac": {"default": 1e-10}, "exchange_s": 0, "seconds_per_byte": null})", "non-negative"},
      {R"({"seconds_per_mac": {"default": 1e-10}, "exchange_s": 0})", "missing \"seconds_per_byte\""},
  };
  for (const auto& [text, what] : bad) {
    SCOPED_TRACE(text);
    try {
      plan::parse_host_costs(text, "bad.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("host cost file bad.json: "), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(plan::load_host_costs("/nonexistent/host.json"), Error);
}

TEST(HostCosts, HostTestbedsAreProcessesOnThisMachine) {
  plan::Testbed t = plan::default_testbed(3, "local");
  EXPECT_TRUE(plan::host_testbed(t));
  t.boards[1].address = "127.0.0.1:5000";
  t.boards[2].address = "localhost:5001";
  EXPECT_TRUE(plan::host_testbed(t));
  t.boards[2].address = "[::1]:5001";
  EXPECT_TRUE(plan::host_testbed(t));
  t.boards[0].address = "192.168.1.20:5000";
  EXPECT_FALSE(plan::host_testbed(t));
  EXPECT_FALSE(plan::host_testbed(plan::default_testbed(2, "qemu")));
}

TEST(HostCosts, WholeStrategyPutsEveryLayerOnTheLargestShare) {
  const QGraph& q = mobilenet112();
  const plan::WholeStrategy whole;
  const std::vector<double> shares{1.0, 3.0, 3.0, 0.5};
  EXPECT_EQ(plan::WholeStrategy::board(shares), 1u);
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const auto regions = whole.split_regions(q, int(n), shares);
    ASSERT_EQ(regions.size(), 4u);
    EXPECT_TRUE(regions[0].empty() && regions[2].empty() && regions[3].empty());
    ASSERT_EQ(regions[1].size(), 1u);
    EXPECT_EQ(regions[1][0].elems(), q.desc(int(n)).out.size());
  }
  const plan::Plan p = plan::plan_with_shares(q, plan::default_testbed(4, "local"), shares, whole, false,
                                              plan::Route::Direct);
  for (int w : {0, 2, 3}) {
    EXPECT_EQ(p.workers[size_t(w)].macs, 0) << w;
    EXPECT_EQ(p.workers[size_t(w)].bytes_in + p.workers[size_t(w)].bytes_out, 0) << w;
  }
  EXPECT_GT(p.workers[1].macs, 0);
  EXPECT_EQ(count(p, "whole"), int(q.nodes.size()));
}

TEST(HostCosts, EstimatePartsAddUp) {
  for (double ex : {0.0, 3e-4}) {
    const plan::CostModel m = plan::host_cost_model(costs(ex, 2e-9));
    for (const char* s : {"spatial", "neuron", "whole", "auto"}) {
      SCOPED_TRACE(s);
      const plan::Plan p = auto_plan(m, 3, s);
      const plan::EstimateParts parts = plan::estimate_parts(mobilenet112(), p, plan::default_testbed(3, "local"), m);
      EXPECT_NEAR(parts.compute_s + parts.steps * m.frame_latency_s + parts.byte_s - parts.hidden_s, p.est_latency_s,
                  1e-9 + 1e-9 * p.est_latency_s);
      EXPECT_GT(parts.compute_s, 0);
      EXPECT_GE(parts.steps, 2);  // at least the input in and the logits out
    }
  }
}

TEST(HostCosts, CoresLimitTheParallelCompute) {
  // Three boards on one core compute no faster than one board.
  plan::CostModel m = plan::host_cost_model(costs(0, 0));
  m.cores = 1;
  const QGraph& q = mobilenet112();
  const plan::Testbed tb = plan::default_testbed(3, "local");
  const double split = plan::estimate_parts(q, auto_plan(m, 3, "spatial"), tb, m).compute_s;
  const double whole = plan::estimate_parts(q, auto_plan(m, 3, "whole"), tb, m).compute_s;
  EXPECT_GE(split, 0.98 * whole);
  m.cores = 3;
  const double split3 = plan::estimate_parts(q, auto_plan(m, 3, "spatial"), tb, m).compute_s;
  EXPECT_LT(split3, 0.5 * whole);
}

TEST(HostCosts, AutoChoosesByTheHostPrices) {
  const QGraph& q = mobilenet112();
  const plan::Testbed tb = plan::default_testbed(3, "local");
  // Waits for free and three cores: splitting pays everywhere it computes,
  // so no block stays on one board.
  plan::CostModel free_waits = plan::host_cost_model(costs(0, 0));
  free_waits.cores = 3;
  const plan::Plan split = auto_plan(free_waits);
  EXPECT_EQ(count(split, "whole"), 0);
  // Dear waits (1 ms each) on two cores: every exchange costs more than a
  // block's compute saves, so the model keeps the whole graph on one board.
  plan::CostModel dear = plan::host_cost_model(costs(1e-3, 1e-9));
  dear.cores = 2;
  const plan::Plan one = auto_plan(dear);
  EXPECT_EQ(count(one, "whole"), int(q.nodes.size()));
  // In between: a mix, with fewer exchange steps than the free-wait plan and
  // an estimate no worse than any single strategy's under the same prices.
  plan::CostModel mid = plan::host_cost_model(costs(5e-5, 1e-9));
  mid.cores = 2;
  const plan::Plan mix = auto_plan(mid);
  const double steps_mix = plan::estimate_parts(q, mix, tb, mid).steps;
  const double steps_split = plan::estimate_parts(q, split, tb, mid).steps;
  EXPECT_LT(steps_mix, steps_split);
  for (const char* s : {"neuron", "spatial", "channel", "whole"}) {
    const plan::Plan fixed = auto_plan(mid, 3, s);
    EXPECT_LE(mix.est_latency_s, fixed.est_latency_s * 1.001) << s;
  }
}

TEST(HostCosts, MixedWholeAndSplitPlanIsBitExact) {
  const QGraph& q = mobilenet112();
  const plan::Testbed tb = plan::default_testbed(3, "local");
  plan::CostModel mid = plan::host_cost_model(costs(5e-5, 1e-9));
  mid.cores = 2;
  const plan::Plan p = auto_plan(mid);
  std::set<std::string> used(p.layer_strategy.begin(), p.layer_strategy.end());
  ASSERT_TRUE(used.count("whole")) << "the mid-price plan has no whole block";
  ASSERT_GT(used.size(), 1u) << "the mid-price plan has one strategy only";
  const std::vector<int8_t> x = ts::testing::random_int8_input(q, 11);
  const auto r = ts::testing::infer_on_host_boards(q, p, tb, x);
  EXPECT_EQ(r.output, run_int8(q, x));
}
