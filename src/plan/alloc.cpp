#include "plan/alloc.h"

#include <algorithm>
#include <cmath>

#include "plan/testbed.h"
#include <limits>
#include <sstream>

namespace ts::plan {
namespace {

using ts::plan::format_number;
std::string num(double v) { return format_number(v); }

// Sum of storage, saturating: anything beyond int64 certainly holds a model
// whose size is an int64.
int64_t total_storage(const std::vector<int64_t>& storage) {
  int64_t sum = 0;
  for (int64_t s : storage) {
    if (s > std::numeric_limits<int64_t>::max() - sum) return std::numeric_limits<int64_t>::max();
    sum += s;
  }
  return sum;
}

void check_inputs(const std::vector<double>& ratings, const std::vector<int64_t>& storage,
                  int64_t model_bytes) {
  if (ratings.empty()) throw Error("allocation: no workers");
  if (storage.size() != ratings.size())
    throw Error("allocation: " + std::to_string(ratings.size()) + " ratings but " +
                std::to_string(storage.size()) + " storage sizes");
  if (model_bytes <= 0)
    throw Error("allocation: model size must be > 0 bytes (got " + std::to_string(model_bytes) + ")");
  double sum = 0;
  for (size_t i = 0; i < ratings.size(); ++i) {
    if (!(std::isfinite(ratings[i]) && ratings[i] >= 0))
      throw Error("allocation: rating of worker " + std::to_string(i) + " must be >= 0 (got " +
                  num(ratings[i]) + ")");
    if (storage[i] < 0)
      throw Error("allocation: storage of worker " + std::to_string(i) + " must be >= 0 (got " +
                  std::to_string(storage[i]) + ")");
    sum += ratings[i];
  }
  if (!(sum > 0) || !std::isfinite(sum)) throw Error("allocation: ratings must have a positive finite sum");
  int64_t have = total_storage(storage);
  if (have < model_bytes)
    throw Error("allocation: model needs " + std::to_string(model_bytes) +
                " bytes but the workers' storage totals only " + std::to_string(have) + " bytes");
}

}  // namespace

double fragment_bytes_eq6(double rating, double rating_sum, double model_bytes) {
  return rating * model_bytes / rating_sum;
}

double overflow_rating_eq7(double share_bytes, double storage_bytes, double rating_sum,
                           double model_bytes) {
  return (share_bytes - storage_bytes) * rating_sum / model_bytes;
}

StorageAllocation allocate_storage(const std::vector<double>& ratings,
                                   const std::vector<int64_t>& storage_bytes,
                                   int64_t model_bytes) {
  check_inputs(ratings, storage_bytes, model_bytes);
  const size_t n = ratings.size();
  const double sm = double(model_bytes);
  double rsum = 0;
  for (double r : ratings) rsum += r;

  StorageAllocation out;
  out.ratings = ratings;
  out.capped.assign(n, false);

  // A share counts as overflowing only beyond rounding noise, so that a
  // receiver landing exactly on its storage is not capped for nothing.
  const double noise = sm * 1e-12;

  // At most n overflowing rounds (each caps a new worker), plus the final
  // round that finds nothing to do.
  for (size_t round = 0; round <= n; ++round) {
    double pool = 0;  // sum of this round's eq. 7 overflow ratings
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      if (out.capped[i]) continue;  // already exactly at its storage
      double share = fragment_bytes_eq6(out.ratings[i], rsum, sm);
      double storage = double(storage_bytes[i]);
      if (share <= storage + noise) continue;
      double over = overflow_rating_eq7(share, storage, rsum, sm);
      out.ratings[i] -= over;
      pool += over;
      out.capped[i] = true;
      any = true;
    }
    if (!any) break;
    ++out.rounds;

    size_t receivers = 0;
    for (size_t i = 0; i < n; ++i) receivers += !out.capped[i];
    if (receivers == 0) {
      // Every worker sits at its storage, so sum S_it == S_m and the pool is
      // rounding noise; there is nobody to give it to.
      if (pool > rsum * 1e-9) throw Error("allocation: internal error, overflow left with no receiver");
      break;
    }
    const double gift = pool / double(receivers);
    for (size_t i = 0; i < n; ++i)
      if (!out.capped[i]) out.ratings[i] += gift;
  }

