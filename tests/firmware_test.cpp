// The Cortex-M7 board firmware under QEMU (mps2-an500, Teensy 4.1 layout).
//
// Needs firmware/build/tinysplit-board.elf (scripts/build_firmware.sh) and
// qemu-system-arm. If TS_FIRMWARE is set (the image's path, as CI sets it),
// both are required and every test FAILS when they are missing; if it is not
// set and the image is not built, the tests are skipped with a message.
//
//  - the image boots and its layout fits the Teensy 4.1 (FlexRAM, OCRAM, flash)
//  - the kernels compute on the target exactly what the host computes
//    (same src/core code, same data: firmware/src/kernel_suite.h), whole and
//    split as boards split them, with repeatable instruction counts
//  - a plan forced over a board's real RAM is refused by the board with
//    ERROR(OutOfMemory), without a fault; MPU guards stop overruns
//    of the arena budget and of the stack
//  - `tinysplit run` on three QEMU boards is bit-exact with the int8 reference
#include <gtest/gtest.h>

#include <array>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "../firmware/src/kernel_suite.h"
#include "coord/qemu.h"
#include "net/keyfile.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;

using Proc = ts::testing::Shell;
using ts::testing::shell;

std::string firmware_path() {
  if (const char* e = std::getenv("TS_FIRMWARE"); e && *e) return e;
  return (fs::path(TS_SOURCE_DIR) / "firmware" / "build" / "tinysplit-board.elf").string();
}

bool required() {
  const char* e = std::getenv("TS_FIRMWARE");
  return e && *e;
}

class FirmwareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    elf_ = firmware_path();
    const bool have_elf = fs::is_regular_file(elf_);
    const bool have_qemu = shell("command -v qemu-system-arm").code == 0;
    if (required()) {
      ASSERT_TRUE(have_elf) << "TS_FIRMWARE=" << elf_ << " does not exist: run scripts/build_firmware.sh";
      ASSERT_TRUE(have_qemu) << "qemu-system-arm is not installed: run scripts/build_firmware.sh";
    } else if (!have_elf || !have_qemu) {
      GTEST_SKIP() << "firmware not built or QEMU missing (run scripts/build_firmware.sh; set TS_FIRMWARE=<elf> "
                      "to make these tests mandatory)";
    }
  }
  // Runs the image in a mode; returns its semihosting output and exit code.
  Proc qemu(const std::string& app, bool icount = true) { return qemu_on("mps2-an500", elf_, app, icount); }
  Proc qemu_on(const std::string& machine, const std::string& elf, const std::string& app, bool icount = true) {
    return shell("timeout 120 qemu-system-arm -M " + machine + " -nographic -monitor none -serial null -semihosting " +
                 std::string(icount ? "-icount shift=0 " : "") + "-kernel " + elf + " -append '" + app + "'");
  }
  // The Cortex-M4 image beside the M7 one (scripts/build_firmware.sh builds both).
  std::string m4_elf() const { return (fs::path(elf_).parent_path() / "mps2-an386" / "tinysplit-m4.elf").string(); }
  // The Cortex-M55 image, likewise.
  std::string m55_elf() const { return (fs::path(elf_).parent_path() / "mps3-an547" / "tinysplit-m55.elf").string(); }
  std::string elf_;
};

