// Views (plan/arena.cpp; core/fragment.h FragLayer::view): input windows
// that hold no bytes of their own but lie in a later layer's window, where
// the data already is: an elementwise layer computed over its operand, and
// a reader earlier than an in-place output's home reading it where it sits.
// The plans' invariants on test models with squeeze-excite blocks and
// top-down Adds; the board's refusals of broken views; the elementwise
// kernels of every variant computed over their operand; runs on host boards
// bit-exact, after a failover inside a view's span too.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/fragment.h"
#include "core/kernel_table.h"
#include "core/layer.h"
#include "core/op.h"
#include "model/qgraph.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "plan/testbed.h"
#include "support/fragment_edit.h"
#include "support/run_json.h"
#include "support/test_models.h"

namespace {

using namespace ts;
using ts::testing::expect_exact;
using ts::testing::run_json;

plan::Plan direct_plan(const QGraph& q, int boards, const std::string& strategy) {
  plan::PlanOptions po;
  po.strategy = strategy;
  po.route = plan::Route::Direct;
  po.route_fallback = false;
  po.check_budgets = false;
  return plan::make_plan(q, plan::default_testbed(boards), po);
}

bool over_operand(const QGraph& q, int node, int k) {
  const core::LayerDesc d = q.desc(node);
  return core::op_def(d.op)->access(d, k).kind == core::Access::kSame;
}

struct Seen {
  int views = 0, early = 0, over = 0;
};

// Every view of p: its host a later active layer's window that is not a
// view, with the same box and offset, in use from no later; an earlier
// reader's data made by the layer it names, whose home is later; otherwise
// the layer computes over that operand into its host. Every fragment opens
// (the board's own checks, core/fragment.cpp). Counts what it saw.
void expect_sound_views(const QGraph& q, const plan::Plan& p, const std::string& what, Seen* seen) {
  for (size_t w = 0; w < p.workers.size(); ++w) {
    const plan::WorkerPlan& wp = p.workers[w];
    for (const plan::LayerShare& ls : wp.layers)
      for (size_t k = 0; k < ls.inputs.size(); ++k) {
        const plan::InputNeed& in = ls.inputs[k];
        if (in.view_of < 0) {
          EXPECT_LT(in.view_from, 0) << what;
          continue;
        }
        const std::string at = what + " worker " + std::to_string(w) + " layer " + q.nodes[size_t(ls.node)].name;
        ASSERT_GT(in.view_of, ls.node) << at;
        ASSERT_LT(size_t(in.view_of), wp.layers.size()) << at;
        const plan::LayerShare& hl = wp.layers[size_t(in.view_of)];
        ASSERT_TRUE(hl.active()) << at;
        ASSERT_LT(size_t(in.view_k), hl.inputs.size()) << at;
        const plan::InputNeed& h = hl.inputs[size_t(in.view_k)];
        EXPECT_LT(h.view_of, 0) << at;
        EXPECT_TRUE(in.box.c0 == h.box.c0 && in.box.c1 == h.box.c1 && in.box.h0 == h.box.h0 && in.box.h1 == h.box.h1)
            << at;
        EXPECT_EQ(in.box_at, h.box_at) << at;
        EXPECT_LE(h.avail_from, in.avail_from) << at;
        EXPECT_TRUE(in.local.empty()) << at;
        ++seen->views;
        if (in.view_from >= 0) {
          ++seen->early;
          EXPECT_EQ(q.tensors[size_t(in.tensor)].producer, in.view_from) << at;
          EXPECT_GT(wp.layers[size_t(in.view_from)].out_until, ls.node) << at;
          EXPECT_NE(wp.layers[size_t(in.view_from)].out_pitch, 0u) << at;
          continue;
        }
        // Over its operand: its outputs where the operand sits.
        ++seen->over;
        EXPECT_TRUE(over_operand(q, ls.node, int(k))) << at;
        ASSERT_NE(ls.out_pitch, 0u) << at;
        const int64_t bytes = in.box.elems(q.desc(ls.node).in[k].w);
        EXPECT_TRUE(ls.out_at >= h.box_at && ls.out_at < h.box_at + bytes) << at;
      }
    const std::vector<uint8_t> f = plan::write_fragment(q, p, int(w));
    core::FragmentReader rd;
    EXPECT_EQ(rd.open(f.data(), f.size()), core::FragStatus::Ok)
        << what << " worker " << w << ": " << (rd.refusal().field ? rd.refusal().field : "") << " "
        << (rd.refusal().what ? rd.refusal().what : "");
  }
}

TEST(ViewPlan, ViewsLieInTheirHostsAndTheFragmentsRead) {
  Seen seen;
  for (const char* m : {"rsefpn", "mobilenet_v3_small", "unet_small", "resnet_small"}) {
    const QGraph q = ts::testing::quantised_test_model(m);
    for (const char* s : {"spatial", "fused", "rows", "fused-rows"})
      for (int n : {2, 3, 5}) {
        const plan::Plan p = direct_plan(q, n, s);
        const std::string what = std::string(m) + " " + s + " on " + std::to_string(n);
        expect_sound_views(q, p, what, &seen);
        const plan::ViewCount c = plan::view_count(p);
        int views = 0;
        for (const plan::WorkerPlan& wp : p.workers)
          for (const plan::LayerShare& ls : wp.layers)
            for (const plan::InputNeed& in : ls.inputs) views += in.view_of >= 0;
        EXPECT_EQ(c.windows, views) << what;
      }
  }
  // Both kinds happen on these models.
  EXPECT_GT(seen.early, 0);
  EXPECT_GT(seen.over, 0);
}

// A resumed inference never starts between a view and the layer that made
// its data: resume_start moves it back to that layer.
TEST(ViewPlan, AResumedInferenceStartsAtTheLayerAnEarlyViewReads) {
  const QGraph q = ts::testing::quantised_test_model("mobilenet_v3_small");
  const plan::Plan p = direct_plan(q, 3, "fused-rows");
  int checked = 0;
  for (const plan::WorkerPlan& wp : p.workers)
    for (const plan::LayerShare& ls : wp.layers)
      for (const plan::InputNeed& in : ls.inputs) {
        if (in.view_from < 0) continue;
        const int start = plan::resume_start(p, ls.node);
        EXPECT_LE(start, in.view_from) << q.nodes[size_t(ls.node)].name;
        EXPECT_EQ(plan::resume_start(p, start), start);
        ++checked;
      }
  EXPECT_GT(checked, 0);
  for (int n = 0; n < int(q.nodes.size()); ++n) EXPECT_LE(plan::resume_start(p, n), n);
}

// Broken views are refused by the board, naming the field: a host that is
// not a later layer, a window outside the host's, a host in use only after
// the view.
TEST(ViewFragment, BrokenViewsAreRefused) {
  const QGraph q = ts::testing::quantised_test_model("mobilenet_v3_small");
  const plan::Plan p = direct_plan(q, 3, "fused-rows");
  const int w = 1;
  const plan::WorkerPlan& wp = p.workers[size_t(w)];
  int node = -1, k = -1;
  for (const plan::LayerShare& ls : wp.layers)
    for (size_t j = 0; j < ls.inputs.size() && node < 0; ++j)
      if (ls.inputs[j].view_from >= 0) node = ls.node, k = int(j);
  ASSERT_GE(node, 0);
  const std::vector<uint8_t> good = plan::write_fragment(q, p, w);
  core::FragmentReader rd;
  ASSERT_EQ(rd.open(good.data(), good.size()), core::FragStatus::Ok);
  const plan::InputNeed& in = wp.layers[size_t(node)].inputs[size_t(k)];
  const size_t slot = core::frag::kHeaderBytes + size_t(node) * core::frag::kEntryBytes + core::frag::kSlots +
                      size_t(k) * core::frag::kSlotBytes;
  const auto refused = [&](size_t at, uint32_t v, const char* field, const char* why) {
    const std::vector<uint8_t> bad = ts::testing::with_u32(good, at, v);
    core::FragmentReader r;
    EXPECT_EQ(r.open(bad.data(), bad.size()), core::FragStatus::BadLayer) << field;
    ASSERT_NE(r.refusal().field, nullptr) << field;
    EXPECT_STREQ(r.refusal().field, field);
    ASSERT_NE(r.refusal().what, nullptr) << field;
    EXPECT_STREQ(r.refusal().what, why);
    EXPECT_EQ(r.refusal().layer, node);
  };
  refused(slot + core::frag::kLocalLayer, uint32_t(node), "local_layer", "a view's host is not a later layer");
  refused(slot + core::frag::kLocalLayer, uint32_t(q.nodes.size()), "local_layer", "a view's host is not a later layer");
  refused(slot + core::frag::kBoxAt, in.box_at + 8, "box_at", "a view outside its host's windows");
  const int host_from = wp.layers[size_t(in.view_of)].inputs[size_t(in.view_k)].avail_from;
  ASSERT_GT(host_from, 0);
  refused(slot + core::frag::kAvailFrom, uint32_t(host_from - 1), "box_at", "a view outside its host's windows");
}

// Every op that reads an operand in the output's shape element by element
// (Access::kSame) gives the same outputs computed over that operand, in
// every kernel variant this build has, whole or in two parts (a board's
// halo-first split): the layers of two test models, random inputs, the
// window wider than the share as a view's is.
TEST(ViewKernels, ElementwiseOpsOverTheirOperandEqualTheirOwnBuffer) {
  std::mt19937 rng(11);
  int cases = 0;
  for (const char* m : {"rsefpn", "mobilenet_v3_small", "activations"}) {
    const QGraph q = ts::testing::quantised_test_model(m);
    for (int n = 0; n < int(q.nodes.size()); ++n) {
      const core::LayerDesc d = q.desc(n);
      for (int k = 0; k < d.n_inputs; ++k) {
        const core::Dims& x = d.in[k];
        if (!over_operand(q, n, k) || x.c != d.out.c || x.h != d.out.h || x.w != d.out.w) continue;
        // Operands: random, whole tensors; the window of operand k: rows
        // [h0, h1) holding the share's [y0, y1).
        std::vector<std::vector<int8_t>> ops(size_t(d.n_inputs));
        core::View views[core::kMaxInputs];
        for (int j = 0; j < d.n_inputs; ++j) {
          ops[size_t(j)].resize(size_t(d.in[j].size()));
          for (auto& v : ops[size_t(j)]) v = int8_t(rng());
          views[j] = core::View{ops[size_t(j)].data(), 0, d.in[j].c, 0, d.in[j].h};
        }
        const int32_t H = d.out.h, W = d.out.w, C = d.out.c;
        const int32_t y0 = int32_t(rng() % uint32_t(H)), y1 = y0 + 1 + int32_t(rng() % uint32_t(H - y0));
        const int32_t h0 = y0 - int32_t(rng() % uint32_t(y0 + 1)), h1 = y1 + int32_t(rng() % uint32_t(H - y1 + 1));
        const int64_t pitch = int64_t(h1 - h0) * W;
        std::vector<int8_t> win(size_t(C * pitch));
        for (int32_t c = 0; c < C; ++c)
          std::memcpy(win.data() + c * pitch, ops[size_t(k)].data() + (int64_t(c) * H + h0) * W, size_t(pitch));
        const core::OutBox b{0, C, y0, y1, 0, W};
        for (const char* t : {"portable", "avx2", "vnni", "dsp", "helium"}) {
          const core::KernelTable* kt = core::find_kernels(t);
          if (!kt) continue;
          core::set_kernels(kt);
          std::vector<int8_t> want(size_t(C * pitch), 0);
          ASSERT_EQ(core::compute_box_pitched(d, views, b, want.data() + (y0 - h0) * W, C, pitch), core::KernelStatus::Ok);
          for (int parts : {1, 2}) {
            std::vector<int8_t> got = win;
            core::View v2[core::kMaxInputs];
            std::copy(views, views + d.n_inputs, v2);
            v2[k] = core::View{got.data(), 0, C, h0, h1 - h0};
            int8_t* out = got.data() + (y0 - h0) * W;
            const int32_t p0 = y0 * W, p1 = y1 * W, mid = parts == 1 ? p1 : p0 + (p1 - p0) / 2;
            // The second part first (a halo-first split computes the rows
            // its sends read before the rest).
            if (mid < p1) {
              ASSERT_EQ(core::compute_positions(d, v2, 0, C, mid, p1, out + (mid - p0), C, pitch), core::KernelStatus::Ok);
            }
            ASSERT_EQ(core::compute_positions(d, v2, 0, C, p0, mid, out, C, pitch), core::KernelStatus::Ok);
            for (int32_t c = 0; c < C; ++c)
              for (int64_t i = (y0 - h0) * W; i < (y1 - h0) * W; ++i)
                ASSERT_EQ(got[size_t(c * pitch + i)], want[size_t(c * pitch + i)])
                    << m << " " << q.nodes[size_t(n)].name << " " << t << " channel " << c << " parts " << parts;
          }
          ++cases;
        }
        core::set_kernels(nullptr);
      }
    }
  }
  EXPECT_GT(cases, 10);
}

// Runs on host boards, bit-exact on every layer, with views in the plan:
// the test models with squeeze-excite blocks and top-down Adds under the
// spatial strategies, and a board killed at a layer an early view belongs
// to (the inference goes on from the layer that made the view's data).
TEST(ViewRuns, TestModelsBitExactWithViewsAndAfterAFailoverInsideOne) {
  const std::string dir = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";
  for (const char* a : {"rsefpn.onnx --workers 2 --strategy spatial", "rsefpn.onnx --workers 2 --strategy fused-rows",
                        "mobilenet_v3_small.onnx --workers 3 --strategy fused-rows",
                        "mobilenet_v3_small.onnx --workers 3 --strategy rows"}) {
    const std::string args = "--size 0 --route direct --model " + dir + a;
    const auto j = run_json(args);
    expect_exact(j, args);
    EXPECT_GT(j.at("views").at("early").get<int>(), 0) << args;
    EXPECT_GT(j.at("views").at("windows").get<int>(), j.at("views").at("early").get<int>()) << args;
  }
  // Killed at the first layer with an early view on board 1: the model
  // saved as the test quantised it, so that the run plans what this does.
  const QGraph q = ts::testing::quantised_test_model("mobilenet_v3_small");
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("ts_view_test_" + std::to_string(::getpid()) + ".tsqm")).string();
  save_qgraph(q, file);
  const plan::Plan mine = direct_plan(q, 3, "fused-rows");
  int layer = -1;
  for (const plan::LayerShare& ls : mine.workers[1].layers)
    for (const plan::InputNeed& in : ls.inputs)
      if (in.view_from >= 0 && layer < 0) layer = ls.node;
  ASSERT_GE(layer, 0);
  const std::string args = "--size 0 --route direct --workers 3 --strategy fused-rows --allocation even --model " + file;
  const std::string a = args + " --repeat 2 --inject-fault kill:1:" + std::to_string(layer);
  const auto f = run_json(a);
  expect_exact(f, a);
  ASSERT_EQ(f.at("failovers").size(), 1u) << a;
  EXPECT_LE(f.at("failovers")[0].at("resumed_at_layer").get<int>(), f.at("failovers")[0].at("kept_layers").get<int>());
  EXPECT_EQ(f.at("bit_exact_inferences").get<int>(), 2);
  std::filesystem::remove(file);
}

}  // namespace
