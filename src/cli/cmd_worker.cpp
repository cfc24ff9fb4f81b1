// tinysplit worker: one emulated board on this machine.
#include "cli/cli.h"
#include "net/fault.h"
#include "net/host_board.h"
#include "net/keyfile.h"
#include "plan/cost.h"
#include "plan/testbed.h"
#include "util/paths.h"
#include "util/endpoint.h"

namespace ts::cli {

struct WorkerOptions {
  std::string listen = "127.0.0.1:0", ram = "512K", flash = "8M", store, key_file;
  double idle_timeout = 60.0;
  int clock = 600, id = 0, window = 32;
  double cpm = 0.0, delay = 0.0;
  std::string costs;  // a board type's cost file (data/costs/<costs>.json)
  std::string protocol_cpu = "off";  // with costs: also its protocol CPU (plan::kProtocolCpu)
  double link_kbps = 0, link_delay_s_per_kb = 0, frame_latency_us = 0;
  std::string fault;  // KIND:LAYER (net/fault.h)
  bool exit_with_parent = false;
};

int cmd_worker(const WorkerOptions& w) {
  net::HostBoardOptions o;
  o.cfg.id = uint16_t(w.id);
  o.cfg.clock_mhz = uint16_t(w.clock);
  const int64_t r = plan::parse_bytes(w.ram), f = plan::parse_bytes(w.flash);
  const std::string budget = plan::board_budget_error(r, f, w.clock, plan::kBudgetOptions);
  if (!budget.empty()) throw Error(budget);
  o.cfg.ram_bytes = uint32_t(r);
  o.cfg.flash_bytes = uint32_t(f);
  o.cfg.window = uint16_t(w.window);
  o.store_dir = w.store;
  // The emulated clock: every layer at --cycles-per-mac, or at the type's
  // measured per-op figures (--cycles-per-mac, else the planner's default,
  // for ops its file does not list): the planner's own prices.
  check_choice("--protocol-cpu", plan::kProtocolCpu, w.protocol_cpu);
  if (w.cpm > 0 || !w.costs.empty()) {
    plan::CostModel cm;
    if (w.cpm > 0) cm.default_cycles_per_mac = w.cpm;
    if (!w.costs.empty()) (void)plan::load_measured_costs(project_home() + "/data/costs/" + w.costs + ".json");
    o.cycles_per_mac = [cm, type = w.costs](const core::LayerDesc& d) { return cm.type_cycles_per_mac(d, type); };
    cm.protocol_cpu = w.protocol_cpu == "on";
    o.protocol = cm.type_protocol(w.costs);
  }
  if (w.link_kbps > 0) o.link.s_per_byte = plan::link_s_per_byte(w.link_delay_s_per_kb, w.link_kbps);
  o.link.latency_s = w.frame_latency_us * 1e-6;
  o.delay_ms = w.delay;
  if (!w.fault.empty()) o.fault = net::parse_board_fault(w.fault);
  o.exit_with_parent = w.exit_with_parent;
  o.idle_timeout_s = w.idle_timeout;
  if (!w.key_file.empty()) {
    const net::Key k = net::load_key_file(w.key_file);
    o.cfg.has_key = true;
    std::copy(k.begin(), k.end(), o.cfg.key);
  }
  Endpoint at;
  if (!parse_endpoint(w.listen, &at, nullptr, true))
    throw Error("--listen must be HOST:PORT with a port in 0..65535 (0 = any free port), got '" + w.listen + "'");
  return net::run_worker_process(at.host, at.port, o);
}

void register_worker(CLI::App& app) {
  auto o = std::make_shared<WorkerOptions>();
  CLI::App& sub = add_command(app, "worker",
                              "Run one emulated board (a Teensy 4.1 budget by default) listening for a coordinator",
                              [o] { return cmd_worker(*o); });
  sub.add_option("--listen", o->listen, "HOST:PORT to listen on (port 0 = any free port)")->capture_default_str();
  sub.add_option("--ram", o->ram, "RAM arena budget, e.g. 512K")->capture_default_str();
  sub.add_option("--flash", o->flash, "flash capacity, e.g. 8M")->capture_default_str();
  sub.add_option("--clock-mhz", o->clock, "clock reported to the coordinator (and used by --cycles-per-mac)")
      ->capture_default_str()->check(CLI::Range(1, 65535));
  sub.add_option("--id", o->id, "board id")->capture_default_str()->check(CLI::Range(0, 65534));
  sub.add_option("--window", o->window, "frames in flight when sending results (1 = stop-and-wait)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  sub.add_option("--store", o->store, "folder holding the board's committed fragment (its flash)");
  sub.add_option("--key-file,--key", o->key_file,
                 "shared key (tinysplit keygen): serve only coordinators that prove they hold it; every frame "
                 "authenticated");
  sub.add_option("--idle-timeout", o->idle_timeout, "close a connection silent for this many seconds (0 = never)")
      ->capture_default_str()->check(finite_range(0.0, 1e6));
  sub.add_option("--cycles-per-mac", o->cpm, "emulate the clock: stretch compute to MACs*cycles/clock (0 = off)")
      ->check(finite_range(0.0, 1e6));
  sub.add_option("--delay-ms", o->delay, "inject this delay before every send and receive (0 = off)")
      ->check(finite_range(0.0, 1e6));
  sub.add_option("--costs", o->costs,
                 "emulate a board type's compute: each layer at the measured cycles per MAC of its op in "
                 "data/costs/NAME.json (e.g. cortex-m7; --cycles-per-mac for ops it does not list)");
  sub.add_option("--link-kbps", o->link_kbps, "emulate the board's link: its bandwidth, KB/s (0 = loopback speed)")
      ->check(finite_range(0.0, 1e9));
  sub.add_option("--link-delay-s-per-kb", o->link_delay_s_per_kb, "with --link-kbps: the link's delay per KB, s")
      ->check(finite_range(0.0, 1e3));
  sub.add_option("--protocol-cpu", o->protocol_cpu,
                 "with --costs: on adds the type's CPU outside the kernels (protocol_instructions) to each layer's "
                 "emulated time")
      ->capture_default_str();
  sub.add_option("--frame-latency-us", o->frame_latency_us, "emulate the link's one-way latency per frame, us")
      ->check(finite_range(0.0, 1e6));
  sub.add_option("--inject-fault", o->fault,
                 "for tests and demos: kill | stall | corrupt the board right after it computes this layer, or flip one "
                 "output value of it at every inference (KIND:LAYER)");
  // Set by a coordinator that spawns its boards; a standalone board keeps serving.
  sub.add_flag("--exit-with-parent", o->exit_with_parent, "")->group("");
}

}  // namespace ts::cli
