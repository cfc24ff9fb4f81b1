// Fuzz target: the fragment reader (src/core/fragment.*).
//
// The input is a fragment as it would sit in a board's flash. Checked for an
// accepted fragment: every layer entry decodes; a layer's run lies in its
// output; every input run is sorted, disjoint, inside its input tensor and
// inside the layer's box, and the runs add up to the expected count; and the
// kernels, given windows the size of the boxes, compute the run without a
// status error (and, under ASan/UBSan, without touching memory outside the
// windows, the fragment or the output).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fragment.h"
#include "core/layer.h"

using namespace ts::core;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

namespace {
// Work bound per input so the fuzzer stays fast: larger runs are checked
// structurally but not computed.
constexpr int64_t kMaxWork = 1 << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Flash is word aligned: a heap copy (16-byte aligned) of exactly `size`
  // bytes, so ASan sees any read past its end.
  const std::vector<uint8_t> copy(data, data + size);
  const uint8_t* frag = copy.data();

  FragmentReader r;
  if (r.open(frag, size) != FragStatus::Ok) return 0;
  const FragHeader& h = r.header();
  FUZZ_CHECK(h.total_bytes <= size && h.worker < h.n_workers);
  int64_t work = 0;
  for (uint32_t i = 0; i < r.layer_count(); ++i) {
    FragLayer L;
    FUZZ_CHECK(r.layer(i, &L) == FragStatus::Ok);
    const LayerDesc& d = L.desc;
    FUZZ_CHECK(L.run_begin >= 0 && L.run_begin <= L.run_end && L.run_end <= d.out.size());
    if (!L.active()) continue;
    View views[kMaxInputs];
    std::vector<std::vector<int8_t>> boxes(size_t(d.n_inputs));
    for (int k = 0; k < d.n_inputs; ++k) {
      const Dims& X = d.in[k];
      const Box& b = L.box[k];
      FUZZ_CHECK(b.c0 >= 0 && b.c1 <= X.c && b.h0 >= 0 && b.h1 <= X.h);
      int64_t prev_end = -1, sum = 0;
      for (uint32_t j = 0; j < L.n_runs[k]; ++j) {
        const InputRun run = L.run(k, j);
        FUZZ_CHECK(run.count > 0 && int64_t(run.offset) + run.count <= X.size());
        FUZZ_CHECK(int64_t(run.offset) > prev_end);
        // First and last element inside the box.
        const int64_t hw = int64_t(X.h) * X.w;
        for (int64_t e : {int64_t(run.offset), int64_t(run.offset) + run.count - 1}) {
          const int64_t c = e / hw, y = (e % hw) / X.w;
          FUZZ_CHECK(c >= b.c0 && c < b.c1 && y >= b.h0 && y < b.h1);
        }
        prev_end = int64_t(run.offset) + run.count;
        sum += run.count;
      }
      FUZZ_CHECK(sum == int64_t(L.expected[k]));
      boxes[size_t(k)].assign(size_t(b.elems(X.w)), int8_t(k + 1));
      views[k] = View{boxes[size_t(k)].empty() ? nullptr : boxes[size_t(k)].data(), b.c0, b.c1 - b.c0, b.h0, b.h1 - b.h0};
    }
    // Cost of the run: outputs times the widest fan-in a kernel may read.
    int64_t fan = 1;
    if (d.op == QOp::Conv) fan = int64_t(d.in[0].c / d.groups) * d.kh * d.kw;
    if (d.op == QOp::Gemm) fan = d.in[0].size();
    if (d.op == QOp::AvgPool || d.op == QOp::MaxPool) fan = int64_t(d.kh) * d.kw;
    if (d.op == QOp::GlobalAvgPool) fan = int64_t(d.in[0].h) * d.in[0].w;
    work += int64_t(L.out_elems) * fan;
    if (work > kMaxWork) continue;
    // Every region, segment by segment, as the board computes it; sends are
    // spans of the output buffer.
    std::vector<int8_t> out(L.out_elems);
    size_t pos = 0;
    for (uint32_t g = 0; g < L.n_regions; ++g)
      L.region(g).segments(d.out, [&](int32_t b, int32_t e) {
        FUZZ_CHECK(b >= L.run_begin && e <= L.run_end && pos + size_t(e - b) <= out.size());
        FUZZ_CHECK(compute_range(d, views, b, e, out.data() + pos, L.oc_count) == KernelStatus::Ok);
        pos += size_t(e - b);
        return true;
      });
    FUZZ_CHECK(pos == L.out_elems);
    for (uint32_t s = 0; s < L.n_sends; ++s) {
      const Send sd = L.send(s);
      FUZZ_CHECK(uint64_t(sd.pos) + sd.count <= L.out_elems && L.position(int32_t(sd.offset)) == int64_t(sd.pos));
    }
  }
  return 0;
}
