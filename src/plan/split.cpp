#include "plan/split.h"

#include <algorithm>
#include <cmath>

#include "plan/testbed.h"
#include <limits>
#include <numeric>
#include <sstream>

namespace ts::plan {
namespace {

using ts::plan::format_number;
std::string num(double v) { return format_number(v); }

// Returns the weights' sum after checking them; the sum is taken in long
// double so that quotas of large totals keep their fractional part.
long double checked_weight_sum(const std::vector<double>& weights) {
  if (weights.empty()) throw Error("split: no workers to split between");
  long double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0)
      throw Error("split: weight of worker " + std::to_string(i) +
                  " must be finite and >= 0 (got " + num(weights[i]) + ")");
    sum += weights[i];
  }
  if (!(sum > 0)) throw Error("split: all weights are zero");
  return sum;
}

}  // namespace

std::vector<int64_t> proportional_counts(int64_t total, const std::vector<double>& weights) {
  if (total < 0) throw Error("split: cannot split a negative count (" + std::to_string(total) + ")");
  const long double sum = checked_weight_sum(weights);
  const size_t n = weights.size();

  // Step 1: the floor of each exact quota.
  std::vector<int64_t> counts(n, 0);
  std::vector<long double> remainder(n, 0);
  int64_t assigned = 0;
  for (size_t i = 0; i < n; ++i) {
    if (weights[i] == 0) continue;  // never gets a unit, even from rounding
    long double quota = (long double)total * weights[i] / sum;
    long double whole = std::floor(quota);
    counts[i] = std::clamp<int64_t>(int64_t(whole), 0, total);
    remainder[i] = quota - whole;
    assigned += counts[i];
  }

  // Step 2: hand the missing units to the largest remainders, ties to the
  // lower index. Only positive-weight workers are candidates.
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (weights[i] > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });

  // In exact arithmetic 0 <= left < order.size(). Floating point could in
  // principle push a floor across an integer either way, so both directions
  // are handled rather than assumed away: the sum must be exact.
  int64_t left = total - assigned;
  for (size_t k = 0; left > 0; k = (k + 1) % order.size()) {
    ++counts[order[k]];
    --left;
  }
  // Too many units: take them back from the smallest remainders. The counts
  // sum to more than total >= 0 here, so some positive count always exists.
  while (left < 0)
    for (auto it = order.rbegin(); it != order.rend() && left < 0; ++it)
      if (counts[*it] > 0) {
        --counts[*it];
        ++left;
      }
  return counts;
}

std::vector<Run> split_runs(int64_t total, const std::vector<double>& weights) {
  std::vector<int64_t> counts = proportional_counts(total, weights);
  std::vector<Run> runs(counts.size());
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    runs[i] = Run{at, at + counts[i]};
    at += counts[i];
  }
  return runs;
}

ChannelUse channels_touched(const Run& run, int64_t c, int64_t h, int64_t w) {
  if (c <= 0 || h <= 0 || w <= 0 || c > std::numeric_limits<int>::max() ||
      h > std::numeric_limits<int64_t>::max() / w ||
      c > std::numeric_limits<int64_t>::max() / (h * w))
    throw Error("split: bad tensor shape " + std::to_string(c) + "x" + std::to_string(h) + "x" +
                std::to_string(w));
  const int64_t plane = h * w;
  const int64_t size = c * plane;
  if (run.begin < 0 || run.end < run.begin || run.end > size)
    throw Error("split: run [" + std::to_string(run.begin) + ", " + std::to_string(run.end) +
                ") is outside a tensor of " + std::to_string(size) + " outputs");

  ChannelUse use;
  if (run.empty()) {
    use.first = int(std::min(run.begin / plane, c - 1));
    use.last = use.first - 1;
    return use;
  }
  use.first = int(run.begin / plane);
  use.last = int((run.end - 1) / plane);
  for (int64_t ch = use.first; ch <= use.last; ++ch) {
    int64_t lo = std::max(run.begin, ch * plane);
    int64_t hi = std::min(run.end, (ch + 1) * plane);
    use.positions.push_back(hi - lo);
  }
  return use;
}

ChannelUse channels_touched(const Run& run, const Shape& shape) {
  return channels_touched(run, shape.c, shape.h, shape.w);
}

}  // namespace ts::plan
