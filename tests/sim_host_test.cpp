// The simulator's host model (sim/host.h, docs/simulator.md "Host boards"):
// boards that are processes sharing a few cores, and measured wake-up delays.
// No wall-clock assertions: everything here is simulated time.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "model/pipeline.h"
#include "plan/testbed.h"
#include "sim/host.h"
#include "sim/scenario.h"
#include "sim/sim.h"
#include "util/error.h"

namespace {

using namespace ts;

const QGraph& mobilenet112() {
  static const QGraph q =
      quantized_model(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v2.onnx", 0, QuantizeOptions{});
  return q;
}

// Host boards with no link costs: only compute (real CPU work, emulated sleeps) and wake-ups.
sim::Scenario host_scenario(int n, const std::string& strategy) {
  sim::Scenario s;
  s.testbed = sim::preset_testbed(sim::board_preset("teensy41"), n);
  for (auto& b : s.testbed.boards) b.ram_bytes = 64 << 20;
  s.alloc = plan::Allocation::Even;
  s.strategy = strategy;
  s.route = plan::Route::Direct;
  s.timing.cycles_per_mac = 1e-6;  // emulated compute negligible: the real CPU work decides
  s.timing.coord_bandwidth_kbps = 0;
  s.timing.board_bandwidth_kbps = 1e12;
  s.timing.host_s_per_mac = 1e-9;
  return s;
}

TEST(CpuPool, SharesCoresEquallyAmongRunningJobs) {
  sim::CpuPool pool(2, 1);
  pool.start(0, 1.0, 0.0);
  ASSERT_EQ(pool.due().size(), 1u);
  EXPECT_DOUBLE_EQ(pool.due()[0].t, 1.0);
  const uint64_t stale = pool.due()[0].version;
  pool.start(1, 1.0, 0.5);  // board 0 has 0.5 s left; both now run at half speed
  ASSERT_EQ(pool.due().size(), 2u);
  EXPECT_FALSE(pool.done(0, stale, 1.0));  // the old finishing time no longer holds
  double t0 = 0, t1 = 0;
  uint64_t v0 = 0;
  for (const auto& d : pool.due()) (d.board == 0 ? t0 : t1) = d.t, v0 = d.board == 0 ? d.version : v0;
  EXPECT_DOUBLE_EQ(t0, 1.5);
  EXPECT_DOUBLE_EQ(t1, 2.5);  // 0.5 s done by 1.5, then alone
  ASSERT_TRUE(pool.done(0, v0, 1.5));
  ASSERT_EQ(pool.due().size(), 1u);
  EXPECT_DOUBLE_EQ(pool.due()[0].t, 2.0);
  sim::CpuPool own(2, 0);
  EXPECT_FALSE(own.shared());
}

TEST(WakeSampler, DeterministicFromTheTableAndFrameWakesSkipTheSlack) {
  const std::vector<double> table{10e-6, 20e-6, 30e-6, 4000e-6};
  sim::WakeSampler a(table, 50e-6, 7), b(table, 50e-6, 7), none({}, 50e-6, 7);
  double sum = 0;
  for (int i = 0; i < 40000; ++i) {
    const double x = a.sleep();
    EXPECT_EQ(x, b.sleep());
    EXPECT_TRUE(x == table[0] || x == table[1] || x == table[2] || x == table[3]);
    sum += x;
  }
  EXPECT_NEAR(sum / 40000, (10 + 20 + 30 + 4000) * 1e-6 / 4, 0.05 * 1015e-6);  // every value equally likely
  for (int i = 0; i < 100; ++i) {
    const double f = a.frame();
    EXPECT_TRUE(f == 0.0 || f == 3950e-6) << f;  // below the slack: 0
  }
  EXPECT_EQ(none.sleep(), 0.0);
  EXPECT_FALSE(none.enabled());
  // Correlated in time: every wake-up in one slot gets the same draw; the
  // draws of different slots still come from the whole table.
  sim::WakeSampler slots(table, 50e-6, 7, 1e-3);
  std::set<double> seen;
  for (int k = 0; k < 400; ++k) {
    const double x = slots.sleep(k * 1e-3 + 1e-4);
    EXPECT_EQ(slots.sleep(k * 1e-3 + 9e-4), x) << k;
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), table.size());
}

TEST(SimHost, TwoSharedCoresAreSlowerThanEightByTheExpectedAmount) {
  // 8 boards whose layers are real CPU work: on 8 cores each board has its own;
  // on 2 shared cores the 8 compute at a quarter of the speed. Work is
  // conserved (2 cores do at most 2 s of CPU per second, so the run takes at
  // least the total work over 2) and no job runs slower than 2/8 of a core
  // (so at most 4x the 8-core time).
  const QGraph& q = mobilenet112();
  sim::Scenario s = host_scenario(8, "spatial");
  s.timing.host_cores = 8;
  const sim::RunRecord r8 = sim::run_scenario(q, s);
  s.timing.host_cores = 2;
  const sim::RunRecord r2 = sim::run_scenario(q, s);
  s.timing.host_cores = 0;  // one CPU per board: the same as 8 cores for 8 boards
  const sim::RunRecord own = sim::run_scenario(q, s);
  const double work = double(r8.total_macs) * 1e-9;
  EXPECT_NEAR(own.result.total_s, r8.result.total_s, 1e-9);
  EXPECT_GE(r2.result.total_s, work / 2 - 1e-9);
  EXPECT_LE(r2.result.total_s, 4 * r8.result.total_s + 1e-9);
  // The boards compute side by side, so 2 shared cores stay busy: the run
  // takes close to the total work over 2 (not the 8-core time: the busiest
  // board there does more than the average, halos included).
  EXPECT_LE(r2.result.total_s, 1.05 * work / 2) << "total work " << work << " s";
  EXPECT_GT(r2.result.total_s / r8.result.total_s, 3.0);
  // The testbed's host_cores is used when the timing model does not say.
  s.testbed.host_cores = 2;
  EXPECT_NEAR(sim::run_scenario(q, s).result.total_s, r2.result.total_s, 1e-12);
  // Emulated compute longer than the real work hides the sharing (boards sleep, using no core).
  s.timing.cycles_per_mac = 20;
  const double slow = sim::run_scenario(q, s).result.total_s;
  s.testbed.host_cores = 0;
  EXPECT_NEAR(sim::run_scenario(q, s).result.total_s, slow, 1e-9);
}

TEST(SimHost, OneBoardPaysEveryWakeUpExactly) {
  // One board, no link or frame costs, every wake-up 1 ms: the inference is
  // its emulated compute, plus one sleep overshoot per layer it computes, plus
  // the wake-up on the input's arrival and the coordinator's for the output
  // (those two without the timer slack).
  const QGraph& q = mobilenet112();
  sim::Scenario s = host_scenario(1, "spatial");
  s.timing.cycles_per_mac = 3;
  s.timing.host_s_per_mac = 0;
  const sim::RunRecord base = sim::run_scenario(q, s);
  s.timing.wake_quantiles_s = {1e-3};
  s.timing.timer_slack_s = 50e-6;
  const sim::RunRecord r = sim::run_scenario(q, s);
  int layers = 0;
  for (const auto& l : r.result.layers) layers += l.compute_s > 0;
  EXPECT_NEAR(base.result.total_s, double(r.total_macs) * 3 / 600e6, 1e-6);
  EXPECT_NEAR(r.result.total_s, base.result.total_s + layers * 1e-3 + 2 * 0.95e-3, 1e-9);
}

TEST(SimHost, WakeUpDelaysSlowEveryModeAndStayDeterministic) {
  const QGraph& q = mobilenet112();
  for (const char* mode : {"auto/direct", "neuron/relay"}) {
    const std::string m = mode;
    sim::Scenario s;
    s.testbed = sim::preset_testbed(sim::board_preset("teensy41"), 3);
    s.alloc = plan::Allocation::Even;
    s.strategy = m.substr(0, m.find('/'));
    s.route = m.substr(m.find('/') + 1) == "relay" ? plan::Route::Relay : plan::Route::Direct;
    s.timing.cycles_per_mac = 20;
    s.timing.window = 8;
    s.timing.coord_bandwidth_kbps = 0;
    s.timing.board_bandwidth_kbps = 1e9;
    const double base = sim::run_scenario(q, s).result.total_s;
    s.timing.wake_quantiles_s = {50e-6, 100e-6, 200e-6, 3e-3};
    s.timing.timer_slack_s = 50e-6;
    const double with = sim::run_scenario(q, s).result.total_s;
    EXPECT_GT(with, base + 66 * 50e-6) << mode;  // at least the smallest overshoot per layer
    EXPECT_EQ(sim::run_scenario(q, s).result.total_s, with) << mode;
  }
}

TEST(HostCalibration, ReadsTheScriptsFileAndRefusesBadInputWithOneLine) {
  nlohmann::json good = {{"command", "scripts/calibrate_host.sh"}, {"nproc", 2}, {"timer_slack_us", 50},
                         {"host_ns_per_mac", 0.25}, {"wake_us", {40, 60, 900}}};
  sim::TimingModel m;
  sim::apply_host_calibration(good, "c.json", m);
  EXPECT_EQ(m.host_cores, 2);
  EXPECT_DOUBLE_EQ(m.host_s_per_mac, 0.25e-9);
  EXPECT_DOUBLE_EQ(m.timer_slack_s, 50e-6);
  ASSERT_EQ(m.wake_quantiles_s.size(), 3u);
  EXPECT_DOUBLE_EQ(m.wake_quantiles_s[2], 900e-6);
  EXPECT_NEAR(m.sleep_overshoot_s, 1000e-6 / 3, 1e-12);  // injected delays overshoot by the mean
  sim::TimingModel keep;
  keep.host_cores = 8;  // --host-cores wins over the file's nproc
  sim::apply_host_calibration(good, "c.json", keep);
  EXPECT_EQ(keep.host_cores, 8);

  auto refused = [&](nlohmann::json doc, const std::string& what) {
    sim::TimingModel t;
    try {
      sim::apply_host_calibration(doc, "c.json", t);
      ADD_FAILURE() << "accepted: " << doc.dump();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("host calibration c.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json d = good;
    if (v.is_null()) d.erase(key);
    else d[key] = v;
    return d;
  };
  refused(with("wake_us", nullptr), "missing key 'wake_us'");
  refused(with("wake_us", nlohmann::json::array()), "'wake_us' must be a list");
  refused(with("wake_us", {60, 40}), "ascending");
  refused(with("wake_us", {-1, 40}), "'wake_us' values");
  refused(with("wake_us", {"fast"}), "'wake_us' values");
  refused(with("nproc", 0), "'nproc'");
  refused(with("nproc", 2.5), "'nproc' must be a whole number");
  refused(with("host_ns_per_mac", "0.2"), "'host_ns_per_mac' must be a number");
  refused(with("timer_slack_us", nullptr), "missing key 'timer_slack_us'");
  refused(nlohmann::json::array(), "expected a JSON object");
  try {
    sim::TimingModel t;
    sim::load_host_calibration("/nonexistent/calib.json", t);
    ADD_FAILURE() << "a missing file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
  // The timing model's own check refuses what a hand-made model gets wrong.
  sim::TimingModel bad;
  bad.wake_quantiles_s = {2e-3, 1e-3};
  EXPECT_THROW(sim::validate(bad), Error);
  bad.wake_quantiles_s = {};
  bad.host_cores = -1;
  EXPECT_THROW(sim::validate(bad), Error);
}

TEST(HostCalibration, TestbedCarriesTheHostsCores) {
  const plan::Testbed t = plan::parse_testbed(R"({"host_cores": 2, "boards": [{"id": 0}, {"id": 1}]})", "tb");
  EXPECT_EQ(t.host_cores, 2);
  EXPECT_EQ(plan::testbed_from_json(plan::to_json(t), "again"), t);
  EXPECT_EQ(plan::parse_testbed(R"({"boards": [{"id": 0}]})", "tb").host_cores, 0);
  for (const char* bad : {R"({"host_cores": 0, "boards": [{"id": 0}]})", R"({"host_cores": "2", "boards": [{"id": 0}]})",
                          R"({"host_cores": 1.5, "boards": [{"id": 0}]})"}) {
    try {
      plan::parse_testbed(bad, "tb");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'host_cores'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
