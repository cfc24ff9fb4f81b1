#include "model/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "core/act_code.h"
#include "core/crc32.h"
#include "model/dataset.h"
#include "model/fold.h"
#include "model/image.h"
#include "model/import_onnx.h"
#include "model/import_tfjs.h"
#include "util/input_file.h"

namespace ts {
namespace fs = std::filesystem;

namespace {
// The models known by name: where scripts/setup.sh or scripts/fetch_model.sh put them.
fs::path named_model_path(const std::string& name) {
  const std::string home = project_home();
  const fs::path models = fs::path(home.empty() ? "." : home) / "models";
  if (name == "mobilenetv2" || name == "mobilenet_v2") return models / "mobilenetv2" / "model.json";
  if (name == "ppocr-det") return models / "ppocr-det" / "model.onnx";  // PP-OCRv4 text detection
  return {};
}

bool is_named_model(const std::string& spec, const std::string& name) {
  const fs::path p = named_model_path(name);
  if (spec == name) return true;
  std::error_code ec;
  return fs::exists(p, ec) && fs::exists(spec, ec) && fs::equivalent(p, spec, ec);
}
}  // namespace

std::string resolve_model(const std::string& spec) {
  if (const fs::path p = named_model_path(spec); !p.empty()) {
    if (fs::exists(p)) return p.string();
    if (spec == "ppocr-det")
      throw Error("model 'ppocr-det' not found at '" + p.string() + "'; run scripts/fetch_model.sh ppocr-det first");
    throw Error("default model not found at '" + p.string() + "'; run scripts/setup.sh (or scripts/fetch_model.sh) first");
  }
  if (!fs::exists(spec)) throw Error("model file '" + spec + "' does not exist");
  if (fs::is_directory(spec)) {
    if (fs::exists(fs::path(spec) / "model.json")) return (fs::path(spec) / "model.json").string();
    throw Error("model folder '" + spec + "' has no model.json");
  }
  // Before anything peeks at it: a regular file within the model cap.
  check_input_file(spec, "model file", kMaxModelFileBytes);
  return spec;
}

static std::string head_bytes(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string s(n, '\0');
  f.read(s.data(), std::streamsize(n));
  s.resize(size_t(f.gcount()));
  return s;
}

bool is_quantized_file(const std::string& path) { return head_bytes(path, 4) == "TSQM"; }

namespace {
bool is_tfjs_file(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".json") return true;
  if (ext == ".onnx") return false;
  const std::string head = head_bytes(path, 64);
  return !head.empty() && head.find('{') != std::string::npos && head.find("modelTopology") != std::string::npos;
}

std::string dims_text(int64_t h, int64_t w) {
  auto d = [](int64_t v) { return v > 0 ? std::to_string(v) : std::string("?"); };
  return d(h) + "x" + d(w);
}
}  // namespace

bool is_default_model(const std::string& spec) { return is_named_model(resolve_model(spec), "mobilenetv2"); }

ImageNorm model_image_norm(const std::string& spec) {
  ImageNorm n;
  // PaddleOCR's detectors read photos as BGR and normalise them with the
  // ImageNet mean and deviation in that channel order (their NormalizeImage
  // step); the ONNX file does not say so.
  if (is_named_model(resolve_model(spec), "ppocr-det")) n = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, true};
  return n;
}

int resolve_input_size(const std::string& spec, int requested) {
  if (requested < 0) throw Error("input size must not be negative (got " + std::to_string(requested) + ")");
  const std::string path = resolve_model(spec);
  if (is_quantized_file(path)) throw Error("'" + path + "' is already quantised; this command needs a float model");
  if (is_tfjs_file(path)) {
    // TF.js MobileNets are fully convolutional: any size the layers accept.
    if (requested > 0) return requested;
    return is_default_model(path) ? kMobileNetTrainedSize : 0;
  }
  const std::vector<int64_t> d = onnx_input_dims(path);
  const bool fixed = d.size() == 4 && d[2] > 0 && d[3] > 0;
  if (fixed) {
    if (requested > 0 && (requested != d[2] || requested != d[3]))
      throw Error("'" + path + "' declares a fixed input size of " + dims_text(d[2], d[3]) + "; it cannot run at " +
                  std::to_string(requested) + "x" + std::to_string(requested) + " (leave out --size to use " +
                  dims_text(d[2], d[3]) + ")");
    return 0;
  }
  if (requested == 0 && d.size() == 4)
    throw Error("'" + path + "' declares no fixed input size (" + dims_text(d[2], d[3]) + "); give one with --size");
  return requested;
}

std::string size_note(const std::string& spec, int size) {
  if (size != kPaperInputSize || !is_default_model(spec)) return {};
  return "112x112 is the paper's input size; this MobileNetV2 was trained at 224x224, and at 112 the float model "
         "itself calls 10 of the 25 evaluation photos 'Drawing' (2 of 25 at 224) and agrees with its own 224 "
         "prediction on 13 of 25 (measured by: tinysplit eval --size 112 --compare-size 224); the default, 224, is the "
         "trained size";
}

