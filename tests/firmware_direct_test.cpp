// Board-to-board routing between Cortex-M7 firmware boards under QEMU
// (docs/firmware.md, "Board to board under QEMU").
//
// Needs firmware/build/tinysplit-board.elf (scripts/build_firmware.sh) and
// qemu-system-arm, like tests/firmware_test.cpp: with TS_FIRMWARE set (CI)
// both are required and the tests FAIL without them; without it and without
// an image they are skipped with a message.
//
//  - one board holds several links at once: sixteen connections each get the
//    board's HELLO, a seventeenth is turned away with one ERROR saying so
//  - `run --workers qemu:3 --route direct` with bands of rows and with the
//    cost-model planner: bit-exact, every layer's digest verified, the
//    activations go board to board (each board dialled its peers through
//    QEMU's gateway), the coordinator's link carries only the graph input,
//    the logits and telemetry, and no frame was dropped at a board's NIC
//  - a board that changes one output of layer 20 is named on one line
//    (exit 2) with direct routing too
//
// Runtime: 35 to 55 s on the 2-core development machine under load (three
// `tinysplit run` commands of 8-21 s each, mostly QEMU boot and deploy, and
// a link test under 1 s).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "coord/qemu.h"
#include "core/wire.h"
#include "net/tcp.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::shell;

std::string firmware_path() {
  if (const char* e = std::getenv("TS_FIRMWARE"); e && *e) return e;
  return (fs::path(TS_SOURCE_DIR) / "firmware" / "build" / "tinysplit-board.elf").string();
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class FirmwareDirectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    elf_ = firmware_path();
    const bool have_elf = fs::is_regular_file(elf_);
    const bool have_qemu = shell("command -v qemu-system-arm").code == 0;
    const char* e = std::getenv("TS_FIRMWARE");
    if (e && *e) {
      ASSERT_TRUE(have_elf) << "TS_FIRMWARE=" << elf_ << " does not exist: run scripts/build_firmware.sh";
      ASSERT_TRUE(have_qemu) << "qemu-system-arm is not installed: run scripts/build_firmware.sh";
    } else if (!have_elf || !have_qemu) {
      GTEST_SKIP() << "firmware not built or QEMU missing (run scripts/build_firmware.sh; set TS_FIRMWARE=<elf> "
                      "to make these tests mandatory)";
    }
    ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
        << "models/mobilenetv2 is missing: run scripts/setup.sh first";
    dir_ = fs::temp_directory_path() / ("ts_fw_direct_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);  // kept on failure: the board logs
  }
  // `tinysplit run --workers qemu:3 --route direct ARGS --json`, board logs
  // in dir_/store/board-N/qemu.log.
  ts::testing::Shell run(const std::string& args, int size = 112) {
    return shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) + " run --size " + std::to_string(size) +
                 " --json --timeout 60 --workers qemu:3 --route direct " + args + " --store " + (dir_ / "store").string());
  }
  std::string board_log(int b) { return read_text(dir_ / "store" / ("board-" + std::to_string(b)) / "qemu.log"); }

  // A bit-exact direct run: every layer verified, activations board to board.
  // min_board_to_board: payload bytes that must cross board to board (fused
  // tiles move fewer: 74,880 at 112 on 3 boards).
  void expect_direct_run(const std::string& args, int64_t min_board_to_board = 100000) {
    const auto r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("route").get<std::string>(), "direct");
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("layers").get<size_t>(), j.at("per_layer").size());
    EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
    EXPECT_TRUE(j.at("first_mismatch").is_null());
    // Board to board: activations between the boards; the coordinator's link
    // carries the graph input (112x112x3 = 37,632 bytes of payload), the
    // logits and the DONE telemetry, far below the relay's megabytes.
    const auto& w = j.at("wire_bytes");
    EXPECT_GT(w.at("board_to_board_payload").get<int64_t>(), min_board_to_board);
    EXPECT_LT(w.at("total").get<int64_t>(), 200000);
    size_t dialled = 0;
    for (int b = 0; b < 3; ++b) {
      const std::string log = board_log(b);
      // Each board learnt its peers' forwarded ports on 127.0.0.1, to dial
      // them through its QEMU gateway. Which board opens a link is timing:
      // a link a peer opened first carries this board's sends too.
      EXPECT_GE(count_of(log, ", dialled as 10.0.2.2:"), 3u) << log;
      dialled += count_of(log, ": to peer ");
      EXPECT_EQ(log.find("cannot connect"), std::string::npos) << log;
      EXPECT_EQ(count_of(log, "sent ERROR"), 1u) << log;  // only the first deploy's expected "not stored"
      EXPECT_EQ(log.find("FATAL"), std::string::npos) << log;
      // The TCP windows of three senders fit the LAN9118's receive FIFO, so
      // QEMU never dropped a frame at the NIC (each drop costs a TCP
      // retransmission timeout).
      EXPECT_EQ(log.find("Failed to send packet"), std::string::npos) << log;
      EXPECT_NE(log.find("layer "), std::string::npos) << log;
    }
    EXPECT_GE(dialled, 1u);  // some board dialled a peer: activations went board to board
    std::printf("qemu:3 direct %s: latency %.3f s, coordinator link %lld bytes, board to board %lld payload bytes\n",
                args.c_str(), j.at("latency_s").at("total").get<double>(), (long long)w.at("total").get<int64_t>(),
                (long long)w.at("board_to_board_payload").get<int64_t>());
  }

  // One standalone QEMU board (id `id`, no icount) logging to board/qemu.log,
  // killed when the returned object goes; `port` is its forwarded port.
  struct OwnBoard {
    pid_t pid = -1;
    uint16_t port = 0;
    std::string log;  // its console
    ~OwnBoard() {
      if (pid <= 0) return;
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  };
  std::unique_ptr<OwnBoard> start_board(int id) {
    ts::coord::QemuBoardOptions o;
    o.id = id;
    o.icount = false;
    o.log_path = (dir_ / "board" / "qemu.log").string();
    const ts::coord::QemuBoard b = ts::coord::spawn_qemu_board(o);
    auto own = std::make_unique<OwnBoard>();
    own->pid = b.pid;
    own->log = o.log_path;
    own->port = uint16_t(std::stoi(b.address.substr(b.address.rfind(':') + 1)));
    return own;
  }

  std::string elf_;
  fs::path dir_;
};

