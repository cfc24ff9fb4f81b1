// tinysplit run: the main job. Plan, bring boards up, deploy, infer, check
// the result against the single-process int8 reference, report.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/fault_flip.h"
#include "cli/run_throughput.h"
#include "coord/boards.h"
#include "coord/coordinator.h"
#include "coord/failover.h"
#include "coord/verify.h"
#include "model/dataset.h"
#include "model/npy.h"
#include "model/pipeline.h"
#include "net/fault.h"
#include "plan/plan.h"
#include "plan/replicate.h"

namespace ts::cli {

namespace {

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= 10 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1024.0 * 1024.0));
  else if (b >= 10 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)b);
  return buf;
}

}  // namespace

struct RunOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  std::string workers = "3", testbed, image, alloc = "rating", ram = "512K", flash = "8M";
  // Defaults (issue 10): the cost model's choice per block, boards sending
  // to boards. `--strategy neuron --route relay` is the paper's mode.
  std::string strategy = "auto", route = "direct";
  bool route_named = false;  // --route given: no fallback to relay (plan::PlanOptions::route_fallback)
  int window = 32;
  double timeout = 10.0, cpm = 0.0, delay = 0.0;
  int repeat = 1;
  std::string store, key_file;
  bool probe = false, json = false;
  std::string input, save_output, save_int8_output, dataset;
  int limit = 0;
  std::vector<int> hooks = std::vector<int>(6, -1);  // crash, stall, garble: board and layer
  std::vector<std::string> faults;  // --inject-fault KIND:BOARD[:LAYER] (kill | stall | corrupt | flip)
  bool no_failover = false;
  std::string objective = "latency";  // | throughput (cli/run_throughput.h)
  int in_flight = 2;  // --objective throughput: images in flight inside one group (1 = one after another)
  // The planner's prices (plan/cost.h): by default (`auto`) what the boards
  // are. Boards that are processes on this machine share its cores and pay
  // for every exchange in system calls and wake-ups, so they are priced by
  // the measured host figures (data/costs/host.json); QEMU and remote boards
  // by the Teensy 4.1 figures. `teensy` prices local boards as the
  // Teensy-class boards they stand in for (512K RAM, 8M flash by default).
  std::string cost_model = "auto";  // | teensy | host
};

// A kill | stall | corrupt fault as given (for error lines) and as parsed.
struct BoardFault {
  std::string text;
  net::FaultSpec spec;
};

// --inject-fault board failures, checked against the testbed alone (syntax,
// board number, a local board, one fault per board): before the model is
// loaded and planned, so a mistyped spec is one line at once.
static std::vector<BoardFault> board_faults_on_testbed(const std::vector<std::string>& specs, const plan::Testbed& tb) {
  std::vector<BoardFault> out;
  std::vector<bool> taken(tb.boards.size(), false);
  for (const auto& text : specs) {
    const net::FaultSpec f = net::parse_fault_spec(text);
    if (f.board >= int(tb.boards.size()))
      throw Error("--inject-fault '" + text + "': there are only " + std::to_string(tb.boards.size()) + " boards (0.." +
                  std::to_string(tb.boards.size() - 1) + ")");
    if (tb.boards[size_t(f.board)].address != "local")
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) +
                  " is not a local board (faults are injected into boards this run starts)");
    if (taken[size_t(f.board)])
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " already has a fault");
    taken[size_t(f.board)] = true;
    out.push_back({text, f});
  }
  return out;
}

// --inject-fault board failures (board_faults_on_testbed) checked against
// the plan, and turned into each board's `worker --inject-fault KIND:LAYER`
// argument. A fault without a layer acts at the board's layer nearest the
// middle of the model; a layer the board has no share of would never fire:
// refused. `fault_layer` gets, per board, the layer of its fault (-1: none).
static std::vector<std::vector<std::string>> fault_args(const std::vector<BoardFault>& faults, const plan::Testbed& tb,
                                                        const QGraph& q, const plan::Plan& p, std::vector<int>* fault_layer) {
  std::vector<std::vector<std::string>> args(tb.boards.size());
  fault_layer->assign(tb.boards.size(), -1);
  for (const auto& [text, spec] : faults) {
    net::FaultSpec f = spec;
    const auto& layers = p.workers[size_t(f.board)].layers;
    if (f.layer >= int(q.nodes.size()))
      throw Error("--inject-fault '" + text + "': the model has layers 0.." + std::to_string(q.nodes.size() - 1));
    if (f.layer < 0) {
      const int mid = int(q.nodes.size()) / 2;
      for (int n = 0; n < int(layers.size()); ++n)
        if (layers[size_t(n)].active() && (f.layer < 0 || std::abs(n - mid) < std::abs(f.layer - mid))) f.layer = n;
      if (f.layer < 0) throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of any layer");
    } else if (!layers[size_t(f.layer)].active()) {
      throw Error("--inject-fault '" + text + "': board " + std::to_string(f.board) + " has no share of layer " +
                  std::to_string(f.layer) + " '" + q.nodes[size_t(f.layer)].name + "', so the fault would never act");
    }
    args[size_t(f.board)] = {"--inject-fault", net::board_fault_arg(f)};
    (*fault_layer)[size_t(f.board)] = f.layer;
  }
  return args;
}

