// Cost of frame authentication (core/auth.h) and of the deploy cache's
// SHA-256 (core/sha256.h) on this machine, one core:
//
//   cmake -S . -B build-bench -DTINYSPLIT_BENCH=ON && cmake --build build-bench --target auth_bench
//   build-bench/auth_bench
//
// Seal/Check: the tag of one frame (header + payload) with a session key, as
// every sender and receiver computes it. Sha256: bytes per second of the
// digest a board computes over its committed fragment.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/auth.h"
#include "core/sha256.h"

namespace {

void Seal(benchmark::State& st) {
  const size_t payload = size_t(st.range(0));
  std::vector<uint8_t> frame(ts::wire::kHeaderSize + payload + ts::wire::kTagSize, 0x5A);
  uint8_t key[32] = {1};
  ts::auth::FrameMac mac;
  mac.start(key);
  for (auto _ : st) {
    mac.seal(frame.data(), frame.size() - ts::wire::kTagSize, frame.data() + frame.size() - ts::wire::kTagSize);
    benchmark::DoNotOptimize(frame.data());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(frame.size()));
}
BENCHMARK(Seal)->Arg(4)->Arg(64)->Arg(1368);

void Check(benchmark::State& st) {
  const size_t payload = size_t(st.range(0));
  std::vector<uint8_t> frame(ts::wire::kHeaderSize + payload + ts::wire::kTagSize, 0x5A);
  uint8_t key[32] = {1};
  ts::auth::FrameMac tx, rx;
  tx.start(key);
  rx.start(key);
  for (auto _ : st) {
    tx.seal(frame.data(), frame.size() - ts::wire::kTagSize, frame.data() + frame.size() - ts::wire::kTagSize);
    if (!rx.check(frame.data(), frame.size())) st.SkipWithError("tag did not verify");
  }
  st.SetLabel("seal + check");
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(frame.size()));
}
BENCHMARK(Check)->Arg(1368);

void Sha256(benchmark::State& st) {
  std::vector<uint8_t> data(size_t(st.range(0)), 0xA5);
  uint8_t out[32];
  for (auto _ : st) {
    ts::sha256(data.data(), data.size(), out);
    benchmark::DoNotOptimize(out);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(data.size()));
}
BENCHMARK(Sha256)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
