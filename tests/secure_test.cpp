// End-to-end tests of authenticated board links and bounded board resources
// (docs/reliability.md): key files, the right and wrong keys between real
// `tinysplit worker` processes and `tinysplit run`, a captured session
// replayed over TCP, board-to-board sessions of the direct route (a keyed
// run, a forged frame, a replayed captured session), idle connections that
// fill a board's link slots. Loopback only. About 45 s in all (each run of the
// bundled model takes 1-3 s).
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "core/wire.h"
#include "core/worker.h"
#include "net/tcp.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::Shell;
using ts::testing::tinysplit;
using ts::net::Millis;

bool have_model() { return fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"); }

// A scratch folder removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "ts_secure_XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string keygen(const TempDir& d, const std::string& name) {
  const std::string p = d / name;
  const Shell r = tinysplit("keygen -o " + p);
  EXPECT_EQ(r.code, 0) << r.err;
  return p;
}

// A standalone `tinysplit worker` process; stopped when destroyed.
class WorkerProcess {
 public:
  explicit WorkerProcess(const std::string& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c", (std::string("exec ") + TS_TINYSPLIT + " worker --listen 127.0.0.1:0 " + args).c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 10000) > 0 && read(fds[0], &c, 1) == 1) line += c;
    close(fds[0]);
    const auto at = line.find(" on ");
    if (at != std::string::npos) address_ = line.substr(at + 4, line.find(' ', at + 4) - at - 4);
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
  }
  const std::string& address() const { return address_; }
  uint16_t port() const { return uint16_t(std::stoi(address_.substr(address_.rfind(':') + 1))); }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

// Writes a testbed naming the given running boards (and a key file if set).
std::string testbed(const TempDir& d, const std::vector<const WorkerProcess*>& boards, const std::string& key = "") {
  nlohmann::json j;
  for (size_t i = 0; i < boards.size(); ++i) j["boards"].push_back({{"id", i}, {"address", boards[i]->address()}});
  if (!key.empty()) j["key_file"] = key;
  const std::string p = d / "testbed.json";
  std::ofstream(p) << j.dump();
  return p;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(KeyFile, KeygenWritesAPrivateKeyOnceAndRunChecksPermissions) {
  TempDir d;
  const std::string k = keygen(d, "a.key");
  struct stat st {};
  ASSERT_EQ(stat(k.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(k);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text.size(), 64u);
  EXPECT_EQ(text.find_first_not_of("0123456789abcdef"), std::string::npos);
  // Never overwritten.
  Shell r = tinysplit("keygen -o " + k);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("not overwritten"), std::string::npos) << r.err;
  // Readable by others: refused by both sides, one line naming the fix.
  chmod(k.c_str(), 0644);
  for (const std::string& cmd : {"run --workers 1 --key-file " + k, "worker --key-file " + k}) {
    r = tinysplit(cmd);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
  // Not a key.
  const std::string bad = d / "bad.key";
  std::ofstream(bad) << "not a key\n";
  chmod(bad.c_str(), 0600);
  r = tinysplit("run --workers 1 --key-file " + bad);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("64 hexadecimal digits"), std::string::npos) << r.err;
}

TEST(Auth, RightKeyIsBitExactWrongOrMissingKeyIsOneLine) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key"), b = keygen(d, "b.key");
  WorkerProcess w0("--id 0 --key-file " + a), w1("--id 1 --key-file " + a), w2("--id 2 --key-file " + a);
  ASSERT_FALSE(w2.address().empty());
  const std::string tb = testbed(d, {&w0, &w1, &w2});

  Shell r = tinysplit("run --json --timeout 5 --testbed " + tb + " --key-file " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_TRUE(j.at("authenticated").get<bool>());

  r = tinysplit("run --json --timeout 5 --testbed " + tb + " --key-file " + b);
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("refused our key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("board "), std::string::npos) << r.err;

  r = tinysplit("run --json --timeout 5 --testbed " + tb);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("requires authentication"), std::string::npos) << r.err;

  // The testbed's key_file (relative to the testbed file) works like --key-file.
  const std::string tbk = testbed(d, {&w0, &w1, &w2}, "a.key");
  r = tinysplit("run --json --timeout 5 --testbed " + tbk);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).at("authenticated").get<bool>());
}

