// The fragment store of the Cortex-M7 firmware under QEMU (firmware/src/
// flash_store.cpp: A/B slots, header written last) and what the board does
// with it, driven through `tinysplit run` and, for deploys no correct
// coordinator sends, through a BoardLink of the test's own:
//
//  - the redeploy cache: a second run of the same plan deploys nothing
//    (the run's deploy counters), another plan deploys again
//  - a committed fragment survives a restart of the board when its flash
//    is kept (QEMU's flash in a file, QemuBoardOptions::flash_path; `run
//    --store` keeps it for "qemu" boards)
//  - a power cut in the middle of a deploy (--cut-after-store) and a corrupt
//    deploy (bytes that are not what COMMIT vouches for, or a digest-correct
//    buffer that is not a fragment) leave the previous fragment committed
//    and usable; the next deploy of the cut plan works
//  - a fragment larger than the flash is refused with one clear line, by the
//    coordinator (the board's HELLO) or by the board itself (a board that
//    claims more flash than it has), and the board keeps serving
//  - window 1 (stop-and-wait) on three QEMU boards is bit-exact
//
// Needs firmware/build/tinysplit-board.elf and qemu-system-arm, like
// firmware_test.cpp: mandatory when TS_FIRMWARE is set (CI), else skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "coord/link.h"
#include "coord/qemu.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "core/wire.h"
#include "net/tcp.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::shell;
using Json = nlohmann::json;

std::string firmware_path() {
  if (const char* e = std::getenv("TS_FIRMWARE"); e && *e) return e;
  return (fs::path(TS_SOURCE_DIR) / "firmware" / "build" / "tinysplit-board.elf").string();
}

