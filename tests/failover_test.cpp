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

#include "coord/failover.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <csignal>
#include <fstream>
#include <memory>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "net/fault.h"
#include "support/shell.h"
#include "support/worker_process.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::Shell;
using ts::testing::WorkerProcess;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

Shell run(const std::string& args) {
  return ts::testing::shell("timeout 180 " + std::string(TS_TINYSPLIT) + " " +
                            ts::testing::at_paper_size("run --timeout 2 " + args));
}

nlohmann::json run_json(const std::string& args) {
  const Shell r = run("--json " + args);
  EXPECT_EQ(r.code, 0) << "tinysplit run " << args << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.out);
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// Whether `reason` holds one of the '|'-separated words of `words`.
bool reason_has_one_of(const std::string& reason, const std::string& words) {
  size_t from = 0;
  while (true) {
    const size_t bar = words.find('|', from);
    const std::string word = words.substr(from, bar == std::string::npos ? std::string::npos : bar - from);
    if (reason.find(word) != std::string::npos) return true;
    if (bar == std::string::npos) return false;
    from = bar + 1;
  }
}

// The run survived: bit-exact on the boards left, one failover naming the
// board, and the boards in the report are exactly the others.
void expect_survived(const nlohmann::json& j, int started, int board, int layer, const std::string& reason_words) {
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
  EXPECT_GT(f[0].at("redeployed_bytes").get<int64_t>(), 0);
  EXPECT_TRUE(reason_has_one_of(f[0].at("reason").get<std::string>(), reason_words)) << f[0].dump();
  // The inference went on from a layer no later than the one the board
  // failed at, every layer before it reported and verified.
  const int resumed = f[0].at("resumed_at_layer").get<int>();
  EXPECT_GE(resumed, 0);
  if (layer >= 0) {
    EXPECT_LE(resumed, layer);
  }
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  ASSERT_EQ(j.at("per_worker").size(), size_t(started - 1));
  for (const auto& w : j.at("per_worker")) {
    EXPECT_NE(w.at("id").get<int>(), board);
    // The new plan's RAM figures are the ones the boards measured (a
    // resumed last inference ran only the layers from its resume point).
    if (j.at("route").get<std::string>() == "relay") {
      if (resumed == 0 || j.at("repeat").get<int>() > 1) {
        EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
      } else {
        EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
      }
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

// The paper's mode (relay route, runs of neurons): the tests written for it
// name it, since the defaults became --strategy auto --route direct.
const std::string kPaper = " --strategy neuron --route relay";

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(have_model()) << "models/mobilenetv2 is missing: run scripts/setup.sh first"; }
};

// The fault acts after the board computed the layer and before any result
// leaves it, so in the paper's relay mode the coordinator sees it at exactly
// that layer.
TEST_F(FailoverTest, OneOfThreeBoardsKilledStalledOrCorrupt) {
  expect_survived(run_json("--workers 3 --inject-fault kill:1:30" + kPaper), 3, 1, 30, "connection");
  expect_survived(run_json("--workers 3 --inject-fault stall:2:5" + kPaper), 3, 2, 5, "no answer");
  expect_survived(run_json("--workers 3 --inject-fault corrupt:0:3" + kPaper), 3, 0, 3, "malformed frame");
}

TEST_F(FailoverTest, OneOfEightBoardsKilledStalledOrCorrupt) {
  expect_survived(run_json("--workers 8 --inject-fault kill:5:20" + kPaper), 8, 5, 20, "connection");
  expect_survived(run_json("--workers 8 --inject-fault stall:7:44" + kPaper), 8, 7, 44, "no answer");
  expect_survived(run_json("--workers 8 --inject-fault corrupt:0:60" + kPaper), 8, 0, 60, "malformed frame");
}

// Only what changed travels after a failover: the boards left hold the old
// plan's fragments, and each gets a patch of its own (wire PATCH) instead
// of its new fragment whole (issue 26's figure: at most a quarter of a full
// deploy); and the interrupted inference resumes exactly at the layer the
// board died in, every layer before it reported and verified (a board
// writes each layer's DONE before its next compute: core/worker_links.h
// flush_before_compute).
TEST_F(FailoverTest, AFailoverRedeploysOnlyWhatChangedAndResumes) {
  // (Layer 20: at 112 on 8 boards `auto` bands the 7x7 maps from layer 22 on
  // in whole rows on 7 of the 8 boards, and board 3 has no share of them.)
  const auto j = run_json("--workers 8 --repeat 3 --inject-fault kill:3:20");
  // Its link, or a peer's link to it, ends: closed, or reset when the killed
  // process still had unread bytes in its socket (the kernel then sends RST).
  expect_survived(j, 8, 3, 20, "closed|connection reset");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 3);
  const auto& f = j.at("failovers")[0];
  const double full = j.at("deploy").at("full_bytes").get<double>();
  EXPECT_EQ(j.at("deploy").at("bytes").get<double>(), full);  // the first deploy: every fragment whole
  EXPECT_LE(f.at("redeployed_bytes").get<double>(), 0.25 * full) << f.dump();
  EXPECT_LE(f.at("redeployed_bytes").get<double>(), 0.25 * f.at("full_deploy_bytes").get<double>()) << f.dump();
  EXPECT_GE(f.at("resumed_at_layer").get<int>(), 20) << f.dump();  // (and <= 20: expect_survived)
  // Boards that take the time of the Teensy 4.1 boards they stand in for
  // (--emulate) have reported every layer before the one they die in. With
  // plain frames: coded ones (the default) reach the dying board sooner, and
  // a DONE of the layer before can then still be on its way to the
  // coordinator (the inference resumes a layer earlier, still bit-exact).
  // On a loaded machine a surviving board may still be computing an earlier
  // layer when board 3 dies: the resume point is then held back by that
  // board (kept_held_by_index), never by the dead one.
  const auto e = run_json("--workers 8 --repeat 2 --emulate --code off --inject-fault kill:3:20");
  ASSERT_FALSE(e.is_null());
  EXPECT_TRUE(e.at("match_reference").get<bool>());
  ASSERT_EQ(e.at("failovers").size(), 1u) << e.at("failovers").dump();
  const auto& fe = e.at("failovers")[0];
  const int kept = fe.at("kept_layers").get<int>();
  EXPECT_LE(fe.at("resumed_at_layer").get<int>(), kept) << fe.dump();
  EXPECT_LE(kept, 20) << fe.dump();
  ASSERT_TRUE(fe.at("kept_held_by_index").is_number()) << fe.dump();
  if (kept < 20) {
    EXPECT_NE(fe.at("kept_held_by_index").get<int>(), 3) << fe.dump();
  }
  EXPECT_EQ(e.at("verified_layers").get<int>(), e.at("layers").get<int>());
}

