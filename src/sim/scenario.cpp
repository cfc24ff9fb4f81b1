#include "sim/scenario.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/fragment.h"
#include "plan/board_kind.h"
#include "plan/cost.h"
#include "plan/replicate.h"
#include "plan/testbed.h"

namespace ts::sim {

namespace {

// Teensy 4.1: the engine's window; each layer at the Cortex-M7 kernels'
// measured cycles per MAC for its op (the kind's cost file,
// data/costs/cortex-m7.json, as the planner prices the kind), 2 cycles per
// MAC (the planner's default price) for ops the file does not list; 0.65 ms
// round trip per frame on its native Ethernet with lwIP (0.325 ms one way).
// Its link's bandwidth is the testbed's (plan/testbed.h kDefaultBandwidthKBps, 94 Mbit/s,
// by default). `run --emulate` paces host boards by these same figures
// (docs/simulator.md, "Emulated runs").
TimingModel teensy_timing() {
  TimingModel m;
  m.window = 32;
  m.cycles_per_mac = 2.0;
  m.costs = plan::find_board_kind("teensy41")->costs;
  m.protocol = plan::CostModel().type_protocol(m.costs);  // its CPU outside the kernels, measured
  m.frame_latency_s = plan::kTeensyFrameLatencyS;
  return m;
}

}  // namespace

const std::vector<BoardPreset>& board_presets() {
  static const std::vector<BoardPreset> presets = {
      {"teensy41", "Teensy 4.1: Cortex-M7 600 MHz, 512 KiB RAM budget, 8 MiB flash, Ethernet at 94 Mbit/s and 0.65 ms round trip (lwIP)",
       plan::kTeensyClockMhz, plan::kTeensyRamBytes, plan::kTeensyFlashBytes, plan::kDefaultBandwidthKBps,
       plan::kDefaultDelaySPerKB, teensy_timing()},
  };
  return presets;
}

const PaperFigure* paper_figure(int workers) {
  // Fig. 9 of the paper: total = compute + communication, seconds.
  static const PaperFigure figures[] = {{3, 42.97, 15.37, 27.60}, {8, 56.89, 7.07, 49.82}};
  for (const PaperFigure& f : figures)
    if (f.workers == workers) return &f;
  return nullptr;
}

const BoardPreset& board_preset(const std::string& name) {
  std::string known;
  for (const auto& p : board_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown board type '" + name + "' (known: " + known + ")");
}

plan::Testbed preset_testbed(const BoardPreset& b, int n) {
  if (n < 1) throw Error("at least one board is needed (got " + std::to_string(n) + ")");
  plan::Testbed t = plan::default_testbed(n, "local", b.ram_bytes, b.flash_bytes, b.clock_mhz);
  for (auto& bd : t.boards) {
    bd.bandwidth_kbps = b.bandwidth_kbps;
    bd.delay_s_per_kb = b.delay_s_per_kb;
  }
  return t;
}

namespace {

// Whole decimal number >= 0 with at most 9 digits, or -1.
long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  for (char c : s)
    if (c < '0' || c > '9') return -1;
  return std::strtol(s.c_str(), nullptr, 10);
}

}  // namespace

std::vector<int> parse_sweep(const std::string& spec) {
  constexpr size_t kMaxCounts = 100000;
  if (spec.empty()) throw Error("sweep: empty (expected e.g. 3..8 or 1..120:10,500,1000)");
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    const std::string bad = "sweep: '" + item + "' ";
    if (item.empty()) throw Error("sweep: empty item in '" + spec + "'");
    const size_t dots = item.find("..");
    long a, b, step = 1;
    if (dots == std::string::npos) {
      a = b = parse_count(item);
      if (a < 0) throw Error(bad + "is not a number of boards");
    } else {
      a = parse_count(item.substr(0, dots));
      std::string rest = item.substr(dots + 2);
      const size_t colon = rest.find(':');
      if (colon != std::string::npos) {
        step = parse_count(rest.substr(colon + 1));
        rest = rest.substr(0, colon);
        if (step < 1) throw Error(bad + "needs a step of at least 1");
      }
      b = parse_count(rest);
      if (a < 0 || b < 0) throw Error(bad + "is not a range A..B of board counts");
      if (a > b) throw Error(bad + "is an empty range (" + std::to_string(a) + " > " + std::to_string(b) + ")");
    }
    if (a < 1) throw Error(bad + "includes 0 boards; at least one board is needed");
    if (b > plan::kMaxBoards)
      throw Error(bad + "goes past " + std::to_string(plan::kMaxBoards) + " boards, the most a testbed may list");
    for (long n = a; n <= b; n += step) {
      out.push_back(int(n));
      if (out.size() > kMaxCounts) throw Error("sweep: more than " + std::to_string(kMaxCounts) + " board counts");
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

RunRecord run_scenario(const QGraph& q, const Scenario& s, bool keep_boards) {
  using Clock = std::chrono::steady_clock;
  validate(s.timing);
  if (s.testbed.boards.empty()) throw Error("at least one board is needed (the testbed is empty)");
  RunRecord r;
  r.workers = int(s.testbed.boards.size());
  plan::PlanOptions po;
  po.alloc = s.alloc;
  po.strategy = s.strategy;
  po.route = s.route;
  po.route_fallback = s.route_fallback;
  po.coding = s.coding;
  po.code = s.code;
  po.stream = s.stream;
  po.first_boards = s.first_boards;
  // The plan is the one `plan` and `run` make (the planner's default cost
  // model, plus --op-cycles if given), whatever timing it is simulated under.
  if (!s.op_cycles.empty()) plan::parse_op_cycles(s.op_cycles, &po.cost);
  po.cost.protocol_cpu = s.protocol_cpu;
  po.routing = false;
  po.check_budgets = false;
  const auto t0 = Clock::now();
  const plan::Plan p = plan::make_plan(q, s.testbed, po);
  r.plan_s = std::chrono::duration<double>(Clock::now() - t0).count();
  try {
    plan::check_budgets(q, p, s.testbed);
  } catch (const Error& e) {
    r.fits = false;
    r.budget_error = e.what();
  }
  r.ram_budget_bytes = s.testbed.boards[0].ram_bytes;
  r.plan_wire_bytes = p.total_wire_bytes;
  r.est_latency_s = p.est_latency_s;
  r.layer_strategy = p.layer_strategy;
  r.route = p.route;
  r.route_note = p.route_note;
  r.min_peak_ram_bytes = p.workers[0].peak_ram_bytes;
  double sum = 0;
  for (size_t w = 0; w < p.workers.size(); ++w) {
    const plan::WorkerPlan& wp = p.workers[w];
    r.ram_budget_bytes = std::min(r.ram_budget_bytes, s.testbed.boards[w].ram_bytes);
    r.min_peak_ram_bytes = std::min(r.min_peak_ram_bytes, wp.peak_ram_bytes);
    r.max_peak_ram_bytes = std::max(r.max_peak_ram_bytes, wp.peak_ram_bytes);
    r.max_flash_bytes = std::max(r.max_flash_bytes, wp.flash_bytes);
    r.total_macs += wp.macs;
    r.recomputed_macs += wp.recomputed_macs;
    sum += double(wp.peak_ram_bytes);
    for (const plan::LayerShare& ls : wp.layers) {
      if (!ls.active()) continue;
      const int64_t need = int64_t(core::kWorkerFixedArena) + ls.bytes_in() + ls.out_elems;
      r.max_exact_need_bytes = std::max(r.max_exact_need_bytes, need);
    }
  }
  r.mean_peak_ram_bytes = sum / double(p.workers.size());
  const auto t1 = Clock::now();
  r.result = simulate(q, p, s.testbed, s.timing);
  r.sim_s = std::chrono::duration<double>(Clock::now() - t1).count();
  if (s.throughput_images > 1) {
    try {
      plan::PlanOptions gpo = po;
      gpo.check_budgets = true;
      const plan::GroupChoice gc = plan::choose_groups(q, s.testbed, gpo, plan::Objective::Throughput);
      r.throughput_mode = gc.mode;
      r.group_boards = gc.group_boards;
      r.groups = gc.groups;
      r.idle_boards = gc.idle_boards;
      r.est_images_per_s = gc.est_images_per_s;
      double rate = 0, coord_bytes = 0;
      const bool same = plan::identical_boards(s.testbed);
      for (int i = 0; i < gc.groups; ++i) {
        const plan::Testbed tg = plan::group_testbed(s.testbed, gc.group_boards, i);
        const plan::Plan gp = plan::make_plan(q, tg, po);
        coord_bytes = plan::coordinator_bytes_per_image(gp);
        double group_rate = 0;
        if (gp.route == plan::Route::Direct) {
          TimingModel tm = s.timing;
          tm.images = s.throughput_images;
          const SimResult many = simulate(q, gp, tg, tm);
          const double span = many.image_done_s.back() - many.image_done_s.front();
          group_rate = span > 0 ? double(tm.images - 1) / span : 0.0;
        } else {
          const SimResult one = simulate(q, gp, tg, s.timing);
          group_rate = one.total_s > 0 ? 1.0 / one.total_s : 0.0;
        }
        if (same) {
          rate = group_rate * gc.groups;
          break;
        }
        rate += group_rate;
      }
      // Every group's images cross the coordinator's one link.
      if (s.timing.coord_bandwidth_kbps > 0 && coord_bytes > 0)
        rate = std::min(rate, s.timing.coord_bandwidth_kbps * plan::kBytesPerKB / coord_bytes);
      r.images_per_s = rate;
    } catch (const Error& e) {
      r.throughput_error = e.what();
    }
  }
  if (!keep_boards) {
    r.result.boards.clear();
    r.result.boards.shrink_to_fit();
    r.result.board_layers.clear();
    r.result.board_layers.shrink_to_fit();
  }
  return r;
}

int flattening_point(const std::vector<int>& counts, const std::vector<int64_t>& max_peak, double tolerance) {
  if (counts.empty() || counts.size() != max_peak.size()) return -1;
  const double floor = double(max_peak.back());
  for (size_t i = 0; i < counts.size(); ++i) {
    // Within tolerance of the final value from here on.
    bool flat = true;
    for (size_t j = i; j < counts.size(); ++j)
      if (double(max_peak[j]) > floor * (1.0 + tolerance)) flat = false;
    if (flat) return counts[i];
  }
  return counts.back();
}

}  // namespace ts::sim