std::string onnx(const std::string& name) {
  return (fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx" / (name + ".onnx")).string();
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// One QEMU board process the test starts, stops and restarts itself.
struct Board {
  ts::coord::QemuBoard qb;
  std::string log_path;
  int status = -1;  // wait status once it exited
  bool running() const { return qb.pid > 0 && status < 0; }
  uint16_t port() const { return uint16_t(std::stoi(qb.address.substr(qb.address.rfind(':') + 1))); }
  std::string log() const { return slurp(log_path); }
  // Waits up to `seconds` for it to exit by itself; true if it did.
  bool wait_exit(double seconds) {
    for (int i = 0; i < int(seconds * 20) && running(); ++i) {
      int st = 0;
      if (waitpid(qb.pid, &st, WNOHANG) == qb.pid) status = st;
      else usleep(50 * 1000);
    }
    return !running();
  }
  void stop() {
    if (!running()) return;
    kill(qb.pid, SIGTERM);
    int st = 0;
    waitpid(qb.pid, &st, 0);
    status = st;
  }
  ~Board() { stop(); }
};

class FirmwareFlashTest : public ::testing::Test {
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
    setenv("TS_FIRMWARE", elf_.c_str(), 1);
    dir_ = fs::temp_directory_path() /
           ("ts_fw_flash_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);  // kept for the board logs otherwise
  }

  // Starts board 0 (no icount: faster); `flash` empty = flash lost at exit.
  std::unique_ptr<Board> boot(const std::string& name, const std::string& flash, const std::string& extra = "") {
    ts::coord::QemuBoardOptions o;
    o.id = 0;
    o.icount = false;
    o.log_path = (dir_ / (name + ".log")).string();
    o.flash_path = flash;
    o.extra_args = extra;
    auto b = std::make_unique<Board>();
    b->qb = ts::coord::spawn_qemu_board(o);
    b->log_path = o.log_path;
    std::ofstream(dir_ / (name + ".json")) << R"({"boards": [{"id": 0, "address": ")" << b->qb.address << R"("}]})";
    return b;
  }

  struct Run {
    ts::testing::Shell sh;
    Json j;  // null unless the run printed JSON
  };
  // `tinysplit run --json` of `model` on the board started as `name`.
  Run run(const std::string& name, const std::string& model, const std::string& extra = "") {
    Run r;
    r.sh = shell(std::string(TS_TINYSPLIT) + " run --json --timeout 60 --size 0 --allocation even -t " +
                 (dir_ / (name + ".json")).string() + " --model " + model + " " + extra);
    if (!r.sh.out.empty()) r.j = Json::parse(r.sh.out, nullptr, false);
    return r;
  }

  // The run is bit-exact, every layer verified, and deployed `sent` boards
  // (the rest cached).
  static void expect_exact(const Run& r, int sent, int cached) {
    ASSERT_EQ(r.sh.code, 0) << r.sh.err;
    ASSERT_TRUE(r.j.is_object()) << r.sh.out;
    EXPECT_TRUE(r.j.at("match_reference").get<bool>());
    EXPECT_EQ(r.j.at("verified_layers").get<int>(), r.j.at("layers").get<int>());
    const Json& d = r.j.at("deploy");
    EXPECT_EQ(d.at("sent").get<int>(), sent) << d;
    EXPECT_EQ(d.at("cached").get<int>(), cached) << d;
    if (sent == 0) EXPECT_EQ(d.at("bytes").get<int64_t>(), 0) << "a cached deploy sent fragment bytes";
    else EXPECT_GT(d.at("bytes").get<int64_t>(), 0);
  }

  std::string elf_;
  fs::path dir_;
};

// The fragment store's line at boot: the committed fragment's size, or 0.
int64_t committed_at_boot(const std::string& log) {
  const std::string key = "flash: committed fragment of ";
  const size_t at = log.find(key);
  if (at == std::string::npos) return log.find("flash: no committed fragment") != std::string::npos ? 0 : -1;
  return std::stoll(log.substr(at + key.size()));
}

TEST_F(FirmwareFlashTest, SecondRunOfTheSamePlanDeploysNothing) {
  auto b = boot("board", "");
  {
    SCOPED_TRACE("first run: deployed");
    expect_exact(run("board", onnx("tiny")), 1, 0);
  }
  {
    SCOPED_TRACE("same plan again: cached, no fragment byte sent");
    expect_exact(run("board", onnx("tiny")), 0, 1);
  }
  {
    SCOPED_TRACE("another plan: deployed again");
    expect_exact(run("board", onnx("squeezenet_mini")), 1, 0);
  }
  {
    SCOPED_TRACE("the first plan again: its slot was replaced, deployed again");
    expect_exact(run("board", onnx("tiny")), 1, 0);
  }
  EXPECT_TRUE(b->running()) << b->log();
  EXPECT_EQ(b->log().find("FATAL"), std::string::npos) << b->log();
}

TEST_F(FirmwareFlashTest, CommittedFragmentSurvivesARestartWithItsFlash) {
  const std::string flash = (dir_ / "flash.img").string();
  int64_t size = 0;
  {
    auto b = boot("first", flash);
    EXPECT_EQ(committed_at_boot(b->log()), 0) << b->log();
    const Run r = run("first", onnx("tiny"));
    expect_exact(r, 1, 0);
    if (r.j.is_object()) size = r.j.at("deploy").at("bytes").get<int64_t>();
  }  // SIGTERM: QEMU stops, the file stays
  auto b = boot("second", flash);
  EXPECT_EQ(committed_at_boot(b->log()), size) << b->log();
  SCOPED_TRACE("after the restart: cached");
  expect_exact(run("second", onnx("tiny")), 0, 1);
  // Without the kept flash the same board starts empty and is deployed to.
  b->stop();
  auto fresh = boot("fresh", (dir_ / "other.img").string());
  EXPECT_EQ(committed_at_boot(fresh->log()), 0) << fresh->log();
  expect_exact(run("fresh", onnx("tiny")), 1, 0);
}

// `run --store DIR` with QEMU boards keeps their flash in DIR/board-N/flash.img.
TEST_F(FirmwareFlashTest, RunStoreKeepsQemuFlashBetweenRuns) {
  const std::string cmd = "TS_QEMU_ICOUNT=0 " + std::string(TS_TINYSPLIT) + " run --json --timeout 60 --size 0 --allocation even " +
                          "--workers qemu:2 --model " + onnx("tiny") + " --store " + (dir_ / "store").string();
  Run first, second;
  first.sh = shell(cmd);
  first.j = Json::parse(first.sh.out, nullptr, false);
  expect_exact(first, 2, 0);
  EXPECT_TRUE(fs::is_regular_file(dir_ / "store" / "board-0" / "flash.img"));
  second.sh = shell(cmd);
  second.j = Json::parse(second.sh.out, nullptr, false);
  expect_exact(second, 0, 2);
}

TEST_F(FirmwareFlashTest, PowerCutInADeployKeepsThePreviousFragment) {
  const std::string flash = (dir_ / "flash.img").string();
  int64_t size_a = 0;
  {
    auto b = boot("a", flash);
    const Run r = run("a", onnx("tiny"));
    expect_exact(r, 1, 0);
    if (r.j.is_object()) size_a = r.j.at("deploy").at("bytes").get<int64_t>();
  }
  {
    // squeezenet_mini's fragment is far larger than 8 KiB: the board stops
    // with a half-staged slot (the header sector of that slot erased, a few
    // data sectors programmed).
    auto b = boot("cut", flash, "--cut-after-store 8192");
    const Run r = run("cut", onnx("squeezenet_mini"));
    EXPECT_NE(r.sh.code, 0) << r.sh.out;
    ASSERT_TRUE(b->wait_exit(30)) << b->log();
    EXPECT_TRUE(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 5) << b->log();
    EXPECT_NE(b->log().find("power cut (test hook --cut-after-store)"), std::string::npos) << b->log();
  }
  auto b = boot("after", flash);
  EXPECT_EQ(committed_at_boot(b->log()), size_a) << b->log();
  {
    SCOPED_TRACE("the fragment committed before the cut: still there, bit-exact");
    expect_exact(run("after", onnx("tiny")), 0, 1);
  }
  {
    SCOPED_TRACE("the plan that was cut: deployed whole over the half-staged slot");
    expect_exact(run("after", onnx("squeezenet_mini")), 1, 0);
  }
  {
    SCOPED_TRACE("and it is the committed one now");
    expect_exact(run("after", onnx("squeezenet_mini")), 0, 1);
  }
}

// A coordinator of the test's own sends deploys that must not be committed;
// the fragment committed before stays current and `run` finds it cached.
TEST_F(FirmwareFlashTest, CorruptDeployKeepsThePreviousFragment) {
  using ts::wire::MsgType;
  auto b = boot("board", (dir_ / "flash.img").string());
  expect_exact(run("board", onnx("tiny")), 1, 0);

  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(20000);
  for (auto& x : bytes) x = uint8_t(rng());
  auto commit_payload = [](const std::vector<uint8_t>& v) {
    ts::wire::CommitPayload c;
    c.fragment_size = uint32_t(v.size());
    c.fragment_crc = ts::crc32(v.data(), v.size());
    ts::sha256(v.data(), v.size(), c.digest);
    std::vector<uint8_t> buf(ts::wire::CommitPayload::kSize);
    c.encode(buf.data(), buf.size());
    return buf;
  };
  // Stages `staged`, commits with `vouched`'s size, CRC and digest; returns
  // the board's answer.
  auto deploy = [&](const std::vector<uint8_t>& staged, const std::vector<uint8_t>& vouched) {
    // The board serves one connection at a time and may still be closing
    // the last run's: it answers "busy" until then.
    std::unique_ptr<ts::coord::BoardLink> lp;
    for (int attempt = 0;; ++attempt) {
      lp = std::make_unique<ts::coord::BoardLink>(
          ts::net::tcp_connect("127.0.0.1", b->port(), ts::net::Millis(20000)), 0, 8, std::chrono::milliseconds(20000));
      try {
        lp->handshake();
        break;
      } catch (const ts::coord::BoardError& e) {
        if (attempt >= 50 || std::string(e.what()).find("busy") == std::string::npos) throw;
        lp.reset();
        usleep(200 * 1000);
      }
    }
    ts::coord::BoardLink& l = *lp;
    l.send_message(MsgType::Store, 0, 0, staged.data(), staged.size(), 1);
    const auto c = commit_payload(vouched);
    l.send(MsgType::Commit, 0, 0, c.data(), c.size(), ts::wire::kFlagLast, 1);
    ts::coord::Frame f = l.recv_or_error();
    l.close();
    return f;
  };
  auto error_text = [](const ts::coord::Frame& f) {
    ts::wire::ErrorPayload e;
    if (f.h.type != MsgType::Error || !e.decode(f.payload.data(), f.payload.size())) return std::string("(not an ERROR)");
    return std::string(ts::wire::error_code_name(e.code)) + ": " + e.text;
  };
  {
    SCOPED_TRACE("one byte changed on the way");
    std::vector<uint8_t> sent = bytes;
    sent[12345] ^= 0x10;
    const ts::coord::Frame f = deploy(sent, bytes);
    EXPECT_EQ(f.h.type, MsgType::Error);
    EXPECT_NE(error_text(f).find("staged fragment has another digest"), std::string::npos) << error_text(f);
  }
  {
    SCOPED_TRACE("fewer bytes than COMMIT says");
    const std::vector<uint8_t> half(bytes.begin(), bytes.begin() + 10000);
    const ts::coord::Frame f = deploy(half, bytes);
    EXPECT_EQ(f.h.type, MsgType::Error) << error_text(f);
  }
  {
    SCOPED_TRACE("digest and CRC right, but not a fragment");
    const ts::coord::Frame f = deploy(bytes, bytes);
    EXPECT_EQ(f.h.type, MsgType::Error);
    EXPECT_NE(error_text(f).find("fragment invalid"), std::string::npos) << error_text(f);
  }
  SCOPED_TRACE("the fragment of before: still committed, bit-exact");
  expect_exact(run("board", onnx("tiny")), 0, 1);
  // And after a restart too: nothing of the refused deploys was committed.
  b->stop();
  auto again = boot("again", (dir_ / "flash.img").string());
  expect_exact(run("again", onnx("tiny")), 0, 1);
}

// Lines of a text.
int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST_F(FirmwareFlashTest, FragmentLargerThanTheFlashIsRefusedAndTheBoardKeepsServing) {
  // 128 KiB of store: two slots of 64 KiB, 60 KiB of data each. tiny's
  // fragment fits, squeezenet_mini's does not.
  {
    SCOPED_TRACE("the board says how much flash it has: the coordinator refuses before deploying");
    auto b = boot("honest", "", "--flash 131072");
    expect_exact(run("honest", onnx("tiny")), 1, 0);
    const Run r = run("honest", onnx("squeezenet_mini"));
    EXPECT_NE(r.sh.code, 0);
    EXPECT_EQ(lines(r.sh.err), 1) << r.sh.err;
    EXPECT_NE(r.sh.err.find("has 61440 bytes of flash, its fragment needs"), std::string::npos) << r.sh.err;
    expect_exact(run("honest", onnx("tiny")), 0, 1);
  }
  {
    SCOPED_TRACE("the board claims 8 MiB: it refuses the fragment itself");
    auto b = boot("liar", "", "--flash 131072 --advertise-flash 8388608");
    expect_exact(run("liar", onnx("tiny")), 1, 0);
    const Run r = run("liar", onnx("squeezenet_mini"));
    EXPECT_NE(r.sh.code, 0);
    EXPECT_EQ(lines(r.sh.err), 1) << r.sh.err;
    EXPECT_NE(r.sh.err.find("fragment exceeds flash"), std::string::npos) << r.sh.err;
    EXPECT_NE(b->log().find("sent ERROR no space: fragment exceeds flash"), std::string::npos) << b->log();
    ASSERT_TRUE(b->running()) << b->log();
    SCOPED_TRACE("the next run on the same board: its fragment still committed, bit-exact");
    expect_exact(run("liar", onnx("tiny")), 0, 1);
    EXPECT_EQ(b->log().find("FATAL"), std::string::npos) << b->log();
  }
}

// Stop-and-wait (`--window 1`, the paper's protocol) on three QEMU boards:
// every layer of every board verified, bit-exact; the boards were started
// with window 1.
TEST_F(FirmwareFlashTest, WindowOneOnThreeQemuBoardsIsBitExact) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const ts::testing::Shell r = shell("TS_QEMU_ICOUNT=0 " + std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 60 --window 1 " +
                                     "--workers qemu:3 --store " + (dir_ / "store").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("window").get<int>(), 1);
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  EXPECT_EQ(j.at("per_layer").size(), j.at("layers").get<size_t>());
  for (int b = 0; b < 3; ++b) {
    const std::string log = slurp(dir_ / "store" / ("board-" + std::to_string(b)) / "qemu.log");
    EXPECT_NE(log.find("window 1,"), std::string::npos) << log;
    EXPECT_NE(log.find("layer 0 kind="), std::string::npos) << log;
    EXPECT_EQ(log.find("FATAL"), std::string::npos) << log;
  }
}

}  // namespace
