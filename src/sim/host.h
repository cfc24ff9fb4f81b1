// Host boards in the simulator (TimingModel's host_* fields, docs/simulator.md
// "Host boards"): boards that are processes sharing a few cores of one machine,
// as `tinysplit run` starts them. Two pieces, used by both routes:
//
//   * WakeSampler: the scheduling delay of one wake-up, drawn from the measured
//     distribution (equally likely values) with a fixed-seed generator, so a
//     simulation stays deterministic.
//   * CpuPool: processor sharing of `cores` cores among the boards that have CPU
//     work at the moment: with n jobs, each progresses at min(1, cores / n).
//     Finishing times move when a job starts or ends; the pool hands out a
//     version per job so the caller can ignore stale completion events.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ts::sim {

class WakeSampler {
 public:
  // slot_s > 0: wake-ups are correlated in time: every wake-up at a time t in
  // the same slot [k slot_s, (k+1) slot_s) gets the same draw (the machine is
  // busy or free for all processes at once); 0 = an independent draw each.
  WakeSampler(const std::vector<double>& table, double slack_s, uint64_t seed, double slot_s = 0)
      : table_(table), slack_(slack_s), seed_(seed * 0x9E3779B97F4A7C15ull + 1), state_(seed_), slot_(slot_s) {}
  bool enabled() const { return !table_.empty(); }
  // After a sleep (timer slack included), waking at time t.
  double sleep(double t = 0) { return enabled() ? table_[pick(t)] : 0.0; }
  // A process blocked in poll woken by a frame at time t (no timer slack).
  double frame(double t = 0) { return enabled() ? std::max(0.0, table_[pick(t)] - slack_) : 0.0; }

 private:
  size_t pick(double t) {
    if (slot_ > 0) return size_t(mix(seed_ + uint64_t(std::max(0.0, t) / slot_)) % uint64_t(table_.size()));
    return size_t(mix(state_ += 0x9E3779B97F4A7C15ull) % uint64_t(table_.size()));
  }
  static uint64_t mix(uint64_t z) {
    // splitmix64's output function
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::vector<double> table_;
  double slack_;
  uint64_t seed_, state_;
  double slot_;
};

class CpuPool {
 public:
  CpuPool(int boards, int cores) : cores_(cores), left_(size_t(boards), -1.0), version_(size_t(boards), 0) {}
  bool shared() const { return cores_ > 0; }
  // Board b starts `work` seconds of CPU at time t (it has none running).
  void start(int b, double work, double t) {
    advance(t);
    left_[size_t(b)] = std::max(0.0, work);
    ++active_;
    bump();
  }
  // A completion event (board, version) at time t: true if it is current,
  // i.e. the board's work is done now; the job is then removed.
  bool done(int b, uint64_t version, double t) {
    if (left_[size_t(b)] < 0 || version != version_[size_t(b)]) return false;
    advance(t);
    left_[size_t(b)] = -1.0;
    --active_;
    bump();
    return true;
  }
  // When each running job ends at the current rate: (board, version, time).
  struct Due {
    int board;
    uint64_t version;
    double t;
  };
  const std::vector<Due>& due() const { return due_; }
  double rate() const { return active_ <= cores_ ? 1.0 : double(cores_) / double(active_); }

 private:
  void advance(double t) {
    const double r = rate();
    for (double& l : left_)
      if (l > 0) l = std::max(0.0, l - (t - now_) * r);
    now_ = t;
  }
  // New versions and finishing times for every running job.
  void bump() {
    due_.clear();
    const double r = rate();
    for (size_t b = 0; b < left_.size(); ++b)
      if (left_[b] >= 0) due_.push_back(Due{int(b), ++version_[b], now_ + left_[b] / r});
  }
  int cores_;
  int active_ = 0;
  double now_ = 0;
  std::vector<double> left_;  // CPU seconds left, -1 = no job
  std::vector<uint64_t> version_;
  std::vector<Due> due_;
};

}  // namespace ts::sim

#include <string>

#include <nlohmann/json.hpp>

#include "sim/sim.h"

namespace ts::sim {

// Host calibration (scripts/calibrate_host.sh writes it): reads
//   {"host_ns_per_mac": 0.17, "timer_slack_us": 50, "wake_us": [ascending values], "nproc": 2, ...}
// into m (host_s_per_mac, timer_slack_s, wake_quantiles_s; host_cores = nproc
// unless m.host_cores is set). Other keys (command, load, date) are notes and
// are kept as they are. Throws ts::Error with one line naming `source` on a
// missing or bad value.
void apply_host_calibration(const nlohmann::json& doc, const std::string& source, TimingModel& m);
void load_host_calibration(const std::string& path, TimingModel& m);

}  // namespace ts::sim
