#include "plan/strategy.h"

#include <cmath>

#include "core/partial.h"
#include "plan/names.h"

namespace ts::plan {

std::vector<Run> NeuronStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const int64_t total = q.shape(q.nodes[size_t(node)].output).size();
  return split_runs(total, shares);
}

std::vector<std::vector<core::Region>> SplitStrategy::split_regions(const QGraph& q, int node,
                                                                   const std::vector<double>& shares) const {
  std::vector<std::vector<core::Region>> out;
  for (const Run& r : split(q, node, shares)) {
    out.emplace_back();
    if (!r.empty()) out.back().push_back(core::Region::run(int32_t(r.begin), int32_t(r.end)));
  }
  return out;
}

std::string SplitStrategy::layer_name(const QGraph&, int) const { return name(); }

bool SpatialStrategy::uses_bands(const QGraph& q, int node) {
  return q.desc(node).out.h >= kMinRows && q.nodes[size_t(node)].op != core::QOp::Gemm;
}

bool SpatialStrategy::whole_rows(const QGraph& q, int node, const std::vector<double>& shares) const {
  int boards = 0;
  for (double x : shares) boards += x > 0;
  return uses_bands(q, node) && (rows_ || q.desc(node).out.h >= kRowsPerBoardForRowBands * std::max(boards, 1));
}

std::string SpatialStrategy::layer_name(const QGraph& q, int node) const {
  if (uses_bands(q, node)) return name();
  // A global pool of a map split in rows may sum each board's own rows
  // (core/partial.h) rather than gather whole planes: where it pays on the
  // plan's boards and route (ReduceStrategy::rows_pay, applied by the plan).
  return core::partial_rows(q.desc(node)) && ReduceStrategy::reducible(q, node) ? "reduce" : "channel";
}

std::vector<Run> SpatialStrategy::split(const QGraph&, int, const std::vector<double>&) const {
  throw Error("split: the spatial strategy's shares are bands of rows, not runs");
}

std::vector<std::vector<core::Region>> SpatialStrategy::split_regions(const QGraph& q, int node,
                                                                      const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const core::Dims d = q.desc(node).out;
  std::vector<std::vector<core::Region>> out(shares.size());
  if (!uses_bands(q, node)) {
    const std::vector<int64_t> counts = proportional_counts(d.c, shares);
    int32_t at = 0;
    for (size_t w = 0; w < shares.size(); ++w) {
      const int32_t n = int32_t(counts[w]);
      if (n > 0) out[w].push_back(core::Region::run(at * d.h * d.w, (at + n) * d.h * d.w));
      at += n;
    }
    return out;
  }
  if (whole_rows(q, node, shares)) {
    const std::vector<int64_t> rows = proportional_counts(d.h, shares);
    int32_t y = 0;
    for (size_t w = 0; w < shares.size(); ++w) {
      const int32_t n = int32_t(rows[w]);
      if (n > 0) out[w].push_back(core::Region::box(0, d.c, y, y + n, 0, d.w));
      y += n;
    }
    return out;
  }
  // Bands of plane positions (row-major) across all channels: whole rows
  // where the cut falls on a row boundary, else a partial first and last row.
  const std::vector<int64_t> counts = proportional_counts(int64_t(d.h) * d.w, shares);
  int32_t at = 0;
  for (size_t w = 0; w < shares.size(); ++w) {
    const int32_t a = at, b = at + int32_t(counts[w]);
    at = b;
    if (b <= a) continue;
    int32_t ya = a / d.w, xa = a % d.w;
    const int32_t yb = b / d.w, xb = b % d.w;
    if (ya == yb) {  // inside one row
      out[w].push_back(core::Region::box(0, d.c, ya, ya + 1, xa, xb));
      continue;
    }
    if (xa > 0) {
      out[w].push_back(core::Region::box(0, d.c, ya, ya + 1, xa, d.w));
      ++ya;
    }
    if (yb > ya) out[w].push_back(core::Region::box(0, d.c, ya, yb, 0, d.w));
    if (xb > 0) out[w].push_back(core::Region::box(0, d.c, yb, yb + 1, 0, xb));
  }
  return out;
}

