// Tests of the host transports (net/transport.h, net/tcp.h), carrying real
// wire frames. TCP tests use 127.0.0.1 and ephemeral ports only.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/wire.h"
#include "net/tcp.h"
#include "net/transport.h"

namespace {

using namespace ts::wire;
using ts::net::Millis;
using ts::net::NetError;
using ts::net::RecvStatus;
using ts::net::TcpListener;
using ts::net::Transport;
using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr Millis kWait{5000};  // generous: only bounds a hung test

// A connected TCP pair on loopback: {client side, server side}.
std::pair<std::unique_ptr<Transport>, std::unique_ptr<Transport>> tcp_pair() {
  TcpListener listener("127.0.0.1", 0);
  EXPECT_GT(listener.port(), 0);
  auto client = ts::net::tcp_connect("127.0.0.1", listener.port(), kWait);
  auto server = listener.accept(kWait);
  EXPECT_NE(server, nullptr);
  return {std::move(client), std::move(server)};
}

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// Sends `data` as INPUT messages of `msg_len` bytes each, packetised into
// frames. Frames are written in random groups and random cuts so that frame
// boundaries and send() boundaries never line up.
void send_as_frames(Transport& t, const Bytes& data, size_t msg_len, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes pending;
  uint32_t seq = 1;
  uint8_t frame[kMaxFrame];
  for (size_t start = 0; start < data.size(); start += msg_len) {
    size_t n = std::min(msg_len, data.size() - start);
    FrameHeader tmpl;
    tmpl.type = MsgType::Input;
    tmpl.src = kCoordinatorId;
    tmpl.dst = 1;
    tmpl.layer = 2;
    Packetiser pk(tmpl, data.data() + start, n, uint32_t(start));
    FrameHeader h;
    const uint8_t* p;
    while (pk.next(&h, &p)) {
      h.seq = seq++;
      size_t len = encode_frame(h, p, h.payload_len, frame, sizeof frame);
      ASSERT_GT(len, 0u);
      pending.insert(pending.end(), frame, frame + len);
      if (pending.size() > 1 + rng() % 20000) {
        size_t cut = rng() % pending.size();
        t.send(pending.data(), cut);
        t.send(pending.data() + cut, pending.size() - cut);
        pending.clear();
      }
    }
  }
  t.send(pending.data(), pending.size());
}

struct PumpStats {
  size_t frames = 0;
  size_t recvs = 0;
  size_t recvs_ending_mid_frame = 0;
};

// Reads from `t` with receive buffers of random size, reassembles frames and
// hands each to `on_frame` until `want_frames` arrived.
PumpStats pump_frames(Transport& t, size_t want_frames, uint32_t seed,
                      const std::function<void(const FrameHeader&, const uint8_t*)>& on_frame) {
  std::mt19937 rng(seed);
  FrameReader reader;
  PumpStats st;
  Bytes buf(8192);
  while (st.frames < want_frames) {
    size_t cap = 1 + rng() % buf.size();
    auto r = t.recv(buf.data(), cap, kWait);
    EXPECT_EQ(r.status, RecvStatus::Data);
    if (r.status != RecvStatus::Data) return st;
    ++st.recvs;
    const uint8_t* p = buf.data();
    size_t left = r.bytes;
    while (left > 0) {
      auto res = reader.feed(p, left);
      p += res.consumed;
      left -= res.consumed;
      EXPECT_NE(res.status, FrameReader::Status::Error) << wire_error_name(reader.error());
      if (res.status == FrameReader::Status::Error) return st;
      if (res.status == FrameReader::Status::Frame) {
        ++st.frames;
        on_frame(reader.header(), reader.payload());
      }
    }
    if (!reader.idle()) ++st.recvs_ending_mid_frame;
  }
  EXPECT_TRUE(reader.idle());
  return st;
}

// Streams a few MB through a transport pair and checks every byte lands at
// its offset.
void bulk_transfer(Transport& tx, Transport& rx, size_t total, size_t msg_len) {
  const Bytes data = random_bytes(total, 11);
  size_t want_frames = 0;
  for (size_t s = 0; s < total; s += msg_len) want_frames += frames_needed(std::min(msg_len, total - s));

  std::string send_error;
  std::thread sender([&] {
    try {
      send_as_frames(tx, data, msg_len, 12);
    } catch (const std::exception& e) {
      send_error = e.what();
    }
  });

  Bytes got(total, 0);
  Assembler as(got.data(), got.size(), 0);
  uint32_t expect_seq = 1;
  PumpStats st = pump_frames(rx, want_frames, 13, [&](const FrameHeader& h, const uint8_t* p) {
    EXPECT_EQ(h.seq, expect_seq++);
    EXPECT_EQ(as.place(h, p), PlaceResult::Ok);
  });
  sender.join();
  EXPECT_EQ(send_error, "");
  EXPECT_EQ(st.frames, want_frames);
  EXPECT_EQ(as.bytes_placed(), total);
  EXPECT_TRUE(got == data) << "payload bytes differ after reassembly";
  // Random receive sizes must have cut frames, or reassembly was not tested.
  EXPECT_GT(st.recvs_ending_mid_frame, 0u);
}

// ---------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------

TEST(Tcp, LoopbackBulkTransferWithPartialReads) {
  auto [client, server] = tcp_pair();
  ASSERT_TRUE(client && server);
  EXPECT_NE(client->peer().find("127.0.0.1:"), std::string::npos) << client->peer();
  EXPECT_NE(server->peer().find("127.0.0.1:"), std::string::npos) << server->peer();
  bulk_transfer(*client, *server, 4 << 20, 100000);  // 4 MiB, ~3100 frames
}

TEST(Tcp, BothDirectionsWithAckWindow) {
  // Coordinator sends 400 frames with W = 8; the "board" thread ACKs
  // according to AckTracker (every 3 frames or on request) over the same
  // socket. Ends with everything acknowledged.
  auto [host, board] = tcp_pair();
  ASSERT_TRUE(host && board);
  constexpr int kFrames = 400;
  std::string board_error;
  std::thread board_thread([&, &board = board] {
    try {
      AckTracker acks(3);
      int seen = 0;
      pump_frames(*board, kFrames, 21, [&](const FrameHeader& h, const uint8_t*) {
        ++seen;
        if (acks.on_frame(h.seq, h.flags) != SeqCheck::InOrder) throw std::runtime_error("seq");
        if (!acks.ack_due()) return;
        FrameHeader a;
        a.type = MsgType::Ack;
        a.src = 1;
        a.dst = kCoordinatorId;
        uint8_t pl[AckPayload::kSize];
        AckPayload{acks.ack_seq()}.encode(pl, sizeof pl);
        uint8_t f[kMaxFrame];
        board->send(f, encode_frame(a, pl, sizeof pl, f, sizeof f));
        acks.ack_sent();
      });
      if (seen != kFrames) board_error = "board saw " + std::to_string(seen) + " frames";
    } catch (const std::exception& e) {
      board_error = e.what();
    }
  });

  SendWindow win(8);
  FrameReader reader;
  uint8_t f[kMaxFrame];
  uint8_t rbuf[512];
  const Bytes payload = random_bytes(700, 22);
  int sent = 0;
  const auto t0 = Clock::now();
  auto now_ms = [&] { return uint32_t(std::chrono::duration_cast<Millis>(Clock::now() - t0).count()); };
  while (sent < kFrames || !win.idle()) {
    while (sent < kFrames && win.can_send()) {
      FrameHeader h;
      h.type = MsgType::Input;
      h.src = kCoordinatorId;
      h.dst = 1;
      h.flags = sent == kFrames - 1 ? kFlagLast : 0;
      ASSERT_TRUE(win.take(now_ms(), &h.seq));
      if (win.full()) h.flags |= kFlagAckReq;
      host->send(f, encode_frame(h, payload.data(), payload.size(), f, sizeof f));
      ++sent;
    }
    ASSERT_FALSE(win.timed_out(now_ms(), uint32_t(kWait.count()))) << "board stopped acking";
    auto r = host->recv(rbuf, sizeof rbuf, kWait);
    ASSERT_EQ(r.status, RecvStatus::Data);
    const uint8_t* p = rbuf;
    size_t left = r.bytes;
    while (left > 0) {
      auto res = reader.feed(p, left);
      p += res.consumed;
      left -= res.consumed;
      ASSERT_NE(res.status, FrameReader::Status::Error);
      if (res.status != FrameReader::Status::Frame) continue;
      ASSERT_EQ(reader.header().type, MsgType::Ack);
      AckPayload ack;
      ASSERT_TRUE(ack.decode(reader.payload(), reader.header().payload_len));
      ASSERT_EQ(win.on_ack(ack.ack_seq), AckResult::Advanced);
    }
  }
  board_thread.join();
  EXPECT_EQ(board_error, "");
  EXPECT_EQ(win.next_seq(), uint32_t(kFrames + 1));
  EXPECT_EQ(win.duplicate_acks(), 0u);
}

TEST(Tcp, ReceiveTimeoutFires) {
  auto [client, server] = tcp_pair();
  ASSERT_TRUE(client && server);
  uint8_t buf[16];
  const auto t0 = Clock::now();
  auto r = server->recv(buf, sizeof buf, Millis(50));
  EXPECT_EQ(r.status, RecvStatus::Timeout);
  EXPECT_EQ(r.bytes, 0u);
  // Must not return early (an upper bound would be a speed assertion).
  EXPECT_GE(Clock::now() - t0, Millis(45));
  // A zero timeout just polls.
  EXPECT_EQ(server->recv(buf, sizeof buf, Millis(0)).status, RecvStatus::Timeout);
  // Data that is already there is returned with a zero timeout.
  client->send("hi", 2);
  auto deadline = Clock::now() + kWait;
  RecvStatus st = RecvStatus::Timeout;
  while (st == RecvStatus::Timeout && Clock::now() < deadline)
    st = server->recv(buf, sizeof buf, Millis(0)).status;
  EXPECT_EQ(st, RecvStatus::Data);
}

// One thread serving many links (a host board) polls their descriptors: only
// the link with bytes waiting is reported, and its recv does not block.
TEST(Tcp, PollHandlesTellWhichLinkHasBytes) {
  std::vector<std::unique_ptr<Transport>> clients, servers;
  for (int i = 0; i < 3; ++i) {
    auto [c, s] = tcp_pair();
    ASSERT_TRUE(c && s);
    ASSERT_GE(s->poll_handle(), 0);
    clients.push_back(std::move(c));
    servers.push_back(std::move(s));
  }
  clients[1]->send("abc", 3);
  std::vector<pollfd> fds;
  for (auto& s : servers) fds.push_back(pollfd{s->poll_handle(), POLLIN, 0});
  ASSERT_EQ(poll(fds.data(), nfds_t(fds.size()), int(kWait.count())), 1);
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_NE(fds[1].revents & POLLIN, 0);
  EXPECT_EQ(fds[2].revents, 0);
  uint8_t buf[8];
  const auto r = servers[1]->recv(buf, sizeof buf, Millis(0));
  EXPECT_EQ(r.status, RecvStatus::Data);
  EXPECT_EQ(r.bytes, 3u);
  // An in-process transport has no descriptor.
  auto [a, b] = ts::net::make_inproc_pair();
  EXPECT_EQ(a->poll_handle(), -1);
}

TEST(Tcp, PeerCloseIsDetected) {
  auto [client, server] = tcp_pair();
  ASSERT_TRUE(client && server);
  client->send("bye!", 4);
  client->close();
  client->close();  // idempotent
  // Bytes sent before the close still arrive, then end of stream.
  Bytes got;
  uint8_t buf[16];
  ts::net::RecvResult r;
  while ((r = server->recv(buf, sizeof buf, kWait)).status == RecvStatus::Data)
    got.insert(got.end(), buf, buf + r.bytes);
  EXPECT_EQ(r.status, RecvStatus::Closed);
  EXPECT_EQ(got, (Bytes{'b', 'y', 'e', '!'}));
  // Our own closed end: send throws, recv reports Closed.
  EXPECT_THROW(client->send("x", 1), NetError);
  EXPECT_EQ(client->recv(buf, sizeof buf, Millis(0)).status, RecvStatus::Closed);
}

TEST(Tcp, SendToClosedPeerThrowsInsteadOfSigpipe) {
  auto [client, server] = tcp_pair();
  ASSERT_TRUE(client && server);
  const std::string peer = client->peer();
  server->close();
  // The first writes may be accepted by the kernel; the peer's RST makes a
  // later one fail with EPIPE or ECONNRESET. Without MSG_NOSIGNAL this test
  // process would die of SIGPIPE here.
  Bytes chunk(64 * 1024, 1);
  std::string what;
  for (int i = 0; i < 200 && what.empty(); ++i) {
    try {
      client->send(chunk.data(), chunk.size());
    } catch (const NetError& e) {
      what = e.what();
    }
    std::this_thread::sleep_for(Millis(1));
  }
  ASSERT_FALSE(what.empty()) << "send to a closed peer never failed";
  EXPECT_NE(what.find(peer), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

TEST(Tcp, ConnectGivesUpWithOneClearLine) {
  uint16_t port;
  {
    TcpListener l("127.0.0.1", 0);
    port = l.port();
  }  // closed: nothing listens there now
  try {
    ts::net::tcp_connect("127.0.0.1", port, Millis(200), Millis(20));
    FAIL() << "connect to a closed port succeeded";
  } catch (const NetError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
    EXPECT_NE(what.find("attempts"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Tcp, ConnectRetriesUntilTheListenerAppears) {
  uint16_t port;
  {
    TcpListener l("127.0.0.1", 0);
    port = l.port();
  }
  std::unique_ptr<ts::net::TcpTransport> client;
  std::string error;
  std::thread connector([&] {
    try {
      client = ts::net::tcp_connect("127.0.0.1", port, kWait, Millis(20));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(Millis(100));  // a few refused attempts first
  TcpListener late("127.0.0.1", port);       // the "board" finishes booting
  auto server = late.accept(kWait);
  connector.join();
  ASSERT_EQ(error, "");
  ASSERT_TRUE(client && server);
  client->send("ok", 2);
  uint8_t buf[2];
  auto r = server->recv(buf, 2, kWait);
  EXPECT_EQ(r.status, RecvStatus::Data);
}

TEST(Tcp, AcceptTimesOutAndBadAddressesFailClearly) {
  TcpListener l("127.0.0.1", 0);
  EXPECT_EQ(l.accept(Millis(20)), nullptr);
  EXPECT_NE(l.address().find(std::to_string(l.port())), std::string::npos);
  // An address this host does not have: bind fails (no DNS lookup involved,
  // so the test cannot hang on a resolver).
  try {
    TcpListener bad("192.0.2.1", 0);  // TEST-NET-1, never local
    FAIL() << "bind to a foreign address succeeded";
  } catch (const NetError& e) {
    EXPECT_NE(std::string(e.what()).find("listen on 192.0.2.1:0"), std::string::npos) << e.what();
  }
  l.close();
  EXPECT_THROW(l.accept(Millis(0)), NetError);
}

// ---------------------------------------------------------------------------
// In-process transport
// ---------------------------------------------------------------------------

TEST(Inproc, BulkTransferWithTinyReads) {
  auto [a, b] = ts::net::make_inproc_pair("host", "board1", 7);  // at most 7 bytes per recv
  EXPECT_EQ(a->peer(), "inproc:board1");
  EXPECT_EQ(b->peer(), "inproc:host");
  bulk_transfer(*a, *b, 256 << 10, 30000);
}

TEST(Inproc, TimeoutCloseAndErrors) {
  auto [a, b] = ts::net::make_inproc_pair();
  uint8_t buf[8];
  EXPECT_EQ(b->recv(buf, sizeof buf, Millis(10)).status, RecvStatus::Timeout);
  a->send("abc", 3);
  auto r = b->recv(buf, sizeof buf, Millis(0));
  ASSERT_EQ(r.status, RecvStatus::Data);
  EXPECT_EQ(r.bytes, 3u);
  EXPECT_EQ(std::memcmp(buf, "abc", 3), 0);

  // A blocked receiver wakes up when the peer closes.
  std::thread closer([&, &a = a] {
    std::this_thread::sleep_for(Millis(20));
    a->send("z", 1);
    a->close();
  });
  r = b->recv(buf, sizeof buf, ts::net::kForever);
  EXPECT_EQ(r.status, RecvStatus::Data);
  EXPECT_EQ(b->recv(buf, sizeof buf, ts::net::kForever).status, RecvStatus::Closed);
  closer.join();
  EXPECT_THROW(b->send("x", 1), NetError);  // peer gone
  EXPECT_THROW(a->send("x", 1), NetError);  // we are closed
  try {
    b->send("x", 1);
  } catch (const NetError& e) {
    EXPECT_NE(std::string(e.what()).find("inproc:a"), std::string::npos) << e.what();
  }
}

}  // namespace
