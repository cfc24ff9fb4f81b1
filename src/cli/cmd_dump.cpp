// tinysplit dump: every layer's int8 output of the single-process reference
// (run_int8) on one photo, as .npy files, with the model and the quantised
// input it used, so that an independent implementation
// (scripts/int8_reference.py) can recompute and compare them (docs/int8.md).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/pipeline.h"

namespace ts::cli {

namespace {

// NumPy .npy version 1.0, int8, C order.
void write_npy_i8(const std::string& path, const std::vector<int8_t>& v, const std::vector<int>& shape) {
  std::string dict = "{'descr': '|i1', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // magic (6) + version (2) + header length (2) + header, padded to 64 bytes, ending in '\n'
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error("cannot write '" + path + "'");
  const unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(dict.size() & 0xff), uint8_t(dict.size() >> 8)};
  f.write(reinterpret_cast<const char*>(head), 10);
  f.write(dict.data(), std::streamsize(dict.size()));
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size()));
  if (!f) throw Error("failed writing '" + path + "'");
}

std::vector<int> chw(const Shape& s) { return {s.c, s.h, s.w}; }

// Reads an int8 .npy (version 1 or 2, C order) that must have `shape`.
std::vector<int8_t> read_npy_i8(const std::string& path, const Shape& shape) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open input '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& why) { return Error("input '" + path + "': " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("not a .npy file");
  const int major = uint8_t(bytes[6]);
  size_t hlen = 0, off = 0;
  if (major == 1) {
    hlen = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    off = 10;
  } else if (major == 2 && bytes.size() >= 12) {
    for (int i = 0; i < 4; ++i) hlen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    off = 12;
  } else {
    throw bad("unsupported .npy version");
  }
  if (bytes.size() < off + hlen) throw bad("truncated header");
  std::string h = bytes.substr(off, hlen);
  h.erase(std::remove(h.begin(), h.end(), ' '), h.end());
  if (h.find("'descr':'|i1'") == std::string::npos && h.find("'descr':'i1'") == std::string::npos)
    throw bad("must hold int8 values (descr '|i1')");
  if (h.find("'fortran_order':False") == std::string::npos) throw bad("must be in C order");
  const std::string want = "'shape':(" + std::to_string(shape.c) + "," + std::to_string(shape.h) + "," + std::to_string(shape.w) + ")";
  if (h.find(want) == std::string::npos)
    throw bad("shape must be (" + std::to_string(shape.c) + ", " + std::to_string(shape.h) + ", " + std::to_string(shape.w) + ")");
  const size_t n = size_t(shape.size());
  if (bytes.size() - off - hlen != n) throw bad("holds " + std::to_string(bytes.size() - off - hlen) + " data bytes, expected " + std::to_string(n));
  std::vector<int8_t> v(n);
  std::memcpy(v.data(), bytes.data() + off + hlen, n);
  return v;
}

}  // namespace

void register_dump(CLI::App& app) {
  add_command(app, "dump", "Write every layer's int8 output of the reference on one photo (.npy + index.json)",
              [](CLI::App& sub) -> Command {
                auto model = std::make_shared<std::string>("mobilenetv2");
                auto size = std::make_shared<int>(112);
                auto out = std::make_shared<std::string>();
                auto image = std::make_shared<std::string>();
                auto input = std::make_shared<std::string>();
                auto json = std::make_shared<bool>(false);
                add_model_options(sub, *model, *size, true);
                sub.add_option("--out,-o", *out, "output folder")->required();
                auto* img_opt = sub.add_option("--image,-i", *image, "photo to run (default: the first of data/eval)");
                sub.add_option("--input", *input, "already quantised int8 input (.npy, C-H-W) instead of a photo")
                    ->excludes(img_opt);
                add_json_flag(sub, *json);
                return [=]() -> int {
                  namespace fs = std::filesystem;
                  const QGraph q = quantized_model(*model, *size, QuantizeOptions{});
                  const Shape in = q.shape(q.input);
                  std::vector<int8_t> x;
                  std::string img;
                  if (!input->empty()) {
                    img = *input;
                    x = read_npy_i8(*input, in);
                  } else {
                    if (in.c != 3 || in.h != in.w)
                      throw Error("a photo needs a square 3-channel model input, this one is " + to_string(in) + "; pass --input");
                    img = image->empty() ? default_photo() : *image;
                    x = quantize_input(q, image_input(img, in.h, q.in_mean, q.in_std));
                  }
                  const auto all = run_int8_all(q, x);
                  std::error_code ec;
                  fs::create_directories(*out, ec);
                  if (ec || !fs::is_directory(*out)) throw Error("cannot create folder '" + *out + "'");
                  const fs::path dir(*out);
                  save_qgraph(q, (dir / "model.tsqm").string());
                  write_npy_i8((dir / "input.npy").string(), x, chw(in));
                  nlohmann::json layers = nlohmann::json::array();
                  for (size_t i = 0; i < q.nodes.size(); ++i) {
                    const QNode& n = q.nodes[i];
                    char file[32];
                    std::snprintf(file, sizeof file, "layer_%03zu.npy", i);
                    write_npy_i8((dir / file).string(), all[size_t(n.output)], chw(q.shape(n.output)));
                    layers.push_back({{"index", i}, {"name", n.name}, {"op", core::qop_name(n.op)},
                                      {"shape", chw(q.shape(n.output))}, {"tensor", n.output}, {"file", file}});
                  }
                  const nlohmann::json index = {
                      {"source", q.source}, {"calibration", q.calibration}, {"image", img}, {"model_file", "model.tsqm"},
                      {"input", {{"tensor", q.input}, {"shape", chw(in)}, {"scale", q.tensors[size_t(q.input)].scale},
                                 {"zp", q.tensors[size_t(q.input)].zp}, {"file", "input.npy"}}},
                      {"output_tensor", q.output}, {"layers", layers}};
                  std::ofstream f(dir / "index.json");
                  f << index.dump(1) << "\n";
                  if (!f) throw Error("failed writing '" + (dir / "index.json").string() + "'");
                  if (*json)
                    std::printf("%s\n", nlohmann::json({{"out", *out}, {"layers", q.nodes.size()}, {"image", img}}).dump(2).c_str());
                  else
                    std::printf("wrote %s: %zu int8 layers of %s at %dx%d on %s\n", out->c_str(), q.nodes.size(),
                                q.source.c_str(), in.h, in.w, img.c_str());
                  return 0;
                };
              });
}

}  // namespace ts::cli
