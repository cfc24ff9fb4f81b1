// Ratings: eq. 1, 2 and 5, the three allocation modes, and the worked
// example of docs/allocation.md.
#include "plan/ratings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace ts::plan;

namespace {

// The 3-board heterogeneous testbed of docs/allocation.md.
Testbed worked_example_testbed() {
  Testbed t;
  t.boards.push_back({0, "local", 600.0, 512 * 1024, 800000, 0.0, 10000.0});
  t.boards.push_back({1, "local", 400.0, 512 * 1024, 600000, 0.00365, 10000.0});
  t.boards.push_back({2, "local", 200.0, 512 * 1024, 1000000, 0.0124, 10000.0});
  return t;
}

}  // namespace

// docs/allocation.md, "Worked example", step 1. Eq. 5 by hand with K1 = 0.2
// and Kc = 2 for every board:
//   board 0: f*K1 = 120, d+1/B = 0 + 0.0001       = 0.0001,  f*K1*Kc = 240
//            R0 = 120 / (0.0001 * 240 + 1) = 120 / 1.024 = 117.1875
//   board 1: f*K1 =  80, d+1/B = 0.00365 + 0.0001 = 0.00375, f*K1*Kc = 160
//            R1 =  80 / (0.00375 * 160 + 1) = 80 / 1.6 = 50
//   board 2: f*K1 =  40, d+1/B = 0.0124 + 0.0001  = 0.0125,  f*K1*Kc = 80
//            R2 =  40 / (0.0125 * 80 + 1) = 40 / 2 = 20
TEST(Ratings, WorkedExampleByHand) {
  const double r0 = (600 * 0.2) / ((0.0 + 1.0 / 10000) * (600 * 0.2 * 2) + 1);
  const double r1 = (400 * 0.2) / ((0.00365 + 1.0 / 10000) * (400 * 0.2 * 2) + 1);
  const double r2 = (200 * 0.2) / ((0.0124 + 1.0 / 10000) * (200 * 0.2 * 2) + 1);
  EXPECT_NEAR(r0, 117.1875, 1e-9);
  EXPECT_NEAR(r1, 50.0, 1e-9);
  EXPECT_NEAR(r2, 20.0, 1e-9);

  EXPECT_NEAR(rating_eq5(600, 0.2, 2, 0.0, 10000), r0, 1e-12);
  EXPECT_NEAR(rating_eq5(400, 0.2, 2, 0.00365, 10000), r1, 1e-12);
  EXPECT_NEAR(rating_eq5(200, 0.2, 2, 0.0124, 10000), r2, 1e-12);

  std::vector<double> r = compute_ratings(worked_example_testbed(), Allocation::Rating, 0.2, {2.0});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_NEAR(r[0], 117.1875, 1e-9);
  EXPECT_NEAR(r[1], 50.0, 1e-9);
  EXPECT_NEAR(r[2], 20.0, 1e-9);
}

// Board 0 of the worked example: R0 = 117.1875 KB/s of output means
// W = R0/K1 = 585.9375 Mcycles, which eq. 1 says takes
//   585.9375/600 + 0.0001 * 0.2*2*585.9375 = 0.9765625 + 0.0234375 = 1 s.
TEST(Ratings, WorkedExampleTimeIsOneSecond) {
  RatingInputs in{600, 0.2, 2, 0.0, 10000};
  TimeTerms t = time_terms_eq1(585.9375, in);
  EXPECT_NEAR(t.compute_s, 0.9765625, 1e-12);
  EXPECT_NEAR(t.comm_s, 0.0234375, 1e-12);
  EXPECT_NEAR(time_eq1(585.9375, in), 1.0, 1e-12);
  EXPECT_NEAR(traffic_kb_eq2(585.9375, 0.2, 2), 234.375, 1e-12);
}

// Eq. 5 is eq. 1 solved for t = 1 s: for random inputs, the workload that
// produces R KB of output (W = R/K1) takes exactly one second.
TEST(Ratings, Eq5InvertsEq1) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> f(1, 1000), k1(0.05, 0.5), kc(0, 20), d(0, 0.05),
      b(10, 100000);
  for (int i = 0; i < 10000; ++i) {
    RatingInputs in{f(rng), k1(rng), kc(rng), d(rng), b(rng)};
    double r = rating_eq5(in);
    ASSERT_GT(r, 0);
    ASSERT_NEAR(time_eq1(r / in.k1, in), 1.0, 1e-9);
  }
}