std::vector<Run> ChannelStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const core::Dims d = q.desc(node).out;
  std::vector<Run> runs = split_runs(d.c, shares);
  const int64_t hw = int64_t(d.h) * d.w;
  for (Run& r : runs) {
    r.begin *= hw;
    r.end *= hw;
  }
  return runs;
}

std::vector<std::vector<core::Region>> ChannelStrategy::split_regions(const QGraph& q, int node,
                                                                      const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const core::Dims d = q.desc(node).out;
  std::vector<std::vector<core::Region>> out(shares.size());
  const std::vector<int64_t> counts = proportional_counts(d.c, shares);
  int32_t at = 0;
  for (size_t w = 0; w < shares.size(); ++w) {
    const int32_t n = int32_t(counts[w]);
    if (n == 0) continue;
    // Whole planes of consecutive channels are one run of the flat index:
    // one region segment, so one message per consumer rather than one per channel.
    const int32_t hw = d.h * d.w;
    out[w].push_back(core::Region::run(at * hw, (at + n) * hw));
    at += n;
  }
  return out;
}

size_t WholeStrategy::board(const std::vector<double>& shares) {
  size_t best = 0;
  for (size_t w = 1; w < shares.size(); ++w)
    if (shares[w] > shares[best]) best = w;
  return best;
}

std::vector<Run> WholeStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  if (shares.empty()) throw Error("split: no workers");
  for (double s : shares)
    if (!(s >= 0) || !std::isfinite(s)) throw Error("split: shares must be finite and >= 0");
  const int64_t size = q.desc(node).out.size();
  std::vector<Run> runs(shares.size(), Run{0, 0});
  const size_t b = board(shares);
  // Empty runs sit where the whole run starts or ends, as split_runs places them.
  for (size_t w = 0; w < shares.size(); ++w) runs[w] = w <= b ? Run{0, w == b ? size : 0} : Run{size, size};
  return runs;
}

std::vector<std::vector<core::Region>> WholeStrategy::split_regions(const QGraph& q, int node,
                                                                    const std::vector<double>& shares) const {
  const std::vector<Run> runs = split(q, node, shares);
  std::vector<std::vector<core::Region>> out(shares.size());
  for (size_t w = 0; w < runs.size(); ++w)
    if (runs[w].end > runs[w].begin) out[w].push_back(core::Region::run(int32_t(runs[w].begin), int32_t(runs[w].end)));
  return out;
}

bool ReduceStrategy::reducible(const QGraph& q, int node) {
  if (node < 0 || node >= int(q.nodes.size())) return false;
  return core::partial_ok(q.desc(node));
}

bool ReduceStrategy::pays(const QGraph& q, int node) {
  if (!reducible(q, node)) return false;
  // The sums a board sends (int32, every output channel at every position)
  // against the input it would otherwise take whole (a Conv 1x1: 4 x out.c
  // against in.c bytes a position; a GlobalAvgPool: 4 against H x W bytes a
  // channel).
  const core::LayerDesc d = q.desc(node);
  return 4 * int64_t(d.out.c) * core::partial_positions(d) < d.in[0].size();
}

// Row sums go board to board (so the direct route only) and help only on
// more than one board and where they are clearly fewer bytes: every board
// sends 4 B a channel to each other one, (N - 1) x 4 x C in all, where the
// planes a channel split gathers come to about C x H x W x (N - 1) / N; a
// margin of 2 for the rows of a board's plane share it may already hold
// (MobileNetV2's 4x4 pool on 3 boards gathers less than its sums).
bool ReduceStrategy::rows_pay(const core::LayerDesc& d, int n_boards, bool direct) {
  return direct && n_boards > 1 && 8 * int64_t(n_boards) < int64_t(d.in[0].h) * d.in[0].w;
}