// "key=value" fields of the first line starting with `prefix`.
std::map<std::string, std::string> fields(const std::string& out, const std::string& prefix) {
  std::map<std::string, std::string> f;
  size_t at = out.find(prefix);
  if (at == std::string::npos) return f;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  static const std::regex kv("([a-z_0-9]+)=([^ ]+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), kv); it != std::sregex_iterator(); ++it)
    f[(*it)[1]] = (*it)[2];
  return f;
}

TEST_F(FirmwareTest, BootsWithinTheTeensyLayout) {
  const Proc r = qemu("hello");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hello: ok"), std::string::npos) << r.out;
  // Code banks + data + stack share the 512 KB FlexRAM; the arena is the
  // whole 512 KB OCRAM.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(ITCM (\d+) B code \((\d+) x 32 KB banks\), DTCM data\+bss (\d+) B, stack (\d+) B)")))
      << r.out;
  const long banks = std::stol(m[2]), data = std::stol(m[3]), stack = std::stol(m[4]);
  EXPECT_GE(banks * 32768, std::stol(m[1]));
  EXPECT_LE(banks * 32768 + data + stack, 512 * 1024 + 64);  // +guard alignment slack
  EXPECT_NE(r.out.find("arena 524288 B at 20200000 (OCRAM)"), std::string::npos) << r.out;
}

TEST_F(FirmwareTest, KernelsOnTheTargetEqualTheHost) {
  const Proc r = qemu("selftest --split 3");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const Proc again = qemu("selftest --split 3");
  ASSERT_EQ(again.code, 0);
  // The same layers on the host, from the same generator and the same core.
  std::vector<uint8_t> ram(2u << 20), flash(4u << 20);
  for (int i = 0; i < ts::suite::kCount; ++i) {
    SCOPED_TRACE(ts::suite::kSpecs[i].name);
    ts::suite::Bump rb{ram.data(), ram.size(), 0}, fb{flash.data(), flash.size(), 0};
    ts::suite::Layer lay;
    ASSERT_TRUE(ts::suite::build(i, rb, fb, &lay));
    std::vector<int8_t> out(size_t(lay.n_out));
    ts::core::View all[2];
    ts::suite::views(lay, all);
    ASSERT_EQ(ts::core::compute_range(lay.desc, all, 0, lay.n_out, out.data(), lay.oc_count),
              ts::core::KernelStatus::Ok);
    char want[16];
    std::snprintf(want, sizeof want, "%08x", unsigned(ts::crc32(out.data(), out.size())));
    const auto f = fields(r.out, std::string("kernel ") + ts::suite::kSpecs[i].name + " ");
    ASSERT_FALSE(f.empty()) << r.out;
    EXPECT_EQ(f.at("crc"), want) << "the Cortex-M7 result differs from the host's";
    EXPECT_EQ(f.at("split_crc"), want) << "split runs differ from the whole layer on the target";
    EXPECT_EQ(std::stoull(f.at("macs")), lay.macs);
    // The image's default table is the DSP one; the portable table computed
    // the same layer on the target too, and must agree bit for bit.
    EXPECT_EQ(f.at("kernels"), "dsp");
    const auto c = fields(r.out, std::string("compare ") + ts::suite::kSpecs[i].name + " ");
    ASSERT_FALSE(c.empty()) << r.out;
    EXPECT_EQ(c.at("kernels"), "portable");
    EXPECT_EQ(c.at("crc"), want) << "the portable table's result differs from the DSP table's on the target";
    // Under -icount shift=0 instruction counts are exact and repeatable.
    const auto g = fields(again.out, std::string("kernel ") + ts::suite::kSpecs[i].name + " ");
    EXPECT_EQ(f.at("instructions"), g.at("instructions"));
    EXPECT_GT(std::stoull(f.at("instructions")), lay.macs) << "less than one instruction per MAC is implausible";
  }
  // The frame CRC on the target over the same bytes as here.
  const auto c = fields(r.out, "crc32 ");
  ASSERT_FALSE(c.empty()) << r.out;
  std::vector<uint8_t> buf(std::stoul(c.at("bytes")));
  ts::suite::Rng rng{12345u};
  for (auto& b : buf) b = uint8_t(rng.next() >> 24);
  char want[16];
  std::snprintf(want, sizeof want, "%08x", unsigned(ts::crc32(buf.data(), buf.size())));
  EXPECT_EQ(c.at("crc"), want);
}

TEST_F(FirmwareTest, RefusesAnArenaLargerThanOcram) {
  const Proc r = qemu("serve --ram 1048576", false);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the arena must be"), std::string::npos) << r.out;
}

// The MPU guards turn overruns into reported faults: a store just past the
// arena budget, and a thread stack overflow.
TEST_F(FirmwareTest, MemoryGuardsFaultInsteadOfCorrupting) {
  const Proc past = qemu("guardtest", false);
  EXPECT_EQ(past.code, 3) << past.out;
  EXPECT_NE(past.out.find("access past the RAM budget"), std::string::npos) << past.out;
  EXPECT_EQ(past.out.find("was not stopped"), std::string::npos) << past.out;
  const Proc deep = qemu("stacktest", false);
  EXPECT_EQ(deep.code, 3) << deep.out;
  EXPECT_NE(deep.out.find("stack overflow"), std::string::npos) << deep.out;
}

// The Cortex-M4 image (qemu-m4, mps2-an386): boots with its 192 KB arena at
// 0x20040000 and its fragment store in the 1 MB flash at 0x21000000, and its
// MPU guards stop a store past the arena budget and a stack overflow.
TEST_F(FirmwareTest, CortexM4ImageBootsWithinItsBudget) {
  ASSERT_TRUE(fs::exists(m4_elf())) << m4_elf() << " is missing: run scripts/build_firmware.sh";
  const Proc r = qemu_on("mps2-an386", m4_elf(), "hello");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hello: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("arena 196608 B at 20040000"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(fragment store (\d+) B at (2[0-9a-f]{7}))"))) << r.out;
  EXPECT_LE(std::stol(m[1]), 1024 * 1024 - 64 * 1024);
  EXPECT_EQ(m[2].str().substr(0, 3), "210");
  const Proc past = qemu_on("mps2-an386", m4_elf(), "guardtest", false);
  EXPECT_EQ(past.code, 3) << past.out;
  EXPECT_NE(past.out.find("access past the RAM budget"), std::string::npos) << past.out;
  const Proc deep = qemu_on("mps2-an386", m4_elf(), "stacktest", false);
  EXPECT_EQ(deep.code, 3) << deep.out;
  EXPECT_NE(deep.out.find("stack overflow"), std::string::npos) << deep.out;
}

// The Cortex-M55 image (qemu-m55, mps3-an547): boots (secure, from the
// SSE-300's ITCM) with its 1 MB arena in the SRAM at 0x01000000 and its
// fragment store in the 8 MB flash at 0x60000000 (the DDR); its MPU (ARMv8-M:
// regions for what it may touch, no default map) stops a store past the
// arena budget and a stack overflow; and its kernels compute on the target
// what the host computes, the split runs and the portable table included.
TEST_F(FirmwareTest, CortexM55ImageBootsWithinItsBudget) {
  ASSERT_TRUE(fs::exists(m55_elf())) << m55_elf() << " is missing: run scripts/build_firmware.sh";
  const Proc r = qemu_on("mps3-an547", m55_elf(), "hello");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hello: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("arena 1048576 B at 01000000"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(fragment store (\d+) B at (6[0-9a-f]{7}))"))) << r.out;
  EXPECT_EQ(std::stol(m[1]), 2 * (3840 + 4) * 1024);  // two A/B slots: the kind's 3840 KB of data each
  EXPECT_LE(std::stoul(m[2], nullptr, 16) + std::stoul(m[1]), 0x60000000u + 8 * 1024 * 1024 - 64 * 1024);
  const Proc past = qemu_on("mps3-an547", m55_elf(), "guardtest", false);
  EXPECT_EQ(past.code, 3) << past.out;
  EXPECT_NE(past.out.find("access past the RAM budget"), std::string::npos) << past.out;
  EXPECT_EQ(past.out.find("was not stopped"), std::string::npos) << past.out;
  const Proc deep = qemu_on("mps3-an547", m55_elf(), "stacktest", false);
  EXPECT_EQ(deep.code, 3) << deep.out;
  EXPECT_NE(deep.out.find("stack overflow"), std::string::npos) << deep.out;
  const Proc st = qemu_on("mps3-an547", m55_elf(), "selftest --split 3");
  ASSERT_EQ(st.code, 0) << st.out << st.err;
  std::vector<uint8_t> ram(2u << 20), flash(4u << 20);
  for (int i = 0; i < ts::suite::kCount; ++i) {
    SCOPED_TRACE(ts::suite::kSpecs[i].name);
    ts::suite::Bump rb{ram.data(), ram.size(), 0}, fb{flash.data(), flash.size(), 0};
    ts::suite::Layer lay;
    ASSERT_TRUE(ts::suite::build(i, rb, fb, &lay));
    std::vector<int8_t> out(size_t(lay.n_out));
    ts::core::View all[2];
    ts::suite::views(lay, all);
    ASSERT_EQ(ts::core::compute_range(lay.desc, all, 0, lay.n_out, out.data(), lay.oc_count),
              ts::core::KernelStatus::Ok);
    char want[16];
    std::snprintf(want, sizeof want, "%08x", unsigned(ts::crc32(out.data(), out.size())));
    const auto f = fields(st.out, std::string("kernel ") + ts::suite::kSpecs[i].name + " ");
    ASSERT_FALSE(f.empty()) << st.out;
    EXPECT_EQ(f.at("crc"), want) << "the Cortex-M55 result differs from the host's";
    EXPECT_EQ(f.at("split_crc"), want) << "split runs differ from the whole layer on the target";
    const auto c = fields(st.out, std::string("compare ") + ts::suite::kSpecs[i].name + " ");
    ASSERT_FALSE(c.empty()) << st.out;
    EXPECT_EQ(c.at("crc"), want) << "the other table's result differs on the target";
  }
}

// A board whose real arena is 64 KB but which claims 512 KB: the plan made
// for 512 KB needs more than it has, and the board must say so (ERROR
// OutOfMemory) rather than write past its arena (the MPU guards would fault).
TEST_F(FirmwareTest, OverBudgetPlanIsRefusedByTheBoard) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const fs::path dir = fs::temp_directory_path() / ("ts_fw_oom_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ts::coord::QemuBoardOptions o;
  o.id = 0;
  o.ram_bytes = 64 * 1024;
  o.icount = false;
  o.log_path = (dir / "board.log").string();
  o.extra_args = "--advertise-ram 524288 --once";
  setenv("TS_FIRMWARE", elf_.c_str(), 1);
  const ts::coord::QemuBoard b = ts::coord::spawn_qemu_board(o);
  {
    std::ofstream tb(dir / "testbed.json");
    tb << R"({"boards": [{"id": 0, "address": ")" << b.address << R"("}]})";
  }
  const Proc r = shell(std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 60 --strategy neuron --route relay -t " +
                       (dir / "testbed.json").string());
  int status = 0;
  for (int i = 0; i < 200 && waitpid(b.pid, &status, WNOHANG) == 0; ++i) usleep(50 * 1000);
  if (waitpid(b.pid, &status, WNOHANG) == 0) {
    kill(b.pid, SIGTERM);
    waitpid(b.pid, &status, 0);
  }
  std::ifstream lf(o.log_path);
  const std::string log((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.err.find("arena exhausted"), std::string::npos) << r.err;
  EXPECT_NE(log.find("sent ERROR out of memory"), std::string::npos) << log;
  EXPECT_EQ(log.find("FATAL"), std::string::npos) << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << "the board's --once exit code reports the refusal\n"
                                                              << log;
}

// A board provisioned with key A (the record at 0x607C0000, firmware.h):
// a coordinator with key B gets one line saying the board refused its key,
// and the board counts the refused frame; a coordinator with key A (the
// same provisioning path, `run --key-file`) is bit-exact.
TEST_F(FirmwareTest, ProvisionedKeyAuthenticatesTheCoordinator) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const fs::path dir = fs::temp_directory_path() / ("ts_fw_auth_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ka = (dir / "a.key").string(), kb = (dir / "b.key").string();
  ASSERT_EQ(shell(std::string(TS_TINYSPLIT) + " keygen -o " + ka).code, 0);
  ASSERT_EQ(shell(std::string(TS_TINYSPLIT) + " keygen -o " + kb).code, 0);
  ts::coord::QemuBoardOptions o;
  o.id = 0;
  o.icount = false;
  o.log_path = (dir / "board.log").string();
  o.extra_args = "--once";
  o.auth = true;
  o.key = ts::net::load_key_file(ka);
  setenv("TS_FIRMWARE", elf_.c_str(), 1);
  const ts::coord::QemuBoard b = ts::coord::spawn_qemu_board(o);
  EXPECT_FALSE(fs::exists(dir / "provision.bin")) << "the provisioning file outlived the boot";
  {
    std::ofstream tb(dir / "testbed.json");
    tb << R"({"boards": [{"id": 0, "address": ")" << b.address << R"("}]})";
  }
  const Proc r = shell(std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 60 --strategy neuron --route relay -t " +
                       (dir / "testbed.json").string() + " --key-file " + kb);
  int status = 0;
  for (int i = 0; i < 200 && waitpid(b.pid, &status, WNOHANG) == 0; ++i) usleep(50 * 1000);
  if (waitpid(b.pid, &status, WNOHANG) == 0) {
    kill(b.pid, SIGTERM);
    waitpid(b.pid, &status, 0);
  }
  std::ifstream lf(o.log_path);
  const std::string log((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("refused our key"), std::string::npos) << r.err;
  EXPECT_NE(log.find("links: authenticated"), std::string::npos) << log;
  EXPECT_NE(log.find("frames refused by authentication 1"), std::string::npos) << log;

  {
    std::ofstream tb(dir / "testbed_qemu.json");
    tb << R"({"boards": [{"id": 0, "address": "qemu"}], "key_file": "a.key"})";
  }
  const Proc ok = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 60 --strategy neuron --route relay -t " +
                        (dir / "testbed_qemu.json").string());
  fs::remove_all(dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_TRUE(j.at("authenticated").get<bool>());
}

TEST_F(FirmwareTest, ThreeQemuBoardsAreBitExact) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const fs::path dir = fs::temp_directory_path() / ("ts_fw_e2e_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream tb(dir / "testbed.json");
    tb << R"({"boards": [{"id": 0, "address": "qemu"}, {"id": 1, "address": "qemu"}, {"id": 2, "address": "qemu"}]})";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Proc r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 60 --strategy neuron --route relay -t " +
                      (dir / "testbed.json").string() + " --store " + (dir / "store").string());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  // Every layer of every board checked by the digest in its DONE: the
  // firmware's digests equal the host's of the reference.
  EXPECT_EQ(j.at("layers").get<size_t>(), j.at("per_layer").size());
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  ASSERT_EQ(j.at("per_worker").size(), 3u);
  for (const auto& w : j.at("per_worker")) {
    EXPECT_EQ(w.at("peak_ram_bytes").get<int64_t>(), w.at("planned_peak_ram_bytes").get<int64_t>());
    EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), 512 * 1024);
  }
  // Each board logged an instruction count for every layer it computed, and
  // run --json's kernel_instructions (from DONE) is their sum: exact counts
  // under -icount, reported per board beside the plan's MACs. The DSP
  // kernels' whole-model cost (deterministic: instructions, not time) stays
  // at most 2 instructions per MAC (docs/kernels.md; 1.90 when written).
  int64_t sum_instr = 0, sum_macs = 0;
  for (int b = 0; b < 3; ++b) {
    std::ifstream lf(dir / "store" / ("board-" + std::to_string(b)) / "qemu.log");
    const std::string log((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
    EXPECT_NE(log.find("layer 0 kind="), std::string::npos) << log;
    EXPECT_EQ(log.find("FATAL"), std::string::npos) << log;
    int64_t logged = 0;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("layer ", 0) != 0) continue;
      const size_t at = line.find(" instructions=");
      ASSERT_NE(at, std::string::npos) << line;
      logged += std::stoll(line.substr(at + 14));
    }
    const auto& w = j.at("per_worker")[size_t(b)];
    ASSERT_TRUE(w.at("kernel_instructions").is_number_integer()) << w.dump();
    EXPECT_EQ(w.at("kernel_instructions").get<int64_t>(), logged) << "board " << b;
    EXPECT_GT(logged, 0);
    sum_instr += w.at("kernel_instructions").get<int64_t>();
    sum_macs += w.at("macs").get<int64_t>();
  }
  ASSERT_GT(sum_macs, 0);
  EXPECT_LE(double(sum_instr) / double(sum_macs), 2.0) << sum_instr << " / " << sum_macs;
  fs::remove_all(dir);
  std::printf("three QEMU boards: %.1f s wall for the whole command, latency %.3f s\n", secs,
              j.at("latency_s").at("total").get<double>());
}

// Boards of different kinds in one run, in the order given: `--workers
// qemu:2,qemu-m4:1,host:1` (two Cortex-M7 and one Cortex-M4 QEMU board, one
// host process) and the same as a testbed file with "kind" keys. Both are
// bit-exact with every layer verified; the QEMU boards report the
// instructions their firmware counted, the host process none; every board
// stays within its own RAM budget (the M4's 192 KB), and the M4 holds the
// smallest share of the QEMU boards. The M4 image sits beside the M7 one
// (scripts/build_firmware.sh builds both).
TEST_F(FirmwareTest, MixedKindsAreBitExact) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const fs::path m4 = fs::path(elf_).parent_path() / "mps2-an386" / "tinysplit-m4.elf";
  ASSERT_TRUE(fs::exists(m4)) << m4 << " is missing: run scripts/build_firmware.sh";
  const fs::path dir = fs::temp_directory_path() / ("ts_fw_mix_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "testbed.json") << R"({"boards": [{"id": 0, "kind": "qemu-m7"}, {"id": 1, "kind": "qemu-m7"},
      {"id": 2, "kind": "qemu-m4", "ram_bytes": 196608, "flash_bytes": 393216, "clock_mhz": 168},
      {"id": 3, "kind": "host"}]})";
  for (const std::string& boards :
       {std::string("--workers qemu:2,qemu-m4:1,host:1"), "-t " + (dir / "testbed.json").string()}) {
    SCOPED_TRACE(boards);
    const Proc r = shell("TS_FIRMWARE=" + elf_ + " TS_FIRMWARE_QEMU_M4=" + m4.string() + " " + std::string(TS_TINYSPLIT) +
                         " run --json --timeout 60 " + boards);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
    const auto& pw = j.at("per_worker");
    ASSERT_EQ(pw.size(), 4u);
    for (size_t b = 0; b < 4; ++b) {
      const auto& w = pw[b];
      EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("ram_budget_bytes").get<int64_t>()) << "board " << b;
      EXPECT_EQ(w.at("kernel_instructions").is_number_integer(), b < 3) << "board " << b << ": " << w.dump();
    }
    EXPECT_EQ(pw[2].at("ram_budget_bytes").get<int64_t>(), 192 * 1024);
    EXPECT_LT(pw[2].at("share").get<double>(), pw[0].at("share").get<double>());
    EXPECT_LT(pw[2].at("share").get<double>(), pw[1].at("share").get<double>());
  }
  fs::remove_all(dir);
}

// The three QEMU kinds in one run, in the order of issue 24: `--workers
// qemu:2,qemu-m55:1,qemu-m4:1` (two Cortex-M7, one Cortex-M55, one
// Cortex-M4) at the model's size (224), and the same as a testbed file at
// 112: bit-exact with every layer verified, every board within its own RAM
// budget (the M55's 1 MB, the M4's 192 KB) and reporting the instructions its
// firmware counted. The shares follow the measured prices (eq. 5 with K1
// scaled by each type's cycles per MAC, data/costs/): the M55 holds the
// largest share, the M4 the smallest.
TEST_F(FirmwareTest, M7M55AndM4InOneRunAreBitExact) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  ASSERT_TRUE(fs::exists(m4_elf())) << m4_elf() << " is missing: run scripts/build_firmware.sh";
  ASSERT_TRUE(fs::exists(m55_elf())) << m55_elf() << " is missing: run scripts/build_firmware.sh";
  const fs::path dir = fs::temp_directory_path() / ("ts_fw_m55mix_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "testbed.json") << R"({"boards": [{"id": 0, "kind": "qemu-m7"}, {"id": 1, "kind": "qemu-m7"},
      {"id": 2, "kind": "qemu-m55", "ram_bytes": 1048576, "flash_bytes": 3932160, "clock_mhz": 400},
      {"id": 3, "kind": "qemu-m4", "ram_bytes": 196608, "flash_bytes": 393216, "clock_mhz": 168}]})";
  for (const std::string& boards :
       {std::string("--workers qemu:2,qemu-m55:1,qemu-m4:1"), "--size 112 -t " + (dir / "testbed.json").string()}) {
    SCOPED_TRACE(boards);
    const Proc r = shell("TS_FIRMWARE=" + elf_ + " TS_FIRMWARE_QEMU_M4=" + m4_elf() + " TS_FIRMWARE_QEMU_M55=" +
                         m55_elf() + " " + std::string(TS_TINYSPLIT) + " run --json --timeout 60 " + boards);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
    const auto& pw = j.at("per_worker");
    ASSERT_EQ(pw.size(), 4u);
    for (size_t b = 0; b < 4; ++b) {
      const auto& w = pw[b];
      EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("ram_budget_bytes").get<int64_t>()) << "board " << b;
      EXPECT_TRUE(w.at("kernel_instructions").is_number_integer()) << "board " << b << ": " << w.dump();
    }
    EXPECT_EQ(pw[2].at("ram_budget_bytes").get<int64_t>(), 1024 * 1024);
    EXPECT_EQ(pw[3].at("ram_budget_bytes").get<int64_t>(), 192 * 1024);
    for (size_t b : {0, 1, 3}) EXPECT_GT(pw[2].at("share").get<double>(), pw[b].at("share").get<double>()) << b;
    for (size_t b : {0, 1, 2}) EXPECT_LT(pw[3].at("share").get<double>(), pw[b].at("share").get<double>()) << b;
  }
  fs::remove_all(dir);
}

