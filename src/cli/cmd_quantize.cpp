// tinysplit quantize: fold, calibrate and write a .tsqm file.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/pipeline.h"

namespace ts::cli {

struct QuantizeCmdOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  std::string out, calib, method = "minmax";
  double percentile = 99.99;
  bool json = false;
};

int cmd_quantize(const QuantizeCmdOptions& o) {
  QuantizeOptions opt;
  opt.calib_dir = o.calib;
  opt.calib.method = parse_calib_method(o.method);
  opt.calib.percentile = o.percentile;
  opt.use_cache = false;
  QGraph q = quantized_model(o.model, o.size, opt);
  save_qgraph(q, o.out);
  if (o.json) {
    nlohmann::json j = {{"out", o.out}, {"layers", q.nodes.size()}, {"weight_bytes", q.weight_bytes()},
                        {"total_macs", q.total_macs()}, {"calibration", q.calibration}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("wrote %s: %zu int8 layers, %lld weight bytes, %.2f M MACs, calibration: %s\n", o.out.c_str(),
                q.nodes.size(), (long long)q.weight_bytes(), double(q.total_macs()) / 1e6, q.calibration.c_str());
  }
  return 0;
}

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeCmdOptions>();
  CLI::App& sub = add_command(app, "quantize", "Fold, calibrate on real photos and write the int8 model (.tsqm)",
                              [o] { return cmd_quantize(*o); });
  add_model_options(sub, o->model, o->size, false);
  sub.add_option("--out,-o", o->out, "output .tsqm file")->required();
  sub.add_option("--calib", o->calib, "folder of calibration photos (default data/calib)");
  sub.add_option("--method", o->method, "calibration: minmax or percentile")->capture_default_str();
  sub.add_option("--percentile", o->percentile, "percentile kept by the percentile method")->capture_default_str();
  add_json_flag(sub, o->json);
}

}  // namespace ts::cli
