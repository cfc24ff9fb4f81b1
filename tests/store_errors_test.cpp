// Store errors said as what they are (issue 26, item 3): a store that is a
// file is refused at start, and a full store ends a run with one line, leaves
// no temporary, keeps the failing board's previous fragment, and the next run
// uses it. (worker_test covers the worker's answer with a fake flash.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sys/mount.h>
#include <unistd.h>

#include "support/shell.h"

namespace fs = std::filesystem;
using ts::testing::tinysplit;

namespace {

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("ts_store_" + std::to_string(::getpid()) + "_" + name);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(StoreErrors, AStoreThatIsAFileIsRefusedAtStart) {
  const fs::path file = temp("file");
  std::ofstream(file) << "x";
  const auto w = tinysplit("worker --store " + file.string());
  EXPECT_EQ(w.code, 1);
  EXPECT_NE(w.err.find("is not a folder"), std::string::npos) << w.err;
  EXPECT_EQ(std::count(w.err.begin(), w.err.end(), '\n'), 1) << w.err;
  const auto r = tinysplit("run --workers 2 --store " + file.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  fs::remove(file);
}

TEST(StoreErrors, AFullStoreEndsTheRunInOneLineAndKeepsThePreviousFragment) {
  const fs::path mnt = temp("tmpfs");
  fs::create_directories(mnt);
  if (::geteuid() != 0 || ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    fs::remove(mnt);
    GTEST_SKIP() << "needs root to mount a 4 MiB tmpfs (worker_test covers the worker's answer)";
  }
  const std::string store = (mnt / "st").string();
  // 3 boards at 112x112 at the host prices (one board computes): about 2.9 MB
  // of fragments, which fit.
  const auto first = tinysplit("run --workers 3 --cost-model host --store " + store);
  ASSERT_EQ(first.code, 0) << first.err;
  std::vector<std::string> before;
  for (int b = 0; b < 3; ++b) before.push_back(slurp(fs::path(store) / ("board-" + std::to_string(b)) / "fragment.bin"));
  // At 224x224 the big board's new fragment does not fit beside its old one.
  const auto full = tinysplit("run --workers 3 --cost-model host --size 224 --store " + store);
  EXPECT_EQ(full.code, 1);
  EXPECT_NE(full.err.find("store full: no space left on device"), std::string::npos) << full.err;
  EXPECT_EQ(std::count(full.err.begin(), full.err.end(), '\n'), 1) << full.err;
  int kept = 0;
  for (int b = 0; b < 3; ++b) {
    const fs::path dir = fs::path(store) / ("board-" + std::to_string(b));
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_EQ(e.path().filename(), "fragment.bin") << "a half-written file is left: " << e.path();
    kept += slurp(dir / "fragment.bin") == before[size_t(b)];
  }
  EXPECT_GE(kept, 1) << "the board whose store was full lost its previous fragment";
  // The next run with the first plan uses what was kept, bit-exact.
  const auto again = tinysplit("run --workers 3 --cost-model host --json --store " + store);
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("\"match_reference\": true"), std::string::npos);
  EXPECT_NE(again.out.find("\"cached\": " + std::to_string(kept)), std::string::npos) << again.out.substr(0, 400);
  ::umount(mnt.c_str());
  fs::remove_all(mnt);
}
