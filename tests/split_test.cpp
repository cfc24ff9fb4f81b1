// Proportional contiguous split (alg. 1 and 2 with Hamilton rounding) and the
// per-run channel reference counts.
#include "plan/split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

using namespace ts::plan;
// Inside a TEST body a plain `Run` would name testing::Test::Run.
using PlanRun = ts::plan::Run;

namespace {

// Checks the runs tile [0, total) in worker order with no gap or overlap and
// that their sizes are the Hamilton counts.
void expect_partition(int64_t total, const std::vector<double>& w, const std::vector<PlanRun>& runs) {
  ASSERT_EQ(runs.size(), w.size());
  int64_t at = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].begin, at) << "gap or overlap before worker " << i;
    ASSERT_GE(runs[i].end, runs[i].begin);
    at = runs[i].end;
  }
  ASSERT_EQ(at, total);
}

}  // namespace

TEST(Split, HamiltonBasics) {
  EXPECT_EQ(proportional_counts(10, {1, 1}), (std::vector<int64_t>{5, 5}));
  // Equal remainders: the lower indices win.
  EXPECT_EQ(proportional_counts(4, {1, 1, 1}), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(proportional_counts(5, {1, 1, 1}), (std::vector<int64_t>{2, 2, 1}));
  // Quotas 2.5, 1.5, 1.0 -> floors 2, 1, 1 and one unit left: tie 0.5/0.5
  // goes to worker 0.
  EXPECT_EQ(proportional_counts(5, {5, 3, 2}), (std::vector<int64_t>{3, 1, 1}));
  // Whole quotas need no rounding.
  EXPECT_EQ(proportional_counts(10, {6, 3, 1}), (std::vector<int64_t>{6, 3, 1}));
  // Largest remainder beats lower index: quotas 0.4, 0.6 -> {0, 1}.
  EXPECT_EQ(proportional_counts(1, {2, 3}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(proportional_counts(0, {1, 2, 3}), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(proportional_counts(7, {0, 1, 0}), (std::vector<int64_t>{0, 7, 0}));
  // Weights that do not sum to an exact binary fraction.
  EXPECT_EQ(proportional_counts(10, std::vector<double>(10, 0.1)), std::vector<int64_t>(10, 1));
  EXPECT_EQ(proportional_counts(3, {1e-300, 1e-300, 1e-300}), (std::vector<int64_t>{1, 1, 1}));
}

// docs/allocation.md, "Worked example", step 3: a (4, 3, 3) conv output split
// by the adjusted ratings 80, 60, 47.1875 (sum 187.1875).
//   quotas 36*80/187.1875 = 15.386, 36*60/187.1875 = 11.539,
//          36*47.1875/187.1875 = 9.075  -> floors 15, 11, 9 (35)
//   one unit left -> largest remainder 0.539 (board 1) -> 15, 12, 9
TEST(Split, WorkedExample) {
  std::vector<double> w{80, 60, 47.1875};
  EXPECT_EQ(proportional_counts(36, w), (std::vector<int64_t>{15, 12, 9}));
  std::vector<PlanRun> runs = split_runs(36, w);
  EXPECT_EQ(runs, (std::vector<PlanRun>{{0, 15}, {15, 27}, {27, 36}}));

  ChannelUse u0 = channels_touched(runs[0], 4, 3, 3);
  EXPECT_EQ(u0.first, 0);
  EXPECT_EQ(u0.last, 1);
  EXPECT_EQ(u0.positions, (std::vector<int64_t>{9, 6}));
  ChannelUse u1 = channels_touched(runs[1], ts::Shape{4, 3, 3});
  EXPECT_EQ(u1.first, 1);
  EXPECT_EQ(u1.last, 2);
  EXPECT_EQ(u1.positions, (std::vector<int64_t>{3, 9}));
  ChannelUse u2 = channels_touched(runs[2], 4, 3, 3);
  EXPECT_EQ(u2.first, 3);
  EXPECT_EQ(u2.last, 3);
  EXPECT_EQ(u2.count(), 1);
  EXPECT_EQ(u2.positions, (std::vector<int64_t>{9}));
}

TEST(Split, BadWeightsThrow) {
  EXPECT_THROW(proportional_counts(10, {}), ts::Error);
  EXPECT_THROW(proportional_counts(10, {0, 0}), ts::Error);
  EXPECT_THROW(proportional_counts(10, {1, -1}), ts::Error);
  EXPECT_THROW(proportional_counts(10, {1, NAN}), ts::Error);
  EXPECT_THROW(proportional_counts(10, {1, INFINITY}), ts::Error);
  EXPECT_THROW(proportional_counts(-1, {1}), ts::Error);
  try {
    split_runs(10, {2, -0.5});
    FAIL();
  } catch (const ts::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("worker 1"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

// N = 1..64 with random ratings and totals: exact tiling, each count within
// 1 of its exact quota, zero weight -> zero count.
TEST(Split, PropertiesOnRandomRatings) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> logr(-2, 2);
  for (int n = 1; n <= 64; ++n) {
    for (int rep = 0; rep < 60; ++rep) {
      std::vector<double> w(static_cast<size_t>(n));
      for (auto& x : w) x = (rng() % 8 == 0) ? 0.0 : std::pow(10.0, logr(rng));
      if (std::accumulate(w.begin(), w.end(), 0.0) == 0) w[rng() % size_t(n)] = 1.0;
      int64_t total = (rep % 3 == 0) ? int64_t(rng() % 8)                 // fewer outputs than workers
                      : (rep % 3 == 1) ? int64_t(rng() % 100000)          // a conv layer
                                       : int64_t(rng() % 5000000000LL);    // beyond 32 bits
      std::vector<PlanRun> runs = split_runs(total, w);
      expect_partition(total, w, runs);

      const double sum = std::accumulate(w.begin(), w.end(), 0.0);
      for (size_t i = 0; i < w.size(); ++i) {
        const double quota = double(total) * w[i] / sum;
        ASSERT_LT(std::abs(double(runs[i].size()) - quota), 1.0 + 1e-12 * double(total))
            << "n=" << n << " total=" << total << " worker " << i;
        if (w[i] == 0) {
          ASSERT_TRUE(runs[i].empty());
        }
      }
    }
  }
}

TEST(Split, RatiosAreHonoured) {
  // Integral quotas are met exactly...
  EXPECT_EQ(proportional_counts(600, {3, 2, 1}), (std::vector<int64_t>{300, 200, 100}));
  EXPECT_EQ(proportional_counts(112 * 112 * 32, {2, 1, 1}),
            (std::vector<int64_t>{200704, 100352, 100352}));
  // ...and large totals track the ratio closely.
  auto c = proportional_counts(1000003, {600, 396, 150});
  EXPECT_NEAR(double(c[0]) / double(c[2]), 4.0, 1e-4);
  EXPECT_NEAR(double(c[1]) / double(c[2]), 396.0 / 150.0, 1e-4);
}

TEST(Split, ThousandWorkers) {
  std::mt19937_64 rng(99);
  std::vector<double> w(1000);
  for (auto& x : w) x = 0.5 + double(rng() % 1000) / 100.0;
  for (int64_t total : {int64_t(0), int64_t(1), int64_t(999), int64_t(1000), int64_t(1001),
                        int64_t(1280), int64_t(602112)}) {
    std::vector<PlanRun> runs = split_runs(total, w);
    expect_partition(total, w, runs);
  }
  // Even weights, one more unit than workers: worker 0 gets the extra one.
  auto even = proportional_counts(1001, std::vector<double>(1000, 1.0));
  EXPECT_EQ(even[0], 2);
  EXPECT_EQ(std::accumulate(even.begin() + 1, even.end(), int64_t(0)), 999);
}

TEST(Split, FewerOutputsThanWorkers) {
  // 3 outputs over 5 even workers: the first three get one each, the last
  // two get empty runs at the end and do nothing for that layer.
  std::vector<PlanRun> runs = split_runs(3, {1, 1, 1, 1, 1});
  EXPECT_EQ(runs, (std::vector<PlanRun>{{0, 1}, {1, 2}, {2, 3}, {3, 3}, {3, 3}}));
  EXPECT_TRUE(runs[4].empty());
  ChannelUse u = channels_touched(runs[4], 3, 1, 1);
  EXPECT_TRUE(u.empty());
  EXPECT_EQ(u.count(), 0);
  EXPECT_TRUE(u.positions.empty());
}

// Reference counts: for random shapes and splits, every channel's positions
// summed over the workers equal H*W, and each worker's counts sum to its run.
TEST(Split, ChannelReferenceCounts) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    int64_t c = 1 + int64_t(rng() % 96), h = 1 + int64_t(rng() % 20), w = 1 + int64_t(rng() % 20);
    size_t n = 1 + rng() % 16;
    std::vector<double> weights(n);
    for (auto& x : weights) x = 0.1 + double(rng() % 100);
    std::vector<PlanRun> runs = split_runs(c * h * w, weights);
    std::vector<int64_t> per_channel(size_t(c), 0);
    for (const PlanRun& r : runs) {
      ChannelUse u = channels_touched(r, c, h, w);
      ASSERT_EQ(int64_t(u.positions.size()), r.empty() ? 0 : int64_t(u.count()));
      ASSERT_EQ(std::accumulate(u.positions.begin(), u.positions.end(), int64_t(0)), r.size());
      for (size_t k = 0; k < u.positions.size(); ++k) {
        ASSERT_GT(u.positions[k], 0);
        ASSERT_LE(u.positions[k], h * w);
        per_channel[size_t(u.first) + k] += u.positions[k];
      }
      if (!r.empty()) {
        ASSERT_EQ(u.first, r.begin / (h * w));
        ASSERT_EQ(u.last, (r.end - 1) / (h * w));
      }
    }
    for (int64_t p : per_channel) ASSERT_EQ(p, h * w);
  }
}

TEST(Split, ChannelsTouchedRejectsBadInput) {
  EXPECT_THROW(channels_touched(PlanRun{0, 1}, 0, 3, 3), ts::Error);
  EXPECT_THROW(channels_touched(PlanRun{0, 10}, 1, 3, 3), ts::Error);
  EXPECT_THROW(channels_touched(PlanRun{5, 4}, 1, 3, 3), ts::Error);
  EXPECT_THROW(channels_touched(PlanRun{-1, 4}, 1, 3, 3), ts::Error);
  // A linear layer is a (features, 1, 1) tensor: one "channel" per column.
  ChannelUse u = channels_touched(PlanRun{10, 13}, 1000, 1, 1);
  EXPECT_EQ(u.first, 10);
  EXPECT_EQ(u.last, 12);
  EXPECT_EQ(u.positions, (std::vector<int64_t>{1, 1, 1}));
}