TEST(Ratings, Limits) {
  // No traffic: the rating is the pure compute rate f*K1.
  EXPECT_DOUBLE_EQ(rating_eq5(600, 0.2, 0, 0.01, 100), 120.0);
  // Faster clock, shorter delay, wider link: never a lower rating.
  EXPECT_GT(rating_eq5(600, 0.2, 2, 0.001, 1000), rating_eq5(300, 0.2, 2, 0.001, 1000));
  EXPECT_GT(rating_eq5(600, 0.2, 2, 0.001, 1000), rating_eq5(600, 0.2, 2, 0.002, 1000));
  EXPECT_GT(rating_eq5(600, 0.2, 2, 0.001, 2000), rating_eq5(600, 0.2, 2, 0.001, 1000));
  // With a slow link the rating saturates at 1 / ((d + 1/B) * Kc) whatever
  // the clock: the board is link-bound.
  double cap = 1.0 / ((0.01 + 1.0 / 100) * 2);
  EXPECT_NEAR(rating_eq5(1e9, 0.2, 2, 0.01, 100), cap, 1e-5);
  EXPECT_LT(rating_eq5(600, 0.2, 2, 0.01, 100), cap);
}

TEST(Ratings, BadInputsThrowOneLine) {
  EXPECT_THROW(rating_eq5(0, 0.2, 2, 0, 1000), ts::Error);
  EXPECT_THROW(rating_eq5(600, 0, 2, 0, 1000), ts::Error);
  EXPECT_THROW(rating_eq5(600, 0.2, -1, 0, 1000), ts::Error);
  EXPECT_THROW(rating_eq5(600, 0.2, 2, -0.1, 1000), ts::Error);
  EXPECT_THROW(rating_eq5(600, 0.2, 2, 0, 0), ts::Error);
  EXPECT_THROW(rating_eq5(NAN, 0.2, 2, 0, 1000), ts::Error);
  EXPECT_THROW(rating_eq5(600, 0.2, 2, 0, INFINITY), ts::Error);
  EXPECT_THROW(time_eq1(-1, RatingInputs{}), ts::Error);
  try {
    rating_eq5(600, 0.2, 2, 0, -5);
    FAIL();
  } catch (const ts::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bandwidth"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
}

TEST(Ratings, AllocationModes) {
  Testbed t = worked_example_testbed();
  EXPECT_EQ(compute_ratings(t, Allocation::Even), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(compute_ratings(t, Allocation::Frequency), (std::vector<double>{600, 400, 200}));

  // Per-board Kc, a broadcast Kc, and the default Kc.
  auto per_board = compute_ratings(t, Allocation::Rating, 0.2, {2, 0, 1});
  EXPECT_NEAR(per_board[0], 117.1875, 1e-9);
  EXPECT_DOUBLE_EQ(per_board[1], 80.0);  // Kc = 0: f*K1
  EXPECT_NEAR(per_board[2], 40.0 / (0.0125 * 40 + 1), 1e-12);
  EXPECT_EQ(compute_ratings(t, Allocation::Rating, 0.2, {kDefaultKc}),
            compute_ratings(t, Allocation::Rating, 0.2));
  EXPECT_EQ(compute_ratings(t, Allocation::Rating), compute_ratings(t, Allocation::Rating, kDefaultK1, {kDefaultKc, kDefaultKc, kDefaultKc}));

  EXPECT_THROW(compute_ratings(t, Allocation::Rating, 0.2, {1, 2}), ts::Error);
  EXPECT_THROW(compute_ratings(t, Allocation::Rating, -0.2), ts::Error);
  EXPECT_THROW(compute_ratings(Testbed{}, Allocation::Even), ts::Error);
}

TEST(Ratings, ParseAllocation) {
  for (Allocation a : {Allocation::Even, Allocation::Frequency, Allocation::Rating})
    EXPECT_EQ(parse_allocation(to_string(a)), a);
  EXPECT_EQ(parse_allocation("rating"), Allocation::Rating);
  try {
    parse_allocation("Rating ");
    FAIL();
  } catch (const ts::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'Rating '"), std::string::npos) << msg;
    EXPECT_NE(msg.find("even, frequency or rating"), std::string::npos) << msg;
  }
}

TEST(Ratings, KcFromTraffic) {
  // A board receiving 300 KB of inputs and returning 100 KB of outputs.
  EXPECT_DOUBLE_EQ(kc_from_traffic(300e3 + 100e3, 100e3), 4.0);
  EXPECT_THROW(kc_from_traffic(1, 0), ts::Error);
  EXPECT_THROW(kc_from_traffic(-1, 10), ts::Error);
}