std::string ReduceStrategy::layer_name(const QGraph& q, int node) const {
  // A global pool's partial sums are of rows (core/partial.h): its input
  // here is split by channels, so it pools its own channels (`reduce-all`,
  // for tests, takes every layer that can).
  if (!all_ && core::partial_rows(q.desc(node))) return "channel";
  return (all_ ? reducible(q, node) : pays(q, node)) ? "reduce" : "channel";
}

std::vector<Run> ReduceStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  return ChannelStrategy().split(q, node, shares);
}

std::vector<std::vector<core::Region>> ReduceStrategy::split_regions(const QGraph& q, int node,
                                                                     const std::vector<double>& shares) const {
  // The output side is a channel split in every case.
  return ChannelStrategy().split_regions(q, node, shares);
}

std::vector<std::pair<int32_t, int32_t>> ReduceStrategy::input_blocks(const QGraph& q, int node,
                                                                      const std::vector<double>& shares) {
  const core::LayerDesc d = q.desc(node);
  const std::vector<int64_t> out = proportional_counts(d.out.c, shares);
  std::vector<double> owners(shares.size(), 0.0);
  for (size_t w = 0; w < shares.size(); ++w) owners[w] = out[w] > 0 ? shares[w] : 0.0;
  const std::vector<int64_t> in = proportional_counts(core::partial_extent(d), owners);
  std::vector<std::pair<int32_t, int32_t>> v(shares.size());
  int32_t at = 0;
  for (size_t w = 0; w < shares.size(); ++w) {
    v[w] = {at, at + int32_t(in[w])};
    at += int32_t(in[w]);
  }
  return v;
}

MixedStrategy::MixedStrategy(std::vector<std::string> choices) : choices_(std::move(choices)) {
  for (int i = 0; i < num_layer_choices(); ++i) impl_.push_back(layer_choice_info(i).make());
  for (const auto& c : choices_) {
    index_.push_back(layer_choice(c));
    if (index_.back() >= 0) continue;
    std::string known;
    for (int i = 0; i < num_layer_choices(); ++i) known += std::string(i ? ", " : "") + layer_choice_info(i).name;
    throw Error("auto: unknown per-layer strategy '" + c + "' (expected " + known + ")");
  }
}

const SplitStrategy& MixedStrategy::of(const QGraph& q, int node) const {
  if (node < 0 || node >= int(q.nodes.size()) || size_t(node) >= choices_.size())
    throw Error("split: node " + std::to_string(node) + " has no strategy in this plan");
  return *impl_[size_t(index_[size_t(node)])];
}

std::string MixedStrategy::signature() const {
  std::string s = "auto:";
  for (int i : index_) s += layer_choice_info(i).letter;
  return s;
}

std::vector<Run> MixedStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  return of(q, node).split(q, node, shares);
}

std::vector<std::vector<core::Region>> MixedStrategy::split_regions(const QGraph& q, int node,
                                                                    const std::vector<double>& shares) const {
  return of(q, node).split_regions(q, node, shares);
}

std::string MixedStrategy::layer_name(const QGraph& q, int node) const { return of(q, node).layer_name(q, node); }

bool direct_only(const std::string& name) {
  for (const StrategyInfo& s : kStrategies)
    if (name == s.name) return s.direct_only;
  return false;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> v;
  for (const StrategyInfo& s : kStrategies) v.push_back(s.name);
  return v;
}

void check_strategy_name(const std::string& name) {
  for (const StrategyInfo& s : kStrategies)
    if (name == s.name) return;
  throw Error("unknown split strategy '" + name + "' (expected " + join_names(kStrategies) + ")");
}

std::unique_ptr<SplitStrategy> make_strategy(const std::string& name) {
  check_strategy_name(name);
  for (const StrategyInfo& s : kStrategies)
    if (name == s.name && s.make) return s.make();
  throw Error("strategy 'auto' is chosen by the planner's cost model (make_plan), not built by name");
}

}  // namespace ts::plan
