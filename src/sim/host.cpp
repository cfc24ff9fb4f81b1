// Host calibration files for the simulator's host model (sim/host.h).
#include "sim/host.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/input_file.h"

namespace ts::sim {

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw Error("host calibration " + source + ": " + what);
}

double number(const nlohmann::json& doc, const char* key, const std::string& source, double lo, double hi) {
  if (!doc.contains(key)) bad(source, std::string("missing key '") + key + "'");
  const nlohmann::json& v = doc[key];
  if (!v.is_number()) bad(source, std::string("'") + key + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(source, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                    " (got " + v.dump() + ")");
  return x;
}

}  // namespace

void apply_host_calibration(const nlohmann::json& doc, const std::string& source, TimingModel& m) {
  if (!doc.is_object()) bad(source, "expected a JSON object");
  const double ns_per_mac = number(doc, "host_ns_per_mac", source, 0.0, 1e6);
  const double slack_us = number(doc, "timer_slack_us", source, 0.0, 1e6);
  const double nproc = number(doc, "nproc", source, 1, 4096);
  if (nproc != std::floor(nproc)) bad(source, "'nproc' must be a whole number");
  if (!doc.contains("wake_us")) bad(source, "missing key 'wake_us'");
  const nlohmann::json& w = doc["wake_us"];
  if (!w.is_array() || w.empty() || w.size() > 10000) bad(source, "'wake_us' must be a list of 1 to 10000 numbers");
  std::vector<double> q;
  for (const nlohmann::json& v : w) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 1e6)
      bad(source, "'wake_us' values must be numbers from 0 to 1000000 us (got " + v.dump() + ")");
    if (!q.empty() && v.get<double>() * 1e-6 < q.back()) bad(source, "'wake_us' must be in ascending order");
    q.push_back(v.get<double>() * 1e-6);
  }
  m.host_s_per_mac = ns_per_mac * 1e-9;
  m.timer_slack_s = slack_us * 1e-6;
  m.wake_quantiles_s = q;
  // Injected delays (--delay-ms) are sleeps too: they overshoot by the mean.
  if (m.sleep_overshoot_s == 0) {
    double sum = 0;
    for (double x : q) sum += x;
    m.sleep_overshoot_s = sum / double(q.size());
  }
  if (m.host_cores == 0) m.host_cores = int(nproc);
}

void load_host_calibration(const std::string& path, TimingModel& m) {
  nlohmann::json doc = nlohmann::json::parse(read_input_file(path, "calibration file", kMaxTextFileBytes), nullptr, false);
  if (doc.is_discarded()) bad(path, "not valid JSON");
  apply_host_calibration(doc, path, m);
}

}  // namespace ts::sim