// Three Cortex-M55 boards (`--workers qemu-m55:3`, MobileNetV2 at 224, the
// Helium kernels): bit-exact, every layer verified, each board within its
// 1 MB, and the exact instruction counts of the boards' kernels (-icount
// shift=0) at most 0.7 per MAC over the whole model (issue 24).
TEST_F(FirmwareTest, CortexM55BoardsTakeUnder07InstructionsPerMac) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  ASSERT_TRUE(fs::exists(m55_elf())) << m55_elf() << " is missing: run scripts/build_firmware.sh";
  const Proc r = shell("TS_FIRMWARE_QEMU_M55=" + m55_elf() + " " + std::string(TS_TINYSPLIT) +
                       " run --json --timeout 60 --workers qemu-m55:3");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  int64_t instr = 0, macs = 0;
  for (const auto& w : j.at("per_worker")) {
    EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("ram_budget_bytes").get<int64_t>());
    EXPECT_EQ(w.at("ram_budget_bytes").get<int64_t>(), 1024 * 1024);
    instr += w.at("kernel_instructions").get<int64_t>();
    macs += w.at("macs").get<int64_t>();
  }
  ASSERT_GT(macs, 0);
  EXPECT_LE(double(instr) / double(macs), 0.7) << instr << " / " << macs;
}

