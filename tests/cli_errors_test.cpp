// Bad options get one clear line and a non-zero exit, before any work
// (issue 12's misleading lines): NaN and infinite numbers, and a --listen
// address without a numeric port. Each of these misbehaved before: NaN was
// accepted (a --timeout nan run waited "-9223372036854775808 ms"), and
// `worker --listen :` said only "stoi".
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "support/shell.h"

namespace {

using ts::testing::tinysplit;

// Exactly one line on stderr, naming `what`; a usage error, not a crash.
void expect_one_line(const std::string& args, const std::string& what) {
  SCOPED_TRACE(args);
  const auto r = tinysplit(args);
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.code, 128) << "killed by a signal";
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliErrors, NonFiniteNumbersAreRefused) {
  for (const char* v : {"nan", "inf", "-inf", "1e999"}) {
    expect_one_line(std::string("run --workers 1 --timeout ") + v, "--timeout");
    expect_one_line(std::string("run --workers 1 --cycles-per-mac ") + v, "--cycles-per-mac");
    expect_one_line(std::string("run --workers 1 --delay-ms ") + v, "--delay-ms");
    expect_one_line(std::string("worker --cycles-per-mac ") + v, "--cycles-per-mac");
  }
  expect_one_line("run --workers 1 --timeout 0.01", "--timeout");  // below the range
}

TEST(CliErrors, ListenNeedsHostAndNumericPort) {
  for (const char* v : {":", "127.0.0.1:", ":7000", "127.0.0.1:abc", "127.0.0.1:70000", "127.0.0.1", "x:-1"})
    expect_one_line(std::string("worker --listen ") + v, "--listen");
}

// A standalone board whose parent is gone (here: a shell that started it in
// the background and exited, so its parent becomes PID 1, as under systemd or
// a container's init) keeps serving; it used to exit silently with status 0.
TEST(WorkerProcess, StandaloneBoardOutlivesItsParent) {
  const std::string pidfile = "/tmp/ts_orphan_worker_" + std::to_string(::getpid());
  const auto r = ts::testing::shell("sh -c '(" + std::string(TS_TINYSPLIT) +
                                    " worker --listen 127.0.0.1:0 >/dev/null 2>&1 & echo $! > " + pidfile + ")'");
  ASSERT_EQ(r.code, 0);
  std::ifstream f(pidfile);
  pid_t pid = 0;
  f >> pid;
  ASSERT_GT(pid, 0);
  // The old check looked once a second; give it three.
  ::sleep(3);
  const bool alive = ts::testing::terminate_if_still(pid, " worker --listen ");
  std::filesystem::remove(pidfile);
  EXPECT_TRUE(alive) << "the board exited when its parent went away";
}

}  // namespace
