// Single-thread inference latency of the int8 reference executor (run_int8)
// on MobileNetV2 at 112 and 224, with the float executor for reference, and a
// per-op-kind breakdown to find hot spots.
//
//   build-bench/int8_bench                       # all benchmarks
//   build-bench/int8_bench --benchmark_filter='BM_Int8/'
//   build-bench/int8_bench --ts_export=DIR       # files for scripts/bench.sh
//
// --ts_export=DIR writes, for each size S in {112, 224}, into DIR/S/:
//   model_s8.onnx, model_u8.onnx  the quantised model in QDQ form with int8
//                                 activations / the same values as uint8
//   input.bin                     the quantised input of the default photo
//   ours.bin                      run_int8's output for it
//   check/input_K.bin, check/ours_K.bin   the same for every photo of data/eval
// and exits; scripts/bench/ort_bench.js times and checks ONNX Runtime on them.
//   build-bench/int8_bench --ts_layers=112       # per-layer CPU time and ns/MAC
//
// Needs models/mobilenetv2 and data/ (scripts/setup.sh); a benchmark whose
// model is missing is skipped with the reason.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "core/digest.h"
#include "core/kernel_table.h"
#include "model/export_onnx.h"
#include "model/float_exec.h"
#include "model/image.h"
#include "model/pipeline.h"

namespace {

namespace fs = std::filesystem;
using ts::core::QOp;

constexpr const char* kModel = "mobilenetv2";

// One quantised model per input size, loaded on first use (quantising from
// scratch takes a while; later runs hit models/.cache).
struct Loaded {
  ts::QGraph q;
  ts::Graph folded;
  std::vector<float> input_f;  // preprocessed default photo
  std::vector<int8_t> input_q;
  std::string error;
};

const Loaded& model(int size) {
  static std::map<int, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[size];
  if (!slot) {
    slot = std::make_unique<Loaded>();
    try {
      slot->q = ts::quantized_model(kModel, size, {}, &slot->folded);
      slot->input_f = ts::image_input(ts::default_photo(), size, slot->q.in_norm);
      slot->input_q = ts::quantize_input(slot->q, slot->input_f);
    } catch (const std::exception& e) {
      slot->error = e.what();
    }
  }
  return *slot;
}

void set_macs(benchmark::State& state, const ts::QGraph& q) {
  state.SetItemsProcessed(int64_t(state.iterations()));
  state.counters["MMAC"] = double(q.total_macs()) / 1e6;
  state.counters["GMAC/s"] =
      benchmark::Counter(double(q.total_macs()) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_Int8(benchmark::State& state) {
  const Loaded& m = model(int(state.range(0)));
  if (!m.error.empty()) return state.SkipWithError(m.error.c_str());
  for (auto _ : state) {
    auto out = ts::run_int8(m.q, m.input_q);
    benchmark::DoNotOptimize(out.data());
  }
  set_macs(state, m.q);
}

// The cost of verifying every layer (docs/execution.md, "Correctness"): the
// digests of every layer's outputs (the boards together hash each output
// once; the coordinator hashes the reference's once more), beside BM_Int8.
void BM_OutputDigests(benchmark::State& state) {
  const Loaded& m = model(int(state.range(0)));
  if (!m.error.empty()) return state.SkipWithError(m.error.c_str());
  const auto all = ts::run_int8_all(m.q, m.input_q);
  int64_t bytes = 0;
  for (const auto& n : m.q.nodes) bytes += int64_t(all[size_t(n.output)].size());
  for (auto _ : state) {
    uint64_t x = 0;
    for (const auto& n : m.q.nodes) {
      const auto& t = all[size_t(n.output)];
      x ^= ts::core::digest64(t.data(), t.size());
    }
    benchmark::DoNotOptimize(x);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_Float(benchmark::State& state) {
  const Loaded& m = model(int(state.range(0)));
  if (!m.error.empty()) return state.SkipWithError(m.error.c_str());
  for (auto _ : state) {
    auto out = ts::run_float(m.folded, m.input_f);
    benchmark::DoNotOptimize(out.data());
  }
  set_macs(state, m.q);
}

// Kind of a node for the breakdown: convolutions split by shape, since the
// pointwise, depthwise and full ones run different loops.
std::string kind(const ts::QNode& n) {
  if (n.op != QOp::Conv) return ts::core::qop_name(n.op);
  const auto& g = n.geo;
  if (g.kh == 1 && g.kw == 1 && g.groups == 1) return "Conv1x1";
  if (g.groups == g.in[0].c && g.groups == g.out.c) return "ConvDW" + std::to_string(g.kh) + "x" + std::to_string(g.kw);
  return "Conv" + std::to_string(g.kh) + "x" + std::to_string(g.kw);
}

// Thread CPU time in seconds: per-node times stay meaningful on a busy
// machine, where wall time also counts the time other processes ran.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Same work as run_int8, node by node, timing each node kind. Counters are
// CPU milliseconds per inference (and the share of the total).
void BM_Int8ByOp(benchmark::State& state) {
  const Loaded& m = model(int(state.range(0)));
  if (!m.error.empty()) return state.SkipWithError(m.error.c_str());
  const ts::QGraph& q = m.q;
  std::vector<std::vector<int8_t>> t(q.tensors.size());
  for (size_t i = 0; i < q.tensors.size(); ++i) t[i].resize(size_t(q.shape(int(i)).size()));
  t[q.input] = m.input_q;
  std::vector<ts::core::LayerDesc> descs;
  std::vector<std::string> kinds;
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    descs.push_back(q.desc(int(i)));
    kinds.push_back(kind(q.nodes[i]));
  }
  std::map<std::string, double> seconds;
  for (auto _ : state) {
    for (size_t i = 0; i < q.nodes.size(); ++i) {
      const ts::QNode& n = q.nodes[i];
      ts::core::View views[ts::core::kMaxInputs];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const ts::Shape& s = q.shape(n.inputs[k]);
        views[k] = ts::core::View{t[n.inputs[k]].data(), 0, s.c, 0, s.h};
      }
      auto& out = t[n.output];
      const double t0 = thread_cpu_seconds();
      const auto st = ts::core::compute_range(descs[i], views, 0, int32_t(out.size()), out.data(), n.channels_with_data());
      seconds[kinds[i]] += thread_cpu_seconds() - t0;
      if (st != ts::core::KernelStatus::Ok) return state.SkipWithError(("kernel failed at " + n.name).c_str());
    }
    benchmark::DoNotOptimize(t[q.output].data());
  }
  double total = 0;
  for (auto& [k, s] : seconds) total += s;
  const double iters = double(state.iterations());
  for (auto& [k, s] : seconds) {
    state.counters[k + "_ms"] = 1e3 * s / iters;
    state.counters[k + "_%"] = total > 0 ? 100.0 * s / total : 0.0;
  }
  set_macs(state, q);
}

double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(112)->Arg(224)->Unit(benchmark::kMillisecond)->ComputeStatistics("min", min_of);
}

BENCHMARK(BM_Int8)->Apply(sizes);
BENCHMARK(BM_OutputDigests)->Apply(sizes);
BENCHMARK(BM_Float)->Apply(sizes);
BENCHMARK(BM_Int8ByOp)->Apply(sizes);

void write_bytes(const fs::path& p, const std::vector<int8_t>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size()));
  if (!f) throw ts::Error("cannot write '" + p.string() + "'");
}

