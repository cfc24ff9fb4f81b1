#include "plan/coding.h"

#include <algorithm>

#include "model/pipeline.h"
#include "plan/names.h"
#include "plan/plan.h"
#include "plan/ratings.h"
#include "util/error.h"

namespace ts::plan {

Coding parse_coding(const std::string& s) {
  if (s == "off") return Coding::Off;
  if (s == "auto") return Coding::Auto;
  if (s == "rice") return Coding::Rice;
  if (s == "mask") return Coding::Mask;
  throw Error("--code: expected " + join_names(kCodings, " or ") + ", got '" + s + "'");
}

const char* coding_name(Coding c) {
  switch (c) {
    case Coding::Off:
      return "off";
    case Coding::Auto:
      return "auto";
    case Coding::Rice:
      return "rice";
    case Coding::Mask:
      return "mask";
  }
  return "?";
}

double code_seconds_per_value(const Board& b, const CostModel& m, Codec c) {
  if (c == Codec::Plain) return 0;
  if (m.host) return c == Codec::Rice ? kHostRiceSPerValue : kHostMaskSPerValue;
  double cycles = c == Codec::Rice ? kDefaultRiceCyclesPerValue : kDefaultMaskCyclesPerValue;
  if (m.costs_dir != "none")
    if (const MeasuredCosts* mc = measured_costs(m.costs_dir, board_type(b))) {
      const double v = c == Codec::Rice ? mc->rice_cycles_per_value : mc->mask_cycles_per_value;
      if (v > 0) cycles = v;
    }
  return cycles / (b.clock_mhz * 1e6);
}

int CodedLayers::layers(Codec c) const { return int(std::count(codec.begin(), codec.end(), c)); }

CodedLayers coded_layers(size_t n_nodes, const Testbed& t, const CostModel& m, Coding c, const CodeEstimate& e) {
  CodedLayers out;
  out.codec.assign(n_nodes, Codec::Plain);
  out.ratio.assign(n_nodes, 1.0);
  out.price.assign(n_nodes, 1.0);
  if (c == Coding::Off || t.boards.empty()) return out;
  // The slowest board's link and CPU decide (a transfer's two ends are
  // some pair of boards; the worst is what the estimate must hold for).
  double link = 0, rice_cpu = 0, mask_cpu = 0;
  for (const Board& b : t.boards) {
    link = std::max(link, m.host ? m.host_costs.s_per_byte : link_s_per_byte(b.delay_s_per_kb, b.bandwidth_kbps));
    rice_cpu = std::max(rice_cpu, code_seconds_per_value(b, m, Codec::Rice));
    mask_cpu = std::max(mask_cpu, code_seconds_per_value(b, m, Codec::Mask));
  }
  const auto est = [&](const std::vector<double>& v, size_t n) { return n < v.size() ? v[n] : 0.0; };
  const auto price = [&](Codec x, double ratio) {
    const double cpu = x == Codec::Rice ? rice_cpu : x == Codec::Mask ? mask_cpu : 0.0;
    return link > 0 ? std::max(ratio, 0.5 * cpu / link) : ratio;
  };
  for (size_t n = 0; n < n_nodes; ++n) {
    const double r = est(e.rice, n), k = est(e.mask, n);
    if (c == Coding::Rice || c == Coding::Mask) {
      out.codec[n] = c == Coding::Rice ? Codec::Rice : Codec::Mask;
      const double x = c == Coding::Rice ? r : k;
      out.ratio[n] = x > 0 ? x : 1.0;
      out.price[n] = price(out.codec[n], out.ratio[n]);
      continue;
    }
    // Auto: the cheapest coding's price, in plain bytes' link time, if at
    // most kCodeMargin (no link time to save: nothing coded).
    double best = kCodeMargin;
    for (const auto& [x, ratio] : {std::pair{Codec::Rice, r}, std::pair{Codec::Mask, k}})
      if (link > 0 && ratio > 0 && price(x, ratio) <= best) {
        best = price(x, ratio);
        out.codec[n] = x, out.ratio[n] = ratio;
      }
    out.price[n] = price(out.codec[n], out.ratio[n]);
  }
  return out;
}

void estimate_code_ratios(const QGraph& q, PlanOptions* opt) {
  if (opt->coding == Coding::Off || !opt->code.empty()) return;
  CodeRatios r = activation_code_ratios(q);
  opt->code.rice = std::move(r.rice);
  opt->code.mask = std::move(r.mask);
  opt->code.source = std::move(r.source);
}

}  // namespace ts::plan
