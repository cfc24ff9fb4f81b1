// Coded activations board to board (plan/coding.h, core/act_code.h, wire.h
// "Coded INPUTS"): every coding bit-exact on host boards, the bytes the
// boards report smaller than plain, the planner's choice and its errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "plan/coding.h"
#include "plan/plan.h"
#include "support/run_json.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::expect_exact;
using ts::testing::run_json;
using ts::testing::tinysplit;

bool have_model() { return fs::exists(std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json"); }

int coded(const nlohmann::json& j, const char* which) { return j.at("coding").at(which).get<int>(); }

TEST(CodingRuns, EveryCodingIsBitExactAndSendsFewerBytes) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  for (const char* boards : {"--size 112 --workers 3", "--size 112 --workers 8"}) {
    const nlohmann::json off = run_json(std::string(boards) + " --code off");
    expect_exact(off, boards);
    EXPECT_EQ(coded(off, "mask_layers") + coded(off, "rice_layers"), 0);
    for (const char* code : {"mask", "rice"}) {
      const std::string a = std::string(boards) + " --code " + code;
      const nlohmann::json j = run_json(a);
      expect_exact(j, a);
      EXPECT_GT(coded(j, std::string(code) == "mask" ? "mask_layers" : "rice_layers"), 30) << a;
      // Measured by the boards (DONE): the same plan's results, coded.
      EXPECT_LT(j.at("result_bytes").get<int64_t>(), off.at("result_bytes").get<int64_t>() * 95 / 100) << a;
      EXPECT_LT(j.at("coding").at("planned_coded_bytes").get<int64_t>(),
                j.at("coding").at("planned_plain_bytes").get<int64_t>()) << a;
    }
  }
}

TEST(CodingRuns, TheDefaultAt224AndOnnxModelsAndUnequalBoardsAreBitExact) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  const nlohmann::json d = run_json("--workers 3");
  expect_exact(d, "default");
  EXPECT_EQ(d.at("coding").at("mode").get<std::string>(), "auto");
  EXPECT_GT(coded(d, "mask_layers"), 0);  // Teensy prices: mask pays on ReLU outputs
  const std::string dir = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";
  for (const char* m : {"mobilenet_v3_small", "unet_small", "shufflenet_v2"}) {
    const std::string a = "--size 0 --workers 3 --code rice --model " + dir + m + ".onnx";
    expect_exact(run_json(a), a);
  }
  const fs::path tb = fs::temp_directory_path() / ("ts_coding_test_tb_" + std::to_string(::getpid()) + ".json");
  std::ofstream(tb) << R"([{"id": 0, "clock_mhz": 600}, {"id": 1, "clock_mhz": 150},
                          {"id": 2, "clock_mhz": 396, "ram_bytes": "1M"}, {"id": 3, "clock_mhz": 24}])";
  const std::string a = "--size 112 --code mask --allocation frequency --testbed " + tb.string();
  expect_exact(run_json(a), a);
  fs::remove(tb);
}

TEST(CodingPlan, AutoCodesWhereTheLinkIsSlowerThanTheCoder) {
  ts::plan::Testbed t;
  t.boards.resize(2);
  ts::plan::CostModel m;
  ts::plan::CodeEstimate e;
  e.rice = {0.5, 0.95, 0.2};
  e.mask = {0.6, 1.1, 0.5};
  // Teensy 4.1 boards (94 Mbit/s, 600 MHz): mask where it shrinks the bytes
  // enough, Rice never (its CPU per value is longer than a byte on the link).
  const auto teensy = ts::plan::coded_layers(3, t, m, ts::plan::Coding::Auto, e);
  EXPECT_EQ(teensy.codec[0], ts::plan::Codec::Mask);
  EXPECT_EQ(teensy.codec[1], ts::plan::Codec::Plain);
  EXPECT_EQ(teensy.codec[2], ts::plan::Codec::Mask);
  EXPECT_DOUBLE_EQ(teensy.ratio[0], 0.6);
  // A link 100 times slower: the smaller code wins.
  for (auto& b : t.boards) b.bandwidth_kbps /= 100;
  const auto slow = ts::plan::coded_layers(3, t, m, ts::plan::Coding::Auto, e);
  EXPECT_EQ(slow.codec[0], ts::plan::Codec::Rice);
  EXPECT_EQ(slow.codec[1], ts::plan::Codec::Plain);  // 0.95 is above the margin
  EXPECT_EQ(slow.codec[2], ts::plan::Codec::Rice);
  // Forced, and off.
  EXPECT_EQ(ts::plan::coded_layers(3, t, m, ts::plan::Coding::Mask, e).codec[1], ts::plan::Codec::Mask);
  EXPECT_EQ(ts::plan::coded_layers(3, t, m, ts::plan::Coding::Off, e).codec[0], ts::plan::Codec::Plain);
  // Without an estimate Auto codes nothing.
  EXPECT_EQ(ts::plan::coded_layers(3, t, m, ts::plan::Coding::Auto, {}).codec[0], ts::plan::Codec::Plain);
}

TEST(CodingPlan, TheRelayRouteCodesNothingAndBadValuesAreOneLine) {
  if (!have_model()) FAIL() << "bundled model missing (scripts/setup.sh)";
  const auto relay = tinysplit("run --size 112 --strategy neuron --route relay --code rice --json");
  ASSERT_EQ(relay.code, 0) << relay.err;
  const auto j = nlohmann::json::parse(relay.out);
  expect_exact(j, "relay");
  EXPECT_EQ(coded(j, "rice_layers"), 0);
  for (const char* cmd : {"run", "plan --workers 3", "simulate"}) {
    const auto r = tinysplit(std::string(cmd) + " --code zip");
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("--code: expected auto, mask, rice or off, got 'zip'"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
