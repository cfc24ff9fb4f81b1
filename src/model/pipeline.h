// From a model name or file to a float graph or a quantised model: the one
// entry point the CLI and the coordinator use.
#pragma once

#include "util/paths.h"  // project_home

#include <string>
#include <vector>

#include "model/graph.h"
#include "model/npy.h"
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

// Input sizes. A model that declares a fixed input size (an ONNX file with
// fixed height and width, a .tsqm) runs at that size; asking it for another
// size is an error. Only TF.js models (fully convolutional MobileNets) may be
// resized with --size. The bundled MobileNetV2 runs at its trained size, 224,
// by default; 112 is the paper's size (see size_note()).
inline constexpr int kPaperInputSize = 112;
inline constexpr int kMobileNetTrainedSize = 224;

// The size to hand to the importer for a float model (0 = as stored), given
// the size asked for (0 = the model's default). Throws Error with one line
// naming the stored size if the model has a fixed size and `requested`
// differs, or if the model declares no size and none was asked for. Reads
// only the model's declared input, so it fails before any work.
int resolve_input_size(const std::string& spec, int requested);

// True if `spec` names the bundled MobileNetV2 (by name or by its path).
bool is_default_model(const std::string& spec);

// How photos are prepared for a model: what its file says (TF.js and ONNX
// files carry no normalisation: pixels / 255, RGB), or for the named models
// what they were trained with (ppocr-det: BGR, ImageNet mean and deviation).
ImageNorm model_image_norm(const std::string& spec);

// For the bundled MobileNetV2 at the paper's 112: one sentence saying that
// 112 is the paper's size, that the model was trained at 224, and what that
// costs it on the evaluation photos (measured; the command is in the text).
// Empty for any other model or size.
std::string size_note(const std::string& spec, int size);

// Imports (TF.js or ONNX by extension/content) at `size` (0 = the model's
// default; see resolve_input_size).
Graph import_model(const std::string& spec, int size);

// Default calibration and evaluation folders (data/calib, data/eval).
std::string default_calib_dir();
// data/text: photos with text (scripts/photos.sh), what ppocr-det is evaluated on.
std::string default_text_dir();
// The photos a model is calibrated on: those of `dir`, less, for ppocr-det
// (evaluated on data/text), any that are also text photos (by content), so
// that its evaluation never sees its calibration photos.
std::vector<std::string> calibration_photos(const std::string& spec, const std::string& dir);
std::string default_eval_dir();
std::string default_photo();

struct QuantizeOptions {
  std::string calib_dir;  // empty = default
  CalibOptions calib;
  bool use_cache = true;  // reuse a .tsqm keyed by model, size and options
  // Calibration tensors (C-H-W, the model's input shape) used instead of the
  // photos of calib_dir, e.g. training images of a data set. calib_tag names
  // them in the cache key and in QGraph::calibration; it must change when
  // they do.
  std::vector<std::vector<float>> calib_inputs;
  std::string calib_tag;
};

// Imports, folds, calibrates on calib_dir (or calib_inputs) and quantises; or
// loads a .tsqm (then `size` must match or be 0). Caches under
// <home>/models/.cache.
QGraph quantized_model(const std::string& spec, int size, const QuantizeOptions& opt, Graph* folded_out = nullptr);

// An input tensor read from a .npy file for a model input of shape `input`:
// float32 (the float model's input, already preprocessed) or int8 (already
// quantised with the model's input scale and zero point). The array's shape
// must be (1, C, H, W) or (C, H, W) of `input`; anything else is one Error
// line naming the file, the shape found and the shape expected.
struct InputTensor {
  bool is_int8 = false;
  std::vector<float> f32;
  std::vector<int8_t> i8;
};
InputTensor load_input_npy(const std::string& path, const Shape& input);

// The int8 input for q (quantising a float tensor) and the float input for
// the float model (dequantising an int8 tensor with q's input parameters).
std::vector<int8_t> int8_input(const QGraph& q, const InputTensor& t);
std::vector<float> float_input(const QGraph& q, const InputTensor& t);

// The Fashion-MNIST model trained by scripts/fashion_mnist.sh
// (models/fashion-mnist/model.onnx); throws Error saying how to make it if
// it is missing.
std::string fashion_mnist_model();

// Calibration on the first `n` training images of Fashion-MNIST (never the
// test images), for quantized_model().
QuantizeOptions fashion_mnist_calibration(int n = 1000);

// Preprocesses an image for a graph's input.
std::vector<float> image_input(const std::string& path, int size, const ImageNorm& norm);

// How well each layer's outputs code for the wire (core/act_code.h), as the
// planner estimates coded transfers: per node, coded bytes / plain bytes of
// its whole output tensor (flat C-H-W order) on one reference input: the
// default photo for a model that takes square 3-channel images, else a
// seeded random input. `source` says which.
struct CodeRatios {
  std::vector<double> rice, mask;  // per coding (core/act_code.h)
  std::string source;
};
CodeRatios activation_code_ratios(const QGraph& q);

}  // namespace ts