// Board-to-board links of a keyed swarm have sessions of their own
// (docs/protocol.md, "Board-to-board links"): the direct route with a key is
// bit-exact on both strategies, every board-to-board frame tagged.
TEST(Auth, KeyedDirectRouteIsBitExact) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key");
  for (const char* strategy : {"spatial", "neuron"}) {
    SCOPED_TRACE(strategy);
    const Shell r = tinysplit(std::string("run --json --timeout 5 --workers 3 --repeat 2 --route direct --strategy ") +
                              strategy + " --key-file " + a);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 2);
    EXPECT_TRUE(j.at("authenticated").get<bool>());
    EXPECT_EQ(j.at("route").get<std::string>(), "direct");
    EXPECT_GT(j.at("wire_bytes").at("board_to_board_payload").get<int64_t>(), 0);
  }
}

TEST(Auth, CoordinatorWithKeyRefusesBoardWithout) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key");
  WorkerProcess w0("--id 0");
  const Shell r = tinysplit("run --timeout 5 --testbed " + testbed(d, {&w0}) + " --key-file " + a);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("has no key"), std::string::npos) << r.err;
}

// Relays one coordinator connection to a board and records what the
// coordinator sent.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t board_port) : listener_("127.0.0.1", 0), board_port_(board_port) {
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener_.port()); }
  std::vector<uint8_t> recorded() {
    std::lock_guard<std::mutex> l(mu_);
    return from_coord_;
  }

 private:
  void run() {
    std::unique_ptr<ts::net::Transport> c;
    while (!stop_ && !c) c = listener_.accept(Millis(100));
    if (!c) return;
    auto b = ts::net::tcp_connect("127.0.0.1", board_port_, Millis(5000));
    std::vector<uint8_t> buf(65536);
    bool open = true;
    while (!stop_ && open) {
      auto r = c->recv(buf.data(), buf.size(), Millis(5));
      if (r.status == ts::net::RecvStatus::Closed) open = false;
      if (r.status == ts::net::RecvStatus::Data) {
        {
          std::lock_guard<std::mutex> l(mu_);
          from_coord_.insert(from_coord_.end(), buf.begin(), buf.begin() + int64_t(r.bytes));
        }
        b->send(buf.data(), r.bytes);
      }
      r = b->recv(buf.data(), buf.size(), Millis(5));
      if (r.status == ts::net::RecvStatus::Closed) open = false;
      if (r.status == ts::net::RecvStatus::Data) c->send(buf.data(), r.bytes);
    }
  }
  ts::net::TcpListener listener_;
  uint16_t board_port_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<uint8_t> from_coord_;
};

TEST(Auth, CapturedSessionReplayedToTheBoardIsRefused) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key");
  WorkerProcess w0("--id 0 --key-file " + a);
  std::vector<uint8_t> recorded;
  {
    RecordingProxy proxy(w0.port());
    nlohmann::json j;
    j["boards"].push_back({{"id", 0}, {"address", proxy.address()}});
    const std::string tb = d / "proxy.json";
    std::ofstream(tb) << j.dump();
    const Shell r = tinysplit("run --json --timeout 5 --testbed " + tb + " --key-file " + a);
    ASSERT_EQ(r.code, 0) << r.err;
    recorded = proxy.recorded();
  }
  ASSERT_GT(recorded.size(), 1000u);
  // Replay the whole recorded session on a new connection.
  auto t = ts::net::tcp_connect("127.0.0.1", w0.port(), Millis(5000));
  try {
    t->send(recorded.data(), recorded.size());
  } catch (const std::exception&) {
    // the board may close while we are still sending: that is a refusal too
  }
  ts::wire::FrameReader reader;
  std::vector<uint8_t> buf(65536);
  bool error_seen = false, done_seen = false, closed = false;
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    ts::net::RecvResult r;
    try {
      r = t->recv(buf.data(), buf.size(), Millis(200));
    } catch (const std::exception&) {
      break;  // reset by the board
    }
    if (r.status == ts::net::RecvStatus::Closed) closed = true;
    size_t pos = 0;
    while (r.status == ts::net::RecvStatus::Data && pos < r.bytes) {
      const auto f = reader.feed(buf.data() + pos, r.bytes - pos);
      pos += f.consumed;
      if (f.status != ts::wire::FrameReader::Status::Frame) break;
      const auto& h = reader.header();
      if (h.type == ts::wire::MsgType::Done || h.type == ts::wire::MsgType::ProbeReply ||
          h.type == ts::wire::MsgType::Output)
        done_seen = true;
      if (h.type == ts::wire::MsgType::Error) {
        ts::wire::ErrorPayload e;
        ASSERT_TRUE(e.decode(reader.payload(), h.payload_len));
        EXPECT_EQ(e.code, ts::wire::ErrorCode::AuthFailed);
        error_seen = true;
        text = e.text;
      }
    }
  }
  EXPECT_TRUE(error_seen);
  EXPECT_FALSE(done_seen) << "the board acted on a replayed session";
  EXPECT_NE(text.find("key"), std::string::npos) << text;
}

