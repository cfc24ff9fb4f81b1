// Failover (issue 12): a board that dies, hangs or garbles frames in the
// middle of an inference is dropped, the model is re-planned on the boards
// left, and the run still ends bit-exact with the single-process int8
// reference, reporting what happened in `failovers`. When the boards left
// cannot run the model, or none is left, the run ends with one clear line
// and a non-zero exit. Real board processes on loopback, the real model.
//
// Every command runs under `timeout 180`: a hang shows as exit status 124
// (a deadline, not a timing assertion).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "net/fault.h"
#include "support/shell.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::Shell;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

Shell run(const std::string& args) {
  return ts::testing::shell("timeout 180 " + std::string(TS_TINYSPLIT) + " run --timeout 2 " + args);
}

nlohmann::json run_json(const std::string& args) {
  const Shell r = run("--json " + args);
  EXPECT_EQ(r.code, 0) << "tinysplit run " << args << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.out);
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// The run survived: bit-exact on the boards left, one failover naming the
// board, and the boards in the report are exactly the others.
void expect_survived(const nlohmann::json& j, int started, int board, int layer, const std::string& reason_word) {
  ASSERT_FALSE(j.is_null());
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("boards_started").get<int>(), started);
  EXPECT_EQ(j.at("workers").get<int>(), started - 1);
  const auto& f = j.at("failovers");
  ASSERT_EQ(f.size(), 1u) << f.dump();
  EXPECT_EQ(f[0].at("board").get<int>(), board);
  if (layer >= 0) {
    EXPECT_EQ(f[0].at("layer").get<int>(), layer);
  }
  EXPECT_EQ(f[0].at("inference").get<int>(), 0);
  EXPECT_EQ(f[0].at("boards_left").get<int>(), started - 1);
  EXPECT_GT(f[0].at("redeploy_bytes").get<int64_t>(), 0);
  EXPECT_NE(f[0].at("reason").get<std::string>().find(reason_word), std::string::npos) << f[0].dump();
  ASSERT_EQ(j.at("per_worker").size(), size_t(started - 1));
  for (const auto& w : j.at("per_worker")) {
    EXPECT_NE(w.at("id").get<int>(), board);
    // The new plan's RAM figures are the ones the boards measured.
    if (j.at("route").get<std::string>() == "relay") {
      EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
    }
  }
}

// A fatal failure: one line, non-zero exit, nothing on stdout.
void expect_one_error_line(const Shell& r, const std::string& needle) {
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "the run hung";
  EXPECT_TRUE(r.out.empty()) << "a failed run printed a result: " << r.out.substr(0, 200);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tinysplit: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(have_model()) << "models/mobilenetv2 is missing: run scripts/setup.sh first"; }
};

// The fault acts after the board computed the layer and before any result
// leaves it, so in the paper's relay mode the coordinator sees it at exactly
// that layer.
TEST_F(FailoverTest, OneOfThreeBoardsKilledStalledOrCorrupt) {
  expect_survived(run_json("--workers 3 --inject-fault kill:1:30"), 3, 1, 30, "connection");
  expect_survived(run_json("--workers 3 --inject-fault stall:2:5"), 3, 2, 5, "no answer");
  expect_survived(run_json("--workers 3 --inject-fault corrupt:0:3"), 3, 0, 3, "malformed frame");
}

TEST_F(FailoverTest, OneOfEightBoardsKilledStalledOrCorrupt) {
  expect_survived(run_json("--workers 8 --inject-fault kill:5:20"), 8, 5, 20, "connection");
  expect_survived(run_json("--workers 8 --inject-fault stall:7:44"), 8, 7, 44, "no answer");
  expect_survived(run_json("--workers 8 --inject-fault corrupt:0:60"), 8, 0, 60, "malformed frame");
}

// --repeat goes on with the smaller swarm; every inference is checked.
TEST_F(FailoverTest, RepeatGoesOnWithTheBoardsLeft) {
  const auto j = run_json("--workers 4 --repeat 4 --inject-fault kill:2:30");
  expect_survived(j, 4, 2, 30, "connection");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("repeat").get<int>(), 4);
}

// Without a layer the fault acts at the board's layer nearest the middle.
TEST_F(FailoverTest, FaultWithoutALayer) {
  const auto j = run_json("--workers 3 --inject-fault kill:1");
  expect_survived(j, 3, 1, -1, "connection");
  ASSERT_FALSE(j.is_null());
  const int layer = j.at("failovers")[0].at("layer").get<int>();
  const int layers = int(j.at("per_layer").size());
  EXPECT_NEAR(layer, layers / 2, 2);
}