// The stride an ONNX model with a symbolic input size needs: the input size
// over its smallest feature map, measured at a size every usual stride divides
// (0 if it cannot be told).
int onnx_stride(const std::string& path) {
  constexpr int kProbe = 256;
  try {
    const Graph g = import_onnx(path, kProbe);
    int smallest = kProbe;
    for (const Tensor& t : g.tensors)
      if (t.shape.h > 1) smallest = std::min(smallest, t.shape.h);
    return smallest > 0 && kProbe % smallest == 0 ? kProbe / smallest : 0;
  } catch (const Error&) {
    return 0;
  }
}

Graph import_model(const std::string& spec, int size) {
  const std::string path = resolve_model(spec);
  if (is_quantized_file(path)) throw Error("'" + path + "' is already quantised; this command needs a float model");
  const int s = resolve_input_size(path, size);
  if (is_tfjs_file(path)) return import_tfjs(path, s);
  try {
    Graph g = import_onnx(path, s);
    g.in_norm = model_image_norm(path);
    return g;
  } catch (const Error&) {
    // A symbolic size the model cannot take (its feature maps no longer
    // line up): say which sizes it takes.
    const int stride = s > 0 ? onnx_stride(path) : 0;
    if (stride > 1 && s % stride != 0)
      throw Error("'" + path + "' takes input sizes that are multiples of " + std::to_string(stride) + "; " +
                  std::to_string(s) + " is not (try " + std::to_string(s / stride * stride > 0 ? s / stride * stride : stride) +
                  " or " + std::to_string((s / stride + 1) * stride) + ")");
    throw;
  }
}

static uint32_t file_crc(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf(1 << 16);
  uint32_t c = 0;
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    c = crc32_update(c, buf.data(), size_t(f.gcount()));
  }
  return c;
}

std::string default_text_dir() { return (fs::path(project_home()) / "data" / "text").string(); }

std::vector<std::string> calibration_photos(const std::string& spec, const std::string& dir) {
  std::vector<std::string> photos = list_images(dir);
  std::error_code ec;
  if (!is_named_model(resolve_model(spec), "ppocr-det") || !fs::is_directory(default_text_dir(), ec)) return photos;
  std::vector<uint32_t> text;
  for (const auto& f : list_images(default_text_dir())) text.push_back(file_crc(f));
  std::vector<std::string> kept;
  for (const auto& f : photos)
    if (std::find(text.begin(), text.end(), file_crc(f)) == text.end()) kept.push_back(f);
  if (kept.empty()) throw Error("every calibration photo in '" + dir + "' is also a text photo (data/text)");
  return kept;
}

std::string default_calib_dir() { return (fs::path(project_home()) / "data" / "calib").string(); }
std::string default_eval_dir() { return (fs::path(project_home()) / "data" / "eval").string(); }
std::string default_photo() {
  const auto files = list_images(default_eval_dir());
  return files.front();
}

std::vector<float> image_input(const std::string& path, int size, const ImageNorm& norm) {
  return preprocess(load_image(path), size, norm);
}

CodeRatios activation_code_ratios(const QGraph& q) {
  CodeRatios r;
  const Shape& in = q.shape(q.input);
  std::vector<int8_t> x;
  if (in.c == 3 && in.h == in.w) {
    const std::string photo = default_photo();
    x = quantize_input(q, image_input(photo, in.h, q.in_norm));
    r.source = std::filesystem::path(photo).filename().string();
  } else {
    std::mt19937 rng(1);
    x.resize(size_t(in.c) * size_t(in.h) * size_t(in.w));
    for (auto& v : x) v = int8_t(rng());
    r.source = "a seeded random input";
  }
  const auto all = run_int8_all(q, x);
  r.rice.resize(q.nodes.size(), 1.0);
  r.mask.resize(q.nodes.size(), 1.0);
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const core::LayerDesc& d = q.nodes[n].geo;
    const std::vector<int8_t>& t = all.at(size_t(q.nodes[n].output));
    if (t.empty()) continue;
    const auto* v = reinterpret_cast<const uint8_t*>(t.data());
    const double size = double(t.size());
    r.rice[n] = double(core::coded_bytes(v, t.size(), core::code_params_for(d.out_zp, d.act_min))) / size;
    r.mask[n] = double(core::coded_bytes(v, t.size(), core::code_params_for(d.out_zp, d.act_min, true))) / size;
  }
  return r;
}

InputTensor load_input_npy(const std::string& path, const Shape& in) {
  NpyArray a = read_npy(path);
  const std::vector<int64_t> chw = {in.c, in.h, in.w}, nchw = {1, in.c, in.h, in.w};
  if (a.shape != chw && a.shape != nchw) {
    auto text = [](const std::vector<int64_t>& d) {
      std::string s = "(";
      for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
      return s + (d.size() == 1 ? ",)" : ")");
    };
    throw Error(path + ": shape " + text(a.shape) + " does not match the model's input " + text(nchw) + " (NCHW)");
  }
  InputTensor t;
  t.is_int8 = a.type == NpyArray::Type::Int8;
  t.f32 = std::move(a.f32);
  t.i8 = std::move(a.i8);
  if (!t.is_int8)
    for (float v : t.f32)
      if (!std::isfinite(v)) throw Error(path + ": the input holds NaN or infinite values");
  return t;
}

