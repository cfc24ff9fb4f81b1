// The planner's cost model and `--strategy auto`.
//
// A plan's time on a testbed is estimated layer by layer from what the plan
// itself says: each board's MACs for the layer (times the op's cycles per
// MAC over the board's clock), and each board's bytes in and out on its own
// link (the testbed's bandwidth and delay per KB, eq. 1's d + 1/B), plus a
// per-message header and a one-way latency per transfer step. The route is
// data of the plan (the coordinator is one more peer: the inputs it sends,
// the outputs it collects, the layers it triggers with RUN), so one formula
// serves both routes; the estimate of a layer is
//
//   step(its inputs: from the coordinator and from boards) + max compute
//   + step(partial sums of a reduced layer) + step(outputs to the coordinator)
//   + the RUN/DONE round trip if the coordinator triggers the layer (relay)
//
// where a step is the busiest link's bytes (each board's max(in, out) on
// its own link, the coordinator's in + out on its) plus the latency. On
// the relay route every byte crosses the coordinator's link; on the direct
// route only the graph's input and output do. The plan's estimate is the
// sum over layers. It knows neither send
// windows nor that boards with direct routing run ahead of each other; the
// simulator (src/sim) checks it (docs/planner.md, "Cost model").
//
// Host testbeds (boards that are processes on this machine: "local" or a
// loopback address) are priced by a measured model instead (HostCosts,
// data/costs/host.json, written by scripts/host_costs.sh): seconds per MAC
// of this machine's kernels per kernel kind, a fixed cost per exchange (a
// transfer step where boards wait for each other: wake-ups, context
// switches, syscalls; it replaces the per-message latency), seconds per
// byte moved, and as many boards computing at once as the machine has
// cores (a layer's compute is max(slowest board, sum over boards / cores)).
//
// `auto` (choose_strategies): the graph's nodes are cut into blocks at every
// point where only the previous node's output crosses (an inverted-residual
// block with its Add is one block, a plain chain is one block per layer).
// Each block takes one strategy of neuron, spatial, channel, whole (one
// board computes the block, nothing crosses inside it); its cost is the
// compute and the transfers inside it under that strategy plus the re-layout
// of the block's input from the previous block's strategy (the elements
// each board needs and does not compute itself). A dynamic programme over
// the chain of blocks picks the cheapest sequence. RAM is a hard limit (a
// strategy whose uniform plan puts any board of a block over its budget is
// not a candidate for the block); flash too (while a board's fragment would
// exceed its flash, the block whose change saves that board's data at the
// least cost per byte is made to use another strategy, and the programme
// runs again). The shares (eq. 5 ratings, eq. 6-7 storage) are the same for
// every strategy: heterogeneous boards get proportional bands, channel
// blocks and runs.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/layer_work.h"
#include "model/qgraph.h"
#include "plan/testbed.h"

