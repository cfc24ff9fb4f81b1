#include "cli/run_throughput.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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
  // The reference's digests of every layer over the group's regions, per
  // input (what every board's DONE must report), for plan generation
  // expected_gen (a failover re-plans: they are made again).
  std::vector<std::vector<std::vector<coord::ExpectedDigest>>> expected;
  int expected_gen = -1;
  int done = 0;
  std::string dropped;  // why the group stopped ("" while its boards run)
};

// A fault aimed at a board no group uses would never act: one line.
void check_faults_in_groups(const RunFaults& f, const plan::GroupChoice& gc) {
  for (const BoardFault& bf : f.board)
    if (bf.spec.board >= gc.groups * gc.group_boards)
      throw Error("--inject-fault '" + bf.text + "': board " + std::to_string(bf.spec.board) +
                  " is idle in this throughput run (" + std::to_string(gc.groups) + " group(s) of " +
                  std::to_string(gc.group_boards) + " board(s) use boards 0.." +
                  std::to_string(gc.groups * gc.group_boards - 1) + ")");
}

std::vector<Group> start_groups(const RunConfig& c, const RunInputs& in, const plan::GroupChoice& gc) {
  const QGraph& q = in.q;
  check_faults_in_groups(c.faults, gc);
  std::vector<Group> groups(size_t(gc.groups));
  for (int g = 0; g < gc.groups; ++g) {
    Group& G = groups[size_t(g)];
    G.tb = plan::group_testbed(c.testbed, gc.group_boards, g);
    const plan::Plan p = plan::make_plan(q, G.tb, in.plan);
    // The group's faults, numbered as its testbed numbers its boards.
    const RunFaults faults = group_faults(c.faults, g * gc.group_boards, gc.group_boards);
    check_flip_faults(faults, q, p);
    coord::SpawnOptions spawn = spawn_options(c);
    coord::SwarmOptions swarm = swarm_options(c);
    apply_faults(faults, G.tb, q, p, &spawn, &swarm.fault_layer);
    G.boards = std::make_unique<coord::BoardSet>(G.tb, spawn);
    G.swarm = std::make_unique<coord::Swarm>(q, G.tb, in.plan, G.boards->addresses(), p, swarm);
    G.swarm->start();
    G.swarm->deploy();
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

  std::vector<std::vector<std::vector<int8_t>>> tensors;  // per input: every tensor of the reference

  Checker(const RunInputs& i, std::vector<Group>& g, int total, ThroughputResult* r)
      : in(i), groups(g), exact(size_t(total), 0), latency(size_t(total), 0), layer_ok(i.q.nodes.size(), 1), res(r) {
    for (const auto& x : in.xs) tensors.push_back(run_int8_all(in.q, x));
    for (Group& G : groups) expect(G);
  }

  // The group's expected digests for the plan it runs now.
  void expect(Group& G) {
    if (G.expected_gen == G.swarm->plan_generation()) return;
    G.expected.clear();
    for (const auto& t : tensors) G.expected.push_back(coord::reference_digests(in.q, G.swarm->plan(), t));
    G.expected_gen = G.swarm->plan_generation();
  }

  // One inference's outputs and digests against the reference (from the
  // group's thread, on the plan that ran it).
  void check(int g, int k, const coord::InferenceResult& r) {
    const size_t i = size_t(k) % in.xs.size();
    Group& G = groups[size_t(g)];
    expect(G);
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

// Images a failed group did not finish (its boards failed and no re-plan on
// the ones left holds the model), for the groups still running. A group
// that has run its own share serves them until none is left and no group
// can add more.
struct Orphans {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> images;
  int running = 0;  // groups still on their own share
  int busy = 0;     // groups running an orphan (which may come back)
};

// Runs image k on group g (one inference); false if the group failed.
bool run_one(const RunInputs& in, Group& G, int g, int k, Checker& ck) {
  try {
    const auto a = Clock::now();
    coord::InferenceResult r = G.swarm->infer(in.xs[size_t(k) % in.xs.size()]);
    r.total_s = std::chrono::duration<double>(Clock::now() - a).count();
    ck.check(g, k, r);
    return true;
  } catch (const std::exception& e) {
    G.dropped = e.what();
    return false;
  }
}

// Group g's own share: pipelined, images g, g + G, ... as one batch; else
// whichever image is next. Returns the images it did not finish (it failed).
std::vector<int> own_share(const RunConfig& c, const RunInputs& in, int g, int n_groups, int total, bool pipelined,
                           std::atomic<int>& next, Checker& ck) {
  Group& G = ck.groups[size_t(g)];
  if (pipelined) {
    std::vector<const std::vector<int8_t>*> batch;
    std::vector<int> ks;
    for (int k = g; k < total; k += n_groups) {
      batch.push_back(&in.xs[size_t(k) % in.xs.size()]);
      ks.push_back(k);
    }
    size_t finished = 0;
    try {
      G.swarm->infer_pipelined(batch, c.in_flight, [&](int j, coord::InferenceResult& r) {
        ck.check(g, ks[size_t(j)], r);
        finished = size_t(j) + 1;
      });
      return {};
    } catch (const std::exception& e) {
      G.dropped = e.what();
      return std::vector<int>(ks.begin() + long(finished), ks.end());
    }
  }
  for (;;) {
    const int k = next.fetch_add(1);
    if (k >= total) return {};
    if (!run_one(in, G, g, k, ck)) return {k};
  }
}

// A group that stopped checks its boards again (after 0.1 s, the pause
// doubling to 2 s) while there is work it could take: images of failed
// groups, or groups still on their own share. True once its boards run
// again (coord::Swarm::rejoin_now). With images left and no group running,
// it gives up after `limit`.
bool wait_to_rejoin(Group& G, Orphans& o, std::chrono::milliseconds limit) {
  auto pause = std::chrono::milliseconds(100);
  const auto since = Clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(o.mu);
      const auto idle = [&] { return o.running == 0 && o.busy == 0; };
      o.cv.wait_for(lock, pause, [&] { return o.images.empty() && idle(); });
      if (idle() && (o.images.empty() || Clock::now() - since > limit)) return false;
    }
    if (G.swarm->rejoin_now()) return true;
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

// Group g: its own share, then (if its boards still run, or run again) the
// orphans. Without failover the first failure ends the run (thrown).
void drive_group(const RunConfig& c, const RunInputs& in, int g, int n_groups, int total, bool pipelined,
                 std::atomic<int>& next, Checker& ck, Orphans& o) {
  Group& G = ck.groups[size_t(g)];
  std::vector<int> left = own_share(c, in, g, n_groups, total, pipelined, next, ck);
  {
    std::lock_guard<std::mutex> lock(o.mu);
    o.images.insert(o.images.end(), left.begin(), left.end());
    --o.running;
  }
  o.cv.notify_all();
  if (!G.dropped.empty()) {
    if (!c.failover) throw Error(G.dropped);
    if (!wait_to_rejoin(G, o, c.timeout)) return;
    G.dropped.clear();
  }
  for (;;) {
    int k = -1;
    {
      std::unique_lock<std::mutex> lock(o.mu);
      o.cv.wait(lock, [&] { return !o.images.empty() || (o.running == 0 && o.busy == 0); });
      if (o.images.empty()) return;
      k = o.images.back();
      o.images.pop_back();
      ++o.busy;
    }
    const bool ok = run_one(in, G, g, k, ck);
    {
      std::lock_guard<std::mutex> lock(o.mu);
      --o.busy;
      if (!ok) o.images.push_back(k);
    }
    o.cv.notify_all();
    if (!ok) {
      if (!wait_to_rejoin(G, o, c.timeout)) return;
      G.dropped.clear();
    }
  }
}

}  // namespace

ThroughputResult run_throughput_session(const RunConfig& c, const RunInputs& in) {
  const QGraph& q = in.q;
  if (in.xs.empty() || in.xs.size() != in.refs.size()) throw Error("run: no inputs for --objective throughput");
  if (c.in_flight < 1 || c.in_flight > 64) throw Error("run: --in-flight must be 1..64");
  ThroughputResult res;
  res.groups = plan::choose_groups(q, c.testbed, in.plan, plan::Objective::Throughput);
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
  Orphans orphans;
  orphans.running = gc.groups;
  std::mutex err_mu;
  std::string error;
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int g = 0; g < gc.groups; ++g)
    threads.emplace_back([&, g] {
      try {
        drive_group(c, in, g, gc.groups, total, res.pipelined, next, ck, orphans);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (error.empty()) error = "group " + std::to_string(g) + ": " + e.what();
        next.store(total);
      }
    });
  for (auto& t : threads) t.join();
  if (error.empty() && !orphans.images.empty()) {
    // Every group failed with images left: the last failure says why.
    std::string why;
    for (size_t g = 0; g < groups.size(); ++g)
      if (!groups[g].dropped.empty()) why = "group " + std::to_string(g) + ": " + groups[g].dropped;
    error = "no group left to run " + std::to_string(orphans.images.size()) + " of " + std::to_string(total) +
            " images (" + why + ")";
  }
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
    res.group_dropped.push_back(G.dropped);
    res.group_failovers.push_back(G.swarm->failovers());
    res.group_rejoins.push_back(G.swarm->rejoins());
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
