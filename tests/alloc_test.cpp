// Storage-aware allocation (eq. 6-7): the worked example of
// docs/allocation.md and seeded property tests on random testbeds.
#include "plan/alloc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace ts::plan;

// docs/allocation.md, "Worked example", step 2. Ratings 117.1875, 50, 20
// (sum 187.1875), model 1,871,875 bytes, so 10,000 bytes per rating unit.
//   eq. 6:   S = 1,171,875  500,000  200,000; storage 800,000 600,000 1,000,000
//   round 1: board 0 is 371,875 over -> R_0o = 37.1875, R0 = 80, capped;
//            37.1875 / 2 = 18.59375 to boards 1 and 2 -> R1 = 68.59375,
//            R2 = 38.59375 -> S1 = 685,937.5 > 600,000
//   round 2: board 1 is 85,937.5 over -> R_1o = 8.59375, R1 = 60, capped;
//            all of it to board 2 -> R2 = 47.1875 -> S2 = 471,875
//   round 3: nothing overflows.
TEST(Alloc, WorkedExample) {
  StorageAllocation a =
      allocate_storage({117.1875, 50, 20}, {800000, 600000, 1000000}, 1871875);
  EXPECT_EQ(a.rounds, 2);
  EXPECT_NEAR(a.ratings[0], 80.0, 1e-9);
  EXPECT_NEAR(a.ratings[1], 60.0, 1e-9);
  EXPECT_NEAR(a.ratings[2], 47.1875, 1e-9);
  EXPECT_NEAR(a.expected_bytes[0], 800000, 1e-6);
  EXPECT_NEAR(a.expected_bytes[1], 600000, 1e-6);
  EXPECT_NEAR(a.expected_bytes[2], 471875, 1e-6);
  EXPECT_EQ(a.capped, (std::vector<bool>{true, true, false}));

  EXPECT_DOUBLE_EQ(fragment_bytes_eq6(117.1875, 187.1875, 1871875), 1171875);
  EXPECT_DOUBLE_EQ(overflow_rating_eq7(1171875, 800000, 187.1875, 1871875), 37.1875);
}

TEST(Alloc, NothingToDoWhenAllFit) {
  StorageAllocation a = allocate_storage({3, 1}, {1000, 1000}, 400);
  EXPECT_EQ(a.rounds, 0);
  EXPECT_EQ(a.ratings, (std::vector<double>{3, 1}));
  EXPECT_DOUBLE_EQ(a.expected_bytes[0], 300);
  EXPECT_DOUBLE_EQ(a.expected_bytes[1], 100);
  EXPECT_EQ(a.capped, (std::vector<bool>{false, false}));
}

TEST(Alloc, ExactlyFullTestbed) {
  // Storage sums to the model exactly: every worker ends at its storage.
  StorageAllocation a = allocate_storage({10, 1, 1, 1}, {100, 200, 300, 400}, 1000);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(a.expected_bytes[i], 100.0 * double(i + 1), 1e-6);
  EXPECT_LE(a.rounds, 4);
}

TEST(Alloc, ZeroRatedWorkerWithStorageReceivesOverflow) {
  StorageAllocation a = allocate_storage({1, 0}, {50, 1000}, 100);
  EXPECT_NEAR(a.expected_bytes[0], 50, 1e-9);
  EXPECT_NEAR(a.expected_bytes[1], 50, 1e-9);
  EXPECT_NEAR(a.ratings[1], 0.5, 1e-12);
}

TEST(Alloc, Errors) {
  auto expect_line = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no ts::Error";
    } catch (const ts::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  expect_line([] { allocate_storage({1, 1}, {100, 200}, 301); }, "needs 301 bytes");
  expect_line([] { allocate_storage({1, 1}, {100, 200}, 301); }, "only 300 bytes");
  expect_line([] { allocate_storage(std::vector<double>{}, std::vector<int64_t>{}, 1); }, "no workers");
  expect_line([] { allocate_storage({1}, {1, 2}, 1); }, "1 ratings but 2 storage");
  expect_line([] { allocate_storage({0, 0}, {10, 10}, 1); }, "positive");
  expect_line([] { allocate_storage({1, -1}, {10, 10}, 1); }, "worker 1");
  expect_line([] { allocate_storage({1, NAN}, {10, 10}, 1); }, "worker 1");
  expect_line([] { allocate_storage({1, 1}, {10, -10}, 1); }, "storage of worker 1");
  expect_line([] { allocate_storage({1, 1}, {10, 10}, 0); }, "model size");
}

