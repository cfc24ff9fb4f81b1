// tinysplit eval: float vs int8 on a folder of photos.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/float_exec.h"
#include "model/image.h"
#include "model/pipeline.h"

namespace ts::cli {

namespace {
int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }
}  // namespace

void register_eval(CLI::App& app) {
  add_command(app, "eval", "Run the float and int8 models on photos and compare them", [](CLI::App& sub) -> Command {
    auto model = std::make_shared<std::string>("mobilenetv2");
    auto size = std::make_shared<int>(112);
    auto images = std::make_shared<std::string>();
    auto calib = std::make_shared<std::string>();
    auto method = std::make_shared<std::string>("minmax");
    auto json = std::make_shared<bool>(false);
    add_model_options(sub, *model, *size, false);
    sub.add_option("--images,-i", *images, "folder of photos to evaluate (default data/eval)");
    sub.add_option("--calib", *calib, "folder of calibration photos (default data/calib)");
    sub.add_option("--method", *method, "calibration: minmax or percentile")->capture_default_str();
    add_json_flag(sub, *json);
    return [=]() -> int {
      const std::string dir = images->empty() ? default_eval_dir() : *images;
      const auto files = list_images(dir);
      QuantizeOptions opt;
      opt.calib_dir = *calib;
      opt.calib.method = parse_calib_method(*method);
      Graph g;
      QGraph q = quantized_model(*model, *size, opt, &g);
      const auto cdir = std::filesystem::weakly_canonical(calib->empty() ? default_calib_dir() : *calib);
      if (std::filesystem::weakly_canonical(dir) == cdir)
        std::fprintf(stderr, "tinysplit: warning: evaluating on the calibration photos\n");
      const bool sm = q.softmax_output;
      Progress bar("eval", int(files.size()));
      nlohmann::json per = nlohmann::json::array();
      int agree = 0;
      double diff_sum = 0;
      size_t diff_n = 0;
      double max_diff = 0;
      for (const auto& f : files) {
        const auto x = image_input(f, g.shape(g.input).h, g.in_mean, g.in_std);
        const auto pf = run_float(g, x);
        const auto pq = output_probs(q, run_int8(q, quantize_input(q, x)));
        const int tf = argmax(pf), tq = argmax(pq);
        agree += tf == tq;
        for (size_t k = 0; k < pf.size(); ++k) {
          const double d = std::fabs(double(pf[k]) - pq[k]);
          diff_sum += d;
          max_diff = std::max(max_diff, d);
          ++diff_n;
        }
        auto label = [&](int i) { return i < int(q.labels.size()) ? q.labels[i] : std::to_string(i); };
        per.push_back({{"file", std::filesystem::path(f).filename().string()}, {"float_top1", tf}, {"int8_top1", tq},
                       {"float_label", label(tf)}, {"int8_label", label(tq)}, {"float_probs", pf}, {"int8_probs", pq}});
        if (!*json)
          std::printf("%-40.40s float %-10s %.3f  int8 %-10s %.3f %s\n", std::filesystem::path(f).filename().c_str(),
                      label(tf).c_str(), pf[tf], label(tq).c_str(), pq[tq], tf == tq ? "" : " <- differs");
        bar.step(std::filesystem::path(f).filename().string());
      }
      const double rate = double(agree) / double(files.size());
      const double mad = diff_n ? diff_sum / double(diff_n) : 0.0;
      if (*json) {
        nlohmann::json j = {{"model", *model}, {"images", files.size()}, {"size", g.shape(g.input).h}, {"top1_agreement", rate},
                            {"mean_abs_prob_diff", mad}, {"max_abs_prob_diff", max_diff}, {"calibration", q.calibration},
                            {"outputs_are_probs", sm}, {"per_image", per}};
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        std::printf("%zu images at %d: top-1 agreement %.1f%%, mean |dprob| %.4f, max |dprob| %.4f (calibration: %s)\n",
                    files.size(), g.shape(g.input).h, 100.0 * rate, mad, max_diff, q.calibration.c_str());
      }
      return 0;
    };
  });
}

}  // namespace ts::cli