// Boards sending to boards (--route direct): no failover yet.
TEST_F(FailoverTest, DirectRoutingFailsFastWithOneLine) {
  // Failover covers the relay route; with --route direct a failure ends the
  // run with the one line naming the board (docs/reliability.md), never a
  // hang and never a result.
  for (const char* args : {"--workers 4 --route direct --inject-fault kill:1",
                           "--workers 3 --route direct --strategy spatial --inject-fault kill:1",
                           "--workers 3 --route direct --inject-fault corrupt:2:12"}) {
    SCOPED_TRACE(args);
    const Shell r = run(std::string("--json ") + args);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.code, 124) << "hung";
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 300);
    const std::string board = std::string(args).find("corrupt:2") != std::string::npos ? "board 2 " : "board 1 ";
    EXPECT_NE(r.err.find(board), std::string::npos) << r.err;
  }
}

TEST_F(FailoverTest, AllBoardsDeadIsOneClearLine) {
  expect_one_error_line(run("--json --workers 3 --inject-fault kill:0:4 --inject-fault kill:1:4 --inject-fault kill:2:4"),
                        "no board left");
  expect_one_error_line(run("--workers 1 --inject-fault stall:0:4"), "no board left");
}

// 224 on two boards with 1 MiB each fits; on one it does not.
TEST_F(FailoverTest, BoardsLeftTooSmallIsOneClearLine) {
  const Shell r = run("--json --size 224 --workers 2 --ram 1M --inject-fault kill:0:5");
  expect_one_error_line(r, "cannot run the model");
  EXPECT_NE(r.err.find("RAM"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("board 0"), std::string::npos) << r.err;  // the cause
}

// --no-failover: today's fail-fast behaviour, one line naming board and layer.
TEST_F(FailoverTest, NoFailoverFailsFast) {
  for (const char* kind : {"kill", "stall", "corrupt"}) {
    SCOPED_TRACE(kind);
    const Shell r = run(std::string("--json --no-failover --workers 3 --inject-fault ") + kind + ":1:10");
    expect_one_error_line(r, "board 1 (");
    EXPECT_NE(r.err.find("at layer 10 "), std::string::npos) << r.err;
  }
}

TEST(FailoverSpec, Parses) {
  using ts::net::FaultKind;
  auto f = ts::net::parse_fault_spec("kill:2:30");
  EXPECT_EQ(f.kind, FaultKind::Kill);
  EXPECT_EQ(f.board, 2);
  EXPECT_EQ(f.layer, 30);
  f = ts::net::parse_fault_spec("stall:0");
  EXPECT_EQ(f.kind, FaultKind::Stall);
  EXPECT_EQ(f.board, 0);
  EXPECT_EQ(f.layer, -1);
  f = ts::net::parse_fault_spec("corrupt:7:0");
  EXPECT_EQ(f.kind, FaultKind::Corrupt);
  EXPECT_EQ(ts::net::board_fault_arg(f), "corrupt:0");
  f = ts::net::parse_board_fault("stall:12");
  EXPECT_EQ(f.kind, FaultKind::Stall);
  EXPECT_EQ(f.layer, 12);
  for (const char* bad : {"", "kill", "kill:", "kill:x", "kill:1:", "kill:1:2:3", "explode:1", "kill:-1", "kill:70000",
                          ":1", "KILL:1", "kill: 1"})
    EXPECT_THROW(ts::net::parse_fault_spec(bad), ts::Error) << bad;
  for (const char* bad : {"kill", "kill:1:2", "stall:", "nap:3"})
    EXPECT_THROW(ts::net::parse_board_fault(bad), ts::Error) << bad;
}

TEST(FailoverSpec, BadSpecsAreOneClearLine) {
  ASSERT_TRUE(have_model());
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"--inject-fault explode:1", "unknown fault 'explode'"},
      {"--inject-fault kill:3", "only 3 boards"},
      {"--inject-fault kill:1:9999", "the model has layers 0.."},
      {"--inject-fault kill:1:x", "LAYER must be a number"},
      {"--inject-fault kill:1:2 --inject-fault stall:1:3", "already has a fault"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Shell r = run("--workers 3 " + c.args);
    expect_one_error_line(r, c.needle);
  }
  const Shell w = ts::testing::shell("timeout 60 " + std::string(TS_TINYSPLIT) + " worker --inject-fault kill");
  expect_one_error_line(w, "KIND:LAYER");
}

}  // namespace
