// Tests of the simulator's shared core (src/sim/core.h): the board-to-board
// windows and ACKs keep the engine's rules (they are its own SendWindow and
// AckTracker), the counted ACKs of coordinator frames come every N frames
// per pair, and the links serve frames first in, first out.
#include <gtest/gtest.h>

#include "sim/core.h"

namespace {

using namespace ts;

TEST(SimCore, PeerWindowAsksForAnAckWhenFullAndWaitsForIt) {
  sim::TimingModel m;
  m.window = 3;
  m.board_ack_every = 16;
  sim::core_sim::PeerWindows w(m);
  bool req = true;
  ASSERT_TRUE(w.send(0, 1, &req));
  EXPECT_FALSE(req);
  ASSERT_TRUE(w.send(0, 1, &req));
  EXPECT_FALSE(req);
  ASSERT_TRUE(w.send(0, 1, &req));
  EXPECT_TRUE(req);  // the frame that fills the window asks for an ACK
  EXPECT_FALSE(w.send(0, 1, &req));  // full: waits
  // Another pair has a window of its own.
  ASSERT_TRUE(w.send(0, 2, &req));
  EXPECT_FALSE(req);
  // The receiver owes no ACK for the first two, one (for 3) on the request.
  EXPECT_EQ(w.receive(1, 0, false), 0u);
  EXPECT_EQ(w.receive(1, 0, false), 0u);
  EXPECT_EQ(w.receive(1, 0, true), 3u);
  w.acked(0, 1, 2);  // a partial ACK opens two places
  ASSERT_TRUE(w.send(0, 1, &req));
  EXPECT_FALSE(req);
  ASSERT_TRUE(w.send(0, 1, &req));
  EXPECT_TRUE(req);
  EXPECT_FALSE(w.send(0, 1, &req));
  w.acked(0, 1, 1);  // stale: changes nothing
  EXPECT_FALSE(w.send(0, 1, &req));
  w.acked(0, 1, 5);
  EXPECT_TRUE(w.send(0, 1, &req));
}

TEST(SimCore, ReceiverAcksEveryNFramesWithoutRequests) {
  sim::TimingModel m;
  m.window = 64;
  m.board_ack_every = 4;
  sim::core_sim::PeerWindows w(m);
  std::vector<uint32_t> acks;
  for (int i = 0; i < 10; ++i)
    if (const uint32_t a = w.receive(2, 5, false)) acks.push_back(a);
  EXPECT_EQ(acks, (std::vector<uint32_t>{4, 8}));
}

TEST(SimCore, CountedAcksComeEveryNFramesPerPair) {
  sim::core_sim::CountedAcks c(3);
  int due = 0;
  for (int i = 0; i < 7; ++i) due += c.frame(-1, 0) ? 1 : 0;  // coordinator -> board 0
  EXPECT_EQ(due, 2);
  EXPECT_FALSE(c.frame(1, -1));
  EXPECT_FALSE(c.frame(1, -1));
  EXPECT_TRUE(c.frame(1, -1));
  EXPECT_FALSE(c.frame(-1, 0));  // the first pair's count went on: 8
  EXPECT_TRUE(c.frame(-1, 0));   // 9
}

TEST(SimCore, FifoServesInOrder) {
  sim::core_sim::Fifo f{0.0, 0.5};
  EXPECT_DOUBLE_EQ(f.pass(1.0, 2), 2.0);  // free at 1, 2 bytes at 0.5 s each
  EXPECT_DOUBLE_EQ(f.pass(1.5, 1), 2.5);  // waits for the first
  EXPECT_DOUBLE_EQ(f.pass(4.0, 0), 4.0);  // idle link: at once
}

}  // namespace