// A firmware board that changes one output value of layer 20 after
// computing it (--inject-fault flip:20, passed by `run --inject-fault flip:1:20`): the
// run names board 1 and that layer on one line and exits with status 2.
TEST_F(FirmwareTest, AFlippedOutputOnAQemuBoardIsNamed) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const Proc r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) +
                       " run --size 112 --json --timeout 60 --strategy neuron --route relay --workers qemu:3 --inject-fault flip:1:20");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ASSERT_FALSE(r.out.empty()) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string name = j.at("per_layer").at(20).at("name").get<std::string>();
  EXPECT_NE(r.err.find("tinysplit: error: board 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at layer 20 '" + name + "'"), std::string::npos) << r.err;
  EXPECT_EQ(j.at("first_mismatch").at("board").get<int>(), 1);
  EXPECT_EQ(j.at("first_mismatch").at("layer").get<int>(), 20);
  EXPECT_GE(j.at("verified_layers").get<int>(), 20);
  EXPECT_LT(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
}

// The other fault kinds on firmware boards, through the same spec (`run
// --inject-fault KIND:B:N` -> firmware `serve --inject-fault KIND:N`, the one
// decorator, net/fault_port.h): kill ends QEMU, stall stops the board,
// corrupt changes its next frame to the coordinator. Each is named (board,
// layer, reason) and the run goes on without the board, bit-exact.
TEST_F(FirmwareTest, KilledStalledAndCorruptQemuBoardsFailOver) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  struct Case {
    const char* spec;
    int board, layer;
    const char* reason;
  };
  for (const Case& c : {Case{"kill:1:20", 1, 20, "closed the connection"}, Case{"stall:2:5", 2, 5, "no answer"},
                        Case{"corrupt:0:3", 0, 3, "malformed frame"}}) {
    SCOPED_TRACE(c.spec);
    const Proc r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) +
                         " run --size 112 --json --timeout 5 --strategy neuron --route relay --workers qemu:3 --inject-fault " +
                         c.spec);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    ASSERT_EQ(j.at("failovers").size(), 1u) << r.out.substr(0, 400);
    const auto& f = j.at("failovers")[0];
    EXPECT_EQ(f.at("board").get<int>(), c.board);
    EXPECT_EQ(f.at("layer").get<int>(), c.layer);
    EXPECT_EQ(f.at("boards_left").get<int>(), 2);
    EXPECT_NE(f.at("reason").get<std::string>().find(c.reason), std::string::npos) << f.dump();
  }
}