// Resuming works on every strategy and route: local runs, outputs computed
// in place (bands of rows, direct), partial sums (reduce), the relay route.
// Every DONE leaves before the board's next compute, so the inference
// resumes exactly at the layer the fault hit (--delay-ms 1: slower boards,
// as they once had to be for this).
TEST_F(FailoverTest, TheInterruptedInferenceResumesOnEveryStrategyAndRoute) {
  struct Case {
    const char* args;
    int workers, board, layer;
  };
  const Case cases[] = {
      {"--strategy spatial --route direct --inject-fault kill:2:30", 4, 2, 30},
      {"--strategy reduce --route direct --inject-fault kill:1:12", 6, 1, 12},
      {"--strategy channel --route direct --inject-fault corrupt:3:44", 5, 3, 44},
      {"--strategy neuron --route relay --inject-fault kill:2:30", 4, 2, 30},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const auto j = run_json("--workers " + std::to_string(c.workers) + " --repeat 2 --delay-ms 1 " + c.args);
    ASSERT_FALSE(j.is_null());
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 2);
    ASSERT_EQ(j.at("failovers").size(), 1u) << j.at("failovers").dump();
    const auto& f = j.at("failovers")[0];
    EXPECT_EQ(f.at("board").get<int>(), c.board);
    EXPECT_EQ(f.at("resumed_at_layer").get<int>(), c.layer) << f.dump();
    EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  }
}

// --repeat goes on with the smaller swarm; every inference is checked.
TEST_F(FailoverTest, RepeatGoesOnWithTheBoardsLeft) {
  const auto j = run_json("--workers 4 --repeat 4 --inject-fault kill:2:30" + kPaper);
  expect_survived(j, 4, 2, 30, "connection");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("repeat").get<int>(), 4);
}

