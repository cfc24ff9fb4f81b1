// The coordinator's end of a board link against a scripted board on an
// in-process transport: what it accepts as a HELLO.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coord/link.h"
#include "core/wire.h"
#include "net/transport.h"

namespace {

using namespace ts;

// Writes one HELLO frame from `src` naming `board_id` to the board's end.
void send_hello(net::Transport& board, uint16_t src, uint16_t board_id) {
  wire::HelloPayload hello;
  hello.board_id = board_id;
  hello.clock_mhz = 600;
  hello.rx_window = 8;
  hello.ram_bytes = 512 * 1024;
  hello.flash_bytes = 8u << 20;
  uint8_t payload[wire::HelloPayload::kSize];
  hello.encode(payload, sizeof payload);
  wire::FrameHeader h;
  h.type = wire::MsgType::Hello;
  h.src = src;
  h.dst = wire::kCoordinatorId;
  h.seq = 1;
  h.flags = wire::kFlagLast;
  uint8_t frame[wire::kMaxFrame];
  const size_t n = wire::encode_frame(h, payload, sizeof payload, frame, sizeof frame);
  ASSERT_GT(n, 0u);
  board.send(frame, n);
}

TEST(Link, HelloMustNameTheBoardItComesFrom) {
  {
    auto [coord, board] = net::make_inproc_pair("coord", "board");
    coord::BoardLink link(std::move(coord), 0, 8, std::chrono::milliseconds(2000));
    send_hello(*board, 3, 3);
    EXPECT_EQ(link.handshake().board_id, 3);
  }
  {
    auto [coord, board] = net::make_inproc_pair("coord", "board");
    coord::BoardLink link(std::move(coord), 0, 8, std::chrono::milliseconds(2000));
    send_hello(*board, 1, 2);
    try {
      link.handshake();
      FAIL() << "a HELLO naming another board was accepted";
    } catch (const coord::BoardError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("naming board 2"), std::string::npos) << m;
      EXPECT_NE(m.find("from board 1"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

}  // namespace