// Sixteen connections at once (coordinator and peers share the board's
// kMaxLinks = 16 slots, firmware/Makefile MAX_LINKS): each gets HELLO. None
// completes a handshake, so the board keeps a slot free for the next: the
// oldest is closed (core::Worker::link_to_evict), and a seventeenth
// connection is greeted too.
constexpr int kFirmwareLinks = 16;
TEST_F(FirmwareDirectTest, ABoardHoldsSixteenLinksAndMakesRoomForTheNext) {
  const auto board = start_board(5);
  const uint16_t port = board->port;

  // The first frame on a connection, within 10 s.
  auto first_frame = [](ts::net::Transport& t, ts::wire::FrameHeader* h, std::string* text) {
    ts::wire::FrameReader reader;
    uint8_t buf[2048];
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      const auto r = t.recv(buf, sizeof buf, ts::net::Millis(200));
      if (r.status == ts::net::RecvStatus::Closed) return false;
      if (r.status != ts::net::RecvStatus::Data) continue;
      const auto f = reader.feed(buf, r.bytes);
      if (f.status == ts::wire::FrameReader::Status::Error) return false;
      if (f.status != ts::wire::FrameReader::Status::Frame) continue;
      *h = reader.header();
      if (h->type == ts::wire::MsgType::Error) {
        ts::wire::ErrorPayload e;
        if (e.decode(reader.payload(), h->payload_len)) *text = e.text;
      }
      return true;
    }
    return false;
  };
  std::vector<std::unique_ptr<ts::net::TcpTransport>> links;
  for (int i = 0; i < kFirmwareLinks; ++i) {
    links.push_back(ts::net::tcp_connect("127.0.0.1", port, ts::net::Millis(5000)));
    ts::wire::FrameHeader h;
    std::string text;
    ASSERT_TRUE(first_frame(*links.back(), &h, &text)) << "connection " << i << "\n" << read_text(board->log);
    EXPECT_EQ(h.type, ts::wire::MsgType::Hello) << "connection " << i;
    EXPECT_EQ(h.src, 5);
  }
  auto extra = ts::net::tcp_connect("127.0.0.1", port, ts::net::Millis(5000));
  ts::wire::FrameHeader h;
  std::string text;
  ASSERT_TRUE(first_frame(*extra, &h, &text)) << read_text(board->log);
  EXPECT_EQ(h.type, ts::wire::MsgType::Hello) << text;
  // The oldest silent connection gave way: the board closed it.
  uint8_t byte = 0;
  EXPECT_EQ(links[0]->recv(&byte, 1, ts::net::Millis(10000)).status, ts::net::RecvStatus::Closed)
      << read_text(board->log);
  EXPECT_NE(read_text(board->log).find("pushed out: a newer connection needs the slot"), std::string::npos)
      << read_text(board->log);
}

