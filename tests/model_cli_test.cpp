// The model pipeline end to end on the real default model and real photos:
// float executor vs TF.js, int8 vs float agreement, inspect figures, and one
// clear error line for every kind of bad input.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "model/float_exec.h"
#include "model/image.h"
#include "model/pipeline.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;

using Result = ts::testing::Shell;
using ts::testing::shell;
using ts::testing::tinysplit;
Result sh(const std::string& cmd) { return shell(cmd); }

const fs::path kRoot = TS_SOURCE_DIR;
const fs::path kModel = kRoot / "models" / "mobilenetv2" / "model.json";

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModel)) << "models/mobilenetv2 is missing: run scripts/setup.sh first";
    ASSERT_TRUE(fs::is_directory(kRoot / "data" / "eval")) << "data/eval is missing: run scripts/setup.sh first";
  }
};

// Our float executor against TensorFlow.js (pure-JS CPU backend) on the same
// preprocessed inputs: every class probability within 1e-4.
void compare_with_tfjs(int size, int n_images) {
  const ts::Graph g = ts::import_model(kModel.string(), size);
  auto files = ts::list_images((kRoot / "data" / "eval").string());
  files.resize(std::min<size_t>(files.size(), size_t(n_images)));
  const fs::path dir = fs::temp_directory_path() / ("ts_tfjs_" + std::to_string(::getpid()) + "_" + std::to_string(size));
  fs::create_directories(dir);
  std::ofstream list(dir / "list.txt");
  std::vector<std::vector<float>> ours;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto x = ts::image_input(files[i], size, g.in_norm);  // C-H-W
    std::vector<float> nhwc(x.size());
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < size * size; ++p) nhwc[size_t(p) * 3 + c] = x[size_t(c) * size * size + p];
    const fs::path in = dir / ("in" + std::to_string(i) + ".bin");
    std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(nhwc.data()), std::streamsize(nhwc.size() * 4));
    list << in.string() << "\n";
    ours.push_back(ts::run_float(g, x));
  }
  list.close();
  const Result r = sh("node " + (kRoot / "scripts" / "ref" / "tfjs_ref.js").string() + " " + kModel.string() +
                      " --batch " + (dir / "list.txt").string() + " " + std::to_string(size) + " " + std::to_string(size));
  ASSERT_EQ(r.code, 0) << "TF.js reference failed (run scripts/setup.sh for its npm packages):\n" << r.err;
  std::istringstream lines(r.out);
  std::string line;
  size_t i = 0;
  double worst = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ASSERT_LT(i, ours.size());
    const auto j = nlohmann::json::parse(line);
    const auto probs = j.at("probs").get<std::vector<double>>();
    ASSERT_EQ(probs.size(), ours[i].size());
    for (size_t k = 0; k < probs.size(); ++k) {
      const double d = std::fabs(probs[k] - ours[i][k]);
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-4) << files[i] << " class " << k;
    }
    ++i;
  }
  EXPECT_EQ(i, ours.size());
  std::printf("float executor vs TF.js at %d: %zu photos, max |dprob| = %.3g\n", size, i, worst);
  fs::remove_all(dir);
}

TEST_F(ModelTest, FloatExecutorMatchesTfjsAt112) { compare_with_tfjs(112, 25); }
TEST_F(ModelTest, FloatExecutorMatchesTfjsAt224) { compare_with_tfjs(224, 6); }

void expect_agreement(int size) {
  const Result r = tinysplit("eval --json --size " + std::to_string(size));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j.at("images").get<int>(), 20);
  EXPECT_EQ(j.at("size").get<int>(), size);
  EXPECT_GE(j.at("top1_agreement").get<double>(), 0.97);
  EXPECT_LT(j.at("mean_abs_prob_diff").get<double>(), 0.05);
  ASSERT_EQ(j.at("per_image").size(), size_t(j.at("images").get<int>()));
  for (const auto& im : j.at("per_image")) {
    EXPECT_EQ(im.at("float_probs").size(), 5u);
    EXPECT_EQ(im.at("int8_probs").size(), 5u);
  }
}

TEST_F(ModelTest, Int8AgreesWithFloatOnHeldOutPhotosAt112) { expect_agreement(112); }
TEST_F(ModelTest, Int8AgreesWithFloatOnHeldOutPhotosAt224) { expect_agreement(224); }