// Relays every connection made to it to one board and records, per
// connection, the bytes the caller sent (the coordinator's, and those of the
// boards that dial this board for the direct route).
class RecordingRelay {
 public:
  explicit RecordingRelay(uint16_t board_port) : listener_("127.0.0.1", 0), board_port_(board_port) {
    accept_ = std::thread([this] {
      while (!stop_) {
        auto c = listener_.accept(Millis(50));
        if (!c) continue;
        std::lock_guard<std::mutex> l(mu_);
        sessions_.emplace_back();
        const size_t k = sessions_.size() - 1;
        pipes_.emplace_back([this, k, t = std::shared_ptr<ts::net::Transport>(std::move(c))] { pipe(*t, k); });
      }
    });
  }
  ~RecordingRelay() {
    stop_ = true;
    accept_.join();
    for (auto& t : pipes_) t.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener_.port()); }
  std::vector<std::vector<uint8_t>> sessions() {
    std::lock_guard<std::mutex> l(mu_);
    return sessions_;
  }

 private:
  void pipe(ts::net::Transport& c, size_t k) {
    std::unique_ptr<ts::net::TcpTransport> b;
    try {
      b = ts::net::tcp_connect("127.0.0.1", board_port_, Millis(5000));
    } catch (const std::exception&) {
      return;
    }
    std::vector<uint8_t> buf(65536);
    try {
      for (bool open = true; open && !stop_;) {
        auto r = c.recv(buf.data(), buf.size(), Millis(2));
        if (r.status == ts::net::RecvStatus::Closed) open = false;
        if (r.status == ts::net::RecvStatus::Data) {
          {
            std::lock_guard<std::mutex> l(mu_);
            sessions_[k].insert(sessions_[k].end(), buf.begin(), buf.begin() + int64_t(r.bytes));
          }
          b->send(buf.data(), r.bytes);
        }
        r = b->recv(buf.data(), buf.size(), Millis(2));
        if (r.status == ts::net::RecvStatus::Closed) open = false;
        if (r.status == ts::net::RecvStatus::Data) c.send(buf.data(), r.bytes);
      }
    } catch (const std::exception&) {
    }
  }
  ts::net::TcpListener listener_;
  uint16_t board_port_;
  std::thread accept_;
  std::vector<std::thread> pipes_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::vector<uint8_t>> sessions_;
};

// What a board answered on a connection, until it closed it (or 10 s).
struct Answer {
  bool auth_error = false;  // an ERROR AuthFailed
  bool acted = false;       // anything but HELLO, ACK (of that HELLO) or ERROR
  std::string text;
};

Answer answer_of(ts::net::Transport& t) {
  Answer a;
  ts::wire::FrameReader reader;
  std::vector<uint8_t> buf(65536);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    ts::net::RecvResult r;
    try {
      r = t.recv(buf.data(), buf.size(), Millis(200));
    } catch (const std::exception&) {
      break;
    }
    if (r.status == ts::net::RecvStatus::Closed) closed = true;
    size_t pos = 0;
    while (r.status == ts::net::RecvStatus::Data && pos < r.bytes) {
      const auto f = reader.feed(buf.data() + pos, r.bytes - pos);
      pos += f.consumed;
      if (f.status != ts::wire::FrameReader::Status::Frame) break;
      const auto& h = reader.header();
      if (h.type == ts::wire::MsgType::Error) {
        ts::wire::ErrorPayload e;
        if (e.decode(reader.payload(), h.payload_len) && e.code == ts::wire::ErrorCode::AuthFailed) a.auth_error = true;
        a.text = e.text;
        return a;  // the board closes the link after its ERROR
      } else if (h.type != ts::wire::MsgType::Hello && h.type != ts::wire::MsgType::Ack) {
        a.acted = true;
      }
    }
  }
  return a;
}

