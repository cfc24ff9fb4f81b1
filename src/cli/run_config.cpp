#include "cli/run_config.h"

#include <algorithm>
#include <filesystem>

#include "cli/run_session.h"
#include "model/pipeline.h"
#include "plan/board_kind.h"
#include "plan/names.h"
#include "sim/scenario.h"

namespace ts::cli {

namespace {

// One "[KIND:]N" part of --workers: the kind ("qemu" is qemu-m7; none is
// a host process) and the count.
std::pair<const plan::BoardKind*, int> workers_part(const std::string& part, const std::string& all) {
  std::string name = "host", count = part;
  if (const size_t colon = part.find(':'); colon != std::string::npos) {
    name = part.substr(0, colon);
    count = part.substr(colon + 1);
    if (name == "qemu") name = "qemu-m7";
  }
  const plan::BoardKind* k = plan::find_board_kind(name);
  const bool digits = !count.empty() && count.size() <= 4 && count.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(count) : 0;
  if (!k || k->start == plan::BoardStart::None || n < 1 || n > plan::kMaxBoards) {
    std::string qemu_kinds;
    for (const plan::BoardKind& q : plan::board_kinds())
      if (q.start == plan::BoardStart::Qemu) qemu_kinds += std::string(", ") + q.name;
    throw Error("--workers: expected N, qemu:N or KIND:N,KIND:N... (KIND host, qemu" + qemu_kinds +
                ") with N in 1.." + std::to_string(plan::kMaxBoards) + ", got '" + all + "'");
  }
  return {k, n};
}

// The boards: a testbed file, N local boards, qemu:N QEMU boards, or a mix
// of kinds in order ("qemu:2,host:1": boards 0-1 QEMU, board 2 a process).
plan::Testbed run_testbed(const RunOptions& o) {
  if (!o.testbed.empty()) return plan::load_testbed(o.testbed);
  const int64_t ram = plan::parse_bytes(o.ram), flash = plan::parse_bytes(o.flash);
  const std::string budget = plan::board_budget_error(ram, flash, plan::kTeensyClockMhz, plan::kBudgetOptions);
  if (!budget.empty()) throw Error(budget);
  std::vector<std::pair<const plan::BoardKind*, int>> parts;
  for (size_t at = 0;;) {
    const size_t comma = o.workers.find(',', at);
    parts.push_back(workers_part(o.workers.substr(at, comma == std::string::npos ? comma : comma - at), o.workers));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  // One kind: the testbed as before kinds (address "local" or "qemu").
  if (parts.size() == 1 && (std::string(parts[0].first->name) == "host" || std::string(parts[0].first->name) == "qemu-m7"))
    return plan::default_testbed(parts[0].second, parts[0].first->start == plan::BoardStart::Qemu ? "qemu" : "local", ram,
                                 flash);
  plan::Testbed t;
  for (const auto& [kind, n] : parts)
    for (int i = 0; i < n; ++i) {
      if (t.boards.size() >= size_t(plan::kMaxBoards))
        throw Error("--workers: more than " + std::to_string(plan::kMaxBoards) + " boards in '" + o.workers + "'");
      plan::Board b = plan::default_testbed(1, "local", kind->ram_bytes ? kind->ram_bytes : ram,
                                            kind->flash_bytes ? kind->flash_bytes : flash).boards[0];
      if (kind->clock_mhz > 0) b.clock_mhz = kind->clock_mhz;
      b.id = int(t.boards.size());
      b.kind = kind->name;
      t.boards.push_back(b);
    }
  plan::validate_testbed(t, "--workers " + o.workers);
  return t;
}

// The planner's prices: by default the board type each board is or stands
// in for (a local board emulates a Teensy 4.1), as `plan` prices it; with
// --cost-model host, boards that are processes on this machine at the
// measured host figures (data/costs/host.json): the fastest plan on this PC.
// The host prices are those of processes on this machine: refused for a
// testbed with other boards.
plan::CostModel run_cost_model(const RunOptions& o, const plan::Testbed& tb) {
  check_choice("--cost-model", plan::kCostModels, o.cost_model);
  if (o.cost_model != "host") return plan::CostModel{};
  if (!plan::host_testbed(tb))
    throw Error("--cost-model host: it prices boards that are processes on this machine, and this testbed has "
                "other boards (use --cost-model teensy)");
  return plan::host_cost_model(plan::load_host_costs(plan::host_costs_path()));
}

// Options that would do nothing in this combination: one line naming both.
void refuse_idle_options(const RunOptions& o, plan::Objective objective) {
  const bool throughput = objective == plan::Objective::Throughput;
  refuse_idle(o.cli, "run", "--ram", !o.testbed.empty(), "with --testbed", "the testbed file gives each board's RAM");
  refuse_idle(o.cli, "run", "--flash", !o.testbed.empty(), "with --testbed", "the testbed file gives each board's flash");
  refuse_idle(o.cli, "run", "--in-flight", !throughput, "without --objective throughput",
              "it sets the images in flight inside one group of boards");
}

// --cycles-per-mac and --delay-ms slow the local boards this run starts;
// --store keeps the flash of the local and QEMU ones.
void refuse_idle_board_options(const RunOptions& o, const plan::Testbed& tb) {
  bool local = false, started = false;
  for (const auto& b : tb.boards) {
    local = local || (plan::started_here(b) && plan::kind_of(b).start == plan::BoardStart::Process);
    started = started || plan::started_here(b);
  }
  const std::string boards = o.testbed.empty() ? "with --workers " + o.workers : "with --testbed " + o.testbed;
  const char* why_local = "it slows the local boards this run starts, and there are none";
  refuse_idle(o.cli, "run", "--cycles-per-mac", !local, boards, why_local);
  refuse_idle(o.cli, "run", "--delay-ms", !local, boards, why_local);
  refuse_idle(o.cli, "run", "--store", !started, boards,
              "it keeps the flash of the boards this run starts, and there are none");
}

// --emulate: the one board type every local board stands in for.
std::string emulated_type(const RunOptions& o, const plan::Testbed& tb) {
  if (!o.emulate) return "";
  refuse_idle(o.cli, "run", "--cycles-per-mac", true, "with --emulate", "the emulated board type sets the clocks");
  refuse_idle(o.cli, "run", "--delay-ms", true, "with --emulate", "the emulated board type sets the links");
  if (plan::parse_objective(o.objective) != plan::Objective::Latency)
    throw Error("run: --emulate is for latency runs (not --objective throughput)");
  std::string type;
  for (const auto& b : tb.boards) {
    const plan::BoardKind& k = plan::kind_of(b);
    if (!plan::started_here(b) || !*k.emulates) continue;
    if (!type.empty() && type != k.emulates)
      throw Error("run: --emulate needs the local boards to stand in for one board type");
    type = k.emulates;
  }
  if (type.empty()) throw Error("run: --emulate slows the local boards this run starts, and there are none");
  (void)sim::board_preset(type);
  return type;
}

}  // namespace

RunConfig make_run_config(const RunOptions& o) {
  RunConfig c;
  c.objective = plan::parse_objective(o.objective);
  refuse_idle_options(o, c.objective);
  c.testbed = run_testbed(o);
  // Before the (slow) model work: one process per local board.
  plan::check_spawn_limit(c.testbed, o.testbed.empty() ? "--workers" : o.testbed);
  if (!o.store.empty() && std::filesystem::exists(o.store) && !std::filesystem::is_directory(o.store))
    throw Error("--store '" + o.store + "' is not a folder");
  c.faults = faults_on_testbed(o.faults, c.testbed);
  refuse_idle_board_options(o, c.testbed);
  plan::check_board_addresses(c.testbed, o.testbed.empty() ? "--workers" : o.testbed);
  c.plan.alloc = plan::parse_allocation(o.alloc);
  plan::check_strategy_name(o.strategy);
  c.plan.strategy = o.strategy;
  c.plan.route = plan::parse_route(o.route);
  c.plan.route_fallback = !given(o.cli, "--route");  // a named route is kept (plan::PlanOptions::route_fallback)
  c.plan.coding = plan::parse_coding(o.code);
  c.plan.stream = plan::streams::parse(o.stream);
  c.plan.routing = false;  // the engine reads each board's needs; the routing map is for reports
  c.plan.cost = run_cost_model(o, c.testbed);
  check_choice("--protocol-cpu", plan::kProtocolCpu, o.protocol_cpu);
  c.plan.cost.protocol_cpu = o.protocol_cpu == "on";
  // The inputs: one photo, one prepared tensor, or the first --limit test
  // images of a data set.
  const int sources = int(!o.image.empty()) + int(!o.input.empty()) + int(!o.dataset.empty());
  if (sources > 1) throw Error("run: give only one of --image, --input and --dataset");
  if (o.limit != 0 && o.dataset.empty()) throw Error("run: --limit needs --dataset");
  if (!o.dataset.empty() && o.dataset != "fashion-mnist")
    throw Error("--dataset: unknown data set '" + o.dataset + "' (known: fashion-mnist)");
  c.model = !o.dataset.empty() && o.model == "mobilenetv2" ? fashion_mnist_model() : o.model;
  c.model_label = o.dataset.empty() ? o.model : c.model;
  c.size = o.size;
  c.image = o.image;
  c.input = o.input;
  c.dataset = o.dataset;
  c.limit = o.limit;
  c.save_output = o.save_output;
  c.save_int8_output = o.save_int8_output;
  c.save_overlay = o.save_overlay;
  if (!c.save_overlay.empty() && (!c.input.empty() || !c.dataset.empty()))
    throw Error("run: --save-overlay draws over a photo; it does not combine with --input or --dataset");
  if (!c.save_overlay.empty() && c.objective == plan::Objective::Throughput)
    throw Error("run: --save-overlay does nothing with --objective throughput (it draws one inference's output)");
  if (c.objective == plan::Objective::Throughput && o.probe)
    throw Error("run: --objective throughput does not combine with --probe");
  // Authenticated links: --key-file, else the testbed's key_file.
  c.store = o.store;
  c.key_file = !o.key_file.empty() ? o.key_file : c.testbed.key_file;
  if (!c.key_file.empty()) c.key = net::load_key_file(c.key_file);
  c.cycles_per_mac = o.cpm;
  c.delay_ms = o.delay;
  c.emulate = emulated_type(o, c.testbed);
  c.window = o.window;
  c.timeout = std::chrono::milliseconds(int64_t(o.timeout * 1000));
  c.failover = !o.no_failover;
  c.probe = o.probe;
  c.repeat = o.repeat;
  c.in_flight = o.in_flight;
  c.json = o.json;
  return c;
}

coord::SpawnOptions spawn_options(const RunConfig& c) {
  coord::SpawnOptions so;
  so.store_root = c.store;
  so.key_file = c.key_file;
  so.key = c.key;
  so.cycles_per_mac = c.cycles_per_mac;
  so.delay_ms = c.delay_ms;
  so.window = uint16_t(c.window);
  if (!c.emulate.empty()) {  // the type's figures, as the simulator reads them
    const sim::TimingModel& tm = sim::board_preset(c.emulate).timing;
    so.emulate_costs = tm.costs;
    so.emulate_protocol = c.plan.cost.protocol_cpu;
    so.cycles_per_mac = tm.cycles_per_mac;
    so.frame_latency_s = tm.frame_latency_s;
  }
  return so;
}

coord::SwarmOptions swarm_options(const RunConfig& c) {
  coord::SwarmOptions sw;
  sw.timeout = c.timeout;
  sw.window = uint16_t(c.window);
  sw.progress = !c.json && c.objective == plan::Objective::Latency;
  sw.failover = c.failover;
  sw.auth = !c.key_file.empty();
  sw.key = c.key;
  if (!c.emulate.empty()) {  // the coordinator's link, as the simulator models it
    const sim::TimingModel& tm = sim::board_preset(c.emulate).timing;
    net::LinkShape s;
    s.s_per_byte = tm.coord_bandwidth_kbps > 0 ? 1.0 / (tm.coord_bandwidth_kbps * plan::kBytesPerKB) : 0.0;
    s.latency_s = tm.frame_latency_s;
    sw.link = std::make_shared<net::LinkShaper>(s);
    net::precise_timers();
  }
  return sw;
}

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App& sub = add_command(app, "run",
                              "Distributed inference on boards: plan, deploy, infer, check against the int8 reference",
                              [o] { return cmd_run(make_run_config(*o)); });
  o->cli = &sub;
  add_model_options(sub, o->model, o->size, true);
  auto* wopt = sub.add_option("--workers,-n", o->workers, "N local emulated boards, qemu:N Cortex-M7 firmware boards under QEMU, or a mix of kinds in order (qemu:2,host:1)")
                   ->capture_default_str();
  sub.add_option("--testbed,-t", o->testbed, "testbed JSON (boards: local, host:port)")->excludes(wopt);
  sub.add_option("--image,-i", o->image, "photo to classify (default: the bundled photo)");
  sub.add_option("--input", o->input, "a prepared input tensor: .npy, float32 NCHW or int8 already quantised");
  sub.add_option("--save-output", o->save_output,
                 "write the output as float32 .npy (dequantised; after the host Softmax if the model ends in one)");
  sub.add_option("--save-int8-output", o->save_int8_output, "write the raw int8 output tensor as .npy");
  sub.add_option("--save-overlay", o->save_overlay,
                 "a detector (ppocr-det): write a PNG of the photo with the output map and the text boxes of the DB "
                 "post-process over it");
  sub.add_option("--dataset", o->dataset, "run the first --limit test images of a data set (fashion-mnist; default model models/fashion-mnist/model.onnx)");
  sub.add_option("--limit", o->limit, "with --dataset: number of test images (default 100)")->check(CLI::Range(1, 1000000));
  sub.add_option("--allocation,-a", o->alloc, "even | frequency | rating")->capture_default_str();
  add_strategy_option(sub, o->strategy);
  sub.add_option("--cost-model", o->cost_model, "the planner's prices: " + plan::names_help(plan::kCostModels))
      ->capture_default_str();
  add_route_option(sub, o->route, "runs on the relay route");
  add_code_option(sub, o->code);
  sub.add_option("--protocol-cpu", o->protocol_cpu,
                 "on: plan (and with --emulate, pace) each board's CPU outside its kernels at its type's measured "
                 "prices per layer, piece and byte (data/costs/, protocol_instructions); off: none")
      ->capture_default_str();
  add_stream_option(sub, o->stream);
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
  sub.add_flag("--emulate", o->emulate,
               "local boards take the time of the board type they stand in for (Teensy 4.1): each layer at its "
               "op's measured cycles per MAC (data/costs/), every link paced at the type's bandwidth and latency, "
               "as `simulate` models them (docs/simulator.md, \"Emulated runs\")");
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
}

}  // namespace ts::cli
