#include "model/pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/crc32.h"
#include "model/fold.h"
#include "model/image.h"
#include "model/import_onnx.h"
#include "model/import_tfjs.h"

namespace ts {
namespace fs = std::filesystem;

std::string resolve_model(const std::string& spec) {
  if (spec == "mobilenetv2" || spec == "mobilenet_v2") {
    const std::string home = project_home();
    const fs::path p = fs::path(home.empty() ? "." : home) / "models" / "mobilenetv2" / "model.json";
    if (!fs::exists(p))
      throw Error("default model not found at '" + p.string() + "'; run scripts/setup.sh (or scripts/fetch_model.sh) first");
    return p.string();
  }
  if (!fs::exists(spec)) throw Error("model file '" + spec + "' does not exist");
  if (fs::is_directory(spec)) {
    if (fs::exists(fs::path(spec) / "model.json")) return (fs::path(spec) / "model.json").string();
    throw Error("model folder '" + spec + "' has no model.json");
  }
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

Graph import_model(const std::string& spec, int size) {
  const std::string path = resolve_model(spec);
  if (is_quantized_file(path)) throw Error("'" + path + "' is already quantised; this command needs a float model");
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".json") return import_tfjs(path, size);
  if (ext == ".onnx") return import_onnx(path, size);
  const std::string head = head_bytes(path, 64);
  if (!head.empty() && head.find('{') != std::string::npos && head.find("modelTopology") != std::string::npos)
    return import_tfjs(path, size);
  return import_onnx(path, size);
}

std::string default_calib_dir() { return (fs::path(project_home()) / "data" / "calib").string(); }
std::string default_eval_dir() { return (fs::path(project_home()) / "data" / "eval").string(); }
std::string default_photo() {
  const auto files = list_images(default_eval_dir());
  return files.front();
}

std::vector<float> image_input(const std::string& path, int size, const float mean[3], const float stdv[3]) {
  return preprocess(load_image(path), size, mean, stdv);
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
  const std::string calib = opt.calib_dir.empty() ? default_calib_dir() : opt.calib_dir;
  const auto images = list_images(calib);

  // Cache key: model bytes, weight shards, size, calibration set and method.
  uint32_t key = file_crc(path);
  for (auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    if (e.path().extension() == ".bin") key ^= file_crc(e.path().string()) * 2654435761u;
  std::string desc = std::to_string(g.shape(g.input).h) + "|" + std::to_string(int(opt.calib.method)) + "|" +
                     std::to_string(opt.calib.percentile) + "|v1";
  for (auto& im : images) desc += "|" + im + ":" + std::to_string(file_crc(im));
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
  for (const auto& im : images) inputs.push_back(image_input(im, g.shape(g.input).h, g.in_mean, g.in_std));
  const Calibration cal = calibrate(g, inputs, opt.calib);
  QGraph q = quantize(g, cal);
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
