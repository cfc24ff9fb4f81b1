// The CLI as configuration (issue 21, item 7): `run`, `plan` and `simulate`
// refuse a combination in which an option does nothing, with one line naming
// both options, before any model work; and their strategy and route names,
// help and error lines come from one registry (plan/strategy.h kStrategies,
// plan/names.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "plan/names.h"
#include "plan/strategy.h"
#include "plan/testbed.h"
#include "support/shell.h"

namespace fs = std::filesystem;
using ts::testing::tinysplit;

namespace {

// Exit status 1, nothing on stdout, exactly the line `line` on stderr.
void expect_refused(const std::string& args, const std::string& line) {
  SCOPED_TRACE(args);
  const auto r = tinysplit(args);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 400);
  EXPECT_EQ(r.err, "tinysplit: error: " + line + "\n");
}

// A testbed of two boards this run does not start (nothing listens there:
// the refusals come before any connection).
fs::path remote_testbed() {
  const fs::path p = fs::temp_directory_path() / ("ts_cli_config_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << R"({"boards": [{"id": 0, "address": "127.0.0.1:9"}, {"id": 1, "address": "127.0.0.1:9"}]})";
  return p;
}

}  // namespace

// --workers: N, qemu:N, or kinds in order (KIND:N,...): every part parses
// or the whole is refused with one line; a mix of QEMU boards only has no
// local board for --delay-ms to slow.
TEST(CliConfig, RunWorkersKinds) {
  const std::string bad = "--workers: expected N, qemu:N or KIND:N,KIND:N... (KIND host, qemu, qemu-m7, qemu-m4, qemu-m55) with N in "
                          "1.." + std::to_string(ts::plan::kMaxBoards) + ", got '";
  expect_refused("run --workers qemu:2,teensy41:1", bad + "qemu:2,teensy41:1'");
  expect_refused("run --workers qemu:2,esp32:1", bad + "qemu:2,esp32:1'");
  expect_refused("run --workers qemu:2,", bad + "qemu:2,'");
  expect_refused("run --workers host:0", bad + "host:0'");
  expect_refused("run --workers qemu:1,qemu-m7:1 --delay-ms 1",
                 "run: --delay-ms does nothing with --workers qemu:1,qemu-m7:1 (it slows the local boards this run "
                 "starts, and there are none)");
}

TEST(CliConfig, RunRefusesOptionsThatDoNothing) {
  const fs::path tb = remote_testbed();
  const std::string t = tb.string();
  expect_refused("run --testbed " + t + " --ram 1M",
                 "run: --ram does nothing with --testbed (the testbed file gives each board's RAM)");
  expect_refused("run --testbed " + t + " --flash 4M",
                 "run: --flash does nothing with --testbed (the testbed file gives each board's flash)");
  expect_refused("run --workers 2 --in-flight 3",
                 "run: --in-flight does nothing without --objective throughput (it sets the images in flight inside "
                 "one group of boards)");
  expect_refused("run --workers 2 --objective throughput --probe",
                 "run: --objective throughput does not combine with --probe");
  expect_refused("run --testbed " + t + " --cycles-per-mac 2",
                 "run: --cycles-per-mac does nothing with --testbed " + t +
                     " (it slows the local boards this run starts, and there are none)");
  expect_refused("run --workers qemu:2 --delay-ms 1",
                 "run: --delay-ms does nothing with --workers qemu:2 (it slows the local boards this run starts, "
                 "and there are none)");
  expect_refused("run --testbed " + t + " --store /tmp/ts-nowhere",
                 "run: --store does nothing with --testbed " + t +
                     " (it keeps the flash of the boards this run starts, and there are none)");
  fs::remove(tb);
}

TEST(CliConfig, PlanRefusesOptionsThatDoNothing) {
  const std::string why_host = " (the host model has its own measured prices)";
  expect_refused("plan --workers 3 --cost-model host --cycles-per-mac 3",
                 "plan: --cycles-per-mac does nothing with --cost-model host" + why_host);
  expect_refused("plan --workers 3 --cost-model host --frame-latency-us 10",
                 "plan: --frame-latency-us does nothing with --cost-model host" + why_host);
  expect_refused("plan --workers 3 --cost-model host --op-cycles Conv=2",
                 "plan: --op-cycles does nothing with --cost-model host" + why_host);
  expect_refused("plan --workers 3 --host-costs data/costs/host.json",
                 "plan: --host-costs does nothing without --cost-model host (it is the host model's price file)");
  expect_refused("plan --workers 3 --cores 2",
                 "plan: --cores does nothing without --cost-model host (it is the host model's core count)");
  expect_refused("plan --workers 3 --k1 0.3",
                 "plan: --k1 does nothing without --allocation rating (K1 is a term of the rating, eq. 5)");
}

