#include "plan/strategy.h"

namespace ts::plan {

std::vector<Run> NeuronStrategy::split(const QGraph& q, int node, const std::vector<double>& shares) const {
  if (node < 0 || node >= int(q.nodes.size()))
    throw Error("split: node " + std::to_string(node) + " is not in the model");
  const int64_t total = q.shape(q.nodes[size_t(node)].output).size();
  return split_runs(total, shares);
}

std::vector<std::string> strategy_names() { return {"neuron"}; }

std::unique_ptr<SplitStrategy> make_strategy(const std::string& name) {
  if (name == "neuron") return std::make_unique<NeuronStrategy>();
  std::string known;
  for (const auto& n : strategy_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown split strategy '" + name + "' (expected " + known + ")");
}

}  // namespace ts::plan
