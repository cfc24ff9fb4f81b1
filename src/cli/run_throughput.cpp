#include "cli/run_throughput.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/run_session.h"

namespace ts::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Every group: its boards, its plan, its coordinator, deployed before the clock starts.
struct Group {
  plan::Testbed tb;
  std::unique_ptr<coord::BoardSet> boards;
  std::unique_ptr<coord::Swarm> swarm;
  std::vector<std::vector<std::vector<coord::ExpectedDigest>>> expected;  // per input
  int done = 0;
};

std::vector<Group> start_groups(const RunConfig& c, const RunInputs& in, const plan::GroupChoice& gc) {
  const QGraph& q = in.q;
  const coord::SpawnOptions spawn = spawn_options(c);
  const coord::SwarmOptions swarm = swarm_options(c);
  std::vector<Group> groups(size_t(gc.groups));
  for (int g = 0; g < gc.groups; ++g) {
    Group& G = groups[size_t(g)];
    G.tb = plan::group_testbed(c.testbed, gc.group_boards, g);
    const plan::Plan p = plan::make_plan(q, G.tb, c.plan);
    G.boards = std::make_unique<coord::BoardSet>(G.tb, spawn);
    G.swarm = std::make_unique<coord::Swarm>(q, G.tb, c.plan, G.boards->addresses(), p, swarm);
    G.swarm->start();
    G.swarm->deploy();
  }
  // The reference's digests of every layer over each group's regions, per
  // input (what every board's DONE must report).
  for (size_t i = 0; i < in.xs.size(); ++i) {
    const auto tensors = run_int8_all(q, in.xs[i]);
    for (Group& G : groups) G.expected.push_back(coord::reference_digests(q, G.swarm->plan(), tensors));
  }
  return groups;
}

// Every output and every board's digests against the reference, from the
// groups' threads.
struct Checker {
  const RunInputs& in;
  std::vector<Group>& groups;
  std::vector<char> exact;
  std::vector<double> latency;
  std::mutex mu;  // exact, latency, layer_ok, first_bad
  std::vector<char> layer_ok;
  ThroughputResult* res;

  Checker(const RunInputs& i, std::vector<Group>& g, int total, ThroughputResult* r)
      : in(i), groups(g), exact(size_t(total), 0), latency(size_t(total), 0), layer_ok(i.q.nodes.size(), 1), res(r) {}

  // One inference's outputs and digests against the reference.
  void check(int g, int k, const coord::InferenceResult& r) {
    const size_t i = size_t(k) % in.xs.size();
    Group& G = groups[size_t(g)];
    const coord::Verification v = coord::verify_layers(G.expected[i], r);
    std::lock_guard<std::mutex> lock(mu);
    latency[size_t(k)] = r.total_s;
    exact[size_t(k)] = r.output == in.refs[i];
    for (size_t n = 0; n < layer_ok.size(); ++n) layer_ok[n] = layer_ok[n] && v.layer_ok[n];
    if (!v.ok() && res->first_bad.ok()) {
      res->first_bad = v;
      res->first_bad_input = int(i);
      const size_t b = size_t(G.swarm->boards()[size_t(v.board)]);  // plan worker -> group testbed board
      res->first_bad.board = G.tb.boards[b].id;
      res->first_bad_address = G.boards->addresses()[b];
    }
    ++G.done;
  }
};

// Group g's share of the inferences: pipelined, images g, g + G, ... as one
// batch; else whichever image is next.
void drive_group(const RunConfig& c, const RunInputs& in, int g, int n_groups, int total, bool pipelined,
                 std::atomic<int>& next, Checker& ck) {
  Group& G = ck.groups[size_t(g)];
  if (pipelined) {
    std::vector<const std::vector<int8_t>*> batch;
    std::vector<int> ks;
    for (int k = g; k < total; k += n_groups) {
      batch.push_back(&in.xs[size_t(k) % in.xs.size()]);
      ks.push_back(k);
    }
    G.swarm->infer_pipelined(batch, c.in_flight, [&](int j, coord::InferenceResult& r) { ck.check(g, ks[size_t(j)], r); });
    return;
  }
  for (;;) {
    const int k = next.fetch_add(1);
    if (k >= total) return;
    const auto a = Clock::now();
    coord::InferenceResult r = G.swarm->infer(in.xs[size_t(k) % in.xs.size()]);
    r.total_s = std::chrono::duration<double>(Clock::now() - a).count();
    ck.check(g, k, r);
  }
}

}  // namespace

ThroughputResult run_throughput_session(const RunConfig& c, const RunInputs& in) {
  const QGraph& q = in.q;
  if (in.xs.empty() || in.xs.size() != in.refs.size()) throw Error("run: no inputs for --objective throughput");
  if (c.in_flight < 1 || c.in_flight > 64) throw Error("run: --in-flight must be 1..64");
  ThroughputResult res;
  res.groups = plan::choose_groups(q, c.testbed, c.plan, plan::Objective::Throughput);
  const plan::GroupChoice& gc = res.groups;
  // Pipelining needs boards that send to boards: with the relay route the
  // coordinator steers every layer of every board itself.
  res.pipelined = c.in_flight > 1 && c.plan.route == plan::Route::Direct;
  if (c.in_flight <= 1) res.pipeline_note = "--in-flight 1: each group's images one after another";
  else if (!res.pipelined) res.pipeline_note = "relay route: each group's images one after another (pipelining needs --route direct)";
  std::vector<Group> groups = start_groups(c, in, gc);
  res.total = int(in.xs.size()) * c.repeat;
  const int total = res.total;
  std::atomic<int> next{0};
  Checker ck(in, groups, total, &res);
  std::mutex err_mu;
  std::string error;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int g = 0; g < gc.groups; ++g)
    threads.emplace_back([&, g] {
      try {
        drive_group(c, in, g, gc.groups, total, res.pipelined, next, ck);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (error.empty()) error = "group " + std::to_string(g) + ": " + e.what();
        next.store(total);
      }
    });
  for (auto& t : threads) t.join();
  res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Group& G : groups) {
    G.swarm->close();
    G.boards->stop();
  }
  if (!error.empty()) throw Error("run --objective throughput: " + error);
  for (char e : ck.exact) res.n_exact += e;
  std::vector<double> sorted = ck.latency;
  std::sort(sorted.begin(), sorted.end());
  res.median_s = sorted[sorted.size() / 2];
  res.images_per_s = res.wall_s > 0 ? double(total) / res.wall_s : 0.0;
  res.verified_layers = int(std::count(ck.layer_ok.begin(), ck.layer_ok.end(), char(1)));
  res.match = res.n_exact == total && res.first_bad.ok();
  res.in_flight = res.pipelined ? c.in_flight : 1;
  for (const Group& G : groups) {
    std::vector<int> ids;
    for (const auto& b : G.tb.boards) ids.push_back(b.id);
    res.group_ids.push_back(ids);
    res.group_done.push_back(G.done);
  }
  return res;
}

int run_throughput(const RunConfig& c, const RunInputs& in) {
  const ThroughputResult r = run_throughput_session(c, in);
  if (c.json) print_throughput_json(c, in, r);
  else print_throughput_text(c, in, r);
  if (!r.first_bad.ok()) {
    std::fprintf(stderr, "tinysplit: error: %s\n", coord::describe_mismatch(in.q, r.first_bad, r.first_bad_address).c_str());
    return 2;
  }
  if (!r.match) {
    std::fprintf(stderr, "tinysplit: error: %d of %d outputs differ from the int8 reference\n", r.total - r.n_exact,
                 r.total);
    return 2;
  }
  return 0;
}

}  // namespace ts::cli
