// for_each_on_every_core (util/parallel.h): every index once, and the
// failure a loop from 0 would have thrown.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/parallel.h"

namespace {

TEST(Parallel, EveryIndexRunsOnce) {
  std::vector<std::atomic<int>> runs(1000);
  ts::for_each_on_every_core(runs.size(), [&](size_t i) { runs[i]++; });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  ts::for_each_on_every_core(0, [&](size_t) { FAIL() << "no job for n = 0"; });
}

TEST(Parallel, TheLowestFailingIndexIsThrown) {
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> started{0};
    try {
      ts::for_each_on_every_core(64, [&](size_t i) {
        ++started;
        if (i == 5 || i == 6 || i == 40) throw std::runtime_error(std::to_string(i));
      });
      FAIL() << "nothing thrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "5");
    }
    // Indices are taken in order, so 5 always ran (6 was taken after it):
    // whichever failure was seen first, 5's is the one thrown.
    EXPECT_GE(started.load(), 6);
  }
}

}  // namespace
