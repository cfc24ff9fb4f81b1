// The coordinator's end of a board link against a scripted board on an
// in-process transport: what it accepts as a HELLO, and (below) how a whole
// Coordinator ends an inference when the board misbehaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "coord/coordinator.h"
#include "coord/link.h"
#include "coord/verify.h"
#include "core/digest.h"
#include "core/wire.h"
#include "model/pipeline.h"
#include "model/qgraph.h"
#include "net/transport.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace {

using namespace ts;

// Writes one HELLO frame from `src` naming `board_id` to the board's end.
void send_hello(net::Transport& board, uint16_t src, uint16_t board_id, uint8_t links = 40) {
  wire::HelloPayload hello;
  hello.board_id = board_id;
  hello.links = links;
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

// Writes the ACK of the coordinator's first frame (its claim, RESET) ahead.
void send_claim_ack(net::Transport& board, uint16_t src) {
  wire::AckPayload a;
  a.ack_seq = 1;
  uint8_t payload[wire::AckPayload::kSize];
  a.encode(payload, sizeof payload);
  wire::FrameHeader h;
  h.type = wire::MsgType::Ack;
  h.src = src;
  h.dst = wire::kCoordinatorId;
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
    send_claim_ack(*board, 3);
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

// A board tells in HELLO how many links it holds: a direct plan that needs
// more on it is refused at the handshake with one line naming both numbers
// (the tiny test model in bands over 3 boards: the middle one talks to the
// coordinator and both neighbours).
TEST(Link, APlanNeedingMoreLinksThanABoardToldIsRefused) {
  const QGraph q = quantized_model(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/tiny.onnx", 0, QuantizeOptions{});
  plan::PlanOptions o;
  o.strategy = "spatial";
  o.route = plan::Route::Direct;
  const plan::Plan p = plan::make_plan(q, plan::default_testbed(3), o);
  const std::vector<int> need = plan::direct_links(p);
  ASSERT_GE(need[1], 2);
  for (const uint8_t told : {uint8_t(need[1] - 1), uint8_t(need[1])}) {
    std::vector<std::unique_ptr<coord::BoardLink>> links;
    std::vector<std::unique_ptr<net::Transport>> boards;
    for (uint16_t b = 0; b < 3; ++b) {
      auto [coord, board] = net::make_inproc_pair("coord", "board");
      send_hello(*board, b, b, b == 1 ? told : uint8_t(40));
      send_claim_ack(*board, b);
      links.push_back(std::make_unique<coord::BoardLink>(std::move(coord), b, 8, std::chrono::milliseconds(2000)));
      boards.push_back(std::move(board));
    }
    coord::Coordinator c(q, p, std::move(links), coord::CoordOptions{});
    if (told >= need[1]) {
      EXPECT_NO_THROW(c.handshake());
      continue;
    }
    try {
      c.handshake();
      FAIL() << "a board telling " << int(told) << " links took a plan needing " << need[1];
    } catch (const coord::BoardError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("board 1 "), std::string::npos) << m;
      EXPECT_NE(m.find("holds " + std::to_string(told) + " links (its HELLO), the plan needs " + std::to_string(need[1])),
                std::string::npos)
          << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The coordinator against a scripted board: a real Coordinator (plan of the
// tiny ONNX test model for one board) whose only link is an in-process pair;
// the board end is a thread that speaks the protocol by hand and misbehaves
// in one way at the RUN of layer 0. Each misbehaviour must end infer() with
// one BoardError line naming the board and the layer, well before the link's
// timeout (no hang), and the board's thread must finish.
// ---------------------------------------------------------------------------

namespace {

using namespace ts;
using wire::MsgType;

// The board end of one link: ACKs every sequenced frame it receives and
// numbers the frames it sends.
class ScriptedBoard {
 public:
  explicit ScriptedBoard(std::unique_ptr<net::Transport> t) : t_(std::move(t)) {}

  void send(MsgType type, uint16_t layer, uint32_t offset, const std::vector<uint8_t>& payload,
            uint16_t flags = wire::kFlagLast) {
    wire::FrameHeader h;
    h.type = type;
    h.src = 0;
    h.dst = wire::kCoordinatorId;
    h.seq = type == MsgType::Ack ? 0 : seq_++;
    h.layer = layer;
    h.offset = offset;
    h.flags = flags;
    uint8_t frame[wire::kMaxFrame];
    const size_t n = wire::encode_frame(h, payload.data(), payload.size(), frame, sizeof frame);
    ASSERT_GT(n, 0u);
    if (closed_) return;
    try {
      t_->send(frame, n);
    } catch (const net::NetError&) {
      closed_ = true;  // the coordinator gave up on the board and closed the link first
    }
  }
  // One OUTPUT message: frames of at most kMaxPayload, LAST on the final one.
  void output(uint16_t layer, uint32_t offset, const std::vector<uint8_t>& data) {
    size_t pos = 0;
    do {
      const size_t k = std::min(data.size() - pos, wire::kMaxPayload);
      send(MsgType::Output, layer, offset + uint32_t(pos),
           std::vector<uint8_t>(data.begin() + long(pos), data.begin() + long(pos + k)),
           pos + k == data.size() ? wire::kFlagLast : 0);
      pos += k;
    } while (pos < data.size());
  }
  void ack(uint32_t seq) {
    wire::AckPayload a;
    a.ack_seq = seq;
    std::vector<uint8_t> p(wire::AckPayload::kSize);
    a.encode(p.data(), p.size());
    send(MsgType::Ack, 0, 0, p, 0);
  }
  void hello() {
    wire::HelloPayload hello;
    hello.board_id = 0;
    hello.clock_mhz = 600;
    hello.rx_window = 8;
    hello.ram_bytes = 512 * 1024;
    hello.flash_bytes = 8u << 20;
    std::vector<uint8_t> p(wire::HelloPayload::kSize);
    hello.encode(p.data(), p.size());
    send(MsgType::Hello, 0, 0, p);
  }
  void done(uint16_t layer, uint32_t request_seq, uint32_t outputs, uint64_t digest = 0) {
    wire::DonePayload d;
    d.request_seq = request_seq;
    d.outputs = outputs;
    d.output_digest = digest;
    std::vector<uint8_t> p(wire::DonePayload::kSize);
    d.encode(p.data(), p.size());
    send(MsgType::Done, layer, 0, p, wire::kFlagLast | wire::kFlagAckReq);
  }
  // Reads the coordinator's frames, ACKing each sequenced one, until one of
  // `type` arrives (true) or the link closes or goes quiet for 5 s (false).
  bool wait_for(MsgType type, wire::FrameHeader* out) {
    for (;;) {
      while (pos_ < have_) {
        const auto r = reader_.feed(buf_ + pos_, have_ - pos_);
        pos_ += r.consumed;
        if (r.status == wire::FrameReader::Status::Error) return false;
        if (r.status != wire::FrameReader::Status::Frame) break;
        const wire::FrameHeader h = reader_.header();
        if (h.type == MsgType::Ack) continue;
        ack(h.seq);
        if (h.type == type) {
          *out = h;
          return true;
        }
      }
      pos_ = have_ = 0;
      const auto r = t_->recv(buf_, sizeof buf_, std::chrono::milliseconds(5000));
      if (r.status != net::RecvStatus::Data) return false;
      have_ = r.bytes;
    }
  }
  // Until the coordinator closes the link.
  void drain() {
    wire::FrameHeader h;
    while (wait_for(MsgType::Bye, &h)) {
    }
  }

 private:
  std::unique_ptr<net::Transport> t_;
  bool closed_ = false;
  uint32_t seq_ = 1;
  wire::FrameReader reader_;
  uint8_t buf_[64 * 1024];
  size_t have_ = 0, pos_ = 0;
};

struct TinyPlan {
  QGraph q;
  plan::Plan p;
  std::vector<int8_t> input;
};

const TinyPlan& tiny() {
  static const TinyPlan t = [] {
    TinyPlan x;
    x.q = quantized_model(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/tiny.onnx", 0, QuantizeOptions{});
    x.p = plan::make_plan(x.q, plan::default_testbed(1));
    x.input.assign(size_t(x.q.shape(x.q.input).size()), 5);
    return x;
  }();
  return t;
}

struct Outcome {
  std::string err;               // the coordinator's BoardError, empty if infer() returned
  coord::InferenceResult result;
};

using Script = std::function<void(ScriptedBoard&, const wire::FrameHeader& run, uint32_t share)>;

// Runs one inference against a board that follows `script` from the RUN of
// layer 0 (given that RUN's header and the size of the board's share of
// layer 0).
Outcome run_against(const Script& script) {
  const TinyPlan& t = tiny();
  auto [coord_end, board_end] = net::make_inproc_pair("coord", "scripted-board");
  ScriptedBoard board(std::move(board_end));
  const uint32_t share = uint32_t(t.p.workers[0].layers[0].out_elems);
  std::thread th([&] {
    board.hello();
    wire::FrameHeader run;
    if (board.wait_for(MsgType::Run, &run)) script(board, run, share);
    board.drain();
  });
  Outcome out;
  {
    std::vector<std::unique_ptr<coord::BoardLink>> links;
    links.push_back(std::make_unique<coord::BoardLink>(std::move(coord_end), 0, 8, std::chrono::milliseconds(20000)));
    coord::CoordOptions opt;
    opt.timeout = std::chrono::milliseconds(20000);
    coord::Coordinator c(t.q, t.p, std::move(links), opt);
    try {
      c.handshake();
      out.result = c.infer(t.input);
    } catch (const coord::BoardError& e) {
      out.err = e.what();
    }
    c.close();
  }
  th.join();
  return out;
}

std::string infer_against(const Script& script) { return run_against(script).err; }

void expect_one_line(const std::string& err, const std::string& needle) {
  EXPECT_NE(err.find("board 0 (inproc:"), std::string::npos) << err;
  EXPECT_NE(err.find(needle), std::string::npos) << err;
  EXPECT_NE(err.find(" at layer 0 '"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_EQ(err.find("no answer within"), std::string::npos) << "the coordinator waited for the timeout: " << err;
}

std::vector<uint8_t> bytes(size_t n, uint8_t v = 1) { return std::vector<uint8_t>(n, v); }

TEST(ScriptedBoard, AnAckForAFrameNeverSentEndsTheRun) {
  expect_one_line(infer_against([](ScriptedBoard& b, const wire::FrameHeader&, uint32_t) { b.ack(100000); }),
                  "acknowledged frames never sent");
}

TEST(ScriptedBoard, AnErrorFromTheBoardIsReportedWithItsText) {
  const std::string err = infer_against([](ScriptedBoard& b, const wire::FrameHeader& run, uint32_t) {
    const auto e = wire::ErrorPayload::make(wire::ErrorCode::OutOfMemory, run.seq, "arena exhausted (inputs)");
    std::vector<uint8_t> p(wire::ErrorPayload::kMaxSize);
    p.resize(e.encode(p.data(), p.size()));
    b.send(MsgType::Error, 0, 0, p, 0);
  });
  expect_one_line(err, "reported error");
  EXPECT_NE(err.find("arena exhausted (inputs)"), std::string::npos) << err;
}

TEST(ScriptedBoard, OutputsOutsideTheShareAreRefused) {
  expect_one_line(infer_against([](ScriptedBoard& b, const wire::FrameHeader&, uint32_t share) {
                    b.send(MsgType::Output, 0, share, bytes(4));
                  }),
                  "sent outputs outside its share");
  // Starting inside the share but running past its end.
  expect_one_line(infer_against([](ScriptedBoard& b, const wire::FrameHeader&, uint32_t share) {
                    b.send(MsgType::Output, 0, share - 2, bytes(4));
                  }),
                  "sent outputs outside its share");
}

TEST(ScriptedBoard, AnAnswerForAnotherLayerIsRefused) {
  const std::string err = infer_against([](ScriptedBoard& b, const wire::FrameHeader&, uint32_t share) {
    b.output(1, 0, bytes(std::min<uint32_t>(share, 16)));
  });
  expect_one_line(err, "answered for layer 1");
}

TEST(ScriptedBoard, TooFewOutputsBeforeDoneAreRefused) {
  const std::string err = infer_against([](ScriptedBoard& b, const wire::FrameHeader& run, uint32_t share) {
    b.output(0, 0, bytes(share / 2));
    b.done(0, run.seq, share);
  });
  expect_one_line(err, "returned " + std::to_string(tiny().p.workers[0].layers[0].out_elems / 2) + " of " +
                           std::to_string(tiny().p.workers[0].layers[0].out_elems) + " outputs");
}

TEST(ScriptedBoard, DuplicateOutputFramesAtOneOffsetAreRefused) {
  // Two frames of the first half at offset 0: together they have the byte
  // count of the whole share, but not its elements.
  const std::string err = infer_against([](ScriptedBoard& b, const wire::FrameHeader& run, uint32_t share) {
    const uint32_t half = share / 2;
    ASSERT_EQ(share % 2, 0u);
    b.output(0, 0, bytes(half));
    b.output(0, 0, bytes(half));
    b.done(0, run.seq, share);
  });
  expect_one_line(err, "sent outputs out of order or twice");
}

// The reference's layer outputs, answered as a correct board would (one board:
// its share of every layer is the whole tensor), except that the digest of
// layer `bad_digest` is off by one. The run completes, and the per-layer
// verification (coord/verify.h) accepts every other layer and names that one.
Outcome honest_board(int bad_digest) {
  const TinyPlan& t = tiny();
  const auto ref = run_int8_all(t.q, t.input);
  return run_against([&](ScriptedBoard& b, const wire::FrameHeader& first, uint32_t) {
    wire::FrameHeader run = first;
    for (size_t node = 0; node < t.q.nodes.size(); ++node) {
      if (node > 0 && !b.wait_for(MsgType::Run, &run)) return;
      const auto& y = ref[size_t(t.q.nodes[node].output)];
      const std::vector<uint8_t> out(reinterpret_cast<const uint8_t*>(y.data()),
                                     reinterpret_cast<const uint8_t*>(y.data()) + y.size());
      ASSERT_EQ(int64_t(out.size()), t.p.workers[0].layers[node].out_elems);
      b.output(uint16_t(node), 0, out);
      const uint64_t d = core::digest64(out.data(), out.size()) + (int(node) == bad_digest ? 1 : 0);
      b.done(uint16_t(node), run.seq, uint32_t(out.size()), d);
    }
  });
}

TEST(ScriptedBoard, DigestsOfAnHonestBoardVerifyEveryLayer) {
  const TinyPlan& t = tiny();
  const auto expected = coord::reference_digests(t.q, t.p, run_int8_all(t.q, t.input));
  const Outcome ok = honest_board(-1);
  ASSERT_EQ(ok.err, "");
  EXPECT_EQ(ok.result.output, run_int8(t.q, t.input));
  const coord::Verification v = coord::verify_layers(expected, ok.result);
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.layers, int(t.q.nodes.size()));
  EXPECT_EQ(v.verified_layers, int(t.q.nodes.size()));

  const int bad = int(t.q.nodes.size()) / 2;
  const Outcome wrong = honest_board(bad);
  ASSERT_EQ(wrong.err, "");
  const coord::Verification w = coord::verify_layers(expected, wrong.result);
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.board, 0);
  EXPECT_EQ(w.node, bad);
  EXPECT_EQ(w.verified_layers, int(t.q.nodes.size()) - 1);
  const std::string line = coord::describe_mismatch(t.q, w, "inproc:scripted-board");
  EXPECT_NE(line.find("board 0 (inproc:scripted-board)"), std::string::npos) << line;
  EXPECT_NE(line.find("layer " + std::to_string(bad) + " '" + t.q.nodes[size_t(bad)].name + "'"), std::string::npos)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

}  // namespace
