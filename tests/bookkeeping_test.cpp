// The board's per-inference bookkeeping, precomputed or indexed (worker.h
// LayerIndex, fragment.h RunFinder / SpanFinder, FragmentReader::layer
// without re-validation, partial_sums' dot-product form), against the
// straightforward computation it replaces, on the fragments the planner
// writes for MobileNetV2 (tests/data/onnx) with every split strategy and
// both routes. Runtime: about 3 s for the program (quantising both models and
// planning 11 times); CTest runs each test in its own process, about 20 s in
// all (about 130 s under the sanitizers).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/fragment.h"
#include "core/partial.h"
#include "core/worker.h"
#include "model/pipeline.h"
#include "model/qgraph.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"

namespace {

using namespace ts;
using core::FragLayer;
using core::FragStatus;

const std::string kModel = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v2.onnx";
// The model `tinysplit run` uses (fetched by scripts/setup.sh), at 112.
const std::string kRunModel = std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json";

struct Frag {
  std::string what;
  std::vector<uint32_t> words;  // 4-byte aligned, as a board's flash
  size_t size = 0;
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words.data()); }
};

// Fragments of every board for every strategy and route run accepts.
const std::vector<Frag>& fragments() {
  static std::vector<Frag> all = [] {
    std::vector<Frag> out;
    struct Case {
      const char* model;
      int size;
      uint32_t ram;
      const char* strategy;
      plan::Route route;
    };
    // `run`'s defaults (auto, direct, 3 boards of 512 KiB: boxes of a few
    // columns, many local runs), the paper's mode, and every strategy on
    // boards with room for each.
    const Case cases[] = {{kRunModel.c_str(), 112, 512 << 10, "auto", plan::Route::Direct},
                          {kRunModel.c_str(), 112, 512 << 10, "neuron", plan::Route::Relay},
                          {kRunModel.c_str(), 112, 4 << 20, "spatial", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "neuron", plan::Route::Relay},
                          {kModel.c_str(), 0, 4 << 20, "neuron", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "spatial", plan::Route::Relay},
                          {kModel.c_str(), 0, 4 << 20, "spatial", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "channel", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "whole", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "reduce-all", plan::Route::Direct},
                          {kModel.c_str(), 0, 4 << 20, "auto", plan::Route::Direct}};
    std::string loaded;
    QGraph q;
    for (const Case& c : cases) {
      if (loaded != c.model) {
        q = quantized_model(c.model, c.size, QuantizeOptions{});
        loaded = c.model;
      }
      const plan::Testbed tb = plan::default_testbed(3, "local", c.ram, 8 << 20);
      plan::PlanOptions opt;
      opt.strategy = c.strategy;
      opt.route = c.route;
      opt.routing = false;  // as `run` plans
      opt.check_budgets = false;
      const plan::Plan p = plan::make_plan(q, tb, opt);
      for (int w = 0; w < p.n_workers(); ++w) {
        const std::vector<uint8_t> bytes = plan::write_fragment(q, p, w);
        Frag f;
        f.what = std::string(c.model == kModel ? "onnx " : "tfjs ") + c.strategy + "-" + plan::route_name(c.route) +
                 " board " + std::to_string(w);
        f.words.assign((bytes.size() + 3) / 4, 0);
        std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(f.words.data()));
        f.size = bytes.size();
        out.push_back(std::move(f));
      }
    }
    return out;
  }();
  return all;
}

class Bookkeeping : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kModel)) << kModel;
    ASSERT_TRUE(std::filesystem::exists(kRunModel)) << kRunModel << " is absent (run scripts/fetch_model.sh first)";
  }
  void follow_as_the_walk(const FragLayer& e, const core::SpanFinder& spans, uint32_t off, uint32_t n);
  int64_t follow_found_ = 0, follow_refused_ = 0;
};

