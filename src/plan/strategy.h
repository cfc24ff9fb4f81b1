// Split strategies: how one layer's output neurons are shared among workers.
//
// A strategy only decides *which* output neurons each worker computes. Every
// thing that follows from that choice (the exact inputs each worker needs,
// the per-channel data it stores, its RAM, the routing map, the fragments) is
// derived by the planner from the runs alone. A new strategy is its class
// (here, with its split in strategy.cpp) and one line of kStrategies below:
// make_strategy, the command line's --strategy (help, check, error line) and,
// with a letter, `auto`'s per-block candidates (plan/cost.cpp) read that table.
//
// The unit is a contiguous run of output neurons in C-H-W order, one run per
// worker (possibly empty). That is the paper's split (alg. 1 for convolutions,
// alg. 2 for linear layers) and what the fragment format (core/fragment.h)
// encodes: one run per worker per layer.
#pragma once

#include <memory>
#include <string>
#include <string_view>
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
  // What this strategy does to node `node` as reported per layer ("neuron",
  // "spatial", "channel"): a strategy that falls back to another split for
  // some layers names the one it used. Default: name().
  virtual std::string layer_name(const QGraph& q, int node) const;
  // What identifies the split in a plan id (plan_hash): name() unless the
  // regions depend on more than the strategy's name (auto: its choices).
  virtual std::string signature() const { return name(); }
  // Strategies with the same split name give every layer the same regions
  // (split_regions) for the same shares: `fused` splits as `spatial`.
  virtual std::string split_name() const { return name(); }
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

// Bands of output positions across all channels (DeepThings-style spatial
// partitioning): worker w computes plane positions [p_w, p_{w+1}) (row-major:
// whole rows, plus a partial first and last row where a cut falls inside a
// row) of every channel of a layer, the bands proportional to the shares
// (largest remainder over positions, so a 7x7 map splits 17/16/16 over three
// boards rather than 3/2/2 rows) and aligned from layer to layer, so an inverted-residual block's 1x1
// convolutions read only the board's own band and a 3x3 one only a halo row
// or two of its neighbours'. Layers whose maps have fewer than kMinRows rows
// (GlobalAvgPool, SE vectors) and Gemm are split by output channels instead: each worker a block of
// whole channels, proportional to the shares. With `--route direct`, bands
// stay on their boards and only halos, channel blocks and the graph's input
// and output cross the network.
//
// Fused (`fused`, the direct route; DeepThings' fused tiles): the same bands,
// and a band layer whose only reader is a fused layer too also computes the
// outputs of its neighbours' bands that its reader's share needs (a 3x3
// depthwise layer's halo rows), so that the wide halo need not travel: the
// layer's own, narrower input halo travels instead (plan.h LayerShare::owned;
// the planner's fuse step, plan/fuse.h).
class SpatialStrategy final : public SplitStrategy {
 public:
  explicit SpatialStrategy(bool fused = false, bool rows = false) : fused_(fused), rows_(rows) {}
  static constexpr int kMinRows = 2;
  // Maps with at least this many rows per board get bands of whole rows
  // (a board can compute them in place into the next layer's window, which
  // is what lets 224x224 fit 3 boards); shorter maps get bands of plane
  // positions, so 7x7 on 3 boards splits 17/16/16 positions, not 3/2/2 rows.
  // `rows` splits every map in whole rows: a board's band of a short map is
  // then one piece per channel instead of up to three (a partial first row,
  // whole rows, a partial last row), and can be computed in place, at the
  // price of less even shares; `auto` weighs both by the cost model.
  static constexpr int kRowsPerBoardForRowBands = 8;
  // Whether the node is split in whole rows for these shares.
  bool whole_rows(const QGraph& q, int node, const std::vector<double>& shares) const;
  std::string name() const override {
    return fused_ ? (rows_ ? "fused-rows" : "fused") : rows_ ? "rows" : "spatial";
  }
  std::string split_name() const override { return rows_ ? "rows" : "spatial"; }
  // Runs cannot express bands; this throws (use split_regions).
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
  // "channel" for the layers it splits by channels (Gemm, maps under kMinRows rows).
  std::string layer_name(const QGraph& q, int node) const override;
  static bool uses_bands(const QGraph& q, int node);