// A failover on firmware boards with the defaults (224, auto, direct): the
// two boards left get patches of the fragments they hold in flash (wire
// PATCH, applied from the committed A/B slot into the other), hold the
// model in their 512 KiB by streaming its first blocks (core/stream.h), and
// the interrupted inference resumes (RESUME) at the layer the board died in.
TEST_F(FirmwareTest, AKilledQemuBoardFailsOverWithPatchesAndResumes) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  const Proc r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) +
                       " run --json --timeout 20 --workers qemu:3 --repeat 5 --inject-fault kill:1:20");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("bit_exact_inferences").get<int>(), 5);
  ASSERT_EQ(j.at("failovers").size(), 1u) << r.out.substr(0, 400);
  const auto& f = j.at("failovers")[0];
  EXPECT_EQ(f.at("board").get<int>(), 1);
  EXPECT_EQ(f.at("boards_left").get<int>(), 2);
  EXPECT_LT(f.at("redeployed_bytes").get<double>(), 0.5 * f.at("full_deploy_bytes").get<double>()) << f.dump();
  // The layers kept are those every board had reported (DONE) when board 1
  // died at layer 20: a board pushes its DONE reports out (Port::flush: its
  // send queue and lwIP's segments) before each compute, but on the direct
  // route board 1 may be a layer or two ahead of the boards it takes halos
  // from (a loaded machine: 18 kept), so at most 20, not exactly. The
  // inference resumes there, or at the first layer of the new plan's
  // streamed chain that holds it (a chain runs whole).
  const int kept = f.at("kept_layers").get<int>(), resumed = f.at("resumed_at_layer").get<int>();
  EXPECT_LE(kept, 20) << f.dump();
  EXPECT_GT(resumed, 0) << f.dump();
  EXPECT_LE(resumed, kept) << f.dump();
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
  EXPECT_EQ(j.at("size").get<int>(), 224);
  for (const auto& w : j.at("per_worker"))
    EXPECT_LE(w.at("peak_ram_bytes").get<int64_t>(), w.at("ram_budget_bytes").get<int64_t>());
}

