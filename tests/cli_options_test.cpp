// Every command-line option a user reaches for, run end to end through the
// real binary (issue 14: `plan` end to end, `worker --listen` boards in a
// testbed, --repeat, --cycles-per-mac, --delay-ms, --image beyond the bundled
// photo, quantize options, simulate --plot and every command's --help had
// never been run by a test).
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/shell.h"

namespace fs = std::filesystem;
using ts::testing::shell;
using ts::testing::tinysplit;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ts_cli_options_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The integer after "KEY": in a JSON text (first occurrence), or -1.
long long json_int(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\"\\s*:\\s*(-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

bool bit_exact(const std::string& json) { return json.find("\"match_reference\": true") != std::string::npos; }

std::string int8_logits(const std::string& json) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"logits_int8\"\\s*:\\s*\\[([^\\]]*)\\]"))) return "";
  return std::regex_replace(std::string(m[1]), std::regex("\\s+"), "");
}

}  // namespace

TEST(CliOptions, EveryCommandHasHelp) {
  const auto top = tinysplit("--help");
  ASSERT_EQ(top.code, 0) << top.err;
  const std::vector<std::string> cmds = {"inspect", "quantize", "eval", "plan", "run", "worker", "simulate", "dump"};
  for (const auto& c : cmds) {
    EXPECT_NE(top.out.find("  " + c + " "), std::string::npos) << "top-level help does not list " << c;
    const auto r = tinysplit(c + " --help");
    EXPECT_EQ(r.code, 0) << c << ": " << r.err;
    EXPECT_NE(r.out.find("Usage: "), std::string::npos) << c;
    EXPECT_NE(r.out.find(c), std::string::npos) << c;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << c;
    EXPECT_TRUE(r.err.empty()) << c << ": " << r.err;
  }
  // An unknown command is one line on stderr and a non-zero exit.
  const auto bad = tinysplit("frobnicate");
  EXPECT_NE(bad.code, 0);
  EXPECT_FALSE(bad.err.empty());
}

TEST(CliOptions, PlanWritesOneFragmentPerBoardOfTheSizeItReports) {
  const fs::path out = scratch("plan");
  const auto r = tinysplit("plan --workers 3 -o " + out.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  // One fragment per board, and each file is as large as the flash the plan reports for it.
  std::smatch m;
  std::string rest = r.out;
  std::vector<long long> flash;
  const std::regex re("\"flash_bytes\"\\s*:\\s*([0-9]+)");
  while (std::regex_search(rest, m, re)) {
    flash.push_back(std::stoll(m[1]));
    rest = m.suffix();
  }
  ASSERT_EQ(flash.size(), 3u) << r.out.substr(0, 2000);
  for (int i = 0; i < 3; ++i) {
    const fs::path f = out / ("worker-" + std::to_string(i) + ".tsfg");
    ASSERT_TRUE(fs::exists(f)) << f;
    EXPECT_EQ(static_cast<long long>(fs::file_size(f)), flash[size_t(i)]) << f;
  }
  EXPECT_FALSE(fs::exists(out / "worker-3.tsfg"));
  EXPECT_GT(json_int(r.out, "total_wire_bytes"), 0);
  fs::remove_all(out);
}

TEST(CliOptions, StandaloneListeningBoardsServeATestbed) {
  const fs::path dir = scratch("listen");
  struct Boards {  // standalone boards outlive the test unless stopped
    std::vector<int> pids;
    ~Boards() {
      for (int p : pids) ts::testing::terminate_if_still(p, " worker --listen ");
    }
  } boards;
  std::vector<int>& pids = boards.pids;
  std::vector<std::string> addrs;
  for (int id = 0; id < 2; ++id) {
    const fs::path log = dir / ("board" + std::to_string(id) + ".log");
    const fs::path pidf = dir / ("board" + std::to_string(id) + ".pid");
    const auto s = shell(std::string(TS_TINYSPLIT) + " worker --listen 127.0.0.1:0 --id " + std::to_string(id) + " > " +
                         log.string() + " 2>&1 & echo $! > " + pidf.string());
    ASSERT_EQ(s.code, 0);
    std::string line;
    for (int i = 0; i < 200 && line.find("listening on") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      line = slurp(log);
    }
    pids.push_back(std::stoi(slurp(pidf)));
    ASSERT_GT(pids.back(), 1);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex("listening on ([0-9.]+:[0-9]+)"))) << line;
    addrs.push_back(m[1]);
  }
  const fs::path tb = dir / "testbed.json";
  std::ofstream(tb) << R"({"boards": [{"id": 0, "address": ")" << addrs[0] << R"("}, {"id": 1, "address": ")"
                    << addrs[1] << R"("}]})";
  const auto r = tinysplit("run --testbed " + tb.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(bit_exact(r.out));
  EXPECT_NE(r.out.find(addrs[0]), std::string::npos);
  EXPECT_NE(r.out.find(addrs[1]), std::string::npos);
  EXPECT_EQ(json_int(r.out, "workers"), 2);
  fs::remove_all(dir);
}

