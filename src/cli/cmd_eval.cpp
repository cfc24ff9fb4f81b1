// tinysplit eval: float vs int8 on a folder of photos, on one prepared tensor
// (--input FILE.npy), or on a labelled data set (--dataset fashion-mnist).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "model/dataset.h"
#include "model/float_exec.h"
#include "model/image.h"
#include "model/npy.h"
#include "model/pipeline.h"
#include "model/text_map.h"

namespace ts::cli {

namespace {
int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }
}  // namespace

struct EvalOptions {
  std::string model = "mobilenetv2";
  int size = 0;
  std::string images, calib, method = "minmax";
  int compare_size = 0;
  std::string input, save_output, save_int8_output;
  std::string dataset;
  int limit = 0;
  bool json = false;
};

// Photos: top-1 agreement and probability deltas between float and int8.
int eval_maps(const EvalOptions& o, const std::vector<std::string>& files, const Graph& g, const QGraph& q);

int eval_photos(const EvalOptions& o) {
  QuantizeOptions opt;
  opt.calib_dir = o.calib;
  opt.calib.method = parse_calib_method(o.method);
  Graph g;
  QGraph q = quantized_model(o.model, o.size, opt, &g);
  // A detector (its output a map, e.g. ppocr-det) is evaluated on the photos with text.
  const bool detector = q.shape(q.output).h > 1 && q.shape(q.output).w > 1;
  const std::string dir = !o.images.empty() ? o.images : detector ? default_text_dir() : default_eval_dir();
  const auto files = list_images(dir);
  const auto cdir = std::filesystem::weakly_canonical(o.calib.empty() ? default_calib_dir() : o.calib);
  if (std::filesystem::weakly_canonical(dir) == cdir)
    std::fprintf(stderr, "tinysplit: warning: evaluating on the calibration photos\n");
  if (detector) {
    if (o.compare_size > 0) throw Error("eval: --compare-size compares classifiers' top-1; '" + o.model + "' outputs a map");
    return eval_maps(o, files, g, q);
  }
  // The float model at another size: how often its top-1 there agrees with
  // the top-1 at this size (what a size other than the trained one costs).
  Graph gref;
  if (o.compare_size > 0) gref = import_model(o.model, o.compare_size);
  const bool sm = q.softmax_output;
  Progress bar("eval", int(files.size()));
  nlohmann::json per = nlohmann::json::array();
  int agree = 0, agree_ref = 0;
  double diff_sum = 0;
  size_t diff_n = 0;
  double max_diff = 0;
  auto label = [&](int i) { return i < int(q.labels.size()) ? q.labels[i] : std::to_string(i); };
  std::map<std::string, int> float_counts, ref_counts;
  for (const auto& f : files) {
    const auto x = image_input(f, g.shape(g.input).h, g.in_norm);
    const auto pf = run_float(g, x);
    const auto pq = output_probs(q, run_int8(q, quantize_input(q, x)));
    const int tf = argmax(pf), tq = argmax(pq);
    agree += tf == tq;
    ++float_counts[label(tf)];
    for (size_t k = 0; k < pf.size(); ++k) {
      const double d = std::fabs(double(pf[k]) - pq[k]);
      diff_sum += d;
      max_diff = std::max(max_diff, d);
      ++diff_n;
    }
    nlohmann::json e = {{"file", std::filesystem::path(f).filename().string()}, {"float_top1", tf}, {"int8_top1", tq},
                        {"float_label", label(tf)}, {"int8_label", label(tq)}, {"float_probs", pf}, {"int8_probs", pq}};
    int tr = -1;
    if (o.compare_size > 0) {
      tr = argmax(run_float(gref, image_input(f, gref.shape(gref.input).h, gref.in_norm)));
      agree_ref += tr == tf;
      ++ref_counts[label(tr)];
      e["float_top1_at_compare_size"] = tr;
    }
    per.push_back(e);
    if (!o.json)
      std::printf("%-40.40s float %-10s %.3f  int8 %-10s %.3f %s%s\n", std::filesystem::path(f).filename().c_str(),
                  label(tf).c_str(), pf[tf], label(tq).c_str(), pq[tq], tf == tq ? "" : " <- differs",
                  tr >= 0 ? (" (at " + std::to_string(o.compare_size) + ": " + label(tr) + ")").c_str() : "");
    bar.step(std::filesystem::path(f).filename().string());
  }
  const double rate = double(agree) / double(files.size());
  const double mad = diff_n ? diff_sum / double(diff_n) : 0.0;
  const int in_size = g.shape(g.input).h;
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"images", files.size()}, {"size", in_size}, {"top1_agreement", rate},
                        {"mean_abs_prob_diff", mad}, {"max_abs_prob_diff", max_diff}, {"calibration", q.calibration},
                        {"outputs_are_probs", sm}, {"float_class_counts", float_counts},
                        {"size_note", size_note(o.model, in_size)}, {"per_image", per}};
    if (o.compare_size > 0) {
      j["compare_size"] = o.compare_size;
      j["float_agreement_with_compare_size"] = double(agree_ref) / double(files.size());
      j["float_class_counts_at_compare_size"] = ref_counts;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%zu images at %d: top-1 agreement %.1f%%, mean |dprob| %.4f, max |dprob| %.4f (calibration: %s)\n",
                files.size(), in_size, 100.0 * rate, mad, max_diff, q.calibration.c_str());
    if (o.compare_size > 0)
      std::printf("float top-1 at %d agrees with the float top-1 at %d on %d of %zu images\n", in_size, o.compare_size,
                  agree_ref, files.size());
    if (const std::string note = size_note(o.model, in_size); !note.empty()) std::printf("note: %s\n", note.c_str());
  }
  return 0;
}

