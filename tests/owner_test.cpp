// One owner per board, with processes on loopback: three standalone
// `tinysplit worker --listen` boards serve one coordinator at a time. A run
// while another session holds them is refused with one line naming the board
// and the owner; once the owner goes, a run gets them and is bit-exact; two
// runs started at once never both fail and never mix their deploys.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "coord/link.h"
#include "net/tcp.h"
#include "support/shell.h"
#include "support/worker_process.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::Shell;
using ts::testing::Swarm3;
using ts::testing::WorkerProcess;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }


Shell run(const Swarm3& s, const std::string& extra = "") {
  return ts::testing::shell("timeout 300 " + std::string(TS_TINYSPLIT) + " " +
                            ts::testing::at_paper_size("run --json --timeout 10 --testbed " + s.testbed + extra));
}

void expect_bit_exact(const Shell& r) {
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_TRUE(j.at("failovers").empty()) << j.at("failovers").dump();
}

void expect_in_use_line(const Shell& r) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("in use by another session (coordinator 127.0.0.1:"), std::string::npos) << r.err;
}

// The test process holds every board (a session of its own: HELLO and the
// claim); a run is refused at the first board of its address order, which
// the line names with the address of the test's connection; once the test
// closes its links, the same run is bit-exact.
TEST(Owner, BoardsHeldByAnotherSessionAreRefusedThenReleased) {
  if (!have_model()) GTEST_SKIP() << "bundled model not found";
  Swarm3 s("owner");
  ASSERT_TRUE(s.up());
  std::vector<std::unique_ptr<ts::coord::BoardLink>> held;
  for (int i = 0; i < 3; ++i) {
    const std::string& a = s.boards[size_t(i)]->address;
    const auto colon = a.rfind(':');
    held.push_back(std::make_unique<ts::coord::BoardLink>(
        ts::net::tcp_connect(a.substr(0, colon), uint16_t(std::stoi(a.substr(colon + 1))), ts::net::Millis(5000)), i, 8,
        std::chrono::milliseconds(5000)));
    held.back()->handshake();
  }
  const Shell refused = run(s);
  expect_in_use_line(refused);
  // The first board in address order is the one named.
  std::vector<std::string> addrs;
  for (auto& b : s.boards) addrs.push_back(b->address);
  const std::string first = *std::min_element(addrs.begin(), addrs.end());
  const int index = int(std::find(addrs.begin(), addrs.end(), first) - addrs.begin());
  EXPECT_NE(refused.err.find("board " + std::to_string(index) + " (" + first + "): in use"), std::string::npos)
      << refused.err;
  for (auto& l : held) l->close();
  expect_bit_exact(run(s));
}

// Two runs started at once on the same boards: the boards are claimed in
// address order, so one gets all three and runs bit-exact, and the other is
// refused at the first (one line) or, if it came after the first finished,
// runs bit-exact too; never two failures, never a wrong result. A run after
// both gets the boards.
TEST(Owner, TwoCoordinatorsAtOnceOneRunsTheOtherIsRefused) {
  if (!have_model()) GTEST_SKIP() << "bundled model not found";
  Swarm3 s("owner");
  ASSERT_TRUE(s.up());
  Shell r[2];
  std::thread a([&] { r[0] = run(s, " --repeat 3"); });
  std::thread b([&] { r[1] = run(s, " --repeat 3"); });
  a.join();
  b.join();
  int ok = 0;
  for (const Shell& x : r) {
    if (x.code == 0) {
      expect_bit_exact(x);
      ++ok;
    } else {
      expect_in_use_line(x);
    }
  }
  EXPECT_GE(ok, 1) << r[0].err << r[1].err;
  expect_bit_exact(run(s));
}

}  // namespace