// The per-frame decode (no checks again) gives every field the checked
// decode gives.
TEST_F(Bookkeeping, LayerDecodesAsTheCheckedDecode) {
  for (const Frag& f : fragments()) {
    SCOPED_TRACE(f.what);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(f.data(), f.size), FragStatus::Ok);
    for (uint32_t i = 0; i < rd.layer_count(); ++i) {
      FragLayer a, b;
      ASSERT_EQ(rd.layer(i, &a), FragStatus::Ok);
      ASSERT_EQ(rd.layer_checked(i, &b), FragStatus::Ok);
      const core::LayerDesc &x = a.desc, &y = b.desc;
      EXPECT_EQ(a.node, b.node);
      EXPECT_EQ(a.flags, b.flags);
      EXPECT_EQ(a.run_begin, b.run_begin);
      EXPECT_EQ(a.run_end, b.run_end);
      EXPECT_EQ(a.oc_count, b.oc_count);
      EXPECT_EQ(a.out_elems, b.out_elems);
      EXPECT_EQ(a.out_at, b.out_at);
      EXPECT_EQ(a.out_until, b.out_until);
      EXPECT_EQ(a.out_pitch, b.out_pitch);
      EXPECT_EQ(a.ram_bytes, b.ram_bytes);
      EXPECT_EQ(a.regions, b.regions);
      EXPECT_EQ(a.n_regions, b.n_regions);
      EXPECT_EQ(a.sends, b.sends);
      EXPECT_EQ(a.n_sends, b.n_sends);
      EXPECT_EQ(a.ps_ci0, b.ps_ci0);
      EXPECT_EQ(a.ps_ci1, b.ps_ci1);
      EXPECT_EQ(a.ps_at, b.ps_at);
      EXPECT_EQ(a.ps_acc_at, b.ps_acc_at);
      EXPECT_EQ(a.ps_expected, b.ps_expected);
      EXPECT_EQ(a.ps_sends, b.ps_sends);
      EXPECT_EQ(a.n_ps_sends, b.n_ps_sends);
      EXPECT_EQ(x.op, y.op);
      EXPECT_EQ(x.n_inputs, y.n_inputs);
      EXPECT_EQ(x.weights, y.weights);
      EXPECT_EQ(x.bias, y.bias);
      EXPECT_EQ(x.mult, y.mult);
      EXPECT_EQ(x.shift, y.shift);
      EXPECT_EQ(x.lut, y.lut);
      EXPECT_EQ(x.oc_base, y.oc_base);
      for (int k = 0; k < core::kMaxInputs; ++k) {
        EXPECT_EQ(a.runs[k], b.runs[k]) << "operand " << k;
        EXPECT_EQ(a.n_runs[k], b.n_runs[k]);
        EXPECT_EQ(a.local[k], b.local[k]) << "operand " << k;
        EXPECT_EQ(a.n_local[k], b.n_local[k]);
        EXPECT_EQ(a.local_layer[k], b.local_layer[k]);
        EXPECT_EQ(a.expected[k], b.expected[k]);
        EXPECT_EQ(a.box_at[k], b.box_at[k]);
        EXPECT_EQ(a.avail_from[k], b.avail_from[k]);
      }
    }
  }
}

// LayerIndex: each layer's share MACs (a walk over its regions' segments),
// the top of its windows and whether it has a share.
TEST_F(Bookkeeping, LayerIndexEqualsThePerLayerComputation) {
  static core::LayerIndex index;  // a board's table: too big for the stack of a test
  int active = 0;
  for (const Frag& f : fragments()) {
    SCOPED_TRACE(f.what);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(f.data(), f.size), FragStatus::Ok);
    index.build(rd);
    ASSERT_LE(rd.layer_count(), core::kMaxIndexedLayers);
    for (uint32_t i = 0; i < rd.layer_count(); ++i) {
      FragLayer e;
      ASSERT_EQ(rd.layer_checked(i, &e), FragStatus::Ok);
      ASSERT_TRUE(index.indexed(i));
      EXPECT_EQ(index.active(i), e.active()) << "layer " << i;
      // The straightforward count: range_macs over every output run.
      uint64_t macs = 0;
      for (uint32_t r = 0; r < e.n_regions; ++r)
        e.region(r).segments(e.desc.out, [&](int32_t b, int32_t end) {
          for (int32_t o = b; o < end; ++o) macs += core::range_macs(e.desc, o, o + 1);
          return true;
        });
      EXPECT_EQ(index.macs(i), macs) << "layer " << i;
      // The windows in use at a layer: those taking frames from it on.
      for (uint32_t at : {0u, i / 2, i}) {
        uint32_t top = 0;
        for (int k = 0; k < e.desc.n_inputs; ++k) {
          const int64_t n = e.box[k].elems(e.desc.in[k].w);
          if (n > 0 && e.avail_from[k] <= at) top = std::max(top, e.box_at[k] + core::arena_block(uint32_t(n)));
        }
        EXPECT_EQ(core::windows_top(e, at), top) << "layer " << i << " at " << at;
      }
      active += e.active();
    }
    EXPECT_FALSE(index.indexed(rd.layer_count()));
  }
  EXPECT_GT(active, 100);
}