// With the defaults local boards are planned as the Teensy 4.1 boards they
// stand in for, so every board has a share and a fault acts where it is
// aimed. With --cost-model host (one board may compute everything on this
// machine) a fault on a board left without a share of its layer is refused
// with one line, not silently ignored.
TEST_F(FailoverTest, DefaultsPlanSoThatTheInjectedFaultActs) {
  const auto j = run_json("--size 112 --workers 4 --repeat 2 --inject-fault kill:2:30");
  expect_survived(j, 4, 2, 30, "board");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("cost_model").get<std::string>(), "teensy");
  EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 2);
  // `whole` keeps every layer on one board, so three of the four have no
  // share of layer 30 (found from that plan's per-board layers).
  const auto whole = run_json("--workers 4 --cost-model host --strategy whole");
  ASSERT_FALSE(whole.is_null());
  std::vector<int> idle;
  for (const auto& w : whole.at("per_worker"))
    if (w.at("planned_layer_ram_bytes").at(30).get<int64_t>() == 0) idle.push_back(w.at("id").get<int>());
  ASSERT_EQ(idle.size(), 3u) << whole.at("per_worker").dump();
  expect_one_error_line(run("--workers 4 --cost-model host --strategy whole --inject-fault kill:" +
                            std::to_string(idle[0]) + ":30"),
                        "no share of layer 30");
}

// Without a layer the fault acts at the board's layer nearest the middle, and
// the failover names that layer on both routes (with direct routing the loss
// may reach the coordinator first as a peer's report from another layer).
TEST_F(FailoverTest, FaultWithoutALayer) {
  for (const char* route : {"relay", "direct"}) {
    SCOPED_TRACE(route);
    const auto j = run_json("--workers 3 --strategy neuron --route " + std::string(route) + " --inject-fault kill:1");
    expect_survived(j, 3, 1, -1, std::string(route) == "relay" ? "connection" : "board");
    ASSERT_FALSE(j.is_null());
    const int layer = j.at("failovers")[0].at("layer").get<int>();
    const int layers = int(j.at("per_layer").size());
    EXPECT_NEAR(layer, layers / 2, 2);
  }
}

// Boards sending to boards (--route direct): a board that dies or hangs is
// dropped like in the relay route, and the boards left, which also hold links
// to each other, rerun the inference bit-exact; --repeat goes on.
TEST_F(FailoverTest, DirectRoutingFailsOver) {
  for (const char* args : {"--workers 4 --repeat 3 --route direct --strategy spatial --inject-fault kill:2:30",
                           "--workers 3 --repeat 2 --route direct --strategy spatial --inject-fault stall:1:10",
                           "--workers 3 --route direct --strategy neuron --inject-fault corrupt:2:12"}) {
    SCOPED_TRACE(args);
    const std::string a = args;
    const int started = a.find("--workers 4") != std::string::npos ? 4 : 3;
    const int board = a.find(":2:") != std::string::npos ? 2 : 1;
    // The failover names the layer the fault was injected at, even when the
    // loss reached the coordinator first as a peer's report from another
    // layer (before, kill:2:30 showed as layer 1 or so).
    const int layer = a.find("corrupt") != std::string::npos ? 12 : a.find("stall") != std::string::npos ? 10 : 30;
    const nlohmann::json j = run_json(a);
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j.at("route").get<std::string>(), "direct");
    const std::string word = a.find("kill") != std::string::npos    ? "board"
                             : a.find("stall") != std::string::npos ? "no answer"
                                                                    : "malformed";
    expect_survived(j, started, board, layer, word);
    const int repeat = a.find("--repeat 3") != std::string::npos ? 3 : a.find("--repeat 2") != std::string::npos ? 2 : 1;
    EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), repeat);
  }
}

// With --no-failover the first failure on a direct route ends the run with
// one line naming the board, never a hang and never a result.
TEST_F(FailoverTest, DirectRoutingWithoutFailoverFailsFastWithOneLine) {
  const Shell r = run("--json --no-failover --workers 3 --route direct --strategy spatial --inject-fault corrupt:2:12");
  expect_one_error_line(r, "board 2 ");
}