// A detector (its output a probability map, e.g. ppocr-det) on photos: per
// photo, the float and int8 maps binarised at the DB threshold and compared
// pixel by pixel, and the text boxes of each (DB post-process, model/text_map.h)
// paired by IoU.
int eval_maps(const EvalOptions& o, const std::vector<std::string>& files, const Graph& g, const QGraph& q) {
  const Shape& os = q.shape(q.output);
  const DbParams db;
  Progress bar("eval", int(files.size()));
  nlohmann::json per = nlohmann::json::array();
  double agree_sum = 0, agree_min = 1, iou_sum = 0;
  int boxes_f = 0, boxes_q = 0, matched = 0;
  for (const auto& f : files) {
    const auto x = image_input(f, g.shape(g.input).h, g.in_norm);
    const ProbMap mf = output_map(run_float(g, x), os.c, os.h, os.w);
    const ProbMap mq = output_map(output_probs(q, run_int8(q, quantize_input(q, x))), os.c, os.h, os.w);
    const double agree = binary_agreement(mf, mq, db.thresh);
    const BoxMatch bm = match_boxes(db_boxes(mf, db), db_boxes(mq, db));
    agree_sum += agree;
    agree_min = std::min(agree_min, agree);
    iou_sum += bm.mean_iou;
    boxes_f += bm.reference, boxes_q += bm.candidate, matched += bm.matched;
    const std::string name = std::filesystem::path(f).filename().string();
    per.push_back({{"file", name}, {"pixel_agreement", agree}, {"float_boxes", bm.reference},
                   {"int8_boxes", bm.candidate}, {"matched_boxes", bm.matched}, {"mean_box_iou", bm.mean_iou}});
    if (!o.json)
      std::printf("%-40.40s binarised map agreement %.2f%%, boxes float %d int8 %d, %d paired at IoU >= 0.5, mean IoU %.3f\n",
                  name.c_str(), 100.0 * agree, bm.reference, bm.candidate, bm.matched, bm.mean_iou);
    bar.step(name);
  }
  const double n = double(files.size());
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"images", files.size()}, {"size", g.shape(g.input).h},
                        {"threshold", db.thresh}, {"mean_pixel_agreement", agree_sum / n},
                        {"min_pixel_agreement", agree_min}, {"mean_box_iou", iou_sum / n},
                        {"float_boxes", boxes_f}, {"int8_boxes", boxes_q}, {"matched_boxes", matched},
                        {"calibration", q.calibration}, {"per_image", per}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%zu images at %d: binarised map (> %.1f) agreement float vs int8 mean %.2f%%, min %.2f%%; boxes float %d, "
                "int8 %d, %d paired at IoU >= 0.5, mean IoU %.3f (calibration: %s)\n",
                files.size(), g.shape(g.input).h, db.thresh, 100.0 * agree_sum / n, 100.0 * agree_min, boxes_f, boxes_q,
                matched, iou_sum / n, q.calibration.c_str());
  }
  return 0;
}

