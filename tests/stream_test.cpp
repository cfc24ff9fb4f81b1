// Streamed chains (core/stream.h, plan/streams.h, docs/execution.md
// "Streamed chains"): the row walk against the reference on every chain of
// real plans, whatever the step, and a line buffer one row short refused;
// the plans (one board at 224 within 512 KiB, three within 256 KiB); broken
// streamed entries refused by the fragment reader; and real runs on host
// boards, bit-exact layer by layer, with every board's measured RAM the
// planned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/digest.h"
#include "core/fragment.h"
#include "core/stream.h"
#include "model/qgraph.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "plan/streams.h"
#include "plan/testbed.h"
#include "support/boards.h"
#include "support/fragment_edit.h"
#include "support/run_json.h"
#include "support/shell.h"
#include "support/test_models.h"

namespace {

namespace fs = std::filesystem;
using namespace ts;
using ts::testing::expect_exact;
using ts::testing::run_json;
using ts::testing::tinysplit;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

QGraph test_model() { return ts::testing::quantised_test_model("mobilenet_v2"); }

// Worker w's chain [a, b] of plan p walked on the reference tensors with
// line buffers of the rows chain_rows gives at `step` (`short_by` fewer for
// the first streamed layer): the last layer's rows and every streamed
// layer's row-order digest against the reference. Returns the walk's status.
core::KernelStatus walk_chain(const QGraph& q, const plan::Plan& p, int w, int a, int b, int32_t step,
                              const std::vector<std::vector<int8_t>>& tensors, int short_by = 0) {
  const int n = b - a + 1;
  core::ChainLayer L[core::kMaxChain];
  for (int i = 0; i < n; ++i) {
    L[i].desc = q.desc(a + i);
    L[i].node = uint32_t(a + i);
    const plan::LayerShare& ls = p.workers[size_t(w)].layers[size_t(a + i)];
    EXPECT_TRUE(plan::streams::whole_rows(L[i].desc.out, ls, &L[i].c0, &L[i].c1, &L[i].y0, &L[i].y1));
    L[i].oc_count = ls.oc_count;
    L[i].desc.oc_base = ls.oc_base;
  }
  int32_t rows[core::kMaxChain];
  EXPECT_TRUE(core::chain_rows(L, n, step, rows));
  auto bufs = std::vector<std::vector<int8_t>>(size_t(n));
  for (int i = 0; i < n; ++i) {
    const int32_t w_out = L[i].desc.out.w;
    L[i].cap = i + 1 < n ? rows[i] - (i == 0 ? short_by : 0) : L[i].y1 - L[i].y0;
    L[i].cpitch = int64_t(L[i].cap) * w_out;
    bufs[size_t(i)].assign(size_t((L[i].c1 - L[i].c0) * L[i].cpitch), int8_t(0x5A));
    L[i].buf = bufs[size_t(i)].data();
  }
  core::View views[core::kMaxInputs];
  for (int k = 0; k < L[0].desc.n_inputs; ++k) {
    const auto& in = tensors[size_t(q.nodes[size_t(a)].inputs[size_t(k)])];
    views[k] = core::View{in.data(), 0, L[0].desc.in[k].c, 0, L[0].desc.in[k].h};
  }
  core::Digest64 dg[core::kMaxChain];
  uint32_t us[core::kMaxChain] = {};
  const core::KernelStatus st = core::run_chain(L, n, views, step, dg, us, core::ChainHooks{});
  if (st != core::KernelStatus::Ok) return st;
  for (int i = 0; i < n; ++i) {
    const core::Dims d = L[i].desc.out;
    const auto& ref = tensors[size_t(q.nodes[size_t(a + i)].output)];
    if (i + 1 < n) {
      core::Digest64 want;
      for (int32_t y = L[i].y0; y < L[i].y1; ++y)
        for (int32_t c = L[i].c0; c < L[i].c1; ++c) want.update(ref.data() + (int64_t(c) * d.h + y) * d.w, size_t(d.w));
      EXPECT_EQ(dg[i].finish(), want.finish()) << "layer " << a + i;
      EXPECT_EQ(dg[i].bytes(), uint64_t(L[i].c1 - L[i].c0) * uint64_t(L[i].y1 - L[i].y0) * uint64_t(d.w));
      continue;
    }
    int bad = 0;
    for (int32_t c = L[i].c0; c < L[i].c1; ++c)
      for (int32_t y = L[i].y0; y < L[i].y1; ++y)
        for (int32_t x = 0; x < d.w; ++x)
          bad += bufs[size_t(i)][size_t((c - L[i].c0) * L[i].cpitch + (y - L[i].y0) * d.w + x)] !=
                 ref[size_t((int64_t(c) * d.h + y) * d.w + x)];
    EXPECT_EQ(bad, 0) << "layer " << a + i;
  }
  return st;
}

// Every chain of streamed plans of a real model for 1 to 6 boards, walked
// at steps 1, 2, 3 and the plan's own: the last layer's values and the
// streamed layers' digests are the reference's. A first line buffer one row
// short of what chain_rows says is refused, not overrun.
TEST(StreamWalk, ChainsComputedRowByRowEqualTheReference) {
  const QGraph q = test_model();
  const auto x = ts::testing::random_int8_input(q, 5);
  const auto tensors = run_int8_all(q, x);
  int walked = 0, short_refused = 0;
  for (int n = 1; n <= 6; ++n) {
    plan::PlanOptions po;
    po.strategy = "spatial";
    po.route = plan::Route::Direct;
    po.stream = plan::Streaming::On;
    po.check_budgets = false;
    const plan::Plan p = plan::make_plan(q, plan::default_testbed(n), po);
    for (int w = 0; w < n; ++w) {
      const auto& layers = p.workers[size_t(w)].layers;
      for (int a = 0; a < int(layers.size()); ++a) {
        if (layers[size_t(a)].stream_step <= 0) continue;
        int b = a;
        while (layers[size_t(b)].stream_step > 0) ++b;
        SCOPED_TRACE(std::to_string(n) + " boards, board " + std::to_string(w) + ", chain " + q.nodes[size_t(a)].name +
                     " .. " + q.nodes[size_t(b)].name);
        for (int32_t step : {1, 2, 3, int(layers[size_t(a)].stream_step)})
          EXPECT_EQ(walk_chain(q, p, w, a, b, step, tensors), core::KernelStatus::Ok) << "step " << step;
        // One row short: a line buffer of a row is then none (BadLayer).
        const core::KernelStatus st = walk_chain(q, p, w, a, b, 1, tensors, 1);
        EXPECT_TRUE(st == core::KernelStatus::ViewTooSmall || st == core::KernelStatus::BadLayer) << int(st);
        short_refused += st == core::KernelStatus::ViewTooSmall;
        ++walked;
        a = b;
      }
    }
  }
  EXPECT_GT(walked, 20);
  EXPECT_GT(short_refused, walked / 2);
}

// A chain that cannot stream is refused by the dry run: a step of 0, a
// second layer that reads two operands.
TEST(StreamWalk, ChainsThatCannotStreamAreRefused) {
  core::ChainLayer L[2];
  for (core::ChainLayer& c : L) {
    c.desc.op = core::QOp::Conv;
    c.desc.n_inputs = 1;
    c.desc.in[0] = core::Dims{4, 8, 8};
    c.desc.out = core::Dims{4, 8, 8};
    c.c1 = 4;
    c.y1 = 8;
  }
  int32_t rows[2];
  EXPECT_TRUE(core::chain_rows(L, 2, 1, rows));
  EXPECT_EQ(rows[0], 1);  // a 1x1 reader: one row at a time
  EXPECT_EQ(rows[1], 8);
  EXPECT_FALSE(core::chain_rows(L, 2, 0, rows));
  EXPECT_FALSE(core::chain_rows(L, 1, 1, rows));
  L[1].desc.n_inputs = 2;
  EXPECT_FALSE(core::chain_rows(L, 2, 1, rows));
}

// One board at 224 holds MobileNetV2 within 512 KiB only with streamed
// chains; --stream off is refused with one line naming the layer.
TEST(StreamPlan, OneBoardAt224FitsHalfAMebibyte) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  const auto r = tinysplit("plan --size 224 --workers 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j.at("workers")[0].at("peak_ram_bytes").get<int64_t>(), 524288);
  int streamed = 0;
  for (const auto& l : j.at("per_layer")) streamed += l.at("stream_step").get<int>() > 0;
  EXPECT_GT(streamed, 5);
  const auto off = tinysplit("plan --size 224 --workers 1 --stream off");
  EXPECT_NE(off.code, 0);
  EXPECT_EQ(std::count(off.err.begin(), off.err.end(), '\n'), 1) << off.err;
  EXPECT_NE(off.err.find("block_1_depthwise"), std::string::npos) << off.err;
  const auto bad = tinysplit("plan --size 224 --workers 1 --stream sometimes");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--stream: expected off, auto or on, got 'sometimes'"), std::string::npos) << bad.err;
}

// A streamed plan's fragments read; a streamed entry with its step zeroed,
// or its output moved off its reader's window, is refused naming the field.
TEST(StreamFragment, BrokenStreamedEntriesAreRefused) {
  const QGraph q = test_model();
  plan::PlanOptions po;
  po.strategy = "spatial";
  po.route = plan::Route::Direct;
  po.stream = plan::Streaming::On;
  const plan::Plan p = plan::make_plan(q, plan::default_testbed(3), po);
  const std::vector<uint8_t> good = plan::write_fragment(q, p, 1);
  core::FragmentReader rd;
  ASSERT_EQ(rd.open(good.data(), good.size()), core::FragStatus::Ok);
  int first = -1;
  for (size_t n = 0; n < q.nodes.size() && first < 0; ++n)
    if (p.workers[1].layers[n].stream_step > 0) first = int(n);
  ASSERT_GE(first, 0);
  const size_t e = core::frag::kHeaderBytes + size_t(first) * core::frag::kEntryBytes;
  ASSERT_TRUE(good[e + core::frag::kFlags] & core::kEntryStreamed);
  const auto refused = [&](size_t at, uint32_t v, const char* field) {
    const std::vector<uint8_t> bad = ts::testing::with_u32(good, at, v);
    core::FragmentReader r;
    EXPECT_EQ(r.open(bad.data(), bad.size()), core::FragStatus::BadLayer) << field;
    ASSERT_NE(r.refusal().field, nullptr) << field;
    EXPECT_STREQ(r.refusal().field, field);
    EXPECT_EQ(r.refusal().layer, first);
  };
  refused(e + core::frag::kStreamStep, 0, "stream_step");
  uint32_t at = 0;
  std::memcpy(&at, good.data() + e + core::frag::kOutAt, 4);
  refused(e + core::frag::kOutAt, at + 8, "out_at");
}

// Real runs on host boards, bit-exact on every layer, each board's
// measured peak RAM the planned one: 1, 3 and 8 boards at 112 with every
// chain streamed, 3 boards at 224 within 256 KiB each (auto streams where
// the RAM binds), and after a board is killed inside a chain (the
// inference goes on from the chain's first layer).
TEST(StreamRuns, MobileNetV2BitExactWithTheRamPlanned) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  for (const char* args : {"--size 112 --workers 1 --stream on", "--size 112 --workers 3 --stream on",
                           "--size 112 --workers 8 --stream on", "--size 224 --workers 3 --ram 256K"}) {
    const auto j = run_json(args);
    expect_exact(j, args);
    for (const auto& w : j.at("per_worker")) {
      EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>()) << args;
      EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("ram_budget_bytes").get<int64_t>()) << args;
    }
  }
  const auto f = run_json("--size 224 --workers 3 --stream on --repeat 2 --inject-fault kill:1:3");
  expect_exact(f, "kill inside a chain");
  ASSERT_EQ(f.at("failovers").size(), 1u);
  EXPECT_EQ(f.at("failovers")[0].at("resumed_at_layer").get<int>(), 0);
  EXPECT_EQ(f.at("bit_exact_inferences").get<int>(), 2);
}

// A board that changes one output of a streamed layer (in its line buffer,
// before the next layer and the digest read it) is named at that layer.
TEST(StreamRuns, AFlippedStreamedOutputIsNamed) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  const auto r = tinysplit("run --json --size 224 --ram 256K --inject-fault flip:1:2");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("board 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at layer 2 'expanded_conv_project'"), std::string::npos) << r.err;
  ASSERT_FALSE(r.out.empty());
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("stream").at("layers").get<int>(), 0);
  EXPECT_EQ(j.at("first_mismatch").at("layer").get<int>(), 2);
}

TEST(StreamRuns, OnnxTestModelsAndAHeterogeneousTestbedAreBitExact) {
  ts::testing::expect_exact_on_test_models_and_unequal_boards("--stream on", "stream_test");
}

}  // namespace
