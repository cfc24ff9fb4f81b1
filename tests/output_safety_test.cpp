// Output files are written whole or not at all, and an interrupted run
// leaves nothing behind (issue 12). A full disk is simulated with a file size
// limit (`ulimit -f`, SIGXFSZ ignored): every write past it fails with EFBIG,
// as writes on a full disk fail with ENOSPC, and the commands must say so in
// one line, exit non-zero, and leave neither a truncated file nor a
// temporary one; a file that was already there stays as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "support/shell.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::Shell;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

// `tinysplit ARGS` in DIR with files limited to `kib` KiB.
Shell limited(const fs::path& dir, int kib, const std::string& args) {
  return ts::testing::shell("cd '" + dir.string() + "' && timeout 300 bash -c \"trap '' XFSZ; ulimit -f " +
                            std::to_string(kib) + "; exec '" + std::string(TS_TINYSPLIT) + "' " + ts::testing::at_paper_size(args) + "\"");
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Every file under `dir` (recursively), by name.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

void expect_write_error(const Shell& r, const std::string& file) {
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "hung";
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("tinysplit: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
}

class OutputSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_model()) << "models/mobilenetv2 is missing: run scripts/setup.sh first";
    dir_ = fs::temp_directory_path() / ("ts_output_safety_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OutputSafety, AtomicWriteReplacesWholeOrNotAtAll) {
  const fs::path f = dir_ / "out.bin";
  ts::write_file_atomic(f.string(), std::string("first"));
  EXPECT_EQ(slurp(f), "first");
  ts::write_file_atomic(f.string(), std::string("second, longer"));
  EXPECT_EQ(slurp(f), "second, longer");
  // A target whose folder does not exist, and one that is a folder: one
  // line naming it, the old state untouched, no temporary left.
  EXPECT_THROW(ts::write_file_atomic((dir_ / "nope" / "x.bin").string(), std::string("x")), ts::Error);
  fs::create_directories(dir_ / "adir");
  try {
    ts::write_file_atomic((dir_ / "adir").string(), std::string("x"));
    ADD_FAILURE() << "writing over a folder succeeded";
  } catch (const ts::Error& e) {
    EXPECT_NE(std::string(e.what()).find("adir"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(dir_ / "adir"));
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"out.bin"});
  // An external writer's file: empty is refused, written is renamed in.
  const std::string tmp = ts::atomic_temp_path((dir_ / "fig.svg").string());
  std::ofstream(tmp).close();
  EXPECT_THROW(ts::commit_file_atomic(tmp, (dir_ / "fig.svg").string()), ts::Error);
  EXPECT_FALSE(fs::exists(tmp));
  std::ofstream(tmp) << "<svg></svg>";
  ts::commit_file_atomic(tmp, (dir_ / "fig.svg").string());
  EXPECT_EQ(slurp(dir_ / "fig.svg"), "<svg></svg>");
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{"fig.svg", "out.bin"}));
}

TEST_F(OutputSafety, QuantizeOnAFullDiskKeepsTheOldModel) {
  // No file yet: none afterwards.
  expect_write_error(limited(dir_, 64, "quantize -o m.tsqm"), "m.tsqm");
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{});
  // A good model written, then a failed rewrite (another size) leaves it intact.
  ASSERT_EQ(limited(dir_, 1 << 20, "quantize -o m.tsqm").code, 0);
  const std::string good = slurp(dir_ / "m.tsqm");
  ASSERT_GT(good.size(), 100000u);
  expect_write_error(limited(dir_, 64, "quantize --size 96 -o m.tsqm"), "m.tsqm");
  EXPECT_EQ(slurp(dir_ / "m.tsqm"), good);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"m.tsqm"});
}

TEST_F(OutputSafety, PlanFragmentsOnAFullDisk) {
  expect_write_error(limited(dir_, 64, "plan --workers 3 -o frags"), "worker-0.tsfg");
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{});
  ASSERT_EQ(limited(dir_, 1 << 20, "plan --workers 3 -o frags").code, 0);
  EXPECT_EQ(files_in(dir_ / "frags").size(), 3u);
}

TEST_F(OutputSafety, SimulatePlotOnAFullDiskWritesNoFigure) {
  // gnuplot itself exits 0 when its output is cut short: the figure is
  // checked before it is renamed into place.
  for (int kib : {1, 6}) {
    SCOPED_TRACE(kib);
    const Shell r = limited(dir_, kib, "simulate --plot figs");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("tinysplit: error: plot: "), std::string::npos) << r.err;
    EXPECT_EQ(files_in(dir_), std::vector<std::string>{});
  }
}

TEST_F(OutputSafety, SaveOutputOnAFullDisk) {
  ASSERT_EQ(limited(dir_, 1 << 20, "dump -o ref").code, 0);
  ASSERT_TRUE(fs::exists(dir_ / "ref" / "input.npy"));
  // The .npy is a few hundred bytes: no byte may be written (limit 0), so
  // stderr goes to the pipe (merged into stdout), which has no size limit.
  Shell r = limited(dir_, 0, "eval --input ref/input.npy --save-output y.npy 2>&1");
  r.err = r.out;
  r.out.clear();
  expect_write_error(r, "y.npy");
  EXPECT_FALSE(fs::exists(dir_ / "y.npy"));
  for (const auto& f : files_in(dir_)) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
  ASSERT_EQ(limited(dir_, 1 << 20, "eval --input ref/input.npy --save-output y.npy").code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "y.npy"));
}

// Ctrl-C (or SIGTERM) during a run: the boards stop and the run's temporary
// board folder (under $TMPDIR) is removed; the process dies of the signal.
TEST_F(OutputSafety, InterruptedRunLeavesNoBoardFolder) {
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const fs::path tmp = dir_ / ("tmp" + std::to_string(sig));
    fs::create_directories(tmp);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::signal(SIGINT, SIG_DFL);
      setenv("TMPDIR", tmp.c_str(), 1);
      freopen("/dev/null", "w", stdout);
      freopen((tmp.parent_path() / ("err" + std::to_string(sig))).c_str(), "w", stderr);
      // Slow links (20 ms per board send and receive): the run is still going
      // when the signal comes.
      execl(TS_TINYSPLIT, TS_TINYSPLIT, "run", "--size", "112", "--json", "--repeat", "3", "--delay-ms", "20", "--workers", "3",
            (char*)nullptr);
      _exit(127);
    }
    // Wait (bounded) until the boards are up and their folder holds flash.
    bool up = false;
    for (int i = 0; i < 1200 && !up; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (const auto& f : files_in(tmp))
        if (f.find("tinysplit-boards-") == 0 && f.find("fragment.bin") != std::string::npos) up = true;
    }
    EXPECT_TRUE(up) << "the run did not start its boards";
    kill(pid, sig);
    int st = 0;
    pid_t done = 0;
    for (int i = 0; i < 300 && done == 0; ++i) {
      done = waitpid(pid, &st, WNOHANG);
      if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      ADD_FAILURE() << "the run did not end within 30 s of the signal";
    }
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == sig) << "status " << st;
    // One line says why the run ended and who sent the signal (this test).
    std::ifstream ef(dir_ / ("err" + std::to_string(sig)));
    const std::string err((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
    const std::string want = std::string("tinysplit: run interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                             " from pid " + std::to_string(::getpid()) + " (";
    EXPECT_EQ(err.rfind(want, 0), 0u) << err;
    EXPECT_NE(err.find(", whose parent is pid "), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(files_in(tmp), std::vector<std::string>{});
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(tmp)) left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{});
  }
}

}  // namespace
