// Deadlines on every stage of a link, with processes on loopback: three
// standalone `tinysplit worker --listen` boards under attack.
//  - Keyed boards whose every connection slot is held by slow senders (one
//    byte of a frame header every second, reconnecting whenever dropped):
//    a real coordinator's run is still bit-exact, within twice its timeout,
//    and the boards drop the slow senders (handshake and frame deadlines,
//    newcomers pushing out connections without a handshake).
//  - An unkeyed board owned by a client that floods frames and never reads
//    the answers: the board keeps serving others meanwhile (its sends never
//    wait on a peer), drops the client by its write limits, and a run after
//    it is bit-exact.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "core/wire.h"
#include "support/shell.h"
#include "support/worker_process.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ts::testing::Shell;
using ts::testing::Swarm3;
using ts::testing::WorkerProcess;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

// A non-blocking TCP connection to "127.0.0.1:PORT", or -1.
int dial(const std::string& address) {
  const auto colon = address.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A coordinator's frame of type `t` with sequence number `seq`.
std::vector<uint8_t> coordinator_frame(ts::wire::MsgType t, uint32_t seq) {
  ts::wire::FrameHeader h;
  h.type = t;
  h.src = ts::wire::kCoordinatorId;
  h.seq = seq;
  h.flags = ts::wire::kFlagLast;
  std::vector<uint8_t> f(ts::wire::kMaxFrame);
  f.resize(ts::wire::encode_frame(h, nullptr, 0, f.data(), f.size()));
  return f;
}

// True if the peer has closed `fd` (end of stream or an error); reads and
// drops what is there.
bool closed_by_peer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR)) return true;
  char buf[4096];
  const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}


constexpr int kTimeoutS = 30;  // the coordinator's --timeout in these runs

Shell run(const Swarm3& s, const std::string& extra) {
  // The run must end within twice its timeout: `timeout` kills it past that.
  return ts::testing::shell("timeout " + std::to_string(2 * kTimeoutS) + " " + TS_TINYSPLIT + " " +
                            ts::testing::at_paper_size("run --json --timeout " + std::to_string(kTimeoutS) +
                                                       " --testbed " + s.testbed + extra));
}

void expect_bit_exact(const Shell& r) {
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_TRUE(j.at("failovers").empty()) << j.at("failovers").dump();
}

// Slow senders on every slot of every board: each connection sends one byte
// of a frame header per second and is reopened when the board drops it,
// until `stop` (bounded: 150 s at most). Counts the drops.
struct SlowSenders {
  std::atomic<bool> stop{false};
  std::atomic<int> dropped{0}, open_now{0};
  int dialled = 0;  // connections open before the trickle began
  std::thread th;
  struct Conn {
    std::string at;
    int fd = -1;
    size_t sent = 0;
  };
  std::vector<Conn> conns;
  SlowSenders(const std::vector<std::string>& addresses, int per_board) {
    // Every connection is open before the run starts (a board accepts them
    // one per turn of its loop: on a busy machine some wait in the backlog).
    for (const auto& a : addresses)
      for (int i = 0; i < per_board; ++i) {
        conns.push_back(Conn{a, dial(a), 0});
        dialled += conns.back().fd >= 0;
      }
    th = std::thread([this] {
      const auto frame = coordinator_frame(ts::wire::MsgType::Reset, 1);
      const auto end = Clock::now() + std::chrono::seconds(150);
      while (!stop && Clock::now() < end) {
        int open = 0;
        for (Conn& c : conns) {
          if (c.fd >= 0 && closed_by_peer(c.fd)) {
            close(c.fd);
            c.fd = -1;
            ++dropped;
          }
          if (c.fd < 0) {
            c.fd = dial(c.at);
            c.sent = 0;
          }
          if (c.fd < 0) continue;
          ++open;
          if (c.sent + 1 < frame.size() && send(c.fd, frame.data() + c.sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
            ++c.sent;
        }
        open_now = open;
        for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      for (Conn& c : conns)
        if (c.fd >= 0) close(c.fd);
    });
  }
  ~SlowSenders() {
    stop = true;
    th.join();
  }
};

TEST(LinkDeadline, SlowSendersOnEverySlotOfKeyedBoardsDoNotStopARun) {
  if (!have_model()) GTEST_SKIP() << "bundled model not found";
  const fs::path key = fs::temp_directory_path() / ("ts_deadline_" + std::to_string(getpid()) + ".key");
  ASSERT_EQ(ts::testing::shell(std::string(TS_TINYSPLIT) + " keygen -o " + key.string()).code, 0);
  Swarm3 s("deadline", "--key-file " + key.string());
  ASSERT_TRUE(s.up());
  std::vector<std::string> at;
  for (auto& b : s.boards) at.push_back(b->address);
  {
    SlowSenders slow(at, 40);  // every slot of each board (core::kMaxLinks)
    ASSERT_EQ(slow.dialled, 120);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // a few header bytes on each
    EXPECT_GT(slow.open_now.load(), 100);
    const Shell r = run(s, " --key-file " + key.string());
    expect_bit_exact(r);
    // The boards made room: slow senders were dropped (pushed out for the
    // coordinator and the boards' own links, or past their deadlines).
    EXPECT_GT(slow.dropped.load(), 0);
  }
  fs::remove(key);
}

TEST(LinkDeadline, AClientThatNeverReadsDoesNotStallAnUnkeyedBoard) {
  if (!have_model()) GTEST_SKIP() << "bundled model not found";
  Swarm3 s("deadline");
  ASSERT_TRUE(s.up());
  // The flooder claims board 0 (its first frame) and sends RESETs, each
  // answered by an ACK it never reads, until the board drops it.
  const int fd = dial(s.boards[0]->address);
  ASSERT_GE(fd, 0);
  uint32_t seq = 1;
  bool dropped = false;
  bool probed = false;
  size_t total = 0;
  // While we hold the board with unread answers, it still greets a newcomer
  // at once.
  auto probe = [&] {
    const int other = dial(s.boards[0]->address);
    ASSERT_GE(other, 0);
    pollfd p{other, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 2000), 1) << "the board did not greet a new connection within 2 s";
    close(other);
    probed = true;
  };
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (!dropped && Clock::now() < end) {
    std::vector<uint8_t> burst;
    for (int i = 0; i < 512; ++i) {
      const auto f = coordinator_frame(ts::wire::MsgType::Reset, seq++);
      burst.insert(burst.end(), f.begin(), f.end());
    }
    size_t off = 0;
    while (off < burst.size() && !dropped && Clock::now() < end) {
      const ssize_t n = send(fd, burst.data() + off, burst.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += size_t(n);
        total += size_t(n);
        if (!probed && total > (size_t(8) << 20)) probe();  // its answers are past any socket buffer
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!probed) probe();
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, 100);
      } else {
        dropped = true;  // the board closed us (EPIPE, ECONNRESET)
      }
    }
  }
  EXPECT_TRUE(dropped) << "the board kept a client that never reads for 60 s";
  if (!probed) probe();
  close(fd);
  expect_bit_exact(run(s, ""));
}

}  // namespace