// RunFinder against a scan of every run: spans inside runs, across their
// ends, before and after them, in increasing order (as frames bring them),
// shuffled, and every second or third run (the runs one peer fills, its
// frame's segments skipping the others) then the ones skipped.
TEST_F(Bookkeeping, RunFinderAnswersAsAScanOfTheRuns) {
  std::mt19937 rng(11);
  int64_t queries = 0, inside = 0;
  for (const Frag& f : fragments()) {
    SCOPED_TRACE(f.what);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(f.data(), f.size), FragStatus::Ok);
    for (uint32_t i = 0; i < rd.layer_count(); ++i) {
      FragLayer e;
      ASSERT_EQ(rd.layer(i, &e), FragStatus::Ok);
      for (int k = 0; k < e.desc.n_inputs; ++k) {
        if (e.n_runs[k] == 0) continue;
        auto scan = [&](uint32_t e0, uint32_t n) {
          for (uint32_t j = 0; j < e.n_runs[k]; ++j) {
            const core::InputRun r = e.run(k, j);
            if (e0 >= r.offset && uint64_t(e0) + n <= uint64_t(r.offset) + r.count) return true;
          }
          return false;
        };
        std::vector<std::pair<uint32_t, uint32_t>> q;
        for (uint32_t j = 0; j < e.n_runs[k]; ++j) {
          const core::InputRun r = e.run(k, j);
          q.push_back({r.offset, r.count});                      // the whole run
          q.push_back({r.offset + r.count / 2, (r.count + 1) / 2});  // its tail
          q.push_back({r.offset, r.count + 1});                  // one past its end
          if (r.offset > 0) q.push_back({r.offset - 1, 1});      // just before it
          q.push_back({r.offset + r.count, 1});                  // just after it
        }
        std::vector<std::pair<uint32_t, uint32_t>> strided;
        for (uint32_t s = 2; s <= 3; ++s)
          for (uint32_t first = 0; first < s; ++first)
            for (uint32_t j = first; j < e.n_runs[k]; j += s) {
              const core::InputRun r = e.run(k, j);
              strided.push_back({r.offset + r.count / 2, (r.count + 1) / 2});
              strided.push_back({r.offset + r.count, 1});
            }
        for (int order = 0; order < 3; ++order) {
          if (order == 1) std::shuffle(q.begin(), q.end(), rng);
          if (order == 2) q = strided;
          core::RunFinder finder(e.runs[k], e.n_runs[k]);
          for (const auto& [e0, n] : q) {
            const bool want = scan(e0, n);
            ASSERT_EQ(finder.covers(e0, n), want) << "layer " << i << " operand " << k << " [" << e0 << ", +" << n << ")";
            ++queries;
            inside += want;
          }
        }
      }
    }
  }
  EXPECT_GT(queries, 10000);
  EXPECT_GT(inside, 1000);
  EXPECT_GT(queries - inside, 1000);
}

// SpanFinder::follow on a layer whose boxes stop short of the last channel
// and of the plane's edges (the planner's fragments have few such): every
// span one channel on from a span found is answered as the region walk
// answers it, or refused; and refused whenever the walk refuses it.
TEST(SpanFinderFollow, StopsAtTheBoxesChannelsRowsAndColumns) {
  FragLayer e;
  e.desc.out = core::Dims{7, 5, 4};
  // Channels [0, 3) rows [1, 4) whole width; channels [4, 6) rows [0, 2)
  // columns [1, 3); a run of flat elements in channel 6.
  const int32_t v[3][7] = {{1, 0, 3, 1, 4, 0, 4}, {1, 4, 6, 0, 2, 1, 3}, {0, 6 * 20 + 3, 6 * 20 + 17, 0, 0, 0, 0}};
  std::vector<uint8_t> regions(3 * core::frag::kRegionBytes);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 7; ++k)
      for (int b = 0; b < 4; ++b) regions[size_t(r) * core::frag::kRegionBytes + 4u * k + b] = uint8_t(uint32_t(v[r][k]) >> (8 * b));
  e.regions = regions.data();
  e.n_regions = 3;
  const uint32_t hw = 20, total = 7 * hw;
  int64_t followed = 0, refused = 0;
  for (uint32_t off = 0; off < total; ++off)
    for (uint32_t n = 1; n <= 6 && off + n <= total; ++n) {
      core::SpanFinder spans(e);
      uint32_t at = 0;
      if (!spans.find(off, n, &at)) continue;
      uint32_t got = 0, want = 0;
      int32_t c = 0, y = 0, x = 0;
      const bool inside = off + hw + n <= total && e.span(off + hw, n, &want);
      if (spans.follow(off + hw, n, &got, &c, &y, &x)) {
        ASSERT_TRUE(inside) << "[" << off + hw << ", +" << n << ") is not the layer's";
        ASSERT_EQ(got, want) << "[" << off + hw << ", +" << n << ")";
        ASSERT_EQ(uint32_t(c) * hw + uint32_t(y) * 4u + uint32_t(x), off + hw);
        ++followed;
      } else {
        refused += !inside;
      }
    }
  EXPECT_GT(followed, 20);
  EXPECT_GT(refused, 20);
}