TEST_F(FirmwareDirectTest, BandsOfRowsBoardToBoardAreBitExact) { expect_direct_run("--strategy spatial"); }

// Whole rows on the short maps too (`rows`): more outputs in place, fewer pieces.
TEST_F(FirmwareDirectTest, WholeRowBandsBoardToBoardAreBitExact) { expect_direct_run("--strategy rows"); }

TEST_F(FirmwareDirectTest, PlannerChoiceBoardToBoardIsBitExact) { expect_direct_run("--strategy auto"); }

// Fused tiles: each board computes the expansion on its neighbours' halo
// rows as well, in place into the depthwise layer's window, and receives the
// narrower rows of the block's input instead.
TEST_F(FirmwareDirectTest, FusedTilesBoardToBoardAreBitExact) { expect_direct_run("--strategy fused", 50000); }

// The same over bands of whole rows on the short maps too (`fused-rows`).
TEST_F(FirmwareDirectTest, FusedRowTilesBoardToBoardAreBitExact) { expect_direct_run("--strategy fused-rows", 50000); }

// Streamed chains (core/stream.h): every chain that can stream computed row
// by row on the Cortex-M7 boards, line buffers in their arenas; and at 224
// within 256 KiB a board, where `auto` streams because nothing else fits:
// every board's measured peak is the planned.
TEST_F(FirmwareDirectTest, StreamedChainsBoardToBoardAreBitExact) {
  expect_direct_run("--strategy spatial --stream on", 50000);
  const auto r = run("--ram 256K", 224);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  for (const auto& w : j.at("per_worker")) {
    EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
    EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), 262144);
  }
}

// Input-channel shares with int32 partial sums (strategy reduce: the
// contracting 1x1 convolutions and the Gemms), summed on the Cortex-M7 boards
// from sums the other boards sent them.
TEST_F(FirmwareDirectTest, PartialSumsBoardToBoardAreBitExact) { expect_direct_run("--strategy reduce"); }

// A global pool of a map split in rows: each board sums its own rows and the
// sums go to the channels' owners (core/partial.h), on PP-OCRv4's neck in
// small (the rsefpn test model, its own 64x64 size), bands of rows.
TEST_F(FirmwareDirectTest, GlobalPoolRowSumsBoardToBoardAreBitExact) {
  const std::string args = "--model " + std::string(TS_SOURCE_DIR) + "/tests/data/onnx/rsefpn.onnx --strategy spatial";
  const auto p = ts::testing::tinysplit("plan --workers 3 --route direct --json " + args);
  ASSERT_EQ(p.code, 0) << p.err;
  int summed = 0;
  const auto plan = nlohmann::json::parse(p.out);
  for (const auto& l : plan.at("per_layer")) summed += l.at("op") == "GlobalAvgPool" && l.at("strategy") == "reduce";
  EXPECT_GE(summed, 2);
  const auto r = run(args, 0);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("route").get<std::string>(), "direct");
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  EXPECT_TRUE(j.at("first_mismatch").is_null());
}

// Views (plan/arena.cpp): windows that hold no bytes of their own, read in a
// later layer's window, on the boards: MobileNetV3-small's squeeze-excite
// blocks over bands of whole rows on 3 QEMU Cortex-M7 boards, bit-exact, each
// board's measured arena the planned one.
TEST_F(FirmwareDirectTest, ViewsReadInPlaceOnTheBoardsAreBitExact) {
  const auto r = run("--model " + std::string(TS_SOURCE_DIR) + "/tests/data/onnx/mobilenet_v3_small.onnx --strategy fused-rows", 0);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("views").at("early").get<int>(), 0);
  EXPECT_GT(j.at("views").at("windows").get<int>(), j.at("views").at("early").get<int>());
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  for (const auto& w : j.at("per_worker"))
    EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
}

// `run --inject-fault flip:1:20`: board 1 changes one output of layer 20
// after computing it; with direct routing the coordinator never sees that
// tensor, only board 1's digest in DONE, and names board and layer.
TEST_F(FirmwareDirectTest, AFlippedOutputIsNamedWithDirectRouting) {
  const auto r = run("--strategy spatial --inject-fault flip:1:20");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ASSERT_FALSE(r.out.empty()) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string name = j.at("per_layer").at(20).at("name").get<std::string>();
  EXPECT_NE(r.err.find("tinysplit: error: board 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at layer 20 '" + name + "'"), std::string::npos) << r.err;
  EXPECT_EQ(j.at("first_mismatch").at("board").get<int>(), 1);
  EXPECT_EQ(j.at("first_mismatch").at("layer").get<int>(), 20);
  EXPECT_LT(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  EXPECT_GE(count_of(board_log(1), ": to peer "), 1u);
}

}  // namespace