// Every op kind on the target: ONNX test models that together hold Conv,
// grouped and depthwise Conv, Gemm, Add, Mul, Concat, MaxPool, AvgPool,
// GlobalAvgPool, Pad, lookup tables (HardSwish, HardSigmoid, Sigmoid) and
// Transpose (all four of the transpose model's perms), run on 3 QEMU boards. Each board's DONE carries the digest of its outputs of
// every layer, so every layer of every board is compared with the host's
// int8 reference bit for bit (not just the final tensor).
TEST_F(FirmwareTest, EveryOpOnTheTargetEqualsTheHost) {
  const fs::path dir = fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx";
  std::set<std::string> ops;
  for (const char* m : {"tiny", "squeezenet_mini", "mobilenet_v3_small", "transpose"}) {
    SCOPED_TRACE(m);
    const std::string model = (dir / (std::string(m) + ".onnx")).string();
    const Proc ins = shell(std::string(TS_TINYSPLIT) + " inspect --json --model " + model);
    ASSERT_EQ(ins.code, 0) << ins.err;
    const auto layers = nlohmann::json::parse(ins.out).at("layers");
    for (const auto& l : layers) {
      std::string op = l.at("op").get<std::string>();
      ops.insert(op.substr(0, op.find('+')));
    }
    const Proc r = shell("TS_FIRMWARE=" + elf_ + " " + std::string(TS_TINYSPLIT) +
                         " run --json --timeout 60 --size 0 --allocation even --strategy neuron --route relay --workers qemu:3 --model " +
                         model);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("match_reference").get<bool>());
    EXPECT_EQ(j.at("layers").get<size_t>(), j.at("per_layer").size());
    EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>());
    for (const auto& w : j.at("per_worker")) EXPECT_GT(w.at("macs").get<int64_t>(), 0);
  }
  for (const char* op : {"Conv", "GConv", "DWConv", "Gemm", "Add", "Mul", "Concat", "MaxPool", "AvgPool",
                         "GlobalAvgPool", "Pad", "HardSwish", "HardSigmoid", "Sigmoid", "Transpose"})
    EXPECT_EQ(ops.count(op), 1u) << op << " is in none of the models";
}

}  // namespace