// SpanFinder::follow for the span one channel on from [off, +n), which
// `spans` just found: on a copy (the board's next query is a run of its
// own), it answers as the region walk does, or false (then the board asks
// find_at). Counts its answers in follow_found_ and, for spans the layer
// does not compute, follow_refused_.
void Bookkeeping::follow_as_the_walk(const FragLayer& e, const core::SpanFinder& spans, uint32_t off, uint32_t n) {
  const uint32_t hw = uint32_t(e.desc.out.h) * uint32_t(e.desc.out.w);
  core::SpanFinder probe = spans;
  uint32_t got = 0, want = 0;
  int32_t c = 0, y = 0, x = 0;
  const uint64_t next = uint64_t(off) + hw;
  const bool inside = next < uint64_t(e.desc.out.c) * hw && e.span(uint32_t(next), n, &want);
  if (probe.follow(uint32_t(next), n, &got, &c, &y, &x)) {
    ASSERT_TRUE(inside) << "follow found [" << next << ", +" << n << ") outside the layer's outputs";
    ASSERT_EQ(got, want) << "follow of [" << off << ", +" << n << ")";
    ASSERT_EQ(int64_t(c) * hw + int64_t(y) * e.desc.out.w + x, int64_t(next));
    ++follow_found_;
  } else if (!inside) {
    ++follow_refused_;
  }
}

