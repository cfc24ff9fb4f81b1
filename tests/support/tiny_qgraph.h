// Test support: the small real test model (tests/data/onnx/tiny.onnx),
// folded and quantised, calibrated on `n` inputs drawn uniformly from
// [-1, 1) with seed `seed` (returned in *inputs if asked).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/quantize.h"

namespace ts::testing {

inline QGraph tiny_qgraph(int n, uint32_t seed, std::vector<std::vector<float>>* inputs = nullptr) {
  Graph g = fold(import_onnx(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/tiny.onnx", 0));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::vector<float>> xs(size_t(n), std::vector<float>(size_t(g.shape(g.input).size())));
  for (auto& in : xs)
    for (auto& v : in) v = u(rng);
  QGraph q = quantize(g, calibrate(g, xs, CalibOptions{}));
  if (inputs) *inputs = std::move(xs);
  return q;
}

}  // namespace ts::testing
