// Split strategies: how one layer's output neurons are shared among workers.
//
// A strategy only decides *which* output neurons each worker computes. Every
// thing that follows from that choice (the exact inputs each worker needs,
// the per-channel data it stores, its RAM, the routing map, the fragments) is
// derived by the planner from the runs alone, so a new strategy plugs in here
// without touching the rest of src/plan.
//
// The unit is a contiguous run of output neurons in C-H-W order, one run per
// worker (possibly empty). That is the paper's split (alg. 1 for convolutions,
// alg. 2 for linear layers) and what the fragment format (core/fragment.h)
// encodes: one run per worker per layer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/fragment.h"
#include "model/qgraph.h"
#include "plan/split.h"

namespace ts::plan {

class SplitStrategy {
 public:
  virtual ~SplitStrategy() = default;
  // Name used on the command line and in reports ("neuron").
  virtual std::string name() const = 0;
  // Runs for node `node` of `q`: exactly shares.size() runs, in worker order,
  // disjoint, covering [0, output size) of the node exactly. A worker with a
  // zero share (or more workers than neurons) gets an empty run.
  // Throws ts::Error on bad shares.
  virtual std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const = 0;
  // The general form the planner calls: each worker's list of output regions
  // (core::Region: runs of the flat index or channel x row x column boxes),
  // disjoint, together covering the layer exactly. The default wraps split():
  // one run per worker.
  virtual std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                               const std::vector<double>& shares) const;
};

// The paper's strategy: every layer (Conv, Gemm, and also Add, pools, Concat,
// Mul, Lut, Pad) has its output neurons (C-H-W order; for Gemm the output
// columns) cut into one contiguous run per worker, proportional to the shares
// with largest-remainder rounding (split_runs).
class NeuronStrategy final : public SplitStrategy {
 public:
  std::string name() const override { return "neuron"; }
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
};

// Bands of output rows across all channels (DeepThings-style spatial
// partitioning): worker w computes rows [y_w, y_{w+1}) of every channel of a
// layer, the bands proportional to the shares (largest remainder over rows)
// and aligned from layer to layer, so an inverted-residual block's 1x1
// convolutions read only the board's own band and a 3x3 one only a halo row
// or two of its neighbours'. Layers whose maps have fewer than kMinRows rows
// (GlobalAvgPool, SE vectors) and Gemm are split by output channels instead: each worker a block of
// whole channels, proportional to the shares. With `--route direct`, bands
// stay on their boards and only halos, channel blocks and the graph's input
// and output cross the network.
class SpatialStrategy final : public SplitStrategy {
 public:
  static constexpr int kMinRows = 2;
  std::string name() const override { return "spatial"; }
  // Runs cannot express bands; this throws (use split_regions).
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
};

// Names accepted by make_strategy, for help texts and errors.
std::vector<std::string> strategy_names();

// "neuron" -> NeuronStrategy. Anything else throws ts::Error naming the
// string and the accepted names.
std::unique_ptr<SplitStrategy> make_strategy(const std::string& name);

}  // namespace ts::plan
