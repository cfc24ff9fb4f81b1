// make_plan_or_count (plan.h): how many boards like the testbed's would
// hold a model that its boards' RAM does not, found by planning.
#include <algorithm>
#include <string>

#include "plan/plan.h"
#include "util/error.h"

namespace ts::plan {

namespace {

// n boards like t's first, numbered 0 .. n-1.
Testbed copies(const Testbed& t, int n) {
  Testbed c = t;
  c.boards.assign(size_t(n), t.boards.front());
  for (int i = 0; i < n; ++i) c.boards[size_t(i)].id = i;
  return c;
}

bool fits(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  try {
    make_plan(q, t, opt);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The fewest boards like t's (all alike, started here) that hold every share
// in RAM, searched up to kMaxCount; 0 if none does.
int boards_needed(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  constexpr int kMaxCount = 256;
  for (const Board& b : t.boards) {
    Board a = b, f = t.boards.front();
    a.id = f.id = 0;
    if (!(a == f) || b.address != "local") return 0;
  }
  int lo = int(t.boards.size()), hi = lo;  // lo does not fit
  while (true) {
    hi = std::min(kMaxCount, hi * 2);
    if (fits(q, copies(t, hi), opt)) break;
    if (hi == kMaxCount) return 0;
    lo = hi;
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(q, copies(t, mid), opt) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

Plan make_plan_or_count(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  try {
    return make_plan(q, t, opt);
  } catch (const RamBudgetError& e) {
    if (!opt.check_budgets || t.boards.empty()) throw;
    const int n = boards_needed(q, t, opt);
    if (n <= 0) throw;
    throw Error(std::string(e.what()) + "; " + std::to_string(n) + " such boards hold it (--workers " +
                std::to_string(n) + ")");
  }
}

}  // namespace ts::plan
