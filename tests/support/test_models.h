// Test support: the ONNX test models (tests/data/onnx) quantised on random
// calibration inputs, and the runs a new planning mode owes bit-exactness
// on: the five test models of different ops and a heterogeneous testbed.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/qgraph.h"
#include "model/quantize.h"
#include "run_json.h"

namespace ts::testing {

// tests/data/onnx/<name>.onnx folded and quantised, calibrated on three
// uniform random inputs of seed 7 (the same model on every machine).
inline QGraph quantised_test_model(const std::string& name) {
  Graph g = fold(import_onnx(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/" + name + ".onnx", 0));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> xs(3, std::vector<float>(size_t(g.shape(g.input).size())));
  for (auto& x : xs)
    for (auto& v : x) v = u(rng);
  return quantize(g, calibrate(g, xs, CalibOptions{}));
}

// `run --json OPTIONS` bit-exact on every layer for five ONNX test models
// on 3 boards, and for MobileNetV2 at 112 on four unequal boards (the halos
// differ from board to board; `tag` names the testbed file).
inline void expect_exact_on_test_models_and_unequal_boards(const std::string& options, const std::string& tag) {
  const std::string dir = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";
  for (const char* m : {"mobilenet_v3_small", "mnasnet", "resnet_small", "unet_small", "shufflenet_v2"}) {
    const std::string a = "--size 0 --workers 3 " + options + " --model " + dir + m + ".onnx";
    expect_exact(run_json(a), a);
  }
  namespace fs = std::filesystem;
  const fs::path tb = fs::temp_directory_path() / ("ts_" + tag + "_tb_" + std::to_string(::getpid()) + ".json");
  std::ofstream(tb) << R"([{"id": 0, "clock_mhz": 600}, {"id": 1, "clock_mhz": 150},
                          {"id": 2, "clock_mhz": 396, "ram_bytes": "1M"}, {"id": 3, "clock_mhz": 24}])";
  const std::string a = "--size 112 " + options + " --allocation frequency --testbed " + tb.string();
  expect_exact(run_json(a), a);
  fs::remove(tb);
}

}  // namespace ts::testing