TEST(Alloc, UsesFlashOfTestbed) {
  Testbed t = default_testbed(2);
  t.boards[0].flash_bytes = 100;
  t.boards[1].flash_bytes = 1000;
  StorageAllocation a = allocate_storage(t, {1, 1}, 600);
  EXPECT_NEAR(a.expected_bytes[0], 100, 1e-9);
  EXPECT_NEAR(a.expected_bytes[1], 500, 1e-9);
}

// Thousands of random cases: rating spreads from flat to extreme, storage
// from generous to exactly sufficient, including zero ratings and zero
// storage. Checks termination, conservation, fit and monotonicity.
TEST(Alloc, PropertiesOnRandomTestbeds) {
  std::mt19937_64 rng(20240611);
  int capped_cases = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    const size_t n = 1 + rng() % 40;
    std::vector<double> r(n);
    std::vector<int64_t> storage(n);
    std::uniform_real_distribution<double> logr(-3, 3);
    for (size_t i = 0; i < n; ++i) {
      r[i] = (rng() % 10 == 0) ? 0.0 : std::pow(10.0, logr(rng));
      storage[i] = (rng() % 15 == 0) ? 0 : int64_t(rng() % 2000000);
    }
    if (std::accumulate(r.begin(), r.end(), 0.0) == 0) r[0] = 1;
    int64_t have = std::accumulate(storage.begin(), storage.end(), int64_t(0));
    if (have == 0) storage[0] = have = 1;
    // Model between 1 byte and all storage (tight cases are the hard ones).
    int64_t model = (rng() % 4 == 0) ? have : 1 + int64_t(rng() % uint64_t(have));

    StorageAllocation a = allocate_storage(r, storage, model);
    ASSERT_EQ(a.ratings.size(), n);
    ASSERT_EQ(a.expected_bytes.size(), n);
    ASSERT_LE(a.rounds, int(n)) << "iter " << iter;
    capped_cases += a.rounds > 0;

    const double rsum = std::accumulate(r.begin(), r.end(), 0.0);
    const double asum = std::accumulate(a.ratings.begin(), a.ratings.end(), 0.0);
    const double ssum = std::accumulate(a.expected_bytes.begin(), a.expected_bytes.end(), 0.0);
    ASSERT_NEAR(asum, rsum, 1e-9 * rsum) << "iter " << iter;
    ASSERT_NEAR(ssum, double(model), 1e-9 * double(model)) << "iter " << iter;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(a.expected_bytes[i], double(storage[i]) + 1e-9 * double(model)) << "iter " << iter;
      ASSERT_GE(a.expected_bytes[i], 0.0);
      ASSERT_GE(a.ratings[i], -1e-12 * rsum);
      if (a.capped[i]) {
        ASSERT_EQ(a.expected_bytes[i], double(storage[i]));
      } else {
        ASSERT_GE(a.ratings[i], r[i]) << "uncapped worker lost rating, iter " << iter;
      }
    }
  }
  EXPECT_GT(capped_cases, 1000);  // the generator does exercise overflow
}

// A chain where each round's gift overflows exactly one more worker: the
// worst case of n rounds is reached and not exceeded.
TEST(Alloc, CascadeTakesAtMostNRounds) {
  const size_t n = 12;
  std::vector<double> r(n, 1.0);
  r[0] = 1000;
  std::vector<int64_t> storage(n);
  for (size_t i = 0; i < n; ++i) storage[i] = int64_t(10 * (i + 1));
  int64_t model = std::accumulate(storage.begin(), storage.end(), int64_t(0));
  StorageAllocation a = allocate_storage(r, storage, model);
  EXPECT_LE(a.rounds, int(n));
  EXPECT_GE(a.rounds, 3);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(a.expected_bytes[i], double(storage[i]), 1e-6);
}

// ---------------------------------------------------------------------------
// Whole fragments (fit_storage): a synthetic fragment whose size, like a real
// one, moves in steps of whole kernels, carries a fixed header, per-boundary
// duplicates (a kernel split between two workers is stored by both) and
// routing bytes that the proportional model does not see.
// ---------------------------------------------------------------------------

