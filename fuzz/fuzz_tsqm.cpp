// Fuzz target: the quantised model reader (.tsqm, src/model/qgraph.cpp).
//
// Checked for an accepted model: it serialises back to exactly the input
// bytes, and (when small enough to run quickly) the single-process int8
// reference runs it to the end without a kernel error, producing the output
// tensor's size. Refusals must be ts::Error; anything else escapes and is
// reported by libFuzzer as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "model/qgraph.h"

using namespace ts;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

namespace {
constexpr int64_t kMaxWork = 1 << 21;  // MACs-ish per input that we execute
constexpr int64_t kMaxElems = 1 << 20;  // activation elements we allocate

int64_t work_of(const QGraph& q, const QNode& n) {
  const core::LayerDesc& d = n.geo;
  int64_t fan = 1;
  if (n.op == core::QOp::Conv) fan = int64_t(d.in[0].c / d.groups) * d.kh * d.kw;
  if (n.op == core::QOp::Gemm) fan = d.in[0].size();
  if (n.op == core::QOp::AvgPool || n.op == core::QOp::MaxPool) fan = int64_t(d.kh) * d.kw;
  if (n.op == core::QOp::GlobalAvgPool) fan = int64_t(d.in[0].h) * d.in[0].w;
  return q.shape(n.output).size() * fan;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  QGraph q;
  try {
    q = deserialize_qgraph(bytes, "fuzz.tsqm");
  } catch (const Error&) {
    return 0;
  }
  FUZZ_CHECK(serialize_qgraph(q) == bytes);
  int64_t work = 0, elems = 0;
  for (const auto& n : q.nodes) work += work_of(q, n);
  for (const auto& t : q.tensors) elems += t.shape.size();
  if (work > kMaxWork || elems > kMaxElems) return 0;
  std::vector<int8_t> in(size_t(q.shape(q.input).size()));
  for (size_t i = 0; i < in.size(); ++i) in[i] = int8_t(i * 29 + 3);
  std::vector<int8_t> out;
  try {
    out = run_int8(q, in);
  } catch (const Error& e) {
    std::printf("accepted model failed to run: %s\n", e.what());
    std::abort();
  }
  FUZZ_CHECK(int64_t(out.size()) == q.shape(q.output).size());
  return 0;
}
