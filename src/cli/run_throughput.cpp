#include "cli/run_throughput.h"

#include <algorithm>
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
  if (o.in_flight < 1 || o.in_flight > 64) throw Error("run: --in-flight must be 1..64");
  const plan::GroupChoice gc = plan::choose_groups(q, o.testbed, o.plan, plan::Objective::Throughput);
  // Pipelining needs boards that send to boards: with the relay route the
  // coordinator steers every layer of every board itself.
  const bool pipelined = o.in_flight > 1 && o.plan.route == plan::Route::Direct;
  std::string pipeline_note;
  if (o.in_flight <= 1) pipeline_note = "--in-flight 1: each group's images one after another";
  else if (!pipelined) pipeline_note = "relay route: each group's images one after another (pipelining needs --route direct)";
  // Every group: its boards, its plan, its coordinator, deployed before the clock starts.
  struct Group {
    plan::Testbed tb;
    std::unique_ptr<coord::BoardSet> boards;
    std::unique_ptr<coord::Swarm> swarm;
    std::vector<std::vector<std::vector<coord::ExpectedDigest>>> expected;  // per input
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
  // The reference's digests of every layer over each group's regions, per
  // input (what every board's DONE must report).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto tensors = run_int8_all(q, inputs[i]);
    for (Group& G : groups) G.expected.push_back(coord::reference_digests(q, G.swarm->plan(), tensors));
  }
  const int total = int(inputs.size()) * o.repeat;
  std::atomic<int> next{0};
  std::vector<char> exact(size_t(total), 0);
  std::vector<double> latency(size_t(total), 0);
  std::mutex res_mu;  // exact, latency, layer_ok, first_bad
  std::vector<char> layer_ok(q.nodes.size(), 1);
  coord::Verification first_bad;
  int first_bad_input = -1;
  std::string first_bad_address;
  // One inference's outputs and digests against the reference.
  auto check = [&](int g, int k, const coord::InferenceResult& r) {
    const size_t i = size_t(k) % inputs.size();
    Group& G = groups[size_t(g)];
    const coord::Verification v = coord::verify_layers(G.expected[i], r);
    std::lock_guard<std::mutex> lock(res_mu);
    latency[size_t(k)] = r.total_s;
    exact[size_t(k)] = r.output == refs[i];
    for (size_t n = 0; n < layer_ok.size(); ++n) layer_ok[n] = layer_ok[n] && v.layer_ok[n];
    if (!v.ok() && first_bad.ok()) {
      first_bad = v;
      first_bad_input = int(i);
      const size_t b = size_t(G.swarm->boards()[size_t(v.board)]);  // plan worker -> group testbed board
      first_bad.board = G.tb.boards[b].id;
      first_bad_address = G.boards->addresses()[b];
    }
    ++G.done;
  };
  std::mutex err_mu;
  std::string error;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int g = 0; g < gc.groups; ++g)
    threads.emplace_back([&, g] {
      Group& G = groups[size_t(g)];
      try {
        if (pipelined) {
          // Group g's images as one pipelined batch: k = g, g + G, ...
          std::vector<const std::vector<int8_t>*> batch;
          std::vector<int> ks;
          for (int k = g; k < total; k += gc.groups) {
            batch.push_back(&inputs[size_t(k) % inputs.size()]);
            ks.push_back(k);
          }
          G.swarm->infer_pipelined(batch, o.in_flight,
                                   [&](int j, coord::InferenceResult& r) { check(g, ks[size_t(j)], r); });
          return;
        }
        for (;;) {
          const int k = next.fetch_add(1);
          if (k >= total) return;
          const auto a = Clock::now();
          coord::InferenceResult r = G.swarm->infer(inputs[size_t(k) % inputs.size()]);
          r.total_s = std::chrono::duration<double>(Clock::now() - a).count();
          check(g, k, r);
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (error.empty()) error = "group " + std::to_string(g) + ": " + e.what();
        next.store(total);
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
  const int verified_layers = int(std::count(layer_ok.begin(), layer_ok.end(), char(1)));
  const bool match = n_exact == total && first_bad.ok();
  const int in_flight = pipelined ? o.in_flight : 1;
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
                              {"pipelined", pipelined},
                              {"in_flight", in_flight},
                              {"pipeline_note", pipeline_note},
                              {"inferences", total},
                              {"bit_exact_inferences", n_exact},
                              {"layers", q.nodes.size()},
                              {"verified_layers", verified_layers},
                              {"first_mismatch", first_bad.ok() ? nlohmann::json(nullptr)
                                                                : nlohmann::json{{"board", first_bad.board},
                                                                                 {"layer", first_bad.node},
                                                                                 {"name", q.nodes[size_t(first_bad.node)].name},
                                                                                 {"input", first_bad_input}}},
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
    if (pipelined)
      std::printf("pipelined: up to %d images in flight in each group\n", in_flight);
    else
      std::printf("not pipelined: %s\n", pipeline_note.c_str());
    std::printf("%d inferences in %.3f s: %.2f images/s (single process: %.2f images/s); median latency %.4f s\n", total,
                wall, ips, o.reference_s > 0 ? 1.0 / o.reference_s : 0.0, median);
    std::printf("bit-exact with the single-process int8 reference: %s (%d of %d; every board's outputs checked by "
                "digest: %d of %zu layers)\n",
                match ? "yes" : "NO", n_exact, total, verified_layers, q.nodes.size());
  }
  if (!first_bad.ok()) {
    std::fprintf(stderr, "tinysplit: error: %s\n", coord::describe_mismatch(q, first_bad, first_bad_address).c_str());
    return 2;
  }
  if (!match) {
    std::fprintf(stderr, "tinysplit: error: %d of %d outputs differ from the int8 reference\n", total - n_exact, total);
    return 2;
  }
  return 0;
}

}  // namespace ts::cli