 private:
  bool fused_ = false;
  bool rows_ = false;
};

// Blocks of whole output channels (for the late layers whose maps are tiny
// and whose weights are large): worker w computes channels [c_w, c_{w+1}) of
// every position, the blocks proportional to the shares (largest remainder
// over channels). A worker stores only its channels' kernels; a 1x1 or dense
// layer still reads every input channel, a depthwise layer only its own
// channels, so a chain expand -> depthwise stays on its board.
class ChannelStrategy final : public SplitStrategy {
 public:
  std::string name() const override { return "channel"; }
  // The same blocks as runs of the flat index (a block of whole channels is
  // one contiguous run).
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
};

// One board computes the whole layer: the board with the largest share (the
// first such board). For layers where splitting costs more in waits than it
// saves in compute (host boards sharing a few cores, plan/cost.h) `auto`
// keeps a contiguous range of layers on one board, so nothing crosses the
// network inside that range. `--strategy whole` keeps every layer there.
class WholeStrategy final : public SplitStrategy {
 public:
  std::string name() const override { return "whole"; }
  // The board computing every layer for these shares.
  static size_t board(const std::vector<double>& shares);
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
};

// Input-channel splits with int32 partial sums (issue 10, `channel` item 2):
// for a Conv 1x1 (one group) or a Gemm, worker w multiplies the block of
// *input* channels it already holds (proportional to the shares, the same
// blocks a channel-split producer leaves on the boards, so nothing is
// gathered) for every output channel, into int32 partial sums; each worker
// also owns a block of whole output channels (as `channel`) and receives
// the other workers' partial sums for it, adds them (exact: int32 addition)
// and requantises with the layer's requantiser. Other layers are split as
// `channel`. Direct route only: the sums go board to board.
//
// `reduce` splits a layer this way only where that moves fewer bytes than
// gathering its input: its partial sums (4 bytes per output) are smaller
// than its input, 4 x out.c < in.c x (Gemm: in.h x in.w), e.g. an inverted
// residual block's project (960 -> 160) or a classifier head; the rest is
// split as `channel`. `reduce-all` (tests) splits every Conv 1x1 and Gemm
// by input channels.
class ReduceStrategy final : public SplitStrategy {
 public:
  explicit ReduceStrategy(bool all = false) : all_(all) {}
  std::string name() const override { return all_ ? "reduce-all" : "reduce"; }
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
  // "reduce" for the layers it splits by input channels, else "channel".
  std::string layer_name(const QGraph& q, int node) const override;
  // Whether node can be split by input channels (core::partial_ok).
  static bool reducible(const QGraph& q, int node);
  // Input channel blocks [first, second) per worker: proportional to the
  // shares over the workers that own output channels (a worker without an
  // output block contributes nothing, it would have no layer to run).
  static std::vector<std::pair<int32_t, int32_t>> input_blocks(const QGraph& q, int node,
                                                              const std::vector<double>& shares);
  // Whether the layer's partial sums are smaller than its input (see above).
  static bool pays(const QGraph& q, int node);
  // Whether a global pool of a map split in rows sums its rows (core/partial.h)
  // on n_boards boards, on the direct route or not, rather than pooling
  // whole planes of its channels.
  static bool rows_pay(const core::LayerDesc& d, int n_boards, bool direct);

 private:
  bool all_ = false;
};

// A strategy per layer (what `--strategy auto` produces, plan/cost.h): node
// n is split by the strategy named choices[n], one of kStrategies with a
// letter. name() is "auto"; the choices are part of the plan id.
class MixedStrategy final : public SplitStrategy {
 public:
  explicit MixedStrategy(std::vector<std::string> choices);
  std::string name() const override { return "auto"; }
  std::string signature() const override;
  std::vector<Run> split(const QGraph& q, int node, const std::vector<double>& shares) const override;
  std::vector<std::vector<core::Region>> split_regions(const QGraph& q, int node,
                                                       const std::vector<double>& shares) const override;
  std::string layer_name(const QGraph& q, int node) const override;
  const std::vector<std::string>& choices() const { return choices_; }

