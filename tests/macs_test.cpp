// The one MAC count (core/op.h) is used everywhere: the float IR's total
// (`tinysplit inspect --json` total_macs, model/graph.cpp node_macs) equals the
// sum of the planner's per-worker MACs (`tinysplit plan --json`, each the
// exact core::range_macs of the worker's runs) for 1, 3 and 7 boards, on
// MobileNetV2 and on every ONNX test model.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/layer.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::tinysplit;

nlohmann::json json_of(const std::string& args) {
  const auto r = tinysplit(args + " --json");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

void expect_same_total(const std::string& model_args) {
  const auto in = json_of("inspect " + model_args);
  ASSERT_TRUE(in.contains("total_macs")) << in.dump();
  const int64_t total = in.at("total_macs").get<int64_t>();
  EXPECT_GT(total, 0);
  for (int n : {1, 3, 7}) {
    SCOPED_TRACE(model_args + " on " + std::to_string(n) + " boards");
    const auto p = json_of("plan --workers " + std::to_string(n) + " " + model_args);
    ASSERT_TRUE(p.contains("workers")) << p.dump();
    // The boards' MACs less those of halos a fused layer computes twice.
    int64_t sum = 0;
    for (const auto& w : p.at("workers")) sum += w.at("macs").get<int64_t>() - w.at("recomputed_macs").get<int64_t>();
    EXPECT_EQ(sum, total);
  }
}

TEST(Macs, InspectTotalEqualsPlanWorkersMobileNetV2) {
  ASSERT_TRUE(fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
      << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  expect_same_total("");
}

TEST(Macs, InspectTotalEqualsPlanWorkersOnnxModels) {
  const fs::path dir = fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx";
  int models = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".onnx") continue;
    ++models;
    expect_same_total("--size 0 --model " + e.path().string());
  }
  EXPECT_GE(models, 6);
}

// The count itself, per op, on hand-built descriptors (core/op.h's table).
TEST(Macs, DefinitionPerOp) {
  using namespace ts::core;
  LayerDesc d;
  d.op = QOp::Conv;
  d.in[0] = {8, 10, 10};
  d.out = {4, 5, 5};
  d.kh = 3; d.kw = 3; d.groups = 2;
  EXPECT_EQ(range_macs(d, 0, d.out.size()), uint64_t(100) * 4 * 9);
  EXPECT_EQ(range_macs(d, 7, 30), uint64_t(23) * 4 * 9);
  EXPECT_EQ(box_macs(d, OutBox{1, 3, 0, 2, 1, 4}), uint64_t(2 * 2 * 3) * 4 * 9);
  d.groups = 3;  // 8 channels do not split into 3 groups
  EXPECT_EQ(range_macs(d, 0, d.out.size()), 0u);
  LayerDesc g;
  g.op = QOp::Gemm;
  g.in[0] = {16, 2, 2};
  g.out = {10, 1, 1};
  EXPECT_EQ(range_macs(g, 0, 10), uint64_t(10) * 64);
  LayerDesc p;
  p.op = QOp::AvgPool;
  p.in[0] = {3, 8, 8};
  p.out = {3, 4, 4};
  p.kh = 3; p.kw = 2;
  EXPECT_EQ(range_macs(p, 0, 48), uint64_t(48) * 6);
  p.op = QOp::MaxPool;
  EXPECT_EQ(range_macs(p, 0, 48), uint64_t(48) * 6);
  LayerDesc ga;
  ga.op = QOp::GlobalAvgPool;
  ga.in[0] = {5, 7, 3};
  ga.out = {5, 1, 1};
  EXPECT_EQ(range_macs(ga, 0, 5), uint64_t(5) * 21);
  for (QOp op : {QOp::Add, QOp::Mul, QOp::Concat, QOp::Lut, QOp::Pad}) {
    LayerDesc e;
    e.op = op;
    e.n_inputs = op == QOp::Add || op == QOp::Mul ? 2 : 1;
    e.in[0] = e.in[1] = {2, 3, 4};
    e.out = {2, 3, 4};
    EXPECT_EQ(range_macs(e, 3, 20), 17u) << qop_name(op);
  }
  EXPECT_EQ(range_macs(d, 5, 5), 0u);
}

}  // namespace
