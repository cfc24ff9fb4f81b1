// Speed of the simulator on MobileNetV2 at 112x112: one simulated inference
// for N boards (the plan is made once, outside the timed loop), and the
// planner for the same N for comparison. Counters: events and frames
// simulated, and events per second of host time.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>

#include "model/pipeline.h"
#include "sim/scenario.h"
#include "sim/sim.h"

namespace {

using namespace ts;

const QGraph* model() {
  static std::unique_ptr<QGraph> g;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const std::string path = std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json";
    if (std::filesystem::exists(path)) g = std::make_unique<QGraph>(quantized_model(path, 112, QuantizeOptions{}));
  }
  return g.get();
}

plan::Testbed bed(int n) { return sim::preset_testbed(sim::board_preset("teensy41"), n); }

const plan::Plan& cached_plan(int n) {
  static std::map<int, std::unique_ptr<plan::Plan>> plans;
  auto& p = plans[n];
  if (!p) {
    plan::PlanOptions o;
    o.routing = false;
    o.check_budgets = false;
    p = std::make_unique<plan::Plan>(plan::make_plan(*model(), bed(n), o));
  }
  return *p;
}

void BM_Simulate(benchmark::State& state) {
  if (!model()) {
    state.SkipWithError("models/mobilenetv2 is absent (run scripts/setup.sh)");
    return;
  }
  const int n = int(state.range(0));
  const int window = int(state.range(1));
  const plan::Plan& p = cached_plan(n);
  const plan::Testbed t = bed(n);
  sim::TimingModel m;
  m.window = window;
  m.cycles_per_mac = 2.0;
  m.frame_latency_s = 30e-6;
  int64_t events = 0, frames = 0;
  double simulated = 0;
  for (auto _ : state) {
    const sim::SimResult r = sim::simulate(*model(), p, t, m);
    events = r.events;
    frames = r.frames;
    simulated = r.total_s;
    benchmark::DoNotOptimize(r.total_s);
  }
  state.counters["events"] = double(events);
  state.counters["frames"] = double(frames);
  state.counters["simulated_s"] = simulated;
  state.counters["events_per_s"] = benchmark::Counter(double(events) * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Simulate)
    ->ArgNames({"boards", "window"})
    ->Args({3, 1})
    ->Args({8, 1})
    ->Args({120, 8})
    ->Args({1000, 8})
    ->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

void BM_Plan(benchmark::State& state) {
  if (!model()) {
    state.SkipWithError("models/mobilenetv2 is absent (run scripts/setup.sh)");
    return;
  }
  const int n = int(state.range(0));
  const plan::Testbed t = bed(n);
  plan::PlanOptions o;
  o.routing = false;
  o.check_budgets = false;
  for (auto _ : state) {
    const plan::Plan p = plan::make_plan(*model(), t, o);
    benchmark::DoNotOptimize(p.total_wire_bytes);
  }
}
BENCHMARK(BM_Plan)->ArgName("boards")->Arg(8)->Arg(120)->Arg(1000)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
