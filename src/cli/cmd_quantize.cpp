// tinysplit quantize: fold, calibrate and write a .tsqm file.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/pipeline.h"

namespace ts::cli {

void register_quantize(CLI::App& app) {
  add_command(app, "quantize", "Fold, calibrate on real photos and write the int8 model (.tsqm)",
              [](CLI::App& sub) -> Command {
                auto model = std::make_shared<std::string>("mobilenetv2");
                auto size = std::make_shared<int>(112);
                auto out = std::make_shared<std::string>();
                auto calib = std::make_shared<std::string>();
                auto method = std::make_shared<std::string>("minmax");
                auto pct = std::make_shared<double>(99.99);
                auto json = std::make_shared<bool>(false);
                add_model_options(sub, *model, *size, false);
                sub.add_option("--out,-o", *out, "output .tsqm file")->required();
                sub.add_option("--calib", *calib, "folder of calibration photos (default data/calib)");
                sub.add_option("--method", *method, "calibration: minmax or percentile")->capture_default_str();
                sub.add_option("--percentile", *pct, "percentile kept by the percentile method")->capture_default_str();
                add_json_flag(sub, *json);
                return [=]() -> int {
                  QuantizeOptions opt;
                  opt.calib_dir = *calib;
                  opt.calib.method = parse_calib_method(*method);
                  opt.calib.percentile = *pct;
                  opt.use_cache = false;
                  QGraph q = quantized_model(*model, *size, opt);
                  save_qgraph(q, *out);
                  if (*json) {
                    nlohmann::json j = {{"out", *out}, {"layers", q.nodes.size()}, {"weight_bytes", q.weight_bytes()},
                                        {"total_macs", q.total_macs()}, {"calibration", q.calibration}};
                    std::printf("%s\n", j.dump(2).c_str());
                  } else {
                    std::printf("wrote %s: %zu int8 layers, %lld weight bytes, %.2f M MACs, calibration: %s\n", out->c_str(),
                                q.nodes.size(), (long long)q.weight_bytes(), double(q.total_macs()) / 1e6, q.calibration.c_str());
                  }
                  return 0;
                };
              });
}

}  // namespace ts::cli