std::vector<int8_t> int8_input(const QGraph& q, const InputTensor& t) {
  return t.is_int8 ? t.i8 : quantize_input(q, t.f32);
}

std::vector<float> float_input(const QGraph& q, const InputTensor& t) {
  if (!t.is_int8) return t.f32;
  const QTensor& in = q.tensors.at(q.input);
  std::vector<float> x(t.i8.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = in.scale * float(int32_t(t.i8[i]) - in.zp);
  return x;
}

std::string fashion_mnist_model() {
  const std::string home = project_home();
  const fs::path p = fs::path(home.empty() ? "." : home) / "models" / "fashion-mnist" / "model.onnx";
  if (!fs::exists(p))
    throw Error("the Fashion-MNIST model is missing (" + p.string() + "); train it with: bash scripts/fashion_mnist.sh");
  return p.string();
}

QuantizeOptions fashion_mnist_calibration(int n) {
  const LabelledImages train = load_fashion_mnist("train", n);
  QuantizeOptions opt;
  for (int i = 0; i < train.count(); ++i) opt.calib_inputs.push_back(train.input(i));
  opt.calib_tag = "fashion-mnist training images 0.." + std::to_string(train.count() - 1);
  return opt;
}


QGraph quantized_model(const std::string& spec, int size, const QuantizeOptions& opt, Graph* folded_out) {
  const std::string path = resolve_model(spec);
  if (is_quantized_file(path)) {
    QGraph q = load_qgraph(path);
    const int stored = q.shape(q.input).h;
    if (size > 0 && size != stored)
      throw Error("'" + path + "' was quantised for input size " + std::to_string(stored) + ", not " + std::to_string(size));
    if (folded_out) throw Error("'" + path + "' is quantised; the float model is not available");
    return q;
  }
  Graph g = fold(import_model(path, size));
  if (folded_out) *folded_out = g;
  const bool tensors = !opt.calib_inputs.empty();
  const std::string calib = opt.calib_dir.empty() ? default_calib_dir() : opt.calib_dir;
  const auto images = tensors ? std::vector<std::string>{} : calibration_photos(path, calib);

  // Cache key: model bytes, weight shards, size, calibration set and method,
  // and the version of what fold and quantise make of them (v6: a nearest
  // Resize by whole factors read by an Add is read upsampled by it; v5: nodes that
  // free more than they make run early; v4: a residual squeeze-excite gate is
  // one Mul by the gate plus one; v3: activations take the affines after them
  // into their tables).
  uint32_t key = file_crc(path);
  for (auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    if (e.path().extension() == ".bin") key ^= file_crc(e.path().string()) * 2654435761u;
  std::string desc = std::to_string(g.shape(g.input).h) + "|" + std::to_string(int(opt.calib.method)) + "|" +
                     std::to_string(opt.calib.percentile) + "|v6";
  for (int c = 0; c < 3; ++c) desc += "|" + std::to_string(g.in_norm.mean[c]) + "/" + std::to_string(g.in_norm.std[c]);
  desc += g.in_norm.bgr ? "|bgr" : "|rgb";
  for (auto& im : images) desc += "|" + im + ":" + std::to_string(file_crc(im));
  if (tensors) desc += "|tensors:" + opt.calib_tag + ":" + std::to_string(opt.calib_inputs.size());
  key = crc32_update(key, desc.data(), desc.size());
  const std::string home = project_home();
  const fs::path cache = fs::path(home.empty() ? "." : home) / "models" / ".cache" /
                         (fs::path(path).parent_path().filename().string() + "-" + std::to_string(g.shape(g.input).h) +
                          "-" + std::to_string(key) + ".tsqm");
  if (opt.use_cache && fs::exists(cache)) {
    try {
      return load_qgraph(cache.string());
    } catch (const Error&) {
      // A damaged cache entry is rebuilt below.
    }
  }
  std::vector<std::vector<float>> inputs;
  for (const auto& im : images) {
    inputs.push_back(image_input(im, g.shape(g.input).h, g.in_norm));
    if (g.shape(g.input).c == 1) {  // a grey model: the mean of the three channels
      std::vector<float>& x = inputs.back();
      const size_t plane = x.size() / 3;
      for (size_t k = 0; k < plane; ++k) x[k] = (x[k] + x[plane + k] + x[2 * plane + k]) / 3.0f;
      x.resize(plane);
    }
  }
  const Calibration cal = calibrate(g, tensors ? opt.calib_inputs : inputs, opt.calib);
  QGraph q = quantize(g, cal);
  if (tensors && !opt.calib_tag.empty()) q.calibration += " on " + opt.calib_tag;
  if (opt.use_cache) {
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    if (!ec) {
      const std::string tmp = cache.string() + ".tmp" + std::to_string(getpid());
      try {
        save_qgraph(q, tmp);
        fs::rename(tmp, cache, ec);
      } catch (const Error&) {
      }
    }
  }
  return q;
}

}  // namespace ts