// Issue 12: a dropped board that comes back at the same address rejoins at
// the next inference. Board 1 (a standalone worker) dies in the first
// inference; the swarm fails over to 2 boards; the board is started again on
// the same port and the run's next inferences use it again: it is in the
// final plan (per_worker), `rejoins` names it, and every inference, before,
// during and after, is bit-exact.
TEST_F(FailoverTest, ABoardThatComesBackRejoinsAtTheNextInference) {
  const fs::path dir = fs::temp_directory_path() / ("ts_rejoin_" + std::to_string(getpid()));
  fs::create_directories(dir);
  WorkerProcess b0("127.0.0.1:0", "--id 0"), b2("127.0.0.1:0", "--id 2");
  auto b1 = std::make_unique<WorkerProcess>("127.0.0.1:0", "--id 1 --inject-fault kill:30");
  ASSERT_FALSE(b0.address.empty() || b1->address.empty() || b2.address.empty());
  const std::string addr1 = b1->address;
  nlohmann::json tb;
  for (const std::string& a : std::vector<std::string>{b0.address, addr1, b2.address}) tb["boards"].push_back({{"address", a}});
  for (int i = 0; i < 3; ++i) tb["boards"][size_t(i)]["id"] = i;
  const std::string tbf = (dir / "testbed.json").string();
  std::ofstream(tbf) << tb.dump();
  Shell r;
  std::thread runner([&] {
    r = run("--json --route direct --strategy neuron --repeat 40 --testbed " + tbf);
  });
  const bool died = b1->wait_exit();
  if (died) b1 = std::make_unique<WorkerProcess>(addr1, "--id 1");  // back at the same address
  runner.join();
  fs::remove_all(dir);
  ASSERT_TRUE(died) << "board 1 did not die at its injected fault";
  EXPECT_EQ(b1->address, addr1);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 40);
  ASSERT_EQ(j.at("failovers").size(), 1u) << j.at("failovers").dump();
  EXPECT_EQ(j.at("failovers")[0].at("board").get<int>(), 1);
  ASSERT_GE(j.at("rejoins").size(), 1u) << "board 1 never rejoined";
  EXPECT_EQ(j.at("rejoins")[0].at("board").get<int>(), 1);
  EXPECT_EQ(j.at("rejoins")[0].at("boards").get<int>(), 3);
  EXPECT_GT(j.at("rejoins")[0].at("inference").get<int>(), 0);
  // Board 1 came back empty and gets its fragment whole; boards 0 and 2 get
  // patches of what they hold.
  const auto& back = j.at("rejoins")[0];
  EXPECT_LT(back.at("redeployed_bytes").get<double>(), 0.6 * back.at("full_deploy_bytes").get<double>()) << back.dump();
  EXPECT_EQ(j.at("workers").get<int>(), 3);
  std::vector<int> ids;
  for (const auto& w : j.at("per_worker")) ids.push_back(w.at("id").get<int>());
  EXPECT_EQ(ids, (std::vector<int>{0, 1, 2}));
}

TEST_F(FailoverTest, AllBoardsDeadIsOneClearLine) {
  // (The Teensy prices, so that every board has a share of layer 4.)
  expect_one_error_line(run("--json --workers 3 --cost-model teensy --inject-fault kill:0:4 --inject-fault kill:1:4 "
                            "--inject-fault kill:2:4"),
                        "no board left");
  expect_one_error_line(run("--workers 1 --inject-fault stall:0:4"), "no board left");
}