namespace {

// Pipelined images on 3 Cortex-M7 boards (the same worker core as host
// boards: core/worker.cpp): no board holds the model at 200 KiB without
// streamed chains, so one deployment of 3 boards takes 3 images with 2 in
// flight; every output and every layer digest the reference's. The rate is
// not asserted.
TEST_F(FirmwareDirectTest, PipelinedImagesOnThreeBoardsAreExact) {
  const auto r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) +
                       " run --size 112 --json --timeout 60 --workers qemu:3 --ram 200K --stream off --objective throughput "
                       "--repeat 3");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("groups").get<int>(), 1);
  EXPECT_TRUE(j.at("pipelined").get<bool>());
  EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 3);
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  EXPECT_TRUE(j.at("match_reference").get<bool>());
}

}  // namespace

// A client that floods a board without a key with RESETs and never reads the
// ACKs they earn does not stall it (issue 26, "sends never block the board's
// loop"): the board's sends to it wait in its bounded send queue instead of
// inside lwIP, a newcomer is greeted while the flood goes on, and the
// flooder is dropped once its queue is full (or has not moved for
// core::kWriteDeadlineMs). The firmware before waited inside lwIP for up to
// 30 s per send, serving nobody meanwhile.
TEST_F(FirmwareDirectTest, AClientThatNeverReadsDoesNotStallAQemuBoard) {
  const auto board = start_board(4);
  const uint16_t port = board->port;
  auto dial = [&](int rcvbuf) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);  // before connect: a small window
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  };
  // A newcomer's first bytes (the board's HELLO) within 5 s.
  auto greeted = [&] {
    const int fd = dial(0);
    if (fd < 0) return false;
    pollfd p{fd, POLLIN, 0};
    const bool ok = poll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
    close(fd);
    return ok;
  };
  const int fd = dial(4096);
  ASSERT_GE(fd, 0);
  uint32_t seq = 1;
  // The next 256 RESETs, numbered on from the last.
  auto burst_of_resets = [&] {
    std::vector<uint8_t> burst;
    for (int i = 0; i < 256; ++i) {
      ts::wire::FrameHeader h;
      h.type = ts::wire::MsgType::Reset;
      h.src = ts::wire::kCoordinatorId;
      h.seq = seq++;
      h.flags = ts::wire::kFlagLast;
      uint8_t f[ts::wire::kMaxFrame];
      const size_t n = ts::wire::encode_frame(h, nullptr, 0, f, sizeof f);
      burst.insert(burst.end(), f, f + n);
    }
    return burst;
  };
  bool dropped = false, probed = false;
  size_t total = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!dropped && std::chrono::steady_clock::now() < end) {
    const std::vector<uint8_t> burst = burst_of_resets();
    size_t off = 0;
    while (off < burst.size() && !dropped && std::chrono::steady_clock::now() < end) {
      const ssize_t n = send(fd, burst.data() + off, burst.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += size_t(n);
        total += size_t(n);
        if (!probed && total > (size_t(256) << 10)) {
          EXPECT_TRUE(greeted()) << "the board did not greet a new connection within 5 s\n" << read_text(board->log);
          probed = true;
        }
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // The board reads no more of ours: its answers are backed up. It
        // still greets a newcomer at once.
        if (!probed) {
          EXPECT_TRUE(greeted()) << "the board did not greet a new connection within 5 s\n" << read_text(board->log);
          probed = true;
        }
        pollfd p{fd, POLLOUT, 0};
        poll(&p, 1, 100);
      } else {
        dropped = true;  // the board closed us (EPIPE, ECONNRESET)
      }
    }
  }
  close(fd);
  const std::string log = read_text(board->log);
  EXPECT_TRUE(dropped) << "the board kept a client that never reads for 60 s (" << total << " bytes sent)\n" << log;
  EXPECT_TRUE(log.find("its peer does not read") != std::string::npos ||
              log.find("did not move for 10 s") != std::string::npos)
      << log;
  EXPECT_TRUE(greeted()) << "the board did not greet a new connection after the flood\n" << log;
}