namespace ts::plan {

struct Plan;
struct LayerShare;
enum class Route : uint8_t;

// Measured cycles per MAC of one board type's kernels, per kernel kind
// (data/costs/<type>.json, written by scripts/board_costs.sh for each QEMU kind):
// <= 0 = not measured.
struct MeasuredCosts {
  double conv = 0, pointwise = 0, depthwise = 0;  // Conv by kind
  std::array<double, core::kNumOps + 1> op{};     // other ops, by core::QOp (Gemm = "linear")
  std::string source;                             // the file's "source"
  // Coding and decoding one value (plan/coding.h), per coding; 0 = not measured.
  double rice_cycles_per_value = 0, mask_cycles_per_value = 0;
  // The board's CPU outside its kernels (core/layer_work.h), in cycles: the
  // file's "protocol_instructions" x cycles_per_instruction; zero = none measured.
  core::ProtocolCost protocol;
  double of(const core::LayerDesc& d) const;
};

// The measured costs of board type `type` in `dir` ("" = data/costs), read
// once per process; nullptr if the type has no file there.
const MeasuredCosts* measured_costs(const std::string& dir, const std::string& type);

// Reads a cost file: its "cycles_per_mac" object (keys conv, pointwise,
// depthwise, linear, or op names such as Add), else "instructions_per_mac"
// times "cycles_per_instruction". Throws ts::Error naming the file.
MeasuredCosts load_measured_costs(const std::string& path);

// A host testbed's measured costs (data/costs/host.json):
//   {"target": "host", "source": "...",
//    "seconds_per_mac": {"conv": 1.1e-10, "pointwise": ..., "depthwise": ...,
//                        "linear": ..., "Add": ..., "default": ...},
//    "exchange_s": 2.0e-4, "seconds_per_byte": 1.0e-9, ...}
// Every figure finite; per-MAC figures > 0 ("default" required: ops without
// their own figure), exchange_s and seconds_per_byte >= 0. Other keys are
// kept for the reader (the calibration's raw figures).
struct HostCosts {
  MeasuredCosts per_mac;        // seconds per MAC by kind
  double default_s_per_mac = 0;
  double exchange_s = 0;
  double s_per_byte = 0;
  std::string source;
};

// Reads a host cost file. Throws ts::Error (one line naming the file and the key).
HostCosts load_host_costs(const std::string& path);
// The same from JSON text; `source` names it in errors.
HostCosts parse_host_costs(const std::string& text, const std::string& source);

// True if every board computes at this machine's speed: a host process
// (board_kind.h BoardKind::host_speed), started here or at a loopback address.
bool host_testbed(const Testbed& t);

// The measured cost file of a board's kind (board_kind.h BoardKind::costs):
// "cortex-m7" for the firmware (QEMU or a Teensy 4.1); a host process is
// priced as the type it stands in for (BoardKind::emulates: the Teensy
// 4.1's "cortex-m7"), as the simulator and `run --emulate` time it.
std::string board_type(const Board& b);

struct CostModel {
  // Cycles per MAC of the boards' kernels: per op (indexed by core::QOp),
  // <= 0 = not set. Depthwise convolutions (groups == input channels) have
  // their own entry. An op not set here takes the board type's measured
  // figure (costs_dir/<type>.json, see board_type), else the default.
  double default_cycles_per_mac = 2.0;
  std::array<double, core::kNumOps + 1> op_cycles_per_mac{};
  double depthwise_cycles_per_mac = 0;
  double layer_overhead_s = 0;      // per board per layer it computes
  // Price each board's CPU outside its kernels (its type's measured
  // protocol cycles per layer, piece and byte: core/layer_work.h); false
  // (`--protocol-cpu off`): boards spend nothing beside their kernels (the
  // ideal board of the figures before these prices were measured).
  bool protocol_cpu = true;
  double frame_latency_s = kTeensyFrameLatencyS;  // one-way latency per message (testbed.h)
  double coord_bandwidth_kbps = 125000;  // coordinator's link (1 Gbit/s); 0 = unlimited
  // Where the measured per-type cost files are: "" = <project home>/data/costs;
  // "none" = do not read any (every op at the figures above).
  std::string costs_dir;

  // Host testbeds (see above): when `host` is set, compute is priced by
  // host_costs and every link (the coordinator's too) by host_costs.s_per_byte,
  // frame_latency_s is the exchange cost, and at most `cores` boards compute
  // at once (0 = no limit).
  bool host = false;
  HostCosts host_costs;
  int cores = 0;

  // Seconds per MAC of layer d on board b (host figures, else cycles / clock).
  double seconds_per_mac(const core::LayerDesc& d, const Board& b) const;