// 224 on two boards with 1 MiB each fits; on one it does not.
TEST_F(FailoverTest, BoardsLeftTooSmallIsOneClearLine) {
  // (Without streamed chains: one 1 MiB board would hold the model streamed.)
  const Shell r = run("--json --size 224 --workers 2 --ram 1M --stream off --inject-fault kill:0:5");
  expect_one_error_line(r, "cannot run the model");
  EXPECT_NE(r.err.find("RAM"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("board 0"), std::string::npos) << r.err;  // the cause
}

// --no-failover: today's fail-fast behaviour, one line naming board and layer.
TEST_F(FailoverTest, NoFailoverFailsFast) {
  for (const char* kind : {"kill", "stall", "corrupt"}) {
    SCOPED_TRACE(kind);
    const Shell r = run(std::string("--json --no-failover --workers 3 --inject-fault ") + kind + ":1:10" + kPaper);
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
  EXPECT_EQ(ts::net::board_fault_arg(f.at_board()), "corrupt:0");
  const auto b = ts::net::parse_board_fault("stall:12");
  EXPECT_EQ(b.kind, FaultKind::Stall);
  EXPECT_EQ(b.layer, 12);
  for (const char* bad : {"", "kill", "kill:", "kill:x", "kill:1:", "kill:1:2:3", "explode:1", "kill:-1", "kill:70000",
                          ":1", "KILL:1", "kill: 1"})
    EXPECT_THROW(ts::net::parse_fault_spec(bad), ts::Error) << bad;
  for (const char* bad : {"kill", "kill:1:2", "stall:", "nap:3"})
    EXPECT_THROW(ts::net::parse_board_fault(bad), ts::Error) << bad;
}

// Every fault kind is parsed once, by the one parser, and reaches the board
// in the one form KIND:LAYER, which the board (host or firmware: the same
// portable parser) reads back as the same fault.
TEST(FaultSpec, EveryKindRoundTripsToTheBoardForm) {
  using ts::net::FaultKind;
  int kinds = 0;
  for (const auto& k : ts::net::kFaultKinds) {
    SCOPED_TRACE(k.name);
    ++kinds;
    const auto f = ts::net::parse_fault_spec(std::string(k.name) + ":2:17");
    EXPECT_EQ(f.kind, k.kind);
    EXPECT_EQ(f.board, 2);
    EXPECT_EQ(f.layer, 17);
    const std::string arg = ts::net::board_fault_arg(f.at_board());
    EXPECT_EQ(arg, std::string(k.name) + ":17");
    const auto b = ts::net::parse_board_fault(arg);
    EXPECT_EQ(b.kind, k.kind);
    EXPECT_EQ(b.layer, 17);
    ts::net::BoardFault pb;
    int bad = -1;
    EXPECT_EQ(ts::net::parse_board_fault(arg.c_str(), &pb, &bad), ts::net::FaultField::Ok);
    EXPECT_EQ(pb.kind, k.kind);
    EXPECT_EQ(pb.layer, 17);
    EXPECT_STREQ(ts::net::fault_kind_name(k.kind), k.name);
  }
  EXPECT_EQ(kinds, 4);  // kill, stall, corrupt, flip
  // The portable parser says which field is at fault.
  ts::net::BoardFault pb;
  int bad = -1;
  EXPECT_EQ(ts::net::parse_board_fault("flip:1:2", &pb, &bad), ts::net::FaultField::Shape);
  EXPECT_EQ(ts::net::parse_board_fault("melt:2", &pb, &bad), ts::net::FaultField::Kind);
  EXPECT_EQ(ts::net::parse_board_fault("flip:2x", &pb, &bad), ts::net::FaultField::Number);
  EXPECT_EQ(bad, 1);
}

// The fault decorator: kill and stall call the board's actions once, right
// after computing their layer; corrupt changes the last byte of the next
// frame to the coordinator (OUTPUT or DONE) once; other frames pass as sent.
struct RecordingPort final : ts::core::Port {
  std::vector<std::vector<uint8_t>> sent;
  bool send(int, const uint8_t* data, size_t len) override {
    sent.emplace_back(data, data + len);
    return true;
  }
  uint32_t now_us() override { return 0; }
};
struct CountingActions final : ts::net::FaultPort::Actions {
  int kills = 0, stalls = 0;
  void kill() override { ++kills; }
  void stall() override { ++stalls; }
};
std::vector<uint8_t> frame_of(ts::wire::MsgType type) {
  ts::wire::FrameHeader h;
  h.type = type;
  h.layer = 5;
  const uint8_t payload[4] = {1, 2, 3, 4};
  std::vector<uint8_t> out(ts::wire::kMaxFrame);
  out.resize(ts::wire::encode_frame(h, payload, sizeof payload, out.data(), out.size()));
  return out;
}

TEST(FaultPort, EachKindActsOnceAtItsLayer) {
  using ts::net::FaultKind;
  for (FaultKind k : {FaultKind::Kill, FaultKind::Stall}) {
    RecordingPort inner;
    CountingActions act;
    ts::net::FaultPort port(inner, {k, 5}, &act);
    port.after_compute(4, 0, 0);
    EXPECT_EQ(act.kills + act.stalls, 0);
    port.after_compute(5, 0, 0);
    port.after_compute(5, 0, 0);
    EXPECT_EQ(act.kills, k == FaultKind::Kill ? 1 : 0);
    EXPECT_EQ(act.stalls, k == FaultKind::Stall ? 1 : 0);
  }
  RecordingPort inner;
  CountingActions act;
  ts::net::FaultPort port(inner, {FaultKind::Corrupt, 5}, &act);
  const auto out = frame_of(ts::wire::MsgType::Output), run = frame_of(ts::wire::MsgType::Run);
  port.send(0, out.data(), out.size());  // before the layer: as sent
  port.after_compute(5, 0, 0);
  port.send(0, run.data(), run.size());  // not to the coordinator: as sent
  port.send(0, out.data(), out.size());  // changed
  port.send(0, out.data(), out.size());  // once
  ASSERT_EQ(inner.sent.size(), 4u);
  EXPECT_EQ(inner.sent[0], out);
  EXPECT_EQ(inner.sent[1], run);
  auto changed = out;
  changed.back() ^= 0x5A;
  EXPECT_EQ(inner.sent[2], changed);
  EXPECT_EQ(inner.sent[3], out);
  EXPECT_EQ(act.kills + act.stalls, 0);
}

// A bad spec is one line, on `run` and on `worker`, for every kind.
TEST(FaultSpec, ABadSpecIsOneLine) {
  for (const char* spec : {"nap:3", "flip:x", "corrupt", "stall:1:2"}) {
    SCOPED_TRACE(spec);
    const Shell w = ts::testing::shell("timeout 60 " + std::string(TS_TINYSPLIT) + " worker --inject-fault " + spec);
    EXPECT_NE(w.code, 0);
    EXPECT_EQ(std::count(w.err.begin(), w.err.end(), '\n'), 1) << w.err;
    EXPECT_NE(w.err.find(std::string("--inject-fault '") + spec + "'"), std::string::npos) << w.err;
  }
}

// `run PREFIX ARGS` for each {ARGS, NEEDLE}: one error line holding NEEDLE.
void expect_spec_errors(const std::string& prefix, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    expect_one_error_line(run(prefix + args), needle);
  }
}

TEST(FailoverSpec, BadSpecsAreOneClearLine) {
  ASSERT_TRUE(have_model());
  expect_spec_errors("--workers 3 ",
                     {
                         {"--inject-fault explode:1", "unknown fault 'explode'"},
                         {"--inject-fault kill:3", "only 3 boards"},
                         {"--inject-fault kill:1:9999", "the model has layers 0.."},
                         {"--inject-fault kill:1:x", "LAYER must be a number"},
                         {"--cost-model teensy --inject-fault kill:1:2 --inject-fault stall:1:3", "already has a fault"},
                     });
  const Shell w = ts::testing::shell("timeout 60 " + std::string(TS_TINYSPLIT) + " worker --inject-fault kill");
  expect_one_error_line(w, "KIND:LAYER");
}

// A spec that is wrong whatever the model is refused before the model is
// loaded and planned: with a model that does not exist, the line is about
// the spec.
TEST(FailoverSpec, SpecsAreCheckedBeforeTheModel) {
  expect_spec_errors("--workers 3 --model /nonexistent/model.json ",
                     {
                         {"--inject-fault explode:1", "unknown fault 'explode'"},
                         {"--inject-fault kill:3", "only 3 boards"},
                         {"--inject-fault kill:1:x", "LAYER must be a number"},
                         {"--inject-fault kill:1:2 --inject-fault stall:1:3", "already has a fault"},
                         {"--inject-fault flip:3:2", "board 3 does not exist"},
                     });
  // The model is still checked when the specs are fine.
  expect_one_error_line(run("--workers 3 --model /nonexistent/model.json --inject-fault kill:1"), "/nonexistent/model.json");
}

}  // namespace

