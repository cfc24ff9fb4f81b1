#include "plan/strategy.h"

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

std::vector<Run> SpatialStrategy::split(const QGraph&, int, const std::vector<double>&) const {
  throw Error("split: the spatial strategy's shares are bands of rows, not runs");
}

std::vector<std::vector<core::Region>> SpatialStrategy::split_regions(const QGraph& q, int node,
                                                                      const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const core::Dims d = q.desc(node).out;
  std::vector<std::vector<core::Region>> out(shares.size());
  const bool bands = d.h >= kMinRows && q.nodes[size_t(node)].op != core::QOp::Gemm;
  const std::vector<int64_t> counts = proportional_counts(bands ? d.h : d.c, shares);
  int32_t at = 0;
  for (size_t w = 0; w < shares.size(); ++w) {
    const int32_t n = int32_t(counts[w]);
    if (n == 0) continue;
    out[w].push_back(bands ? core::Region::box(0, d.c, at, at + n, 0, d.w) : core::Region::box(at, at + n, 0, d.h, 0, d.w));
    at += n;
  }
  return out;
}

std::vector<std::string> strategy_names() { return {"neuron", "spatial"}; }

std::unique_ptr<SplitStrategy> make_strategy(const std::string& name) {
  if (name == "neuron") return std::make_unique<NeuronStrategy>();
  if (name == "spatial") return std::make_unique<SpatialStrategy>();
  std::string known;
  for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown split strategy '" + name + "' (expected " + known + ")");
}

}  // namespace ts::plan