TEST_F(ModelTest, CalibrationAndEvaluationPhotosAreDisjoint) {
  auto names = [](const fs::path& d) {
    std::set<std::string> s;
    for (const auto& f : ts::list_images(d.string())) {
      std::ifstream in(f, std::ios::binary);
      s.insert(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
    return s;
  };
  const auto a = names(kRoot / "data" / "calib"), b = names(kRoot / "data" / "eval");
  EXPECT_GE(a.size(), 20u);
  EXPECT_GE(b.size(), 20u);
  for (const auto& x : a) EXPECT_EQ(b.count(x), 0u) << "a calibration photo is also an evaluation photo";
}

TEST_F(ModelTest, InspectMacsMatchPublishedFigures) {
  const Result r224 = tinysplit("inspect --json --size 224");
  ASSERT_EQ(r224.code, 0) << r224.err;
  const auto j = nlohmann::json::parse(r224.out);
  const double macs = j.at("total_macs").get<double>();
  EXPECT_GT(macs, 295e6);  // MobileNetV2 1.0 at 224: ~300 M multiply-adds
  EXPECT_LT(macs, 305e6);
  EXPECT_GT(j.at("total_params").get<int64_t>(), 2'000'000);
  ASSERT_FALSE(j.at("layers").empty());
  for (const auto& l : j.at("layers")) {
    EXPECT_TRUE(l.contains("name") && l.contains("op") && l.contains("output_shape") && l.contains("macs"));
  }
  const Result r112 = tinysplit("inspect --json");
  ASSERT_EQ(r112.code, 0) << r112.err;
  const auto k = nlohmann::json::parse(r112.out);
  // Stored padding kept: the last stage is 3x3 at 112, so fewer than 300/4 M.
  EXPECT_GT(k.at("total_macs").get<double>(), 65e6);
  EXPECT_LT(k.at("total_macs").get<double>(), 76e6);
  EXPECT_EQ(k.at("layers").back().at("output_shape"), nlohmann::json::array({5, 1, 1}));
}

TEST_F(ModelTest, QuantizedFileRoundTripsThroughTheCli) {
  const fs::path out = fs::temp_directory_path() / ("ts_q_" + std::to_string(::getpid()) + ".tsqm");
  const Result q = tinysplit("quantize --json -o " + out.string());
  ASSERT_EQ(q.code, 0) << q.err;
  const ts::QGraph a = ts::load_qgraph(out.string());
  EXPECT_GT(a.nodes.size(), 50u);
  // The .tsqm runs in place of the float model and gives the same result.
  const Result r = tinysplit("run --json --workers 2 --model " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).at("match_reference").get<bool>());
  fs::remove(out);
}

// One line on stderr, non-zero exit, the cause named.
void expect_clean_error(const std::string& args, const std::string& needle) {
  SCOPED_TRACE(args);
  const Result r = tinysplit(args);
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.code, 128) << "crashed";
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
}

TEST_F(ModelTest, BadInputGivesOneClearLine) {
  const fs::path tmp = fs::temp_directory_path() / ("ts_bad_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  // Missing model.
  expect_clean_error("inspect --model " + (tmp / "missing.onnx").string(), "does not exist");
  // Truncated TF.js model: a copy whose weight shard is cut in half.
  fs::create_directories(tmp / "trunc");
  fs::copy_file(kModel, tmp / "trunc" / "model.json");
  {
    std::ifstream in(kModel.parent_path() / "group1-shard1of1.bin", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(tmp / "trunc" / "group1-shard1of1.bin", std::ios::binary).write(all.data(), std::streamsize(all.size() / 2));
  }
  expect_clean_error("inspect --model " + (tmp / "trunc" / "model.json").string(), "truncated");
  // Corrupt model.json.
  std::ofstream(tmp / "corrupt.json") << "{\"modelTopology\": {\"model_config\": ";
  expect_clean_error("inspect --model " + (tmp / "corrupt.json").string(), "not valid JSON");
  // Random bytes as ONNX.
  {
    std::ofstream f(tmp / "garbage.onnx", std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(char((i * 2654435761u) >> 13));
  }
  expect_clean_error("inspect --model " + (tmp / "garbage.onnx").string(), "garbage.onnx");
  // Unsupported layer type in a TF.js model.
  {
    std::ifstream in(kModel);
    auto j = nlohmann::json::parse(in);
    auto& layers = j["modelTopology"]["model_config"]["config"]["layers"];
    layers[2]["class_name"] = "LSTM";
    fs::create_directories(tmp / "unsup");
    std::ofstream(tmp / "unsup" / "model.json") << j.dump();
    fs::copy_file(kModel.parent_path() / "group1-shard1of1.bin", tmp / "unsup" / "group1-shard1of1.bin");
  }
  expect_clean_error("inspect --model " + (tmp / "unsup" / "model.json").string(), "LSTM");
  // Corrupt quantised model: flip one byte.
  {
    const fs::path q = tmp / "m.tsqm";
    ASSERT_EQ(tinysplit("quantize -o " + q.string()).code, 0);
    std::fstream f(q, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  expect_clean_error("run --model " + (tmp / "m.tsqm").string(), "m.tsqm");
  // Unreadable image.
  std::ofstream(tmp / "not_an_image.jpg") << "this is not a jpeg";
  expect_clean_error("run --image " + (tmp / "not_an_image.jpg").string(), "cannot decode image");
  expect_clean_error("run --image " + (tmp / "nope.png").string(), "does not exist");
  // Wrong size arguments.
  expect_clean_error("inspect --size -3", "size");
  expect_clean_error("inspect --size abc", "size");
  expect_clean_error("inspect --size 16", "too small");
  expect_clean_error("eval --images " + (tmp / "empty_dir").string(), "does not exist");
  fs::remove_all(tmp);
}

}  // namespace

namespace {
// Issue 12: `--size 4096` was reported as a weight-count mismatch.
TEST_F(ModelTest, InputSizeIsBoundedAndExplained) {
  expect_clean_error("inspect --size 4096", "not in range 0 to 1024");
  expect_clean_error("inspect --size 1024", "does not take this input size");
}
}  // namespace