// A keyed board that holds a fragment of a direct plan, met by a stranger
// that claims to be another board of the plan (the HELLO is the one frame a
// board link sends untagged): its first tagged frame, forged without the key,
// is refused with AuthFailed and the link closed; an untagged frame after the
// HELLO as well.
TEST(Auth, ForgedBoardToBoardFrameIsRefused) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key");
  WorkerProcess w0("--id 0 --key-file " + a), w1("--id 1 --key-file " + a);
  ASSERT_FALSE(w1.address().empty());
  const Shell r = tinysplit("run --json --timeout 5 --route direct --strategy spatial --testbed " +
                            testbed(d, {&w0, &w1}) + " --key-file " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int kind = 0; kind < 2; ++kind) {
    SCOPED_TRACE(kind == 0 ? "forged tag" : "untagged");
    auto t = ts::net::tcp_connect("127.0.0.1", w0.port(), Millis(5000));
    // The board's HELLO names its deployment (the plan id).
    ts::wire::FrameReader reader;
    std::vector<uint8_t> buf(4096);
    ts::wire::FrameHeader board_hello;
    for (int i = 0; i < 50; ++i) {
      const auto rr = t->recv(buf.data(), buf.size(), Millis(200));
      if (rr.status == ts::net::RecvStatus::Data &&
          reader.feed(buf.data(), rr.bytes).status == ts::wire::FrameReader::Status::Frame) {
        board_hello = reader.header();
        break;
      }
    }
    ASSERT_EQ(board_hello.type, ts::wire::MsgType::Hello);
    ASSERT_EQ(board_hello.payload_len, ts::wire::HelloPayload::kAuthSize);
    // A HELLO as board 1 of that plan, then INPUTS.
    ts::wire::HelloPayload hp;
    hp.board_id = 1;
    hp.auth = true;
    for (auto& b : hp.nonce) b = 0x42;
    uint8_t pay[64];
    ts::wire::FrameHeader h;
    h.type = ts::wire::MsgType::Hello;
    h.src = 1;
    h.dst = 0;
    h.deployment = board_hello.deployment;
    h.seq = 1;
    h.flags = ts::wire::kFlagLast;
    std::vector<uint8_t> bytes(ts::wire::kMaxFrameBuf * 2);
    size_t n = ts::wire::encode_frame(h, pay, hp.encode(pay, sizeof pay), bytes.data(), bytes.size());
    h.type = ts::wire::MsgType::Inputs;
    h.seq = 2;
    h.layer = 1;
    h.flags = uint16_t(kind == 0 ? ts::wire::kFlagMac : 0);
    const uint8_t block[] = {0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 7};  // whatever: refused before it is read
    const size_t m = ts::wire::encode_frame(h, block, sizeof block, bytes.data() + n, bytes.size() - n);
    ASSERT_GT(m, 0u);
    if (kind == 0)
      for (size_t i = n + m - ts::wire::kTagSize; i < n + m; ++i) bytes[i] = uint8_t(i * 7);
    bytes.resize(n + m);
    t->send(bytes.data(), bytes.size());
    const Answer ans = answer_of(*t);
    EXPECT_TRUE(ans.auth_error) << ans.text;
    EXPECT_FALSE(ans.acted);
  }
  // The board still serves the swarm.
  const Shell again = tinysplit("run --json --timeout 5 --route direct --strategy spatial --testbed " +
                                testbed(d, {&w0, &w1}) + " --key-file " + a);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(nlohmann::json::parse(again.out).at("match_reference").get<bool>());
}

