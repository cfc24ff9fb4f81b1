// Independent jobs side by side on the machine's cores.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace ts {

// Calls job(i) for every i in [0, n) on up to `max_threads` threads (and
// no more than the machine's cores), this one among them; indices are
// taken in order. After a job throws no further index is started, and the
// failure of the lowest index is rethrown here once all have stopped: what
// a loop from 0 would have thrown, for jobs that do not depend on each
// other.
// Whether this thread runs jobs of a for_each_on_every_core with helper
// threads: one inside it runs its own jobs on this thread (the cores are
// busy already).
inline thread_local bool t_in_parallel_jobs = false;

template <class Job>
void for_each_on_every_core(size_t n, Job&& job, size_t max_threads = 8) {
  std::vector<std::exception_ptr> failed(n);
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i; (i = next++) < n;) try {
        job(i);
      } catch (...) {
        failed[i] = std::current_exception();
        next = n;
      }
  };
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t threads = t_in_parallel_jobs ? 1 : std::min({n, cores, std::max<size_t>(1, max_threads)});
  const auto helper = [&] {
    t_in_parallel_jobs = true;
    work();
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(helper);
  const bool outer = t_in_parallel_jobs;
  t_in_parallel_jobs = threads > 1 || outer;
  work();
  t_in_parallel_jobs = outer;
  for (std::thread& t : pool) t.join();
  for (auto& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace ts
