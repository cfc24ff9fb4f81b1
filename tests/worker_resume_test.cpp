// RESUME (wire.h) on the portable worker, frame by frame: a board told to
// resume at a layer computes nothing before it and reproduces the reference
// from it on when the coordinator sends what the earlier layers made; a
// RESUME at no layer after the first, during an inference or for another
// deployment is refused with one ERROR. (The failover runs of every strategy
// and route, local runs and outputs computed in place included, are in
// tests/failover_test.cpp.)
#include <gtest/gtest.h>

#include "support/worker_driver.h"

namespace {

using namespace ts;
using namespace ts::testing::worker_driver;
using wire::MsgType;

// The reference outputs board w sends for layer n (OUTPUT frames) are
// compared; returns the elements it sent, -1 on a wrong value.
int64_t outputs_match(const Driver& d, size_t n) {
  const auto& out = fixture().ref[fixture().q.nodes[n].output];
  int64_t got = 0;
  for (const auto& fr : d.got)
    if (fr.first.type == MsgType::Output) {
      if (std::memcmp(fr.second.data(), out.data() + fr.first.offset, fr.second.size()) != 0) return -1;
      got += int64_t(fr.second.size());
    }
  return got;
}

TEST(WorkerResume, AResumedInferenceComputesFromItsLayerOnExactly) {
  const auto& f = fixture();
  const size_t L = f.q.nodes.size();
  for (int w = 0; w < 2; ++w) {
    // Resume at the board's second active layer: the first is never run.
    std::vector<size_t> active;
    for (size_t n = 0; n < L; ++n)
      if (!f.p.workers[size_t(w)].layers[n].run.empty()) active.push_back(n);
    ASSERT_GE(active.size(), 2u);
    const size_t from = active[1];
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[size_t(w)])) << d.last_error();
    const uint32_t before = d.w.stats().layers_run;
    ASSERT_TRUE(d.raw(MsgType::Resume, uint16_t(from), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
    for (size_t i = 1; i < active.size(); ++i) {
      const size_t n = active[i];
      SCOPED_TRACE("board " + std::to_string(w) + " layer " + std::to_string(n));
      d.got.clear();
      ASSERT_TRUE(send_inputs(d, w, int(n))) << d.last_error();
      ASSERT_TRUE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
      EXPECT_EQ(outputs_match(d, n), f.p.workers[size_t(w)].layers[n].run.size());
      EXPECT_TRUE(d.saw(MsgType::Done));
    }
    EXPECT_EQ(d.w.stats().layers_run - before, active.size() - 1);
    // The next inference starts from the first layer again.
    d.got.clear();
    ASSERT_TRUE(send_inputs(d, w, int(active[0])));
    ASSERT_TRUE(d.raw(MsgType::Run, uint16_t(active[0]), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
    EXPECT_EQ(outputs_match(d, active[0]), f.p.workers[size_t(w)].layers[active[0]].run.size());
  }
}

TEST(WorkerResume, ABadResumeIsOneErrorAndTheLinkCloses) {
  const auto& f = fixture();
  const size_t L = f.q.nodes.size();
  struct Case {
    uint16_t layer;
    bool mid_inference;
    uint32_t deployment;  // 0: the fragment's
    const char* says;
  };
  const Case cases[] = {
      {0, false, 0, "no layer after the first"},
      {uint16_t(L), false, 0, "no layer after the first"},
      {1, true, 0, "during an inference"},
      {1, false, 12345, "another deployment"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0])) << d.last_error();
    if (c.mid_inference) {
      size_t n = 0;
      while (f.p.workers[0].layers[n].run.empty()) ++n;
      const auto& s = f.p.workers[0].layers[n];
      ASSERT_FALSE(s.inputs.empty());
      ASSERT_FALSE(s.inputs[0].runs.empty());
      const auto& r = s.inputs[0].runs[0];
      // Part of a layer's inputs: the board is in an inference.
      ASSERT_TRUE(d.raw(MsgType::Input, uint16_t(n), core::input_offset(0, r.offset),
                        reinterpret_cast<const uint8_t*>(f.ref[s.inputs[0].tensor].data()) + r.offset, 1, 0));
    }
    if (c.deployment) d.deployment = c.deployment;
    d.got.clear();
    EXPECT_FALSE(d.raw(MsgType::Resume, c.layer, 0, nullptr, 0, wire::kFlagLast));
    EXPECT_NE(d.last_error().find(c.says), std::string::npos) << d.last_error();
  }
}

}  // namespace