  // Without a board: the explicit entries and the default only.
  double cycles_per_mac(const core::LayerDesc& d) const;
  // For a board: explicit entry, else its type's measured figure, else the default.
  double cycles_per_mac(const core::LayerDesc& d, const Board& b) const;
  // For a board type (a cost file's name, board_type; "" = none): explicit
  // entry, else the type's measured figure, else the default. What the
  // planner, the simulator (sim.h TimingModel::costs) and an emulated host
  // board (`run --emulate`) all price a layer with.
  double type_cycles_per_mac(const core::LayerDesc& d, const std::string& type) const;
  // A board type's protocol cycles (zero when protocol_cpu is off, for host
  // models, without a cost file, or with costs_dir "none").
  core::ProtocolCost type_protocol(const std::string& type) const;
  // Seconds board b spends on share ls outside its kernel.
  double protocol_s(const LayerShare& ls, const Board& b) const;
};

// Cycles per MAC of the whole model on a board type (type_cycles_per_mac of
// every layer weighted by its MACs); 0 for a model without MACs.
double model_cycles_per_mac(const QGraph& q, const CostModel& m, const std::string& type);

// Per board, the factor on K1 for eq. 5 (ratings.h kK1BoardType): the K1
// type's model_cycles_per_mac over the board type's. 1 for a board without
// measured prices (a host process) and for every board of a host model.
std::vector<double> k1_scales(const QGraph& q, const Testbed& t, const CostModel& m);

// The model for a host testbed from a host cost file: host = true, the
// file's figures, frame_latency_s = exchange_s, cores = this machine's.
CostModel host_cost_model(const HostCosts& h);
// data/costs/host.json under the project home ("" dir) or `dir`.
std::string host_costs_path(const std::string& dir = "");

// Reads "op=cycles,op=cycles,..." (op names as core::qop_name, plus
// "depthwise" and "default") into m. Throws ts::Error naming a bad item.
void parse_op_cycles(const std::string& spec, CostModel* m);

// Estimated seconds of every layer of p on t (the plan's route). Throws
// ts::Error if the testbed does not match the plan.
std::vector<double> estimate_layer_seconds(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m);

// A floor under the estimate of every relay plan of q, whatever its boards
// and strategy: for each layer, the input elements its outputs read cross
// the coordinator's link once at least, and then its outputs, each in a step
// of its own; the coordinator's RUN and DONE take a frame latency each.
double relay_floor_s(const QGraph& q, const CostModel& m);

// What the estimate is made of: the compute part, the number of transfer
// steps (each charged frame_latency_s; for host testbeds, one exchange) and
// the seconds of bytes on the busiest link of each step, summed over layers;
// and the seconds of inputs that travel while their senders still compute
// (halos first, docs/execution.md).
// compute_s + steps x frame_latency_s + byte_s - hidden_s = the estimate.
struct EstimateParts {
  double compute_s = 0;
  double steps = 0;
  double byte_s = 0;
  double bytes = 0;  // the busiest link's bytes of each step, summed
  double hidden_s = 0;
};
EstimateParts estimate_parts(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m);

// Blocks of the graph: block_of[n] for every node, numbered from 0 along the
// node order. A block starts at node i when no node from i on reads a tensor
// made before node i - 1 (the graph input excepted).
std::vector<int> graph_blocks(const QGraph& q);

struct AutoChoice {
  std::vector<std::string> per_node;  // "neuron" | "spatial" | "channel" | "whole"
  std::vector<int> block_of;
  double est_s = 0;                   // the programme's estimate
  // Direct route: the boards' links ruled out the cheapest choice (a
  // transfer over a board's limit), and this one is the cheapest within them.
  bool link_bound = false;
  // Direct route, boards that may need more links than they hold: why no
  // choice keeps every board within its links, or "" (then per_node is
  // empty, and make_plan takes the relay route).
  std::string out_of_links;
};

// Picks a strategy per block (see above) for the given shares and route.
// stop_out_of_links: give up as soon as a block shows that no choice keeps
// every board within its links (AutoChoice::out_of_links).
AutoChoice choose_strategies(const QGraph& q, const Testbed& t, const std::vector<double>& shares, Route route,
                             const CostModel& m, bool stop_out_of_links = false);

}  // namespace ts::plan
