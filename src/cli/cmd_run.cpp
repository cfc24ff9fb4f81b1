// tinysplit run: the main job. Plan, bring boards up, deploy, infer, check
// the result against the single-process int8 reference, report.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "coord/boards.h"
#include "coord/coordinator.h"
#include "model/pipeline.h"
#include "plan/plan.h"

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
  int window = 32;
  double timeout = 10.0, cpm = 0.0, delay = 0.0;
  int repeat = 1;
  std::string store;
  bool probe = false, json = false;
  std::vector<int> hooks = std::vector<int>(6, -1);  // crash, stall, garble: board and layer
};

int cmd_run(const RunOptions& o) {
  using Clock = std::chrono::steady_clock;
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
  plan::PlanOptions popt;
  popt.alloc = plan::parse_allocation(o.alloc);
  popt.routing = false;  // the engine reads each board's needs; the routing map is for reports
  // Model, reference and plan.
  const std::string photo = o.image.empty() ? default_photo() : o.image;
  QGraph q = quantized_model(o.model, o.size, QuantizeOptions{});
  const int in_size = q.shape(q.input).h;
  const auto x = quantize_input(q, image_input(photo, in_size, q.in_mean, q.in_std));
  const auto t_ref = Clock::now();
  const auto ref = run_int8(q, x);
  const double ref_s = std::chrono::duration<double>(Clock::now() - t_ref).count();
  plan::Plan p = plan::make_plan(q, tb, popt);

  // Boards.
  coord::SpawnOptions so;
  so.store_root = o.store;
  so.cycles_per_mac = o.cpm;
  so.delay_ms = o.delay;
  so.window = uint16_t(o.window);
  so.crash_board = o.hooks[0]; so.crash_layer = o.hooks[1];
  so.stall_board = o.hooks[2]; so.stall_layer = o.hooks[3];
  so.garble_board = o.hooks[4]; so.garble_layer = o.hooks[5];
  coord::BoardSet boards(tb, so);
  const auto tmo = std::chrono::milliseconds(int64_t(o.timeout * 1000));
  coord::CoordOptions copt;
  copt.timeout = tmo;
  copt.progress = !o.json;
  coord::Coordinator c(q, p, boards.links(tmo), copt);
  c.handshake();
  std::vector<coord::ProbeResult> probes;
  if (o.probe) {
    // Measure each link's d and B, put them in the testbed, and re-plan:
    // with the rating allocation the shares now follow measured links.
    for (int w = 0; w < p.n_workers(); ++w) probes.push_back(c.probe(w));
    for (int w = 0; w < p.n_workers(); ++w) {
      tb.boards[w].delay_s_per_kb = probes[w].delay_s_per_kb;
      tb.boards[w].bandwidth_kbps = probes[w].bandwidth_kbps;
    }
    p = plan::make_plan(q, tb, popt);
    c.set_plan(p);
  }
  const coord::DeployResult dep = c.deploy();
  coord::InferenceResult r;
  bool match = true;
  for (int k = 0; k < o.repeat; ++k) {
    r = c.infer(x);
    match = match && r.output == ref;
  }
  c.close();
  boards.stop();

  const auto probs = output_probs(q, r.output);
  const int top = int(std::max_element(probs.begin(), probs.end()) - probs.begin());
  auto label = [&](int i) { return i < int(q.labels.size()) ? q.labels[i] : std::to_string(i); };
  const auto logits = dequantize_output(q, r.output);
  std::vector<int> order(probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });

  if (o.json) {
    nlohmann::json jw = nlohmann::json::array(), jl = nlohmann::json::array();
    for (size_t i = 0; i < r.boards.size(); ++i) {
      const auto& b = r.boards[i];
      nlohmann::json e = {{"id", b.board_id}, {"address", boards.addresses()[i]}, {"peak_ram_bytes", b.peak_ram_bytes},
                          {"planned_peak_ram_bytes", b.planned_peak_ram_bytes}, {"ram_budget_bytes", tb.boards[i].ram_bytes},
                          {"flash_bytes", b.flash_bytes}, {"compute_s", b.compute_s}, {"bytes_in", b.bytes_in},
                          {"bytes_out", b.bytes_out}, {"rating", p.ratings[i]}, {"share", p.shares[i]},
                          {"macs", p.workers[i].macs}};
      std::vector<int64_t> planned, measured;
      for (size_t n = 0; n < q.nodes.size(); ++n) {
        const auto& ls = p.workers[i].layers[n];
        planned.push_back(ls.run.empty() ? 0 : int64_t(core::kWorkerFixedArena) + ls.ram_bytes);
        measured.push_back(b.layer_peak[n]);
      }
      e["planned_layer_ram_bytes"] = planned;
      e["measured_layer_ram_bytes"] = measured;
      if (!probes.empty())
        e["probe"] = {{"rtt_s", probes[i].rtt_s}, {"delay_s_per_kb", probes[i].delay_s_per_kb},
                      {"bandwidth_kbps", probes[i].bandwidth_kbps}};
      jw.push_back(e);
    }
    for (const auto& l : r.layers)
      jl.push_back({{"name", l.name}, {"wall_s", l.wall_s}, {"compute_s", l.compute_s}, {"communication_s", l.comm_s},
                    {"payload_bytes", l.payload_bytes}, {"wire_bytes", l.wire_bytes}, {"max_peak_ram_bytes", l.max_peak_ram}});
    nlohmann::json j = {
        {"model", o.model}, {"size", in_size}, {"image", std::filesystem::path(photo).filename().string()},
        {"workers", p.n_workers()}, {"allocation", plan::to_string(popt.alloc)}, {"window", o.window},
        {"top1", {{"index", top}, {"label", label(top)}, {"prob", probs[top]}}}, {"logits", logits},
        {"logits_int8", std::vector<int>(r.output.begin(), r.output.end())}, {"probs", probs},
        {"match_reference", match}, {"reference_s", ref_s}, {"repeat", o.repeat},
        {"latency_s", {{"total", r.total_s}, {"compute", r.compute_s}, {"communication", r.comm_s}}},
        {"wire_bytes", {{"total", r.wire_bytes}, {"payload", r.payload_bytes}}},
        {"planned_wire_payload_bytes", p.total_wire_bytes},
        {"deploy", {{"sent", dep.sent}, {"cached", dep.cached}, {"bytes", dep.bytes}, {"seconds", dep.seconds}}},
        {"emulation", {{"cycles_per_mac", o.cpm}, {"delay_ms", o.delay}}},
        {"per_worker", jw}, {"per_layer", jl}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("tinysplit run: %s at %dx%d on %d boards (%s allocation, window %d)%s%s\n", o.model.c_str(), in_size,
                in_size, p.n_workers(), plan::to_string(popt.alloc), o.window,
                o.cpm > 0 ? ", emulated clocks" : "", o.delay > 0 ? ", injected delays" : "");
    std::printf("image %s\n", std::filesystem::path(photo).filename().c_str());
    for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k)
      std::printf("  %-10s %6.2f%%\n", label(order[k]).c_str(), 100.0 * probs[order[k]]);
    std::printf("bit-exact with the single-process int8 reference: %s\n", match ? "yes" : "NO");
    std::printf("deploy: %d boards sent %s, %d cached, %.2f s\n", dep.sent, human_bytes(dep.bytes).c_str(), dep.cached,
                dep.seconds);
    std::printf("latency: %.3f s total = %.3f s compute + %.3f s communication (single process: %.3f s)\n", r.total_s,
                r.compute_s, r.comm_s, ref_s);
    std::printf("wire: %s in frames, %s activations\n", human_bytes(r.wire_bytes).c_str(),
                human_bytes(r.payload_bytes).c_str());
    std::printf("%-6s %-22s %12s %12s %10s %12s %12s %10s\n", "board", "address", "peak RAM", "planned", "budget",
                "flash", "compute s", "in/out KiB");
    for (size_t i = 0; i < r.boards.size(); ++i) {
      const auto& b = r.boards[i];
      std::printf("%-6d %-22s %12u %12lld %10lld %12lld %12.4f %5lld/%-5lld\n", b.board_id, boards.addresses()[i].c_str(),
                  b.peak_ram_bytes, (long long)b.planned_peak_ram_bytes, (long long)tb.boards[i].ram_bytes,
                  (long long)b.flash_bytes, b.compute_s, (long long)(b.bytes_in / 1024), (long long)(b.bytes_out / 1024));
    }
    std::printf("%-34s %10s %10s %10s %12s\n", "layer", "wall ms", "compute ms", "comm ms", "payload B");
    for (const auto& l : r.layers)
      std::printf("%-34.34s %10.3f %10.3f %10.3f %12lld\n", l.name.c_str(), 1e3 * l.wall_s, 1e3 * l.compute_s,
                  1e3 * l.comm_s, (long long)l.payload_bytes);
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
  sub.add_option("--allocation,-a", o->alloc, "even | frequency | rating")->capture_default_str();
  sub.add_option("--window,-w", o->window, "frames in flight per link (1 = the paper's stop-and-wait)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  sub.add_option("--ram", o->ram, "RAM budget of each local board (with --workers)")->capture_default_str();
  sub.add_option("--flash", o->flash, "flash of each local board (with --workers)")->capture_default_str();
  sub.add_option("--timeout", o->timeout, "seconds to wait for a board before giving up")->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  sub.add_option("--cycles-per-mac", o->cpm, "emulate board clocks: compute takes MACs*cycles/clock (0 = host speed)")
      ->check(CLI::Range(0.0, 1e6));
  sub.add_option("--delay-ms", o->delay, "inject a delay before each board send and receive (0 = off)")
      ->check(CLI::Range(0.0, 1e6));
  sub.add_option("--repeat", o->repeat, "inferences to run (timings are reported for the last)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  sub.add_option("--store", o->store, "keep board flash in this folder (a later run reuses unchanged fragments)");
  sub.add_flag("--probe", o->probe, "measure each link's delay and bandwidth first and plan with them");
  add_json_flag(sub, o->json);
  sub.add_option("--test-crash", o->hooks[0], "")->group("");
  sub.add_option("--test-crash-layer", o->hooks[1], "")->group("");
  sub.add_option("--test-stall", o->hooks[2], "")->group("");
  sub.add_option("--test-stall-layer", o->hooks[3], "")->group("");
  sub.add_option("--test-garble", o->hooks[4], "")->group("");
  sub.add_option("--test-garble-layer", o->hooks[5], "")->group("");
}

}  // namespace ts::cli