TEST(CliConfig, SimulateRefusesOptionsThatDoNothing) {
  expect_refused("simulate --workers 3 --images 5",
                 "simulate: --images does nothing without --objective throughput (it sets the images back to back of "
                 "a throughput run or of --plot's figure 22)");
  expect_refused("simulate --workers 3 --per-board",
                 "simulate: --per-board does nothing without --json (per-board details are part of --json)");
  for (const char* opt : {"--figures 8", "--png", "--plot-prefix x_"})
    expect_refused(std::string("simulate --workers 3 ") + opt,
                   "simulate: " + std::string(opt).substr(0, std::string(opt).find(' ')) +
                       " does nothing without --plot (it chooses what --plot draws)");
}

// The same options are accepted where they act (the checks are not blanket refusals).
TEST(CliConfig, OptionsAreAcceptedWhereTheyAct) {
  const auto plan = tinysplit("plan --workers 3 --cost-model host --cores 2 --json");
  EXPECT_EQ(plan.code, 0) << plan.err;
  const auto k1 = tinysplit("plan --workers 3 --allocation rating --k1 0.3 --json");
  EXPECT_EQ(k1.code, 0) << k1.err;
  const auto sim = tinysplit("simulate --workers 3 --objective throughput --images 4 --json --per-board");
  EXPECT_EQ(sim.code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\"per_board\""), std::string::npos);
}

// Every strategy and route of the registry is in the --help of the three
// commands, and a bad name is refused with the registry's list, by all three.
TEST(CliConfig, StrategyAndRouteNamesComeFromOneRegistry) {
  for (const char* cmd : {"run", "plan", "simulate"}) {
    SCOPED_TRACE(cmd);
    const auto help = tinysplit(std::string(cmd) + " --help");
    ASSERT_EQ(help.code, 0) << help.err;
    for (const auto& s : ts::plan::kStrategies)
      EXPECT_NE(help.out.find(std::string(s.name) + " (" + s.help + ")"), std::string::npos) << s.name;
    for (const auto& r : ts::plan::kRoutes)
      EXPECT_NE(help.out.find(std::string(r.name) + " (" + r.help + ")"), std::string::npos) << r.name;
    const std::string workers = std::string(cmd) == "run" ? " --workers 2" : " --workers 3";
    expect_refused(std::string(cmd) + workers + " --strategy bogus",
                   "unknown split strategy 'bogus' (expected neuron, spatial, channel, whole, reduce, fused, rows, fused-rows, reduce-all, auto)");
    expect_refused(std::string(cmd) + workers + " --route sideways", "unknown route 'sideways' (expected relay, direct)");
  }
  expect_refused("run --workers 2 --cost-model cheap", "--cost-model: expected teensy or host, got 'cheap'");
  expect_refused("run --workers 2 --cost-model auto", "--cost-model: expected teensy or host, got 'auto'");
  expect_refused("plan --workers 3 --cost-model cheap", "--cost-model: expected teensy or host, got 'cheap'");
  expect_refused("simulate --workers 3 --objective fastest", "unknown objective 'fastest' (expected latency, throughput)");
}

// The registry's own invariants: every name builds (auto aside), auto's
// per-block choices have distinct letters, and make_strategy's error line
// lists every name.
TEST(CliConfig, RegistryBuildsEveryStrategy) {
  std::string letters;
  for (const auto& s : ts::plan::kStrategies) {
    SCOPED_TRACE(s.name);
    if (s.make) EXPECT_EQ(ts::plan::make_strategy(s.name)->name(), s.name);
    else EXPECT_THROW(ts::plan::make_strategy(s.name), ts::Error);
    if (s.letter) {
      EXPECT_EQ(letters.find(s.letter), std::string::npos);
      letters += s.letter;
    }
  }
  EXPECT_EQ(letters, "nscwrfbg");  // part of every auto plan's id: must not change
  EXPECT_EQ(ts::plan::num_layer_choices(), 8);
  try {
    (void)ts::plan::make_strategy("bogus");
    FAIL();
  } catch (const ts::Error& e) {
    for (const auto& n : ts::plan::strategy_names()) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n;
  }
}
