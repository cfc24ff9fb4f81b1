// for_each_on_every_core (util/parallel.h): every index once, the failure a
// loop from 0 would have thrown, and jobs inside jobs on the thread that
// asks for them.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
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

// Inside a job run beside others, the inner jobs all run on the job's own
// thread (the cores are taken), every index once; outside, the flag that
// says so is clear again.
TEST(Parallel, JobsInsideJobsRunOnTheirThread) {
  std::mutex mu;
  bool inner_elsewhere = false;
  std::vector<std::atomic<int>> runs(8 * 50);
  ts::for_each_on_every_core(8, [&](size_t i) {
    const std::thread::id me = std::this_thread::get_id();
    ts::for_each_on_every_core(50, [&](size_t j) {
      runs[i * 50 + j]++;
      if (std::this_thread::get_id() != me) {
        std::lock_guard<std::mutex> lock(mu);
        inner_elsewhere = true;
      }
    });
  });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_FALSE(inner_elsewhere);
  }
  EXPECT_FALSE(ts::t_in_parallel_jobs);
  // A failure inside still reaches the caller, and leaves the flag clear.
  EXPECT_THROW(ts::for_each_on_every_core(4, [](size_t i) {
                 ts::for_each_on_every_core(4, [&](size_t j) {
                   if (i == 2 && j == 1) throw std::runtime_error("inner");
                 });
               }),
               std::runtime_error);
  EXPECT_FALSE(ts::t_in_parallel_jobs);
}

}  // namespace
