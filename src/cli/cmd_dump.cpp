// tinysplit dump: every layer's int8 output of the single-process reference
// (run_int8) on one photo, as .npy files, with the model and the quantised
// input it used, so that an independent implementation
// (scripts/int8_reference.py) can recompute and compare them (docs/int8.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/npy.h"
#include "model/pipeline.h"

namespace ts::cli {

struct DumpCmdOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  std::string out, image, input;
  bool json = false;
};

namespace {

std::vector<int64_t> chw(const Shape& s) { return {s.c, s.h, s.w}; }

}  // namespace

int cmd_dump(const DumpCmdOptions& o) {
  namespace fs = std::filesystem;
  const QGraph q = quantized_model(o.model, o.size, QuantizeOptions{});
  const Shape in = q.shape(q.input);
  std::vector<int8_t> x;
  std::string img;
  if (!o.input.empty()) {
    img = o.input;
    NpyArray a = read_npy(o.input);
    if (a.type != NpyArray::Type::Int8) throw Error("input '" + o.input + "': must hold int8 values (descr '|i1')");
    if (a.size() != in.size())
      throw Error("input '" + o.input + "': holds " + std::to_string(a.size()) + " values, the model takes " +
                  to_string(in));
    x = std::move(a.i8);
  } else {
    if (in.c != 3 || in.h != in.w)
      throw Error("a photo needs a square 3-channel model input, this one is " + to_string(in) + "; pass --input");
    img = o.image.empty() ? default_photo() : o.image;
    x = quantize_input(q, image_input(img, in.h, q.in_norm));
  }
  const auto all = run_int8_all(q, x);
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec || !fs::is_directory(o.out)) throw Error("cannot create folder '" + o.out + "'");
  const fs::path dir(o.out);
  save_qgraph(q, (dir / "model.tsqm").string());
  write_npy((dir / "input.npy").string(), chw(in), x);
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    const QNode& n = q.nodes[i];
    char file[32];
    std::snprintf(file, sizeof file, "layer_%03zu.npy", i);
    write_npy((dir / file).string(), chw(q.shape(n.output)), all[size_t(n.output)]);
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
  if (o.json)
    std::printf("%s\n", nlohmann::json({{"out", o.out}, {"layers", q.nodes.size()}, {"image", img}}).dump(2).c_str());
  else
    std::printf("wrote %s: %zu int8 layers of %s at %dx%d on %s\n", o.out.c_str(), q.nodes.size(), q.source.c_str(),
                in.h, in.w, img.c_str());
  return 0;
}

void register_dump(CLI::App& app) {
  auto o = std::make_shared<DumpCmdOptions>();
  CLI::App& sub = add_command(app, "dump", "Write every layer's int8 output of the reference on one photo (.npy + index.json)",
                              [o] { return cmd_dump(*o); });
  add_model_options(sub, o->model, o->size, true);
  sub.add_option("--out,-o", o->out, "output folder")->required();
  auto* img_opt = sub.add_option("--image,-i", o->image, "photo to run (default: the first of data/eval)");
  sub.add_option("--input", o->input, "already quantised int8 input (.npy, C-H-W) instead of a photo")->excludes(img_opt);
  add_json_flag(sub, o->json);
}

}  // namespace ts::cli