// Issue 26: a board that rejoins and fails again waits twice as long each
// time before it is checked again (1, 2, 4, ... 64 inferences), and a check
// that timed out doubles the wait too; a board dropped at deploy (inference
// -1) is checked before the first inference.
TEST(RejoinBackoff, EachDropDoublesTheWait) {
  ts::coord::RejoinBackoff b;
  b.resize(3);
  EXPECT_TRUE(b.due(1, 0));
  b.dropped(1, -1);  // at deploy
  EXPECT_TRUE(b.due(1, 0));
  b.dropped(1, 0);   // rejoined before inference 0 and failed in it
  EXPECT_FALSE(b.due(1, 1));
  EXPECT_TRUE(b.due(1, 2));
  b.dropped(1, 2);
  EXPECT_EQ(b.wait(1), 4);
  EXPECT_FALSE(b.due(1, 5));
  EXPECT_TRUE(b.due(1, 6));
  for (int k = 0; k < 10; ++k) b.dropped(1, 100);
  EXPECT_EQ(b.wait(1), ts::coord::RejoinBackoff::kMaxWait);
  EXPECT_TRUE(b.due(2, 0));  // other boards are not affected
  b.dropped(2, 10);
  EXPECT_TRUE(b.due(2, 11));
  b.check_timed_out(2, 11);
  EXPECT_EQ(b.wait(2), 2);
  EXPECT_FALSE(b.due(2, 12));
  EXPECT_TRUE(b.due(2, 13));
}
