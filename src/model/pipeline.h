// From a model name or file to a float graph or a quantised model: the one
// entry point the CLI and the coordinator use.
#pragma once

#include "util/paths.h"  // project_home

#include <string>
#include <vector>

#include "model/graph.h"
#include "model/qgraph.h"
#include "model/quantize.h"

namespace ts {

// The project folder holding models/ and data/: $TINYSPLIT_HOME, else the
// first ancestor of the executable or of the working directory that has a
// models/ or data/ folder. Empty if none.

// "mobilenetv2" (the default model, fetched by scripts/setup.sh), a TF.js
// model.json, an ONNX file, or a .tsqm quantised model -> a path; throws
// Error with one line if the model is missing.
std::string resolve_model(const std::string& spec);
bool is_quantized_file(const std::string& path);

// Imports (TF.js or ONNX by extension/content) at `size` (0 = as stored).
Graph import_model(const std::string& spec, int size);

// Default calibration and evaluation folders (data/calib, data/eval).
std::string default_calib_dir();
std::string default_eval_dir();
std::string default_photo();

struct QuantizeOptions {
  std::string calib_dir;  // empty = default
  CalibOptions calib;
  bool use_cache = true;  // reuse a .tsqm keyed by model, size and options
};

// Imports, folds, calibrates on calib_dir and quantises; or loads a .tsqm
// (then `size` must match or be 0). Caches under <home>/models/.cache.
QGraph quantized_model(const std::string& spec, int size, const QuantizeOptions& opt, Graph* folded_out = nullptr);

// Preprocesses an image for a graph's input.
std::vector<float> image_input(const std::string& path, int size, const float mean[3], const float stdv[3]);

}  // namespace ts
