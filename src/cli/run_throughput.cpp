#include "cli/run_throughput.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "plan/replicate.h"

namespace ts::cli {

int run_throughput(const QGraph& q, const std::vector<std::vector<int8_t>>& inputs,
                   const std::vector<std::vector<int8_t>>& refs, const ThroughputRunOptions& o) {
  using Clock = std::chrono::steady_clock;
  if (inputs.empty() || inputs.size() != refs.size()) throw Error("run: no inputs for --objective throughput");
  const plan::GroupChoice gc = plan::choose_groups(q, o.testbed, o.plan, plan::Objective::Throughput);
  // Every group: its boards, its plan, its coordinator, deployed before the clock starts.
  struct Group {
    plan::Testbed tb;
    std::unique_ptr<coord::BoardSet> boards;
    std::unique_ptr<coord::Swarm> swarm;
    int done = 0;
  };
  std::vector<Group> groups(size_t(gc.groups));
  for (int g = 0; g < gc.groups; ++g) {
    Group& G = groups[size_t(g)];
    G.tb = plan::group_testbed(o.testbed, gc.group_boards, g);
    const plan::Plan p = plan::make_plan(q, G.tb, o.plan);
    G.boards = std::make_unique<coord::BoardSet>(G.tb, o.spawn);
    G.swarm = std::make_unique<coord::Swarm>(q, G.tb, o.plan, G.boards->addresses(), p, o.swarm);
    G.swarm->start();
    G.swarm->deploy();
  }
  const int total = int(inputs.size()) * o.repeat;
  std::atomic<int> next{0};
  std::vector<char> exact(size_t(total), 0);
  std::vector<double> latency(size_t(total), 0);
  std::mutex err_mu;
  std::string error;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int g = 0; g < gc.groups; ++g)
    threads.emplace_back([&, g] {
      Group& G = groups[size_t(g)];
      for (;;) {
        const int k = next.fetch_add(1);
        if (k >= total) return;
        const size_t i = size_t(k) % inputs.size();
        try {
          const auto a = Clock::now();
          const coord::InferenceResult r = G.swarm->infer(inputs[i]);
          latency[size_t(k)] = std::chrono::duration<double>(Clock::now() - a).count();
          exact[size_t(k)] = r.output == refs[i];
          ++G.done;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (error.empty()) error = "group " + std::to_string(g) + ": " + e.what();
          next.store(total);
          return;
        }
      }
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Group& G : groups) {
    G.swarm->close();
    G.boards->stop();
  }
  if (!error.empty()) throw Error("run --objective throughput: " + error);
  int n_exact = 0;
  for (char e : exact) n_exact += e;
  std::vector<double> sorted = latency;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double ips = wall > 0 ? double(total) / wall : 0.0;
  const bool match = n_exact == total;
  if (o.json) {
    nlohmann::json per_group = nlohmann::json::array();
    for (const Group& G : groups) {
      std::vector<int> ids;
      for (const auto& b : G.tb.boards) ids.push_back(b.id);
      per_group.push_back({{"boards", ids}, {"inferences", G.done}});
    }
    nlohmann::json cands = nlohmann::json::array();
    for (const auto& c : gc.candidates)
      cands.push_back({{"group_boards", c.group_boards}, {"groups", c.groups}, {"fits", c.fits},
                       {"est_images_per_s", c.est_images_per_s}, {"why_not", c.why_not}});
    const nlohmann::json j = {{"model", o.model},
                              {"objective", "throughput"},
                              {"workers", o.testbed.boards.size()},
                              {"strategy", o.plan.strategy},
                              {"route", plan::route_name(o.plan.route)},
                              {"mode", gc.mode},
                              {"group_boards", gc.group_boards},
                              {"groups", gc.groups},
                              {"idle_boards", gc.idle_boards},
                              {"inferences", total},
                              {"bit_exact_inferences", n_exact},
                              {"match_reference", match},
                              {"images_per_s", ips},
                              {"wall_s", wall},
                              {"latency_s", {{"total", median}}},
                              {"reference_s", o.reference_s},
                              {"reference_images_per_s", o.reference_s > 0 ? 1.0 / o.reference_s : 0.0},
                              {"planner_est_images_per_s", gc.est_images_per_s},
                              {"per_group", per_group},
                              {"candidates", cands}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("tinysplit run --objective throughput: %s on %zu boards: %s, %d group%s of %d board%s%s\n",
                o.model.c_str(), o.testbed.boards.size(), gc.mode.c_str(), gc.groups, gc.groups == 1 ? "" : "s",
                gc.group_boards, gc.group_boards == 1 ? "" : "s",
                gc.idle_boards ? (", " + std::to_string(gc.idle_boards) + " idle").c_str() : "");
    if (gc.groups == 1) std::printf("one group: the inferences run one after another (run does not pipeline)\n");
    std::printf("%d inferences in %.3f s: %.2f images/s (single process: %.2f images/s); median latency %.4f s\n", total,
                wall, ips, o.reference_s > 0 ? 1.0 / o.reference_s : 0.0, median);
    std::printf("bit-exact with the single-process int8 reference: %s (%d of %d)\n", match ? "yes" : "NO", n_exact,
                total);
  }
  if (!match) {
    std::fprintf(stderr, "tinysplit: error: %d of %d outputs differ from the int8 reference\n", total - n_exact, total);
    return 2;
  }
  return 0;
}

}  // namespace ts::cli