// One prepared tensor: the float and the int8 outputs of any model.
int eval_tensor(const EvalOptions& o) {
  QuantizeOptions opt;
  opt.calib_dir = o.calib;
  opt.calib.method = parse_calib_method(o.method);
  Graph g;
  // Read the file against the float model's input first: a bad tensor is
  // reported before calibration.
  const Graph gi = import_model(o.model, o.size);
  const InputTensor t = load_input_npy(o.input, gi.shape(gi.input));
  QGraph q = quantized_model(o.model, o.size, opt, &g);
  const auto out_f = run_float(g, float_input(q, t));
  const auto raw = run_int8(q, int8_input(q, t));
  const auto out_q = output_probs(q, raw);
  const std::vector<int64_t> oshape = {1, int64_t(out_f.size())};
  if (!o.save_output.empty()) write_npy(o.save_output, oshape, out_f);
  if (!o.save_int8_output.empty()) write_npy(o.save_int8_output, oshape, raw);
  double max_abs = 0, max_ref = 0;
  for (size_t k = 0; k < out_f.size(); ++k) {
    max_abs = std::max(max_abs, std::fabs(double(out_f[k]) - out_q[k]));
    max_ref = std::max(max_ref, std::fabs(double(out_f[k])));
  }
  const int tf = argmax(out_f), tq = argmax(out_q);
  auto label = [&](int i) { return i < int(q.labels.size()) ? q.labels[i] : std::to_string(i); };
  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"input", o.input}, {"input_dtype", t.is_int8 ? "int8" : "float32"},
                        {"size", g.shape(g.input).h}, {"outputs_are_probs", q.softmax_output},
                        {"float_output", out_f}, {"int8_output", out_q},
                        {"int8_output_raw", std::vector<int>(raw.begin(), raw.end())},
                        {"float_top1", tf}, {"int8_top1", tq}, {"max_abs_diff", max_abs},
                        {"max_abs_diff_relative", max_ref > 0 ? max_abs / max_ref : 0.0}, {"calibration", q.calibration}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s (%s input) at %d: float top-1 %s (%.4g), int8 top-1 %s (%.4g), max |float - int8| %.4g\n",
                o.input.c_str(), t.is_int8 ? "int8" : "float32", g.shape(g.input).h, label(tf).c_str(), out_f[tf],
                label(tq).c_str(), out_q[tq], max_abs);
    std::printf("%6s %14s %14s %6s\n", "index", "float", "int8", "raw");
    for (size_t k = 0; k < out_f.size(); ++k)
      std::printf("%6zu %14.6g %14.6g %6d\n", k, out_f[k], out_q[k], int(raw[k]));
  }
  return 0;
}