// --ts_export=DIR (see the file comment).
int export_for_ort(const std::string& dir) {
  for (int size : {112, 224}) {
    const ts::QGraph q = ts::quantized_model(kModel, size, {});
    const fs::path d = fs::path(dir) / std::to_string(size);
    fs::create_directories(d / "check");
    ts::OnnxExportOptions opt;
    opt.activations = ts::OnnxExportOptions::Activations::Int8;
    ts::export_qdq_onnx(q, (d / "model_s8.onnx").string(), opt);
    opt.activations = ts::OnnxExportOptions::Activations::Uint8;
    ts::export_qdq_onnx(q, (d / "model_u8.onnx").string(), opt);
    const auto x = ts::quantize_input(q, ts::image_input(ts::default_photo(), size, q.in_norm));
    write_bytes(d / "input.bin", x);
    write_bytes(d / "ours.bin", ts::run_int8(q, x));
    const auto photos = ts::list_images(ts::default_eval_dir());
    for (size_t k = 0; k < photos.size(); ++k) {
      const auto xk = ts::quantize_input(q, ts::image_input(photos[k], size, q.in_norm));
      write_bytes(d / "check" / ("input_" + std::to_string(k) + ".bin"), xk);
      write_bytes(d / "check" / ("ours_" + std::to_string(k) + ".bin"), ts::run_int8(q, xk));
    }
    std::printf("int8_bench: exported %s (%zu check photos)\n", d.string().c_str(), photos.size());
  }
  return 0;
}

// --ts_layers=SIZE: every node of the model at SIZE timed on its own (the
// minimum over repeated runs of thread CPU time), with MACs and ns per MAC;
// the kernel table is the start-up default (TS_KERNELS to force one).
int time_layers(int size) {
  const ts::QGraph q = ts::quantized_model(kModel, size, {});
  const auto x = ts::quantize_input(q, ts::image_input(ts::default_photo(), size, q.in_norm));
  auto t = ts::run_int8_all(q, x);
  std::printf("kernels: %s\n%-28s %-10s %10s %10s %10s\n", ts::core::kernels().name, "layer", "kind", "MACs",
              "us (min)", "ns/MAC");
  double total = 0;
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    const ts::QNode& n = q.nodes[i];
    const ts::core::LayerDesc d = q.desc(int(i));
    ts::core::View views[ts::core::kMaxInputs];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ts::Shape& sh = q.shape(n.inputs[k]);
      views[k] = ts::core::View{t[n.inputs[k]].data(), 0, sh.c, 0, sh.h};
    }
    auto& out = t[n.output];
    double best = 1e30;
    for (int rep = 0; rep < 200; ++rep) {
      const double t0 = thread_cpu_seconds();
      for (int k = 0; k < 5; ++k)
        ts::core::compute_range(d, views, 0, int32_t(out.size()), out.data(), n.channels_with_data());
      best = std::min(best, (thread_cpu_seconds() - t0) / 5);
    }
    total += best;
    std::printf("%-28s %-10s %10lld %10.2f %10.4f\n", n.name.c_str(), kind(n).c_str(), (long long)n.macs, best * 1e6,
                n.macs ? best * 1e9 / double(n.macs) : 0.0);
  }
  std::printf("total %.3f ms\n", total * 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ts_layers=", 12) == 0) {
      try {
        return time_layers(std::atoi(argv[i] + 12));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "int8_bench: %s\n", e.what());
        return 1;
      }
    }
    const char* flag = "--ts_export=";
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      try {
        return export_for_ort(argv[i] + std::strlen(flag));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "int8_bench: %s\n", e.what());
        return 1;
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
