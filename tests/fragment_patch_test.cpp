// Fragments sent as patches of the ones boards hold (wire PATCH,
// coord/fragment_patch.h): the frames are valid PATCH payloads that rebuild
// the new fragment exactly, moved bytes go as copies, and a deploy against a
// base the board does not hold falls back to sending the fragment whole.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "coord/boards.h"
#include "coord/coordinator.h"
#include "coord/fragment_patch.h"
#include "core/sha256.h"
#include "core/wire.h"
#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/quantize.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "support/boards.h"
#include "support/tiny_qgraph.h"

namespace {

using namespace ts;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

coord::Patch patch_of(const std::vector<uint8_t>& base, const std::vector<uint8_t>& next) {
  uint8_t digest[32];
  sha256(base.data(), base.size(), digest);
  return coord::make_patch(base, digest, next);
}

// Rebuilds `next` from the frames the way the board's ops define it (an
// independent reading of the wire format, checked against make_patch).
std::vector<uint8_t> rebuild(const std::vector<uint8_t>& base, const coord::Patch& p) {
  std::vector<uint8_t> out;
  for (const auto& f : p.frames) {
    EXPECT_TRUE(wire::patch_ops_ok(f.payload.data(), f.payload.size()));
    EXPECT_LE(f.payload.size(), wire::kMaxPayload);
    EXPECT_EQ(f.offset, out.size());
    size_t pos = wire::kPatchBaseBytes;
    wire::PatchOp op;
    while (wire::next_patch_op(f.payload.data(), f.payload.size(), &pos, &op)) {
      if (op.copy) {
        EXPECT_LE(size_t(op.from) + op.len, base.size());
        EXPECT_LE(op.len, coord::kMaxCopyOp);
        out.insert(out.end(), base.begin() + op.from, base.begin() + op.from + op.len);
      } else {
        out.insert(out.end(), op.data, op.data + op.len);
      }
    }
  }
  return out;
}

TEST(FragmentPatch, MovedAndShiftedBytesGoAsCopies) {
  const auto base = random_bytes(300000, 1);
  // next: a new header, base's second half, 1000 new bytes, its first half
  // shifted by 3 with one byte changed in the middle.
  std::vector<uint8_t> next = random_bytes(40, 2);
  next.insert(next.end(), base.begin() + 150000, base.end());
  const auto fresh = random_bytes(1000, 3);
  next.insert(next.end(), fresh.begin(), fresh.end());
  next.insert(next.end(), base.begin() + 3, base.begin() + 150000);
  next[next.size() - 70000] ^= 0x5a;
  const auto p = patch_of(base, next);
  EXPECT_EQ(rebuild(base, p), next);
  EXPECT_EQ(p.copied + p.literal, int64_t(next.size()));
  // The new bytes, the changed one and at most a block each side of it.
  EXPECT_LE(p.literal, 40 + 1000 + 2 * 32 + 1);
  EXPECT_LT(p.bytes, 4000);
}

TEST(FragmentPatch, NothingInCommonIsSentAsItIs) {
  const auto base = random_bytes(5000, 4), next = random_bytes(7000, 5);
  const auto p = patch_of(base, next);
  EXPECT_EQ(rebuild(base, p), next);
  EXPECT_EQ(p.literal, 7000);
  EXPECT_GT(p.bytes, 7000);  // digests and op headers on top
}

TEST(FragmentPatch, EmptyAndTinyFragments) {
  const std::vector<uint8_t> none;
  const auto small = random_bytes(10, 6);
  EXPECT_EQ(rebuild(none, patch_of(none, small)), small);
  EXPECT_EQ(rebuild(small, patch_of(small, small)), small);
  EXPECT_TRUE(patch_of(small, none).frames.empty());
}

TEST(FragmentPatch, LongCopiesAreSplit) {
  const auto base = random_bytes(200000, 7);
  const auto p = patch_of(base, base);
  EXPECT_EQ(rebuild(base, p), base);
  EXPECT_EQ(p.literal, 0);
  EXPECT_EQ(p.copied, 200000);
}

// A small real model planned on 3 and on 2 boards: the second plan deployed
// on the boards that hold the first goes as patches where that is smaller,
// and as whole fragments where the base held is not what the board has.
struct Models {
  QGraph q;
  plan::Plan p3, p2;
};

const Models& models() {
  static Models m = [] {
    Models x;
    x.q = ts::testing::tiny_qgraph(2, 7);
    plan::PlanOptions o;
    o.strategy = "auto";
    x.p3 = plan::make_plan(x.q, plan::default_testbed(3), o);
    x.p2 = plan::make_plan(x.q, plan::default_testbed(2), o);
    return x;
  }();
  return m;
}

TEST(FragmentPatchDeploy, AReplanOnBoardsThatHoldTheOldPlanSendsPatches) {
  const auto& m = models();
  coord::SpawnOptions so;
  so.exe = TS_TINYSPLIT;
  coord::BoardSet boards(plan::default_testbed(3), so);
  const auto tmo = std::chrono::milliseconds(20000);
  std::vector<coord::HeldFragment> held(3);
  {
    coord::Coordinator c(m.q, m.p3, boards.links(tmo), coord::CoordOptions{tmo});
    c.handshake();
    const coord::DeployResult d = c.deploy(&held);  // nothing held: whole fragments
    EXPECT_EQ(d.sent, 3);
    EXPECT_EQ(d.bytes, d.full_bytes);
    c.close();
  }
  // Board 2 is lost: the 2-board plan goes to boards 0 and 1.
  auto links = boards.links(tmo);
  links.pop_back();
  held.pop_back();
  const auto x = ts::testing::random_int8_input(m.q, 3);
  const auto ref = run_int8_all(m.q, x);
  coord::Coordinator c(m.q, m.p2, std::move(links), coord::CoordOptions{tmo});
  c.handshake();
  const coord::DeployResult d = c.deploy(&held);
  EXPECT_EQ(d.patched, 2);
  EXPECT_EQ(d.sent, 0);
  EXPECT_LT(d.bytes, d.full_bytes / 2);
  for (int w = 0; w < 2; ++w) EXPECT_EQ(*held[size_t(w)], plan::write_fragment(m.q, m.p2, w));
  EXPECT_EQ(c.infer(x).output, ref[m.q.nodes.back().output]);
  c.close();
}

TEST(FragmentPatchDeploy, ABaseTheBoardDoesNotHoldFallsBackToTheWholeFragment) {
  const auto& m = models();
  coord::SpawnOptions so;
  so.exe = TS_TINYSPLIT;
  coord::BoardSet boards(plan::default_testbed(2), so);
  const auto tmo = std::chrono::milliseconds(20000);
  // The coordinator believes the boards hold the 3-board plan's fragments;
  // they hold nothing.
  std::vector<coord::HeldFragment> held;
  for (int w = 0; w < 2; ++w)
    held.push_back(std::make_shared<const std::vector<uint8_t>>(plan::write_fragment(m.q, m.p3, w)));
  const auto x = ts::testing::random_int8_input(m.q, 4);
  const auto ref = run_int8_all(m.q, x);
  coord::Coordinator c(m.q, m.p2, boards.links(tmo), coord::CoordOptions{tmo});
  c.handshake();
  const coord::DeployResult d = c.deploy(&held);
  EXPECT_EQ(d.patched, 0);
  EXPECT_EQ(d.sent, 2);
  EXPECT_GT(d.bytes, d.full_bytes);  // the wasted patches, then every fragment whole
  EXPECT_EQ(c.infer(x).output, ref[m.q.nodes.back().output]);
  // Deployed again: every board holds its fragment (nothing sent).
  const coord::DeployResult again = c.deploy(&held);
  EXPECT_EQ(again.cached, 2);
  EXPECT_EQ(again.bytes, 0);
  c.close();
}

}  // namespace
