// A tiny but complete model for the fuzz harnesses and their seed corpora:
// a TF.js layers model (model.json text + one float32 weight shard) that
// touches every layer type the importer knows, and from it, through the real
// pipeline (import, fold, calibrate, quantise, plan), a quantised model and
// board fragments. Deterministic: the same bytes on every run.
#pragma once

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "model/fold.h"
#include "model/import_tfjs.h"
#include "model/qgraph.h"
#include "model/quantize.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::fuzz {

struct TinyTfjs {
  std::string json;     // model.json
  std::string weights;  // the shard "w.bin"
};

inline TinyTfjs tiny_tfjs() {
  using nlohmann::json;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  json layers = json::array();
  json manifest_w = json::array();
  std::string blob;
  auto weight = [&](const std::string& name, std::vector<int> shape, float base = 0.f) {
    size_t n = 1;
    for (int d : shape) n *= size_t(d);
    for (size_t i = 0; i < n; ++i) {
      const float v = base + u(rng);
      blob.append(reinterpret_cast<const char*>(&v), 4);
    }
    manifest_w.push_back({{"name", name}, {"shape", shape}, {"dtype", "float32"}});
  };
  auto in = [](const std::string& a) { return json::array({json::array({json::array({a, 0, 0, json::object()})})}); };
  auto in2 = [](const std::string& a, const std::string& b) {
    return json::array({json::array({json::array({a, 0, 0, json::object()}), json::array({b, 0, 0, json::object()})})});
  };
  layers.push_back({{"name", "input"}, {"class_name", "InputLayer"},
                    {"config", {{"batch_input_shape", {nullptr, 8, 8, 3}}, {"name", "input"}}}, {"inbound_nodes", json::array()}});
  layers.push_back({{"name", "pad"}, {"class_name", "ZeroPadding2D"},
                    {"config", {{"padding", {{0, 1}, {0, 1}}}}}, {"inbound_nodes", in("input")}});
  layers.push_back({{"name", "conv"}, {"class_name", "Conv2D"},
                    {"config", {{"filters", 4}, {"kernel_size", {3, 3}}, {"strides", {2, 2}}, {"padding", "valid"},
                                {"activation", "relu6"}, {"use_bias", true}}},
                    {"inbound_nodes", in("pad")}});
  weight("conv/kernel", {3, 3, 3, 4});
  weight("conv/bias", {4});
  layers.push_back({{"name", "dw"}, {"class_name", "DepthwiseConv2D"},
                    {"config", {{"kernel_size", {3, 3}}, {"strides", {1, 1}}, {"padding", "same"}, {"use_bias", false}}},
                    {"inbound_nodes", in("conv")}});
  weight("dw/depthwise_kernel", {3, 3, 4, 1});
  layers.push_back({{"name", "bn"}, {"class_name", "BatchNormalization"}, {"config", {{"axis", -1}, {"epsilon", 0.001}}},
                    {"inbound_nodes", in("dw")}});
  weight("bn/gamma", {4}, 1.f);
  weight("bn/beta", {4});
  weight("bn/moving_mean", {4});
  weight("bn/moving_variance", {4}, 1.f);
  layers.push_back({{"name", "relu"}, {"class_name", "ReLU"}, {"config", {{"max_value", 6.0}}}, {"inbound_nodes", in("bn")}});
  layers.push_back({{"name", "pw"}, {"class_name", "Conv2D"},
                    {"config", {{"filters", 4}, {"kernel_size", 1}, {"padding", "same"}, {"use_bias", true}}},
                    {"inbound_nodes", in("relu")}});
  weight("pw/kernel", {1, 1, 4, 4});
  weight("pw/bias", {4});
  layers.push_back({{"name", "add"}, {"class_name", "Add"}, {"config", json::object()}, {"inbound_nodes", in2("conv", "pw")}});
  layers.push_back({{"name", "mul"}, {"class_name", "Multiply"}, {"config", json::object()}, {"inbound_nodes", in2("add", "relu")}});
  layers.push_back({{"name", "cat"}, {"class_name", "Concatenate"}, {"config", {{"axis", -1}}},
                    {"inbound_nodes", in2("mul", "conv")}});
  layers.push_back({{"name", "maxp"}, {"class_name", "MaxPooling2D"},
                    {"config", {{"pool_size", {2, 2}}, {"strides", {1, 1}}, {"padding", "same"}}}, {"inbound_nodes", in("cat")}});
  layers.push_back({{"name", "avgp"}, {"class_name", "AveragePooling2D"},
                    {"config", {{"pool_size", {2, 2}}, {"strides", {2, 2}}, {"padding", "same"}}}, {"inbound_nodes", in("maxp")}});
  layers.push_back({{"name", "sig"}, {"class_name", "Activation"}, {"config", {{"activation", "sigmoid"}}},
                    {"inbound_nodes", in("avgp")}});
  layers.push_back({{"name", "gap"}, {"class_name", "GlobalAveragePooling2D"}, {"config", json::object()},
                    {"inbound_nodes", in("sig")}});
  layers.push_back({{"name", "drop"}, {"class_name", "Dropout"}, {"config", {{"rate", 0.1}}}, {"inbound_nodes", in("gap")}});
  layers.push_back({{"name", "dense"}, {"class_name", "Dense"},
                    {"config", {{"units", 3}, {"activation", "softmax"}, {"use_bias", true}}}, {"inbound_nodes", in("drop")}});
  weight("dense/kernel", {8, 3});
  weight("dense/bias", {3});
  json model = {{"format", "layers-model"},
                {"modelTopology",
                 {{"model_config",
                   {{"class_name", "Model"},
                    {"config", {{"name", "tiny"}, {"layers", layers}, {"input_layers", {{"input", 0, 0}}},
                                {"output_layers", {{"dense", 0, 0}}}}}}}}},
                {"weightsManifest", {{{"paths", {"w.bin"}}, {"weights", manifest_w}}}}};
  return {model.dump(), blob};
}

inline Graph tiny_graph() {
  const TinyTfjs t = tiny_tfjs();
  return fold(import_tfjs_text(t.json, "tiny/model.json", [&](const std::string&) { return t.weights; }, 0));
}

inline QGraph tiny_qgraph() {
  const Graph g = tiny_graph();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> inputs(3, std::vector<float>(size_t(g.shape(g.input).size())));
  for (auto& x : inputs)
    for (auto& v : x) v = u(rng);
  return quantize(g, calibrate(g, inputs, CalibOptions{}));
}

inline plan::Plan tiny_plan(const QGraph& q) { return plan::make_plan(q, plan::default_testbed(2)); }

}  // namespace ts::fuzz
