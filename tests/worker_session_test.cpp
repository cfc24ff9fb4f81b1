// One owner per board, in the portable worker with no sockets: the first
// coordinator link to speak owns the board; a coordinator on another link is
// refused ERROR(BoardInUse) naming the owner, and gets the board once the
// owner's link closed, or once the port says it is gone.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/worker.h"
#include "support/no_flash.h"

namespace {

using namespace ts;
using wire::MsgType;

// Frames the worker sent, per link; names for links; which links the
// transport still thinks alive.
class LinksPort final : public core::Port {
 public:
  std::map<int, std::vector<uint8_t>> sent;
  std::map<int, std::string> names;
  std::map<int, bool> dead;
  bool send(int link, const uint8_t* d, size_t n) override {
    sent[link].insert(sent[link].end(), d, d + n);
    return true;
  }
  uint32_t now_us() override { return t_ += 10; }
  size_t describe_link(int link, char* out, size_t cap) override {
    auto it = names.find(link);
    if (it == names.end()) return 0;
    const size_t n = std::min(it->second.size(), cap - 1);
    std::memcpy(out, it->second.data(), n);
    out[n] = 0;
    return n;
  }
  bool link_alive(int link) override { return !dead[link]; }

 private:
  uint32_t t_ = 0;
};

using ts::testing::NoFlash;

struct Board {
  LinksPort port;
  NoFlash flash;
  std::vector<uint8_t> arena = std::vector<uint8_t>(256 * 1024);
  core::Worker w;
  std::map<int, uint32_t> seq;

  Board() { EXPECT_TRUE(w.init(core::WorkerConfig{}, arena.data(), uint32_t(arena.size()), &flash, &port)); }
  void connect(int link) {
    ASSERT_TRUE(w.on_connect(link));
    seq[link] = 1;
  }
  // A coordinator's PROBE on `link`; on_bytes' answer.
  int32_t probe(int link) {
    wire::FrameHeader h;
    h.type = MsgType::Probe;
    h.src = wire::kCoordinatorId;
    h.seq = seq[link]++;
    h.flags = wire::kFlagLast;
    const uint8_t ping[4] = {1, 2, 3, 4};
    uint8_t frame[wire::kMaxFrame];
    const size_t n = wire::encode_frame(h, ping, sizeof ping, frame, sizeof frame);
    return w.on_bytes(link, frame, n);
  }
  // The frames the board sent on `link` since the last call.
  std::vector<std::pair<wire::FrameHeader, std::vector<uint8_t>>> frames(int link) {
    std::vector<std::pair<wire::FrameHeader, std::vector<uint8_t>>> out;
    wire::FrameReader r;
    const std::vector<uint8_t> b = std::move(port.sent[link]);
    port.sent[link].clear();
    for (size_t pos = 0; pos < b.size();) {
      const auto f = r.feed(b.data() + pos, b.size() - pos);
      pos += f.consumed;
      if (f.status != wire::FrameReader::Status::Frame) break;
      out.emplace_back(r.header(), std::vector<uint8_t>(r.payload(), r.payload() + r.header().payload_len));
    }
    return out;
  }
  bool answered_probe(int link) {
    for (auto& f : frames(link))
      if (f.first.type == MsgType::ProbeReply) return true;
    return false;
  }
  // The ERROR sent on `link` (code None if none).
  wire::ErrorPayload error(int link) {
    wire::ErrorPayload e;
    for (auto& f : frames(link))
      if (f.first.type == MsgType::Error) {
        EXPECT_TRUE(e.decode(f.second.data(), f.second.size()));
      }
    return e;
  }
};

TEST(WorkerSession, SecondCoordinatorIsRefusedNamingTheOwner) {
  Board b;
  b.port.names[0] = "127.0.0.1:40001";
  b.connect(0);
  ASSERT_GT(b.probe(0), 0);
  EXPECT_TRUE(b.answered_probe(0));
  b.connect(1);
  EXPECT_EQ(b.probe(1), -1);
  const wire::ErrorPayload e = b.error(1);
  EXPECT_EQ(e.code, wire::ErrorCode::BoardInUse);
  EXPECT_STREQ(e.text, "in use by another session (coordinator 127.0.0.1:40001)");
  EXPECT_FALSE(b.w.link_open(1));
  // The owner's session goes on.
  ASSERT_GT(b.probe(0), 0);
  EXPECT_TRUE(b.answered_probe(0));
}

TEST(WorkerSession, OwnerWithoutANameIsNamedByItsLink) {
  Board b;
  b.connect(3);
  ASSERT_GT(b.probe(3), 0);
  b.connect(1);
  EXPECT_EQ(b.probe(1), -1);
  EXPECT_STREQ(b.error(1).text, "in use by another session (coordinator on link 3)");
}

TEST(WorkerSession, OwnerClosingReleasesTheBoard) {
  Board b;
  b.connect(0);
  ASSERT_GT(b.probe(0), 0);
  b.w.on_disconnect(0);
  b.connect(1);
  ASSERT_GT(b.probe(1), 0);
  EXPECT_TRUE(b.answered_probe(1));
  // Now the owner is link 1: the old one coming back is refused.
  b.connect(0);
  EXPECT_EQ(b.probe(0), -1);
  EXPECT_EQ(b.error(0).code, wire::ErrorCode::BoardInUse);
}

TEST(WorkerSession, OwnerGoneBeforeTheBoardHeardIsReplaced) {
  // The owner closed its end, but the transport has not delivered the close
  // yet (a new coordinator right after the last): link_alive says so.
  Board b;
  b.connect(0);
  ASSERT_GT(b.probe(0), 0);
  b.port.dead[0] = true;
  b.connect(1);
  ASSERT_GT(b.probe(1), 0);
  EXPECT_TRUE(b.answered_probe(1));
  EXPECT_FALSE(b.w.link_open(0));  // the transport closes it
}

TEST(WorkerSession, ClaimSessionAnswersDirectly) {
  Board b;
  b.connect(0);
  b.connect(1);
  EXPECT_EQ(b.w.claim_session(0, 1), core::Verdict::Ok);
  EXPECT_EQ(b.w.claim_session(1, 1), core::Verdict::Fail);
  EXPECT_EQ(b.error(1).code, wire::ErrorCode::BoardInUse);
  b.w.on_disconnect(0);
  EXPECT_EQ(b.w.claim_session(1, 1), core::Verdict::Ok);
}

}  // namespace