int cmd_run(const RunOptions& o) {
  using Clock = std::chrono::steady_clock;
  const plan::Objective objective = plan::parse_objective(o.objective);
  // Testbed.
  plan::Testbed tb;
  if (!o.testbed.empty()) {
    tb = plan::load_testbed(o.testbed);
  } else {
    std::string kind = "local", count = o.workers;
    if (count.rfind("qemu:", 0) == 0) {
      kind = "qemu";
      count = count.substr(5);
    }
    const bool digits = !count.empty() && count.size() <= 4 && count.find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(count) : 0;
    if (n < 1 || n > 4096) throw Error("--workers: expected N or qemu:N with N in 1..4096, got '" + o.workers + "'");
    tb = plan::default_testbed(n, kind, plan::parse_bytes(o.ram), plan::parse_bytes(o.flash));
  }
  // Before the (slow) model work: one process per local board.
  plan::check_spawn_limit(tb, o.testbed.empty() ? "--workers" : o.testbed);
  // --inject-fault: flip:BOARD:LAYER (cli/fault_flip.h) or a board failure
  // kill | stall | corrupt (net/fault.h, fault_args above).
  FlipFault flip;
  std::vector<std::string> failure_specs;
  for (const auto& f : o.faults) {
    FlipFault one;
    if (!parse_flip_fault(f, &one)) {
      failure_specs.push_back(f);
    } else {
      if (flip.on()) throw Error("--inject-fault: one flip:BOARD:LAYER per run, got a second one '" + f + "'");
      flip = one;
    }
  }
  // What can be checked before the model work (the rest needs the plan).
  const std::vector<BoardFault> board_faults = board_faults_on_testbed(failure_specs, tb);
  if (flip.on() && flip.board >= int(tb.boards.size()))
    throw Error("--inject-fault flip: board " + std::to_string(flip.board) + " does not exist (the testbed has " +
                std::to_string(tb.boards.size()) + " boards, numbered from 0)");
  plan::PlanOptions popt;
  popt.alloc = plan::parse_allocation(o.alloc);
  popt.strategy = o.strategy;
  popt.route = plan::parse_route(o.route);
  popt.route_fallback = !o.route_named;
  popt.routing = false;  // the engine reads each board's needs; the routing map is for reports
  // The planner's prices: boards that are processes on this machine (not
  // slowed by --cycles-per-mac or --delay-ms) by the measured host model
  // (data/costs/host.json), others by the Teensy figures.
  if (o.cost_model != "auto" && o.cost_model != "teensy" && o.cost_model != "host")
    throw Error("--cost-model: expected auto, teensy or host, got '" + o.cost_model + "'");
  const std::string host_file = plan::host_costs_path();
  if (o.cost_model == "host" ||
      (o.cost_model == "auto" && plan::host_testbed(tb) && o.cpm == 0 && o.delay == 0 &&
       std::filesystem::is_regular_file(host_file)))
    popt.cost = plan::host_cost_model(plan::load_host_costs(host_file));
  // Model, inputs, references and plan. The inputs are one photo, one
  // prepared tensor, or the first --limit test images of a data set.
  const int sources = int(!o.image.empty()) + int(!o.input.empty()) + int(!o.dataset.empty());
  if (sources > 1) throw Error("run: give only one of --image, --input and --dataset");
  if (o.limit != 0 && o.dataset.empty()) throw Error("run: --limit needs --dataset");
  if (!o.dataset.empty() && o.dataset != "fashion-mnist")
    throw Error("--dataset: unknown data set '" + o.dataset + "' (known: fashion-mnist)");
  const std::string model = !o.dataset.empty() && o.model == "mobilenetv2" ? fashion_mnist_model() : o.model;
  std::string input_name;
  InputTensor tensor;
  LabelledImages test;
  QuantizeOptions qopt;
  if (!o.input.empty()) {
    // A bad tensor is reported before any work on the model.
    if (!is_quantized_file(resolve_model(model))) {
      const Graph gi = import_model(model, o.size);
      tensor = load_input_npy(o.input, gi.shape(gi.input));
    }
    input_name = std::filesystem::path(o.input).filename().string();
  } else if (!o.dataset.empty()) {
    test = load_fashion_mnist("test", o.limit > 0 ? o.limit : 100);
    qopt = fashion_mnist_calibration();
    input_name = "fashion-mnist test images 0.." + std::to_string(test.count() - 1);
  }
  QGraph q = quantized_model(model, o.size, qopt);
  if (!o.dataset.empty() && q.labels.empty()) q.labels = test.classes;
  const int in_size = q.shape(q.input).h;
  std::vector<std::vector<int8_t>> xs;
  if (!o.input.empty()) {
    if (tensor.f32.empty() && tensor.i8.empty()) tensor = load_input_npy(o.input, q.shape(q.input));
    xs.push_back(int8_input(q, tensor));
  } else if (!o.dataset.empty()) {
    if (q.shape(q.input) != Shape{1, test.rows, test.cols})
      throw Error("'" + model + "' takes " + to_string(q.shape(q.input)) + " inputs; Fashion-MNIST images are 1x" +
                  std::to_string(test.rows) + "x" + std::to_string(test.cols));
    for (int i = 0; i < test.count(); ++i) xs.push_back(quantize_input(q, test.input(i)));
  } else {
    const std::string photo = o.image.empty() ? default_photo() : o.image;
    input_name = std::filesystem::path(photo).filename().string();
    xs.push_back(quantize_input(q, image_input(photo, in_size, q.in_mean, q.in_std)));
  }
  std::vector<std::vector<int8_t>> refs;
  for (const auto& x : xs) refs.push_back(run_int8(q, x));
  // The single process, warm (the runs above were the warm-up): the median
  // of --repeat timed runs of the first input, in this same process (for
  // --objective throughput; one inference at a time times it again below,
  // interleaved with the inferences).
  std::vector<double> ref_times;
  for (int k = 0; k < o.repeat; ++k) {
    const auto t_ref = Clock::now();
    (void)run_int8(q, xs[0]);
    ref_times.push_back(std::chrono::duration<double>(Clock::now() - t_ref).count());
  }
  std::sort(ref_times.begin(), ref_times.end());
  double ref_s = ref_times[ref_times.size() / 2];
  if (objective == plan::Objective::Throughput) {
    if (!o.faults.empty() || o.probe || std::any_of(o.hooks.begin(), o.hooks.end(), [](int h) { return h >= 0; }))
      throw Error("run: --objective throughput does not combine with --inject-fault, --probe or test hooks");
    ThroughputRunOptions to;
    to.testbed = tb;
    to.plan = popt;
    to.spawn.store_root = o.store;
    to.spawn.key_file = !o.key_file.empty() ? o.key_file : tb.key_file;
    if (!to.spawn.key_file.empty()) to.spawn.key = net::load_key_file(to.spawn.key_file);
    to.spawn.cycles_per_mac = o.cpm;
    to.spawn.delay_ms = o.delay;
    to.spawn.window = uint16_t(o.window);
    to.swarm.timeout = std::chrono::milliseconds(int64_t(o.timeout * 1000));
    to.swarm.window = uint16_t(o.window);
    to.swarm.failover = false;
    to.swarm.auth = !to.spawn.key_file.empty();
    to.swarm.key = to.spawn.key;
    to.repeat = o.repeat;
    to.in_flight = o.in_flight;
    to.json = o.json;
    to.model = o.dataset.empty() ? o.model : model;
    to.reference_s = ref_s;
    return run_throughput(q, xs, refs, to);
  }
  plan::Plan p = plan::make_plan(q, tb, popt);
  // A fault is injected where a board computes: a fault on a board that the
  // host-priced plan leaves without a share of the fault's layer (on this
  // machine one board often computes everything) could never act. When the
  // cost model was the default's choice, such a run is planned with the
  // Teensy prices instead, which give every board a share of every layer
  // it can hold, and says so; an explicit --cost-model host keeps its plan
  // and the fault is refused below with one line.
  std::string cost_note;
  if (popt.cost.host && o.cost_model == "auto" && (flip.on() || !board_faults.empty())) {
    bool acts = true;
    try {
      check_flip_fault(flip, q, p);
      std::vector<int> unused;
      (void)fault_args(board_faults, tb, q, p, &unused);
    } catch (const Error&) {
      acts = false;
    }
    if (!acts) {
      popt.cost = plan::CostModel{};
      p = plan::make_plan(q, tb, popt);
      cost_note = "planned with the Teensy prices: the host-priced plan leaves a board named by --inject-fault "
                  "without a share of its layer";
    }
  }
  check_flip_fault(flip, q, p);

  // Boards.
  coord::SpawnOptions so;
  so.store_root = o.store;
  // Authenticated links: --key-file, else the testbed's key_file.
  so.key_file = !o.key_file.empty() ? o.key_file : tb.key_file;
  if (!so.key_file.empty()) {
    so.key = net::load_key_file(so.key_file);
  }
  so.cycles_per_mac = o.cpm;
  so.delay_ms = o.delay;
  so.window = uint16_t(o.window);
  so.crash_board = o.hooks[0]; so.crash_layer = o.hooks[1];
  so.stall_board = o.hooks[2]; so.stall_layer = o.hooks[3];
  so.garble_board = o.hooks[4]; so.garble_layer = o.hooks[5];
  std::vector<int> fault_layer;
  so.board_args = fault_args(board_faults, tb, q, p, &fault_layer);
  so.flip_board = flip.board; so.flip_layer = flip.layer;
  coord::BoardSet boards(tb, so);
  const auto tmo = std::chrono::milliseconds(int64_t(o.timeout * 1000));
  coord::SwarmOptions sopt;
  sopt.timeout = tmo;
  sopt.window = uint16_t(o.window);
  sopt.progress = !o.json;
  sopt.failover = !o.no_failover;
  sopt.auth = !so.key_file.empty();
  sopt.key = so.key;
  sopt.fault_layer = fault_layer;
  coord::Swarm c(q, tb, popt, boards.addresses(), p, sopt);
  c.start();
  std::vector<coord::ProbeResult> probes;
  if (o.probe) {
    // Measure each link's d and B, put them in the testbed, and re-plan:
    // with the rating allocation the shares now follow measured links.
    for (int w = 0; w < p.n_workers(); ++w) probes.push_back(c.probe(w));
    for (int w = 0; w < p.n_workers(); ++w) {
      tb.boards[w].delay_s_per_kb = probes[w].delay_s_per_kb;
      tb.boards[w].bandwidth_kbps = probes[w].bandwidth_kbps;
    }
    c.replan(tb);
    p = c.plan();
    check_flip_fault(flip, q, p);
  }
  const coord::DeployResult dep = c.deploy();
  coord::InferenceResult r;
  bool match = true;
  int exact = 0, correct = 0, ref_correct = 0;
  int inferences = 0, exact_inferences = 0;  // every inference, each checked
  struct Times {
    double total, compute, comm;
  };
  std::vector<Times> times;  // every inference, for the medians
  // Every layer of every inference: each board's digest of its outputs
  // against the reference's (coord/verify.h). A layer counts as verified
  // when it matched on every board in every inference.
  std::vector<char> layer_ok(q.nodes.size(), 1);
  coord::Verification first_bad;
  int first_bad_input = -1;
  // reference_s again, interleaved: one timed single-process run of the
  // first input after each of its inferences, so that a load that comes and
  // goes on a shared machine weighs on both figures alike.
  std::vector<double> ref_between;
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto tensors = run_int8_all(q, xs[i]);
    std::vector<std::vector<coord::ExpectedDigest>> expected;
    int expected_for = -1;  // the swarm's plan generation `expected` was computed for
    bool same = true;
    for (int k = 0; k < o.repeat; ++k) {
      r = c.infer(xs[i]);
      times.push_back({r.total_s, r.compute_s, r.comm_s});
      if (i == 0) {
        const auto t_ref = Clock::now();
        (void)run_int8(q, xs[0]);
        ref_between.push_back(std::chrono::duration<double>(Clock::now() - t_ref).count());
      }
      same = same && r.output == refs[i];
      ++inferences;
      exact_inferences += r.output == refs[i];
      // The boards' digests against the reference's over the regions of the
      // plan that ran (after a failover, the new plan).
      if (c.plan_generation() != expected_for) {  // after a failover or a rejoin, the new plan
        expected = coord::reference_digests(q, c.plan(), tensors);
        expected_for = c.plan_generation();
      }
      const coord::Verification v = coord::verify_layers(expected, r);
      for (size_t n = 0; n < layer_ok.size(); ++n) layer_ok[n] = layer_ok[n] && v.layer_ok[n];
      if (!v.ok() && first_bad.ok()) {
        first_bad = v;
        first_bad_input = int(i);
        first_bad.board = c.boards()[size_t(v.board)];  // plan worker -> testbed board
      }
    }
    match = match && same;
    exact += same;
    if (!o.dataset.empty()) {
      const int y = test.labels[i];
      auto top1 = [](const std::vector<int8_t>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); };
      correct += top1(r.output) == y;
      ref_correct += top1(refs[i]) == y;
    }
  }
  c.close();
  boards.stop();
  // What the last inference ran on: after a failover, fewer boards (plan
  // worker w is testbed board used[w]).
  p = c.plan();
  const std::vector<int> used = c.boards();
  const int verified_layers = int(std::count(layer_ok.begin(), layer_ok.end(), char(1)));
  match = match && first_bad.ok();
  // latency_s: the inference with the median total time over all of them
  // (per-layer figures stay those of the last inference).
  std::sort(times.begin(), times.end(), [](const Times& a, const Times& b) { return a.total < b.total; });
  const Times& med = times[times.size() / 2];
  if (!ref_between.empty()) {
    std::sort(ref_between.begin(), ref_between.end());
    ref_s = ref_between[ref_between.size() / 2];
  }
  r.total_s = med.total;
  r.compute_s = med.compute;
  r.comm_s = med.comm;

  const auto probs = output_probs(q, r.output);
  const int top = int(std::max_element(probs.begin(), probs.end()) - probs.begin());
  auto label = [&](int i) { return i < int(q.labels.size()) ? q.labels[i] : std::to_string(i); };
  const auto logits = dequantize_output(q, r.output);
  std::vector<int> order(probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  // The last input's output: the model's output as float32 (dequantised, with
  // the host Softmax if the model ends in one) and the raw int8 tensor.
  const std::vector<int64_t> oshape = {1, int64_t(probs.size())};
  if (!o.save_output.empty()) write_npy(o.save_output, oshape, probs);
  if (!o.save_int8_output.empty()) write_npy(o.save_int8_output, oshape, r.output);
  const std::string note = size_note(model, in_size);
  const double n_in = double(xs.size());

  if (o.json) {
    nlohmann::json jw = nlohmann::json::array(), jl = nlohmann::json::array();
    for (size_t i = 0; i < r.boards.size(); ++i) {
      const auto& b = r.boards[i];
      nlohmann::json e = {{"id", b.board_id}, {"address", boards.addresses()[size_t(used[i])]}, {"peak_ram_bytes", b.peak_ram_bytes},
                          {"planned_peak_ram_bytes", b.planned_peak_ram_bytes}, {"ram_budget_bytes", tb.boards[size_t(used[i])].ram_bytes},
                          {"flash_bytes", b.flash_bytes}, {"compute_s", b.compute_s}, {"bytes_in", b.bytes_in},
                          {"bytes_out", b.bytes_out}, {"rating", p.ratings[i]}, {"share", p.shares[i]},
                          {"macs", p.workers[i].macs},
                          // Exact under QEMU -icount (DONE's compute_instructions),
                          // null for boards that do not count them.
                          {"kernel_instructions", b.kernel_instructions >= 0 ? nlohmann::json(b.kernel_instructions)
                                                                             : nlohmann::json(nullptr)}};
      std::vector<int64_t> planned, measured;
      for (size_t n = 0; n < q.nodes.size(); ++n) {
        const auto& ls = p.workers[i].layers[n];
        planned.push_back(!ls.active() ? 0 : int64_t(core::kWorkerFixedArena) + ls.ram_bytes);
        measured.push_back(b.layer_peak[n]);
      }
      e["planned_layer_ram_bytes"] = planned;
      e["measured_layer_ram_bytes"] = measured;
      if (!probes.empty()) {
        const auto& pr = probes[size_t(used[i])];
        e["probe"] = {{"rtt_s", pr.rtt_s}, {"delay_s_per_kb", pr.delay_s_per_kb}, {"bandwidth_kbps", pr.bandwidth_kbps}};
      }
      jw.push_back(e);
    }
    for (const auto& l : r.layers)
      jl.push_back({{"name", l.name}, {"wall_s", l.wall_s}, {"compute_s", l.compute_s}, {"communication_s", l.comm_s},
                    {"payload_bytes", l.payload_bytes}, {"wire_bytes", l.wire_bytes}, {"max_peak_ram_bytes", l.max_peak_ram},
                    {"result_frames", l.result_frames}});
    nlohmann::json jf = nlohmann::json::array();
    for (const auto& f : c.failovers())
      jf.push_back({{"board", f.board_id}, {"index", f.board}, {"address", f.address}, {"layer", f.layer},
                    {"layer_name", f.layer_name}, {"inference", f.inference}, {"reason", f.reason},
                    {"boards_left", f.boards_left}, {"recover_s", f.recover_s}, {"redeploy_bytes", f.redeploy_bytes}});
    nlohmann::json jr = nlohmann::json::array();
    for (const auto& e : c.rejoins())
      jr.push_back({{"board", e.board_id}, {"index", e.board}, {"address", e.address}, {"inference", e.inference},
                    {"boards", e.boards}, {"rejoin_s", e.rejoin_s}, {"redeploy_bytes", e.redeploy_bytes}});
    int64_t board_to_board = 0;
    for (const auto& wp : p.workers)
      for (const auto& ls : wp.layers)
        for (const auto& s : ls.sends)
          if (s.peer != core::kPeerCoordinator) board_to_board += s.count;
    nlohmann::json j = {
        {"model", o.dataset.empty() ? o.model : model}, {"size", in_size}, {"image", input_name},
        {"size_note", note},
        {"workers", p.n_workers()}, {"allocation", plan::to_string(popt.alloc)}, {"strategy", p.strategy},
        {"cost_model", popt.cost.host ? "host" : "teensy"},
        {"cost_model_note", cost_note},
        {"route", plan::route_name(p.route)}, {"route_note", p.route_note}, {"window", o.window},
        {"top1", {{"index", top}, {"label", label(top)}, {"prob", probs[top]}}}, {"logits", logits},
        {"logits_int8", std::vector<int>(r.output.begin(), r.output.end())}, {"probs", probs},
        {"match_reference", match}, {"reference_s", ref_s}, {"repeat", o.repeat},
        {"inferences", inferences}, {"bit_exact_inferences", exact_inferences},
        {"layers", q.nodes.size()}, {"verified_layers", verified_layers},
        {"first_mismatch", first_bad.ok() ? nlohmann::json(nullptr)
                                          : nlohmann::json{{"board", first_bad.board}, {"layer", first_bad.node},
                                                           {"name", q.nodes[size_t(first_bad.node)].name},
                                                           {"input", first_bad_input}}},
        {"latency_s", {{"total", r.total_s}, {"compute", r.compute_s}, {"communication", r.comm_s}}},
        // total: every byte on the coordinator's links, measured; payload:
        // the plan's activation bytes, board-to-board ones included (with
        // --route direct the coordinator does not see those).
        {"wire_bytes", {{"total", r.wire_bytes}, {"payload", r.payload_bytes},
                        {"board_to_board_payload", board_to_board}}},
        // Frames the boards sent with their results (OUTPUT to the
        // coordinator, INPUT/INPUTS to other boards), from their DONE reports.
        {"result_frames", r.result_frames},
        {"planned_wire_payload_bytes", p.total_wire_bytes},
        {"deploy", {{"sent", dep.sent}, {"cached", dep.cached}, {"bytes", dep.bytes}, {"seconds", dep.seconds}}},
        {"authenticated", !so.key_file.empty()},
        {"emulation", {{"cycles_per_mac", o.cpm}, {"delay_ms", o.delay}}},
        {"boards_started", tb.boards.size()}, {"failover", !o.no_failover}, {"failovers", jf}, {"rejoins", jr},
        {"per_worker", jw}, {"per_layer", jl}};
    if (!o.dataset.empty())
      j["dataset"] = {{"name", o.dataset}, {"split", "test"}, {"images", xs.size()}, {"bit_exact_images", exact},
                      {"accuracy", correct / n_in}, {"reference_accuracy", ref_correct / n_in}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("tinysplit run: %s at %dx%d on %d boards (%s allocation, window %d)%s%s\n",
                (o.dataset.empty() ? o.model : model).c_str(), in_size,
                in_size, p.n_workers(), plan::to_string(popt.alloc), o.window,
                o.cpm > 0 ? ", emulated clocks" : "", o.delay > 0 ? ", injected delays" : "");
    if (!note.empty()) std::printf("note: %s\n", note.c_str());
    if (!cost_note.empty()) std::printf("note: %s\n", cost_note.c_str());
    if (!p.route_note.empty()) std::printf("note: %s\n", p.route_note.c_str());
    if (!o.dataset.empty())
      std::printf("%s: distributed accuracy %.4f (int8 reference %.4f), %d of %zu bit-exact; last image:\n",
                  input_name.c_str(), correct / n_in, ref_correct / n_in, exact, xs.size());
    else
      std::printf("%s %s\n", o.input.empty() ? "image" : "input", input_name.c_str());
    for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k)
      if (q.softmax_output)
        std::printf("  %-10s %6.2f%%\n", label(order[k]).c_str(), 100.0 * probs[order[k]]);
      else
        std::printf("  %-12s %8.4g (output value; the model has no Softmax)\n", label(order[k]).c_str(), probs[order[k]]);
    std::printf("bit-exact with the single-process int8 reference: %s (every board's outputs checked by digest: %d of "
                "%zu layers)\n",
                match ? "yes" : "NO", verified_layers, q.nodes.size());
    for (const auto& f : c.failovers())
      std::printf("failover: board %d (%s) dropped %s%s: %s; re-planned on %d boards in %.2f s\n",
                  f.board_id, f.address.c_str(),
                  f.inference < 0 ? "during deploy" : ("in inference " + std::to_string(f.inference)).c_str(),
                  f.layer >= 0 ? (" at layer " + std::to_string(f.layer) + " '" + f.layer_name + "'").c_str() : "",
                  f.reason.c_str(), f.boards_left, f.recover_s);
    for (const auto& e : c.rejoins())
      std::printf("rejoin: board %d (%s) back before inference %d; re-planned on %d boards in %.2f s\n", e.board_id,
                  e.address.c_str(), e.inference, e.boards, e.rejoin_s);
    std::printf("deploy: %d boards sent %s, %d cached, %.2f s\n", dep.sent, human_bytes(dep.bytes).c_str(), dep.cached,
                dep.seconds);
    if (!so.key_file.empty()) std::printf("links: authenticated (HMAC-SHA-256 tag on every frame, key %s)\n", so.key_file.c_str());
    std::printf("latency: %.3f s total = %.3f s compute + %.3f s communication (single process: %.3f s)\n", r.total_s,
                r.compute_s, r.comm_s, ref_s);
    std::printf("wire: %s in frames, %s activations\n", human_bytes(r.wire_bytes).c_str(),
                human_bytes(r.payload_bytes).c_str());
    std::printf("%-6s %-22s %12s %12s %10s %12s %12s %10s\n", "board", "address", "peak RAM", "planned", "budget",
                "flash", "compute s", "in/out KiB");
    for (size_t i = 0; i < r.boards.size(); ++i) {
      const auto& b = r.boards[i];
      std::printf("%-6d %-22s %12u %12lld %10lld %12lld %12.4f %5lld/%-5lld\n", b.board_id,
                  boards.addresses()[size_t(used[i])].c_str(), b.peak_ram_bytes, (long long)b.planned_peak_ram_bytes,
                  (long long)tb.boards[size_t(used[i])].ram_bytes,
                  (long long)b.flash_bytes, b.compute_s, (long long)(b.bytes_in / 1024), (long long)(b.bytes_out / 1024));
    }
    std::printf("%-34s %10s %10s %10s %12s\n", "layer", "wall ms", "compute ms", "comm ms", "payload B");
    for (const auto& l : r.layers)
      std::printf("%-34.34s %10.3f %10.3f %10.3f %12lld\n", l.name.c_str(), 1e3 * l.wall_s, 1e3 * l.compute_s,
                  1e3 * l.comm_s, (long long)l.payload_bytes);
  }
  if (!first_bad.ok()) {
    std::fprintf(stderr, "tinysplit: error: %s\n",
                 coord::describe_mismatch(q, first_bad, boards.addresses()[size_t(first_bad.board)]).c_str());
    return 2;
  }
  if (!match) {
    std::fprintf(stderr, "tinysplit: error: the distributed result differs from the int8 reference\n");
    return 2;
  }
  return 0;
}

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App& sub = add_command(app, "run",
                              "Distributed inference on boards: plan, deploy, infer, check against the int8 reference",
                              [o] { return cmd_run(*o); });
  add_model_options(sub, o->model, o->size, true);
  auto* wopt = sub.add_option("--workers,-n", o->workers, "N local emulated boards, or qemu:N Cortex-M7 firmware boards under QEMU")
                   ->capture_default_str();
  sub.add_option("--testbed,-t", o->testbed, "testbed JSON (boards: local, host:port)")->excludes(wopt);
  sub.add_option("--image,-i", o->image, "photo to classify (default: the bundled photo)");
  sub.add_option("--input", o->input, "a prepared input tensor: .npy, float32 NCHW or int8 already quantised");
  sub.add_option("--save-output", o->save_output,
                 "write the output as float32 .npy (dequantised; after the host Softmax if the model ends in one)");
  sub.add_option("--save-int8-output", o->save_int8_output, "write the raw int8 output tensor as .npy");
  sub.add_option("--dataset", o->dataset, "run the first --limit test images of a data set (fashion-mnist; default model models/fashion-mnist/model.onnx)");
  sub.add_option("--limit", o->limit, "with --dataset: number of test images (default 100)")->check(CLI::Range(1, 1000000));
  sub.add_option("--allocation,-a", o->alloc, "even | frequency | rating")->capture_default_str();
  sub.add_option("--strategy", o->strategy,
                 "split strategy: auto (per block, by the cost model) | neuron (the paper) | spatial (bands of rows) | "
                 "channel (blocks of channels) | whole (one board) | "
                 "reduce (channel, with input channels and int32 partial sums summed on the output's board where the sums are smaller than the input; --route direct) | reduce-all (every Conv 1x1 and Gemm that way; tests)")
      ->capture_default_str();
  sub.add_option("--cost-model", o->cost_model,
                 "the planner's prices: auto (the measured prices of board processes on this machine, "
                 "data/costs/host.json, when every board runs here; else the Teensy 4.1 figures) | host (those "
                 "measured prices) | teensy (the Teensy 4.1 figures, what local boards stand in for)")
      ->capture_default_str();
  sub.add_option("--route", o->route,
                 "direct (boards send to boards) | relay (every activation through the coordinator, the paper); "
                 "when not given, a direct plan that needs more links on a board than it holds runs on the relay "
                 "route, with a note")
      ->capture_default_str()
      ->each([o](const std::string&) { o->route_named = true; });
  sub.add_option("--window,-w", o->window, "frames in flight per link (1 = the paper's stop-and-wait)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  sub.add_option("--ram", o->ram, "RAM budget of each local board (with --workers)")->capture_default_str();
  sub.add_option("--flash", o->flash, "flash of each local board (with --workers)")->capture_default_str();
  sub.add_option("--timeout", o->timeout, "seconds to wait for a board before giving up")->capture_default_str()
      ->check(finite_range(0.05, 3600.0));
  sub.add_option("--cycles-per-mac", o->cpm, "emulate board clocks: compute takes MACs*cycles/clock (0 = host speed)")
      ->check(finite_range(0.0, 1e6));
  sub.add_option("--delay-ms", o->delay, "inject a delay before each board send and receive (0 = off)")
      ->check(finite_range(0.0, 1e6));
  sub.add_option("--objective", o->objective,
                 "latency (inferences one after another) | throughput (images side by side: the planner groups the "
                 "boards, e.g. one board per image when one holds the model; reports images_per_s)")
      ->capture_default_str();
  sub.add_option("--in-flight", o->in_flight,
                 "with --objective throughput: images in flight inside one deployment (pipelined: a board starts "
                 "the next image while the others finish the last; needs --route direct); 1 = one after another")
      ->capture_default_str()->check(CLI::Range(1, 64));
  sub.add_option("--repeat", o->repeat, "inferences to run; latency_s and reference_s are medians over them")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  sub.add_option("--key-file,--key", o->key_file,
                 "shared key (tinysplit keygen): authenticate every board and every frame (default: the testbed's "
                 "key_file)");
  sub.add_option("--store", o->store, "keep board flash in this folder (a later run reuses unchanged fragments)");
  sub.add_flag("--probe", o->probe, "measure each link's delay and bandwidth first and plan with them");
  add_json_flag(sub, o->json);
  sub.add_option("--inject-fault", o->faults,
                 "for tests and demos: KIND:BOARD[:LAYER] with KIND kill | stall | corrupt (the board fails right after "
                 "computing that layer, default its layer nearest the middle, of the first inference), or "
                 "flip:BOARD:LAYER (the board changes one output value of that layer: the run must name it and exit "
                 "with status 2); layers numbered from 0 as in plan --json; repeatable");
  sub.add_flag("--no-failover", o->no_failover,
               "fail fast: end the run when a board fails instead of re-planning on the boards left");
  sub.add_option("--test-crash", o->hooks[0], "")->group("");
  sub.add_option("--test-crash-layer", o->hooks[1], "")->group("");
  sub.add_option("--test-stall", o->hooks[2], "")->group("");
  sub.add_option("--test-stall-layer", o->hooks[3], "")->group("");
  sub.add_option("--test-garble", o->hooks[4], "")->group("");
  sub.add_option("--test-garble-layer", o->hooks[5], "")->group("");
}

}  // namespace ts::cli
