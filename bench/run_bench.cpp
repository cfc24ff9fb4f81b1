// Wall latency of a distributed inference (`tinysplit run`'s engine: real
// board processes on loopback TCP) for 1..8 boards and window 1, 8 and 32,
// against the single-process int8 executor, in one run of one binary.
//
//   build/run_bench --benchmark_min_time=2
//
// Needs models/mobilenetv2 and data/ from scripts/setup.sh. Boards are
// spawned once per configuration and deployed once; each iteration is one
// whole inference (all layers, every activation relayed by the coordinator).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "coord/boards.h"
#include "coord/coordinator.h"
#include "model/pipeline.h"
#include "plan/plan.h"

namespace {

struct Model {
  ts::QGraph q;
  std::vector<int8_t> x, ref;
};

Model& model() {
  static Model m = [] {
    Model mm;
    mm.q = ts::quantized_model("mobilenetv2", 112, ts::QuantizeOptions{});
    const int s = mm.q.shape(mm.q.input).h;
    mm.x = ts::quantize_input(mm.q, ts::image_input(ts::default_photo(), s, mm.q.in_norm));
    mm.ref = ts::run_int8(mm.q, mm.x);
    return mm;
  }();
  return m;
}

void BM_SingleProcessInt8(benchmark::State& st) {
  Model& m = model();
  for (auto _ : st) benchmark::DoNotOptimize(ts::run_int8(m.q, m.x));
  st.SetLabel("MobileNetV2 112, one thread");
}

void BM_Distributed(benchmark::State& st) {
  Model& m = model();
  const int n = int(st.range(0));
  const uint16_t window = uint16_t(st.range(1));
  const auto tb = ts::plan::default_testbed(n);
  ts::plan::PlanOptions po;
  po.alloc = ts::plan::Allocation::Rating;
  po.routing = false;
  const ts::plan::Plan p = ts::plan::make_plan(m.q, tb, po);
  ts::coord::SpawnOptions so;
  so.exe = TS_TINYSPLIT;
  so.window = window;
  ts::coord::BoardSet boards(tb, so);
  ts::coord::CoordOptions co;
  ts::coord::Coordinator c(m.q, p, boards.links(std::chrono::milliseconds(10000)), co);
  c.handshake();
  c.deploy();
  double compute = 0, comm = 0;
  int64_t wire = 0;
  for (auto _ : st) {
    auto r = c.infer(m.x);
    if (r.output != m.ref) {
      st.SkipWithError("distributed result differs from the int8 reference");
      break;
    }
    compute += r.compute_s;
    comm += r.comm_s;
    wire = r.wire_bytes;
  }
  st.counters["compute_s"] = benchmark::Counter(compute, benchmark::Counter::kAvgIterations);
  st.counters["comm_s"] = benchmark::Counter(comm, benchmark::Counter::kAvgIterations);
  st.counters["wire_bytes"] = double(wire);
  c.close();
}

}  // namespace

BENCHMARK(BM_SingleProcessInt8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Distributed)
    ->ArgNames({"boards", "window"})
    ->ArgsProduct({{1, 2, 3, 4, 5, 6, 7, 8}, {32}})
    ->ArgsProduct({{3, 8}, {1, 8}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