// A labelled data set: float and int8 accuracy.
int eval_dataset(const EvalOptions& o) {
  if (o.dataset != "fashion-mnist") throw Error("--dataset: unknown data set '" + o.dataset + "' (known: fashion-mnist)");
  const std::string model = o.model == "mobilenetv2" ? fashion_mnist_model() : o.model;
  const LabelledImages test = load_fashion_mnist("test", o.limit);
  QuantizeOptions opt = fashion_mnist_calibration();
  opt.calib.method = parse_calib_method(o.method);
  Graph g;
  {
    const Graph gi = import_model(model, o.size);
    const Shape& s = gi.shape(gi.input);
    if (s.c != 1 || s.h != test.rows || s.w != test.cols)
      throw Error("'" + model + "' takes " + to_string(s) + " inputs; Fashion-MNIST images are 1x" +
                  std::to_string(test.rows) + "x" + std::to_string(test.cols));
  }
  QGraph q = quantized_model(model, o.size, opt, &g);
  Progress bar("eval", (test.count() + 99) / 100);
  int ok_f = 0, ok_q = 0, agree = 0;
  const size_t nc = test.classes.size();
  std::vector<int> per_class_n(nc, 0), per_class_f(nc, 0), per_class_q(nc, 0);
  for (int i = 0; i < test.count(); ++i) {
    const auto x = test.input(i);
    const int tf = argmax(run_float(g, x));
    const int tq = argmax(output_probs(q, run_int8(q, quantize_input(q, x))));
    const int y = test.labels[size_t(i)];
    ok_f += tf == y;
    ok_q += tq == y;
    agree += tf == tq;
    ++per_class_n[size_t(y)];
    per_class_f[size_t(y)] += tf == y;
    per_class_q[size_t(y)] += tq == y;
    if (i % 100 == 99 || i + 1 == test.count()) bar.step();
  }
  const double n = double(test.count());
  if (o.json) {
    nlohmann::json pc = nlohmann::json::array();
    for (size_t c = 0; c < nc; ++c)
      pc.push_back({{"class", test.classes[c]}, {"images", per_class_n[c]},
                    {"float_accuracy", per_class_n[c] ? double(per_class_f[c]) / per_class_n[c] : 0.0},
                    {"int8_accuracy", per_class_n[c] ? double(per_class_q[c]) / per_class_n[c] : 0.0}});
    nlohmann::json j = {{"dataset", "fashion-mnist"}, {"split", "test"}, {"model", model}, {"size", g.shape(g.input).h},
                        {"images", test.count()}, {"float_accuracy", ok_f / n}, {"int8_accuracy", ok_q / n},
                        {"float_int8_agreement", agree / n}, {"calibration", q.calibration}, {"per_class", pc}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("fashion-mnist test, %d images, %s at %dx%d\n", test.count(), model.c_str(), g.shape(g.input).h,
                g.shape(g.input).w);
    std::printf("float accuracy %.4f, int8 accuracy %.4f, float/int8 top-1 agreement %.4f (calibration: %s)\n", ok_f / n,
                ok_q / n, agree / n, q.calibration.c_str());
  }
  return 0;
}

int cmd_eval(const EvalOptions& o) {
  const int sources = int(!o.input.empty()) + int(!o.dataset.empty()) + int(!o.images.empty());
  if (sources > 1) throw Error("eval: give only one of --images, --input and --dataset");
  if ((!o.save_output.empty() || !o.save_int8_output.empty()) && o.input.empty())
    throw Error("eval: --save-output and --save-int8-output need --input");
  if (o.limit != 0 && o.dataset.empty()) throw Error("eval: --limit needs --dataset");
  if (!o.input.empty()) return eval_tensor(o);
  if (!o.dataset.empty()) return eval_dataset(o);
  return eval_photos(o);
}

void register_eval(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App& sub = add_command(app, "eval", "Run the float and int8 models on photos, a tensor or a data set and compare them",
                              [o] { return cmd_eval(*o); });
  add_model_options(sub, o->model, o->size, false);
  sub.add_option("--images,-i", o->images, "folder of photos to evaluate (default data/eval; data/text for a detector)");
  sub.add_option("--calib", o->calib, "folder of calibration photos (default data/calib)");
  sub.add_option("--method", o->method, "calibration: minmax or percentile")->capture_default_str();
  sub.add_option("--compare-size", o->compare_size, "photos: also run the float model at this size and count agreement")
      ->check(CLI::Range(1, 4096));
  sub.add_option("--input", o->input, "a prepared input tensor: .npy, float32 NCHW or int8 already quantised");
  sub.add_option("--save-output", o->save_output, "with --input: write the float model's output (float32 .npy)");
  sub.add_option("--save-int8-output", o->save_int8_output, "with --input: write the int8 model's raw output (int8 .npy)");
  sub.add_option("--dataset", o->dataset, "labelled data set: fashion-mnist (float and int8 accuracy on its test images; default model models/fashion-mnist/model.onnx)");
  sub.add_option("--limit", o->limit, "with --dataset: only the first N test images")->check(CLI::Range(1, 1000000));
  add_json_flag(sub, o->json);
}

}  // namespace ts::cli