TEST(CliOptions, RepeatEmulationAndDelaysStayBitExact) {
  const auto r = tinysplit("run --workers 2 --repeat 3 --cycles-per-mac 0.5 --delay-ms 0.2 --window 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(bit_exact(r.out));
  EXPECT_EQ(json_int(r.out, "repeat"), 3);
  EXPECT_EQ(json_int(r.out, "window"), 4);
  EXPECT_NE(r.out.find("\"cycles_per_mac\": 0.5"), std::string::npos) << r.out.substr(0, 600);
  EXPECT_NE(r.out.find("\"delay_ms\": 0.2"), std::string::npos) << r.out.substr(0, 600);
  // The emulation and delays change timing only, never the answer.
  const auto plain = tinysplit("run --workers 2 --json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(int8_logits(r.out), int8_logits(plain.out));
  EXPECT_FALSE(int8_logits(r.out).empty());
}

// --emulate: every local board takes the Teensy 4.1's time for its share,
// each layer at its op's measured cycles per MAC (what `simulate` charges the
// same plan's boards), over paced links; the answer stays bit-exact.
TEST(CliOptions, EmulatedRunTakesTheBoardTypesComputeAndStaysBitExact) {
  const auto r = tinysplit("run --workers 2 --size 112 --emulate --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(bit_exact(r.out));
  const auto run = nlohmann::json::parse(r.out);
  EXPECT_EQ(run["emulation"]["board_type"], "teensy41");
  const auto s = tinysplit("simulate --workers 2 --size 112 --json --per-board");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto sim = nlohmann::json::parse(s.out)["runs"][0];
  ASSERT_EQ(run["per_worker"].size(), sim["per_board"].size());
  // Each board's measured compute is at least its emulated compute (sleeps
  // end late, never early); the run at least the slowest board's layers.
  for (size_t b = 0; b < run["per_worker"].size(); ++b) {
    const double want = sim["per_board"][b]["compute_s"].get<double>();
    EXPECT_GT(want, 0.0) << "board " << b;
    EXPECT_GE(run["per_worker"][b]["compute_s"].get<double>(), want * (1 - 1e-6)) << "board " << b;
  }
  EXPECT_GE(run["latency_s"]["total"].get<double>(), sim["latency_s"]["compute"].get<double>());
  // The emulated type sets the clocks and links: a clock of its own is refused.
  const auto bad = tinysplit("run --workers 2 --size 112 --emulate --cycles-per-mac 2");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--cycles-per-mac does nothing with --emulate"), std::string::npos) << bad.err;
}

TEST(CliOptions, ImageOptionClassifiesThePhotoGiven) {
  const fs::path eval = fs::path(TS_SOURCE_DIR) / "data" / "eval";
  ASSERT_TRUE(fs::is_directory(eval)) << "run scripts/setup.sh first";
  std::vector<fs::path> photos;
  for (const auto& e : fs::directory_iterator(eval)) photos.push_back(e.path());
  std::sort(photos.begin(), photos.end());
  ASSERT_GE(photos.size(), 3u);
  // Every photo runs bit-exact and reports its own file name; different photos give different logits.
  std::vector<std::string> logits;
  for (size_t i = 0; i < 3; ++i) {
    const auto r = tinysplit("run --workers 2 --image " + photos[i].string() + " --json");
    ASSERT_EQ(r.code, 0) << photos[i] << ": " << r.err;
    EXPECT_TRUE(bit_exact(r.out)) << photos[i];
    EXPECT_NE(r.out.find(photos[i].filename().string()), std::string::npos) << photos[i];
    logits.push_back(int8_logits(r.out));
  }
  EXPECT_FALSE(logits[0] == logits[1] && logits[1] == logits[2]) << logits[0];
  // A photo that does not exist is one line and a non-zero exit.
  const auto missing = tinysplit("run --workers 1 --image /nonexistent/photo.jpg");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("photo.jpg"), std::string::npos) << missing.err;
}

TEST(CliOptions, QuantizeMethodsAndCalibrationFolder) {
  const fs::path dir = scratch("quant");
  const auto mm = tinysplit("quantize -o " + (dir / "minmax.tsqm").string() + " --json");
  ASSERT_EQ(mm.code, 0) << mm.err;
  const auto pc = tinysplit("quantize --method percentile --percentile 99.0 -o " + (dir / "pct.tsqm").string() + " --json");
  ASSERT_EQ(pc.code, 0) << pc.err;
  // Calibration on a two-photo folder.
  fs::create_directories(dir / "calib");
  const fs::path eval = fs::path(TS_SOURCE_DIR) / "data" / "eval";
  int n = 0;
  for (const auto& e : fs::directory_iterator(eval)) {
    if (n++ == 2) break;
    fs::copy_file(e.path(), dir / "calib" / e.path().filename());
  }
  const auto two = tinysplit("quantize --calib " + (dir / "calib").string() + " -o " + (dir / "two.tsqm").string());
  ASSERT_EQ(two.code, 0) << two.err;
  // Different calibrations give different scales, so different files.
  const std::string a = slurp(dir / "minmax.tsqm"), b = slurp(dir / "pct.tsqm"), c = slurp(dir / "two.tsqm");
  EXPECT_FALSE(a.empty());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  // Each one runs distributed, bit-exact against its own reference.
  for (const char* f : {"pct.tsqm", "two.tsqm"}) {
    const auto r = tinysplit("run --workers 2 --model " + (dir / f).string() + " --json");
    ASSERT_EQ(r.code, 0) << f << ": " << r.err;
    EXPECT_TRUE(bit_exact(r.out)) << f;
  }
  // Bad options are one line each.
  const auto method = tinysplit("quantize --method median -o " + (dir / "x.tsqm").string());
  EXPECT_NE(method.code, 0);
  EXPECT_NE(method.err.find("median"), std::string::npos) << method.err;
  fs::create_directories(dir / "empty");
  const auto empty = tinysplit("quantize --calib " + (dir / "empty").string() + " -o " + (dir / "y.tsqm").string());
  EXPECT_NE(empty.code, 0);
  EXPECT_FALSE(empty.err.empty());
  EXPECT_FALSE(fs::exists(dir / "y.tsqm"));
  fs::remove_all(dir);
}

TEST(CliOptions, SimulatePlotWritesFigures) {
  const fs::path dir = scratch("plot");
  const auto r = tinysplit("simulate --sweep 1,2,3 --plot " + dir.string() + " --figures 8,9");
  ASSERT_EQ(r.code, 0) << r.err;
  int svgs = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".svg") continue;
    ++svgs;
    const std::string s = slurp(e.path());
    EXPECT_NE(s.find("<svg"), std::string::npos) << e.path();
    EXPECT_NE(s.find("</svg>"), std::string::npos) << e.path();
  }
  EXPECT_GE(svgs, 2);
  fs::remove_all(dir);
}