  // Capped workers hold exactly their storage (no rounding drift above it).
  out.expected_bytes.resize(n);
  for (size_t i = 0; i < n; ++i)
    out.expected_bytes[i] = out.capped[i] ? double(storage_bytes[i])
                                          : fragment_bytes_eq6(out.ratings[i], rsum, sm);
  return out;
}

FittedStorage fit_storage(const std::vector<double>& ratings, const std::vector<int64_t>& flash_bytes,
                          int64_t model_bytes, int64_t fixed_overhead, const FragmentSizer& measure,
                          int max_measurements, int64_t tolerance) {
  const size_t n = ratings.size();
  if (flash_bytes.size() != n)
    throw Error("allocation: " + std::to_string(n) + " ratings but " + std::to_string(flash_bytes.size()) + " flash sizes");
  std::vector<int64_t> storage(n);
  for (size_t i = 0; i < n; ++i) storage[i] = std::max<int64_t>(0, flash_bytes[i] - std::max<int64_t>(0, fixed_overhead));

  constexpr int64_t kNone = -1;
  std::vector<int64_t> fit_lo(n, kNone);    // largest S_it seen fitting while capped
  std::vector<int64_t> over_hi(n, kNone);   // smallest S_it seen overflowing
  std::vector<int> cuts(n, 0);              // consecutive overflows before a fit is known
  FittedStorage best, last;
  for (int m = 0; m < std::max(1, max_measurements); ++m) {
    FittedStorage cur;
    cur.alloc = allocate_storage(ratings, storage, model_bytes);
    cur.storage = storage;
    cur.fragment_bytes = measure(cur.alloc.ratings);
    if (cur.fragment_bytes.size() != n) throw Error("allocation: the fragment sizer returned the wrong number of sizes");
    bool over = false;
    for (size_t i = 0; i < n; ++i) over = over || cur.fragment_bytes[i] > flash_bytes[i];
    cur.fits = !over;
    cur.measurements = m + 1;
    last = cur;
    if (cur.fits) best = cur;

    std::vector<int64_t> next = storage;
    for (size_t i = 0; i < n; ++i) {
      const int64_t excess = cur.fragment_bytes[i] - flash_bytes[i];
      if (excess > 0) {
        over_hi[i] = over_hi[i] == kNone ? storage[i] : std::min(over_hi[i], storage[i]);
        if (fit_lo[i] != kNone && fit_lo[i] < over_hi[i]) {
          next[i] = fit_lo[i] + (over_hi[i] - fit_lo[i]) / 2;
        } else {
          const int64_t cut = excess << std::min(cuts[i], 40);
          next[i] = std::max<int64_t>(0, storage[i] - std::max<int64_t>(1, cut));
          ++cuts[i];
        }
      } else if (cur.alloc.capped[i]) {
        fit_lo[i] = std::max(fit_lo[i], storage[i]);
      }
    }
    if (!over) {
      // Fill capped workers towards their flash: try the middle of any
      // bracket still wider than the tolerance.
      for (size_t i = 0; i < n; ++i)
        if (cur.alloc.capped[i] && over_hi[i] != kNone && fit_lo[i] != kNone && over_hi[i] - fit_lo[i] > tolerance) {
          next[i] = fit_lo[i] + (over_hi[i] - fit_lo[i]) / 2;
          break;  // one worker at a time keeps the others' brackets valid
        }
    }
    if (next == storage) break;
    int64_t total = 0;
    for (int64_t v : next) total = total > std::numeric_limits<int64_t>::max() - v ? total : total + v;
    if (total < model_bytes) break;  // no storage left to cut: the caller reports the overflow
    storage = next;
  }
  FittedStorage out = best.fits ? best : last;
  out.measurements = last.measurements;
  return out;
}

StorageAllocation allocate_storage(const Testbed& t, const std::vector<double>& ratings,
                                   int64_t model_bytes) {
  std::vector<int64_t> storage;
  storage.reserve(t.boards.size());
  for (const Board& b : t.boards) storage.push_back(b.flash_bytes);
  return allocate_storage(ratings, storage, model_bytes);
}

}  // namespace ts::plan