// SpanFinder against FragLayer::span (the walk over the regions): every
// local run of every layer as the board copies them (in order), then every
// segment's elements and spans around them, in flat order and shuffled;
// after each, follow (above). The local runs are asked as the board asks
// them: follow first, then find.
TEST_F(Bookkeeping, SpanFinderAnswersAsTheRegionWalk) {
  std::mt19937 rng(12);
  int64_t queries = 0, found = 0, local = 0, multi = 0, followed = 0;
  for (const Frag& f : fragments()) {
    SCOPED_TRACE(f.what);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(f.data(), f.size), FragStatus::Ok);
    for (uint32_t i = 0; i < rd.layer_count(); ++i) {
      FragLayer e;
      ASSERT_EQ(rd.layer(i, &e), FragStatus::Ok);
      if (!e.active()) continue;
      multi += e.n_regions > 1;
      // Local runs read from this layer's outputs by later layers.
      for (uint32_t j = i + 1; j < rd.layer_count(); ++j) {
        FragLayer c;
        ASSERT_EQ(rd.layer(j, &c), FragStatus::Ok);
        for (int k = 0; k < c.desc.n_inputs; ++k) {
          if (c.n_local[k] == 0 || c.local_layer[k] != i) continue;
          core::SpanFinder spans(e);
          for (uint32_t r = 0; r < c.n_local[k]; ++r) {
            const core::InputRun lr = c.local_run(k, r);
            uint32_t want = 0, got = ~0u;
            int32_t ch = 0, y = 0, x = 0;
            ASSERT_TRUE(e.span(lr.offset, lr.count, &want));
            if (spans.follow(lr.offset, lr.count, &got, &ch, &y, &x)) {
              ++followed;
            } else {
              ASSERT_TRUE(spans.find(lr.offset, lr.count, &got)) << "layer " << i << " local run " << r;
            }
            ASSERT_EQ(got, want) << "layer " << i << " local run " << r;
            ++local;
          }
        }
      }
      std::vector<std::pair<uint32_t, uint32_t>> q;
      const int64_t total = int64_t(e.desc.out.c) * e.desc.out.h * e.desc.out.w;
      for (uint32_t r = 0; r < e.n_regions; ++r)
        e.region(r).segments(e.desc.out, [&](int32_t b, int32_t end) {
          const uint32_t len = uint32_t(end - b);
          q.push_back({uint32_t(b), len});
          q.push_back({uint32_t(b), len + 1});
          q.push_back({uint32_t(b) + len / 2, len - len / 2});
          q.push_back({uint32_t(end - 1), 1});
          if (b > 0) q.push_back({uint32_t(b - 1), 1});
          if (end < total) q.push_back({uint32_t(end), 1});
          return q.size() < 20000;
        });
      for (int order = 0; order < 2; ++order) {
        if (order == 1) std::shuffle(q.begin(), q.end(), rng);
        core::SpanFinder spans(e);
        for (const auto& [off, n] : q) {
          uint32_t want = 0, got = 0;
          const bool w = e.span(off, n, &want);
          ASSERT_EQ(spans.find(off, n, &got), w) << "layer " << i << " [" << off << ", +" << n << ")";
          if (w) {
            ASSERT_EQ(got, want) << "layer " << i << " [" << off << ", +" << n << ")";
            // And the same through find_at, given the coordinates.
            const uint32_t hw = uint32_t(e.desc.out.h * e.desc.out.w), c = off / hw;
            const uint32_t y = (off % hw) / uint32_t(e.desc.out.w), x = off % uint32_t(e.desc.out.w);
            uint32_t at = 0;
            ASSERT_TRUE(spans.find_at(off, n, int32_t(c), int32_t(y), int32_t(x), &at));
            ASSERT_EQ(at, want);
            follow_as_the_walk(e, spans, off, n);
          }
          ++queries;
          found += w;
        }
      }
    }
  }
  EXPECT_GT(local, 10000);
  EXPECT_GT(followed, local / 2) << "local runs found one channel on from an earlier one";
  EXPECT_GT(follow_found_, 10000) << "spans found one channel on from the last";
  EXPECT_GT(follow_refused_, 1000) << "spans one channel on that are not the layer's";
  EXPECT_GT(multi, 20) << "layers of several regions";
  EXPECT_GT(found, 10000);
  EXPECT_GT(queries - found, 10000);
}

// partial_sums of a Gemm (one position per output channel) is computed as a
// dot product less zp times the weights' sum: equal, wrapping included, to
// the per-term sum the reference computes.
TEST(BookkeepingPartial, GemmSumsEqualThePerTermSums) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    core::LayerDesc L;
    L.op = core::QOp::Gemm;
    L.n_inputs = 1;
    const int32_t ci = 1 + int32_t(rng() % 300);
    L.in[0] = core::Dims{ci, 1, 1};
    L.out = core::Dims{1 + int32_t(rng() % 40), 1, 1};
    L.in_zp[0] = int32_t(rng() % 256) - 128;
    const int32_t ci0 = int32_t(rng() % uint32_t(ci)), ci1 = ci0 + 1 + int32_t(rng() % uint32_t(ci - ci0));
    const int32_t K = ci1 - ci0;
    std::vector<int8_t> x(static_cast<size_t>(K) + 0), w(static_cast<size_t>(K) * size_t(L.out.c));
    for (auto& v : x) v = int8_t(rng());
    for (auto& v : w) v = trial % 3 == 0 ? int8_t(rng() % 3) - 1 : int8_t(rng());  // some with many zeros
    if (trial == 1)
      for (auto& v : x) v = -128;  // extreme values
    std::vector<int32_t> sums(size_t(L.out.c));
    ASSERT_TRUE(core::partial_sums(L, x.data(), core::partial_window(L, ci0, ci1), ci0, ci1, w.data(), sums.data()));
    for (int32_t o = 0; o < L.out.c; ++o) {
      uint32_t want = 0;
      for (int32_t k = 0; k < K; ++k) want += uint32_t((int32_t(x[size_t(k)]) - L.in_zp[0]) * w[size_t(o) * size_t(K) + size_t(k)]);
      EXPECT_EQ(uint32_t(sums[size_t(o)]), want) << "trial " << trial << " output " << o;
    }
  }
}

}  // namespace
