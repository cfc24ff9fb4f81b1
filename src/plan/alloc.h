// Storage-aware allocation (paper §5.3, eq. 6-7).
//
// Each worker i gets a share of the model proportional to its rating:
//   S_i = R_i * S_m / sum_j R_j                                   (eq. 6)
// A worker whose share exceeds its storage S_it gives up the overflow rating
//   R_io = (S_i - S_it) * sum_j R_j / S_m                          (eq. 7)
// which is spread evenly over the workers that still have spare storage.
//
// The paper leaves the loop open; we define it as follows (docs/allocation.md):
//  * A round computes every S_i from the current ratings. Every worker over
//    its storage is capped: R_io is subtracted from it, so its share is
//    exactly S_it, and it is marked capped for good.
//  * The sum of this round's R_io is divided equally among all workers not
//    capped (including those with rating 0: "spare storage" is the only
//    criterion). A receiver pushed over its storage by that gift is capped
//    in the next round, and so on.
//  * The loop stops at the first round with no overflow. Every overflowing
//    round caps at least one new worker and a capped worker never receives
//    again, so there are at most N overflowing rounds.
//  * sum_j R_j is invariant: rating only moves between workers. Hence
//    sum S_i = S_m throughout, and uncapped workers' ratings never decrease.
//  * If sum_i S_it < S_m no assignment can fit; that is an error up front.
//
// This works on the proportional model: a worker's real fragment is not
// exactly R_i/sum R * S_m bytes, since a kernel is stored once however many
// output positions of it a worker computes (alg. 1), runs are rounded to
// whole neurons and fragments carry headers. The planner therefore checks
// the real fragment bytes against flash after splitting; this allocation
// only chooses the shares.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "plan/testbed.h"

namespace ts::plan {

struct StorageAllocation {
  std::vector<double> ratings;         // adjusted ratings: the shares to split by
  std::vector<double> expected_bytes;  // S_i from eq. 6 with the adjusted ratings
  std::vector<bool> capped;            // worker was capped at its storage
  int rounds = 0;                      // overflowing rounds (0 if all fit at once)
};

// Eq. 6: a worker's share of a model of model_bytes.
double fragment_bytes_eq6(double rating, double rating_sum, double model_bytes);

// Eq. 7: rating to take off a worker whose share exceeds its storage.
double overflow_rating_eq7(double share_bytes, double storage_bytes, double rating_sum,
                           double model_bytes);

// Runs the capped redistribution above. ratings: finite, >= 0, positive sum;
// storage_bytes: one per worker, >= 0; model_bytes > 0. Throws ts::Error with
// one line on bad input or when the storage cannot hold the model.
StorageAllocation allocate_storage(const std::vector<double>& ratings,
                                   const std::vector<int64_t>& storage_bytes,
                                   int64_t model_bytes);

// Eq. 6-7 against whole fragments. The proportional model above counts only
// the model's data; a real fragment also carries a header, per-layer
// entries, routing runs and alignment, and a kernel split between two
// workers is stored by both. fit_storage() therefore works on the real size
// of every fragment, as measured by `measure` (given the shares to split by,
// it returns each worker's fragment bytes; the planner passes the fragment
// writer's own size function, so the layout is defined once):
//   1. S_it starts at flash_i - fixed_overhead (the guess the proportional
//      model needs); allocate_storage() gives shares; measure them.
//   2. A worker whose fragment exceeds its flash gets a smaller S_it: first
//      by its excess, doubling the cut each time it still overflows (the
//      size moves in steps of whole kernels, so a cut by the excess alone
//      may change nothing); once a fitting S_it is known, by bisection
//      between the largest fitting and the smallest overflowing S_it.
//   3. When everything fits, capped workers with an open bracket wider than
//      `tolerance` bytes try the midpoint, so that a storage-capped board is
//      filled up to its flash rather than left with the cut's slack.
//   4. Stop when nothing overflows and no bracket is open, or after
//      max_measurements; the result is the last allocation that fitted (or,
//      if none did, the last one tried, whose overflow the caller reports).
struct FittedStorage {
  StorageAllocation alloc;             // the allocation chosen (its ratings are the shares)
  std::vector<int64_t> storage;        // the S_it it was computed with
  std::vector<int64_t> fragment_bytes; // measured sizes of that allocation
  bool fits = false;                   // every fragment within its flash
  int measurements = 0;                // calls of `measure`
};

using FragmentSizer = std::function<std::vector<int64_t>(const std::vector<double>& shares)>;

FittedStorage fit_storage(const std::vector<double>& ratings, const std::vector<int64_t>& flash_bytes,
                          int64_t model_bytes, int64_t fixed_overhead, const FragmentSizer& measure,
                          int max_measurements = 40, int64_t tolerance = 64);

// Same, with each board's flash as its storage S_it.
StorageAllocation allocate_storage(const Testbed& t, const std::vector<double>& ratings,
                                   int64_t model_bytes);

}  // namespace ts::plan