 private:
  const SplitStrategy& of(const QGraph& q, int node) const;
  std::vector<std::string> choices_;
  std::vector<std::unique_ptr<SplitStrategy>> impl_;  // per layer choice (layer_choice)
  std::vector<int> index_;                            // per node: its choice's index in impl_
};

// One strategy by name: what `--strategy NAME` builds.
struct StrategyInfo {
  const char* name;  // as on the command line and in reports
  const char* help;  // the phrase --help gives it
  // Builds it; null for `auto`, which make_plan turns into a MixedStrategy
  // from the cost model's choices.
  std::unique_ptr<SplitStrategy> (*make)();
  // Non-zero: `auto` weighs it for every block (choose_strategies) and this
  // is its letter in an auto plan's signature (plan id). 0: not a per-block choice.
  char letter;
  // Plans on the direct route only (boards send to boards what the relay
  // has no path for): the relay route refuses it, and no fallback to the
  // relay is made for it.
  bool direct_only = false;
};

template <class S, auto... args>
std::unique_ptr<SplitStrategy> build_strategy() {
  return std::make_unique<S>(args...);
}

// Every strategy, in the order errors and --help list them.
inline constexpr StrategyInfo kStrategies[] = {
    {"neuron", "the paper", &build_strategy<NeuronStrategy>, 'n'},
    {"spatial", "bands of rows", &build_strategy<SpatialStrategy>, 's'},
    {"channel", "blocks of channels", &build_strategy<ChannelStrategy>, 'c'},
    {"whole", "one board", &build_strategy<WholeStrategy>, 'w'},
    {"reduce",
     "channel, with input channels and int32 partial sums summed on the output's board where the sums are smaller "
     "than the input; --route direct",
     &build_strategy<ReduceStrategy>, 'r', true},
    {"fused",
     "spatial, and a layer read by a fused layer also computes the halo its reader needs, so its narrower input's "
     "halo travels instead; --route direct",
     &build_strategy<SpatialStrategy, true>, 'f', true},
    {"rows",
     "spatial with whole rows on short maps too (fewer pieces per channel, outputs in place; shares less even than "
     "spatial's bands of plane positions)",
     &build_strategy<SpatialStrategy, false, true>, 'b'},
    {"fused-rows", "fused over the bands of rows: whole rows on short maps too; --route direct",
     &build_strategy<SpatialStrategy, true, true>, 'g', true},
    {"reduce-all", "every Conv 1x1 and Gemm that way; tests", &build_strategy<ReduceStrategy, true>, 0, true},
    {"auto", "per block, by the cost model", nullptr, 0},
};

// `auto`'s per-block choices (the entries with a letter), numbered from 0 in
// kStrategies' order: how many, the index of one by name (-1: none), and one.
constexpr int num_layer_choices() {
  int n = 0;
  for (const StrategyInfo& s : kStrategies) n += s.letter != 0;
  return n;
}
constexpr int layer_choice(std::string_view name) {
  int i = 0;
  for (const StrategyInfo& s : kStrategies) {
    if (s.letter == 0) continue;
    if (name == s.name) return i;
    ++i;
  }
  return -1;
}
constexpr const StrategyInfo& layer_choice_info(int index) {
  for (const StrategyInfo& s : kStrategies)
    if (s.letter != 0 && index-- == 0) return s;
  return kStrategies[0];
}

// True for the strategies whose layers are fused tiles (plan/fuse.h):
// `fused` and `fused-rows`.
inline bool fused_strategy(std::string_view name) { return name == "fused" || name == "fused-rows"; }

// True if the strategy called `name` plans on the direct route only.
bool direct_only(const std::string& name);

// Names accepted by make_strategy (kStrategies), for help texts and errors.
std::vector<std::string> strategy_names();

// Throws ts::Error naming `name` and the accepted names unless it is one of
// kStrategies ("auto" included): the line make_strategy and the command
// line give.
void check_strategy_name(const std::string& name);

// The strategy called `name` (kStrategies). ("auto" is not a strategy by
// itself: make_plan turns it into a MixedStrategy by cost.) Anything else
// throws ts::Error (check_strategy_name).
std::unique_ptr<SplitStrategy> make_strategy(const std::string& name);

}  // namespace ts::plan
