// Deadlines of a link, in the portable worker with no sockets and a clock the
// test sets: a connection that has not completed its handshake, or a frame
// begun and not finished, runs out of time (Worker::link_overdue); the
// connections that hold slots without a handshake give way to newcomers
// (Worker::link_to_evict). The host board and the firmware close what these
// name (tests/link_deadline_test.cpp shows it on real sockets).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "core/worker.h"
#include "support/no_flash.h"

namespace {

using namespace ts;
using wire::MsgType;

class ClockPort final : public core::Port {
 public:
  uint32_t now = 1000;
  bool send(int, const uint8_t*, size_t) override { return true; }
  uint32_t now_us() override { return now; }
};

using ts::testing::NoFlash;

struct Board {
  ClockPort port;
  NoFlash flash;
  std::vector<uint8_t> arena = std::vector<uint8_t>(256 * 1024);
  core::WorkerConfig cfg;
  core::Worker w;
  std::map<int, uint32_t> seq;
  explicit Board(uint8_t unproven = 4) {
    cfg.handshake_ms = 2000;
    cfg.frame_ms = 500;
    cfg.unproven_links = unproven;
    EXPECT_TRUE(w.init(cfg, arena.data(), uint32_t(arena.size()), &flash, &port));
  }
  void connect(int link) {
    ASSERT_TRUE(w.on_connect(link));
    seq[link] = 1;
  }
  // A coordinator's RESET on `link` (the claim an unkeyed coordinator makes).
  std::vector<uint8_t> reset_frame(int link) {
    wire::FrameHeader h;
    h.type = MsgType::Reset;
    h.src = wire::kCoordinatorId;
    h.seq = seq[link]++;
    h.flags = wire::kFlagLast;
    std::vector<uint8_t> f(wire::kMaxFrame);
    f.resize(wire::encode_frame(h, nullptr, 0, f.data(), f.size()));
    return f;
  }
  void ms(uint32_t n) { port.now += n * 1000u; }
};

TEST(WorkerDeadline, AConnectionWithoutAHandshakeRunsOutOfTime) {
  Board b;
  b.connect(0);
  b.ms(1999);
  EXPECT_EQ(b.w.link_overdue(0), nullptr);
  EXPECT_FALSE(b.w.link_established(0));
  b.ms(2);
  ASSERT_NE(b.w.link_overdue(0), nullptr);
  EXPECT_STREQ(b.w.link_overdue(0), "no handshake in time");
}

TEST(WorkerDeadline, TheSessionsCoordinatorHasNoHandshakeDeadline) {
  Board b;
  b.connect(0);
  const auto f = b.reset_frame(0);
  ASSERT_EQ(b.w.on_bytes(0, f.data(), f.size()), int32_t(f.size()));
  EXPECT_TRUE(b.w.link_established(0));
  b.ms(60000);
  EXPECT_EQ(b.w.link_overdue(0), nullptr);
}

// A frame's deadline runs from its first byte: a header trickled byte by
// byte is overdue although every byte restarted no idle timer; one that
// arrives whole in time is not, and the next frame has a deadline of its own.
TEST(WorkerDeadline, AFrameMustArriveWholeWithinItsDeadline) {
  Board b;
  b.connect(0);
  const auto f = b.reset_frame(0);
  ASSERT_EQ(b.w.on_bytes(0, f.data(), f.size()), int32_t(f.size()));  // the session's
  const auto g = b.reset_frame(0);
  for (size_t i = 0; i + 1 < g.size() && i < 10; ++i) {
    ASSERT_EQ(b.w.on_bytes(0, g.data() + i, 1), 1);
    b.ms(100);
  }
  ASSERT_NE(b.w.link_overdue(0), nullptr);
  EXPECT_STREQ(b.w.link_overdue(0), "a frame did not arrive whole in time");

  Board c;
  c.connect(0);
  const auto h1 = c.reset_frame(0);
  ASSERT_EQ(c.w.on_bytes(0, h1.data(), 3), 3);
  c.ms(400);
  ASSERT_EQ(c.w.on_bytes(0, h1.data() + 3, h1.size() - 3), int32_t(h1.size() - 3));
  c.ms(400);
  EXPECT_EQ(c.w.link_overdue(0), nullptr);  // done in time; nothing begun since
  const auto h2 = c.reset_frame(0);
  ASSERT_EQ(c.w.on_bytes(0, h2.data(), 3), 3);
  c.ms(400);
  EXPECT_EQ(c.w.link_overdue(0), nullptr);
  c.ms(200);
  EXPECT_NE(c.w.link_overdue(0), nullptr);
}

// No slot free: the oldest connection without a handshake gives way, never
// the session's coordinator. Past the share of such connections, the same.
TEST(WorkerDeadline, NewcomersPushOutTheOldestConnectionWithoutAHandshake) {
  Board b(/*unproven=*/3);
  b.connect(5);
  const auto f = b.reset_frame(5);
  ASSERT_EQ(b.w.on_bytes(5, f.data(), f.size()), int32_t(f.size()));
  b.ms(10);
  b.connect(2);
  b.ms(10);
  b.connect(0);
  b.ms(10);
  b.connect(7);
  EXPECT_EQ(b.w.link_to_evict(4), -1);  // 3 without a handshake: within the share
  EXPECT_EQ(b.w.link_to_evict(0), 2);   // no slot free: the oldest of them
  b.ms(10);
  b.connect(9);
  EXPECT_EQ(b.w.link_to_evict(4), 2);   // 4 past a share of 3
  b.w.on_disconnect(2);
  EXPECT_EQ(b.w.link_to_evict(4), -1);
  EXPECT_EQ(b.w.link_to_evict(0), 0);
  for (int l : {0, 7, 9}) b.w.on_disconnect(l);
  EXPECT_EQ(b.w.link_to_evict(0), -1);  // only the coordinator left: it stays
}

}  // namespace