namespace {

struct StepFragments {
  int64_t model = 0, kernel = 0, header = 0, per_boundary = 0, routing_per_kb = 0;
  int calls = 0;
  std::vector<int64_t> operator()(const std::vector<double>& shares) {
    ++calls;
    const size_t n = shares.size();
    const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
    std::vector<int64_t> out(n);
    double begin = 0;
    for (size_t i = 0; i < n; ++i) {
      const double end = begin + shares[i] / sum * double(model);
      // Whole kernels from the one holding `begin` to the one holding `end`.
      const int64_t k0 = int64_t(std::floor(begin / double(kernel)));
      const int64_t k1 = int64_t(std::ceil(end / double(kernel)));
      const int64_t data = end > begin ? (k1 - k0) * kernel : 0;
      const int boundaries = (i > 0) + (i + 1 < n);
      out[i] = header + data + boundaries * per_boundary + data / 1000 * routing_per_kb;
      begin = end;
    }
    return out;
  }
};

}  // namespace

TEST(FitStorage, SmallBoardBetweenLargeOnesIsFilledToItsFlash) {
  StepFragments f{2'760'000, 1'664, 35'000, 700, 3};
  const std::vector<int64_t> flash = {8 << 20, 204'800, 8 << 20};
  // The proportional model alone (flash minus the fixed header) overflows.
  {
    std::vector<int64_t> storage;
    for (int64_t b : flash) storage.push_back(b - f.header);
    const auto a = allocate_storage({1, 1, 1}, storage, f.model);
    EXPECT_GT(f(a.ratings)[1], flash[1]);
  }
  f.calls = 0;
  const FittedStorage r = fit_storage({1, 1, 1}, flash, f.model, f.header,
                                      [&](const std::vector<double>& s) { return f(s); });
  ASSERT_TRUE(r.fits);
  EXPECT_EQ(r.measurements, f.calls);
  EXPECT_LE(r.measurements, 40);
  const auto sizes = f(r.alloc.ratings);
  EXPECT_EQ(sizes, r.fragment_bytes);
  for (size_t i = 0; i < flash.size(); ++i) EXPECT_LE(sizes[i], flash[i]) << i;
  // Filled: within two kernels (the size moves in kernel steps at each of
  // its two ends) and the bisection tolerance of its flash.
  EXPECT_GE(sizes[1], flash[1] - 2 * f.kernel - 64) << sizes[1];
  // The excess went to the large boards; ratings only moved.
  EXPECT_GT(r.alloc.ratings[0], r.alloc.ratings[1]);
  EXPECT_GT(r.alloc.ratings[2], r.alloc.ratings[1]);
  EXPECT_NEAR(std::accumulate(r.alloc.ratings.begin(), r.alloc.ratings.end(), 0.0), 3.0, 1e-9);
  EXPECT_TRUE(r.alloc.capped[1]);
}

TEST(FitStorage, CascadesAndRandomTestbedsFit) {
  std::mt19937 rng(77);
  int fitted = 0;
  for (int t = 0; t < 200; ++t) {
    const int n = 2 + int(rng() % 7);
    StepFragments f{int64_t(500'000 + rng() % 3'000'000), int64_t(64 + rng() % 4000), int64_t(1000 + rng() % 40'000),
                    int64_t(rng() % 3000), int64_t(rng() % 20)};
    std::vector<double> ratings;
    std::vector<int64_t> flash;
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      ratings.push_back(0.5 + double(rng() % 100));
      flash.push_back(int64_t(f.model / n / 2 + rng() % uint64_t(f.model)));
      total += flash.back();
    }
    // Room for the data plus every fragment's extras, with some slack.
    const int64_t extras = n * (f.header + 2 * f.per_boundary + 2 * f.kernel) + f.model / 1000 * f.routing_per_kb;
    if (total < f.model + extras + f.model / 4) continue;
    const FittedStorage r = fit_storage(ratings, flash, f.model, f.header, [&](const std::vector<double>& s) { return f(s); });
    SCOPED_TRACE("testbed " + std::to_string(t));
    ASSERT_TRUE(r.fits);
    for (int i = 0; i < n; ++i) EXPECT_LE(r.fragment_bytes[size_t(i)], flash[size_t(i)]);
    ++fitted;
  }
  EXPECT_GE(fitted, 100);
}

TEST(FitStorage, ReportsTheLastTryWhenNothingFits) {
  StepFragments f{100'000, 100, 10'000, 0, 0};
  // The data fits the storage but not with the header on every board.
  const FittedStorage r = fit_storage({1, 1}, {55'000, 55'000}, f.model, 0, [&](const std::vector<double>& s) { return f(s); });
  EXPECT_FALSE(r.fits);
  EXPECT_GT(std::max(r.fragment_bytes[0], r.fragment_bytes[1]), 55'000);
}
