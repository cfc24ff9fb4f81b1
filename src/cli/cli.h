// Shared pieces of the tinysplit command line.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <unistd.h>

#include "plan/names.h"
#include "plan/strategy.h"
#include "plan/streams.h"
#include "util/error.h"

namespace ts::cli {

// Each subcommand file declares an options struct, a function that runs the
// command with them (`int cmd_<name>(const <Name>Options&)`, returning the
// exit code and throwing ts::Error for bad input) and a register_<name>()
// that adds the subcommand, binds its options to one struct and hands
// add_command the call to run when the subcommand is given.
using Command = std::function<int()>;
CLI::App& add_command(CLI::App& app, const std::string& name, const std::string& help, Command run);

// A one-line progress bar on stderr when it is a terminal; silent otherwise.
class Progress {
 public:
  Progress(std::string label, int total) : label_(std::move(label)), total_(total), tty_(isatty(2) != 0) {}
  void step(const std::string& what = "") {
    ++done_;
    if (!tty_) return;
    const int width = 30;
    const int fill = total_ > 0 ? done_ * width / total_ : width;
    std::fprintf(stderr, "\r%s [%s%s] %d/%d %-30.30s", label_.c_str(), std::string(size_t(fill), '#').c_str(),
                 std::string(size_t(width - fill), ' ').c_str(), done_, total_, what.c_str());
    if (done_ >= total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  int total_;
  int done_ = 0;
  bool tty_;
};

// The options every model-reading command shares. `quantized` says whether
// the command also takes a .tsqm file in place of a float model.
inline void add_model_options(CLI::App& sub, std::string& model, int& size, bool quantized) {
  sub.add_option("--model,-m", model,
                 quantized ? "mobilenetv2, a TF.js model.json, an ONNX file or a .tsqm"
                           : "mobilenetv2, a TF.js model.json or an ONNX file")
      ->capture_default_str();
  sub.add_option("--size,-s", size,
                 "square input size up to 1024, for models that can be resized (default 0: the model's own size; "
                 "224, its trained size, for the bundled MobileNetV2; 112 is the paper's)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
}

// A number in [lo, hi]: NaN and infinities are refused (CLI::Range lets NaN
// through, since every comparison with it is false).
inline CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != 0 || !std::isfinite(v) || v < lo || v > hi)
          return "expected a number in [" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) +
                 "], got '" + s + "'";
        return {};
      },
      "FLOAT in [" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]");
}

inline void add_json_flag(CLI::App& sub, bool& json) { sub.add_flag("--json", json, "machine-readable output"); }

// Whether option `name` ("--ram") was given to subcommand `sub`.
inline bool given(const CLI::App* sub, const char* name) { return sub != nullptr && sub->count(name) > 0; }

// A combination in which an option does nothing is refused, with one line
// naming both: "CMD: OPTION does nothing CONTEXT (WHY)", e.g. "run: --ram
// does nothing with --testbed (...)". Only when `option` was given and `idle`.
inline void refuse_idle(const CLI::App* sub, const std::string& cmd, const char* option, bool idle,
                        const std::string& context, const std::string& why) {
  if (idle && given(sub, option))
    throw Error(cmd + ": " + option + " does nothing " + context + " (" + why + ")");
}

// A value of an option that takes one of `choices` (plan/names.h): else one
// line, "--cost-model: expected a, b or c, got 'x'".
template <class Range>
void check_choice(const char* option, const Range& choices, const std::string& value) {
  if (!plan::has_name(choices, value))
    throw Error(std::string(option) + ": expected " + plan::join_names(choices, " or ") + ", got '" + value + "'");
}

// --strategy and --route, their names and help from the registries
// (plan/strategy.h kStrategies, plan/names.h kRoutes); the commands check the
// value with plan::check_strategy_name and plan::parse_route, whose error
// lines name the choices. `fallback`: what a direct plan that needs more
// links than a board holds, or more RAM where the relay plan fits, does when
// --route is not given ("" = nothing).
inline CLI::Option* add_strategy_option(CLI::App& sub, std::string& strategy) {
  return sub.add_option("--strategy", strategy, "split strategy: " + plan::names_help(plan::kStrategies))
      ->capture_default_str();
}
inline CLI::Option* add_route_option(CLI::App& sub, std::string& route, const std::string& fallback) {
  std::string help = plan::names_help(plan::kRoutes);
  if (!fallback.empty())
    help += "; when not given, a direct plan that needs more links on a board than it holds, or more RAM than a "
            "board has where the relay plan fits, " + fallback + ", with a note";
  return sub.add_option("--route", route, help)->capture_default_str();
}

// --code (plan/coding.h): the commands check the value with
// plan::parse_coding, and plan::estimate_code_ratios estimates the model's
// coded sizes once the model is loaded.
inline CLI::Option* add_code_option(CLI::App& sub, std::string& code) {
  return sub.add_option("--code", code, "activation frames board to board: " + plan::names_help(plan::kCodings))
      ->capture_default_str();
}

// --stream (plan/streams.h): checked with plan::streams::parse.
inline CLI::Option* add_stream_option(CLI::App& sub, std::string& stream) {
  return sub.add_option("--stream", stream, "layers computed row by row on each board: " + plan::names_help(plan::kStreamings))
      ->capture_default_str();
}

// `plan --json` and `run --json`: what the plan streams (plan/streams.h).
inline nlohmann::json stream_json(plan::Streaming mode, const plan::Plan& p) {
  const plan::streams::Summary s = plan::streams::summary(p);
  return {{"mode", plan::streams::name(mode)}, {"layers", s.layers}, {"chains", s.chains}, {"step", s.step}};
}

// `plan --json` and `run --json`: the windows read in place (plan.h ViewCount).
inline nlohmann::json views_json(const plan::Plan& p) {
  const plan::ViewCount v = plan::view_count(p);
  return {{"windows", v.windows}, {"early", v.early}};
}
inline std::string views_line(const plan::Plan& p) {
  const plan::ViewCount v = plan::view_count(p);
  if (v.windows == 0) return "";
  return "views: " + std::to_string(v.windows) + " input windows read in place in a later layer's window (no copy, " +
         "no buffer of their own), " + std::to_string(v.early) + " of them before their data's home layer\n";
}

// Registration functions, one per subcommand file.
void register_inspect(CLI::App& app);
void register_quantize(CLI::App& app);
void register_eval(CLI::App& app);
void register_plan(CLI::App& app);
void register_run(CLI::App& app);
void register_worker(CLI::App& app);
void register_keygen(CLI::App& app);
void register_simulate(CLI::App& app);
void register_dump(CLI::App& app);

}  // namespace ts::cli