// A board-to-board session recorded on the way (one board dialling the other
// through a relay) and replayed to the board it went to on a new connection:
// that board's new HELLO nonce gives the link other keys, so the first recorded tagged
// frame is refused (AuthFailed) and nothing is taken.
TEST(Auth, CapturedBoardToBoardSessionReplayedIsRefused) {
  ASSERT_TRUE(have_model());
  TempDir d;
  const std::string a = keygen(d, "a.key");
  WorkerProcess w0("--id 0 --key-file " + a), w1("--id 1 --key-file " + a);
  ASSERT_FALSE(w1.address().empty());
  // Both boards behind a relay: whichever board dials the other, the link
  // goes through one of them.
  std::vector<uint8_t> peer;
  uint16_t target = 0;
  {
    RecordingRelay r0(w0.port()), r1(w1.port());
    nlohmann::json j;
    j["boards"].push_back({{"id", 0}, {"address", r0.address()}});
    j["boards"].push_back({{"id", 1}, {"address", r1.address()}});
    const std::string tb = d / "relay.json";
    std::ofstream(tb) << j.dump();
    const Shell r = tinysplit("run --json --timeout 5 --route direct --strategy spatial --testbed " + tb +
                              " --key-file " + a);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out).at("match_reference").get<bool>());
    // The peer's session: the one whose first frame is a board's HELLO.
    for (int k = 0; k < 2; ++k)
      for (const auto& s : (k == 0 ? r0 : r1).sessions()) {
        ts::wire::FrameHeader h;
        if (s.size() > 200 && ts::wire::decode_header(s.data(), s.size(), &h) == ts::wire::WireError::Ok &&
            h.type == ts::wire::MsgType::Hello && h.src != ts::wire::kCoordinatorId) {
          peer = s;
          target = k == 0 ? w0.port() : w1.port();
        }
      }
  }
  ASSERT_FALSE(peer.empty()) << "no board-to-board session went through the relays";
  auto t = ts::net::tcp_connect("127.0.0.1", target, Millis(5000));
  try {
    t->send(peer.data(), peer.size());
  } catch (const std::exception&) {
    // the board may close while we are still sending: that is a refusal too
  }
  const Answer ans = answer_of(*t);
  EXPECT_TRUE(ans.auth_error) << ans.text;
  EXPECT_FALSE(ans.acted) << "the board acted on a replayed board-to-board session";
}

// The first frame a board sends on a new connection, within 5 s.
ts::wire::MsgType first_frame(uint16_t port, std::string* text) {
  auto t = ts::net::tcp_connect("127.0.0.1", port, Millis(5000));
  ts::wire::FrameReader reader;
  std::vector<uint8_t> buf(4096);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto r = t->recv(buf.data(), buf.size(), Millis(200));
    if (r.status == ts::net::RecvStatus::Closed) break;
    if (r.status != ts::net::RecvStatus::Data) continue;
    if (reader.feed(buf.data(), r.bytes).status != ts::wire::FrameReader::Status::Frame) continue;
    ts::wire::ErrorPayload e;
    if (reader.header().type == ts::wire::MsgType::Error && e.decode(reader.payload(), reader.header().payload_len))
      *text = e.text;
    return reader.header().type;
  }
  return ts::wire::MsgType(0);
}

TEST(BoundedResources, IdleConnectionsDoNotBlockABoard) {
  ASSERT_TRUE(have_model());
  // kMaxLinks silent connections take every link slot of a board. None has
  // completed a handshake, so none keeps a newcomer out: the oldest gives
  // way (the board closes it) and another connection is greeted at once;
  // the idle timeout closes the rest, and a coordinator is served.
  WorkerProcess w0("--id 0 --idle-timeout 2");
  std::vector<std::unique_ptr<ts::net::TcpTransport>> idle;
  std::vector<uint8_t> buf(256);
  for (int i = 0; i < ts::core::kMaxLinks; ++i) {
    // One at a time, each until its HELLO is in: all accepted, none queued.
    idle.push_back(ts::net::tcp_connect("127.0.0.1", w0.port(), Millis(5000)));
    EXPECT_EQ(idle.back()->recv(buf.data(), buf.size(), Millis(5000)).status, ts::net::RecvStatus::Data);
  }
  EXPECT_EQ(idle.front()->recv(buf.data(), buf.size(), Millis(1500)).status, ts::net::RecvStatus::Closed)
      << "the oldest silent connection still holds its slot with every slot taken";
  std::string text;
  EXPECT_EQ(first_frame(w0.port(), &text), ts::wire::MsgType::Hello) << text;
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_EQ(first_frame(w0.port(), &text), ts::wire::MsgType::Hello);
  TempDir d;
  const Shell r = tinysplit("run --json --timeout 5 --testbed " + testbed(d, {&w0}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).at("match_reference").get<bool>());
}

}  // namespace
