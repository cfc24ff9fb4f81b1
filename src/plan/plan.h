// The planner: from a quantised model, a testbed and an allocation mode to a
// Plan, i.e. for every worker and every layer the run of output neurons it
// computes, the per-channel data it stores, the exact input elements it must
// receive, the RAM it needs; plus the routing map (alg. 3) and the traffic
// of one inference in the paper's mode (every activation goes worker ->
// coordinator -> workers).
//
// Everything here is pure: no sockets, no files (fragment_writer.h writes
// fragments explicitly). docs/planner.md explains the maths.
//
// Pipeline of make_plan():
//   1. ratings: even | frequency | rating (eq. 5). For `rating` the Kc of
//      each worker comes from the plan itself: plan once with even shares,
//      measure Kc_i = (bytes in + bytes out) / bytes out per worker, rate.
//   2. storage-aware allocation (eq. 6-7, alloc.h) with S_m = the model's
//      weight bytes and S_it = flash minus the fragment's fixed overhead
//      (header + layer entries + CRC, fragment_overhead_bytes()); the
//      adjusted ratings are the shares.
//   3. split every layer with the strategy (strategy.h), derive needs, RAM,
//      fragment sizes. Steps 2-3 repeat on whole fragments (fit_storage in
//      alloc.h): a board whose real fragment (header, entries, routing runs,
//      alignment, kernels shared with a neighbour) exceeds its flash gets a
//      smaller S_it until it fits, then is filled up to its flash; the
//      excess moves to boards with space.
//   4. refuse the plan (ts::Error, one line) if a board's peak RAM or
//      fragment exceeds its budget.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/fragment.h"
#include "core/halo_first.h"
#include "core/layer_work.h"
#include "model/qgraph.h"
#include "plan/alloc.h"
#include "plan/coding.h"
#include "plan/cost.h"
#include "plan/ratings.h"
#include "plan/split.h"
#include "plan/strategy.h"
#include "plan/testbed.h"

namespace ts::plan {

// Where activations travel. Relay: the paper's mode, every activation goes
// board -> coordinator -> boards and every layer starts on the coordinator's
// RUN. Direct: a board sends each output element straight to the boards that
// consume it (or keeps it, when it consumes it itself: a fused step), only
// the graph's input comes from the coordinator and only its output goes back.
enum class Route : uint8_t { Relay, Direct };
const char* route_name(Route r);
// "relay" | "direct"; anything else throws ts::Error naming the choices.
Route parse_route(const std::string& s);

// Streamed chains (plan/streams.h, direct route only): never, where a
// board's RAM holds the plan only with them, or always.
enum class Streaming { Off, Auto, On };

struct PlanOptions {
  Allocation alloc = Allocation::Even;
  Route route = Route::Relay;
  double k1 = kDefaultK1;           // K1 for eq. 5 (KB/Mcycle)
  std::string strategy = "neuron";  // make_strategy(), or "auto" (cost.h)
  CostModel cost;                   // the time estimate and `auto`'s choice
  bool routing = true;              // build Plan::routes (alg. 3)
  bool check_budgets = true;        // refuse plans over a board's RAM/flash
  // With route Direct: a plan that needs more links on a board than it holds
  // (board_links; every all-gather on N boards needs 2(N-1)+1), or that keeps
  // within them only by giving up the cheapest choice, is weighed against the
  // relay route and the direct route on fewer boards (make_plan), and
  // Plan::route_note says which was taken and why. Off, a plan over the links
  // is refused (check_budgets). The CLI sets it when --route is not given.
  bool route_fallback = false;
  // > 0 and fewer than the boards: only this many boards take shares (the
  // fastest by eq. 5 with the default Kc, the first of equals); the others
  // are left idle. make_plan sets it for its direct plan on the boards that
  // no direct plan can take past their links (route_fallback).
  int boards_used = 0;
  // Where make_plan keeps and finds its direct plans on the first boards of
  // a testbed (FirstBoardsMemo); null: none kept.
  std::shared_ptr<class FirstBoardsMemo> first_boards;
  // Activations board to board coded (plan/coding.h): Off, Auto (where it
  // pays), or every layer Rice or Mask; direct route only. `code`: per
  // node, the estimated coded bytes per value of each coding.
  Coding coding = Coding::Off;
  CodeEstimate code;  // model/pipeline.h activation_code_ratios (estimate_code_ratios)
  Streaming stream = Streaming::Auto;
};

// One input operand of a layer as one worker needs it.
struct InputNeed {
  int tensor = -1;                     // tensor index in the QGraph
  core::Box box;                       // core::input_box: window held in RAM
  std::vector<core::InputRun> runs;    // exact elements, sorted, merged (flat CHW)
  int64_t elems = 0;                   // sum of run counts
  // Where they come from (the route pass): runs received over the network
  // (sorted, merged), the part of them the coordinator sends, and runs this
  // worker computed itself in layer `local_layer` (a fused step), each inside
  // one segment of that layer's regions.
  std::vector<core::InputRun> recv;
  int64_t recv_elems = 0;
  std::vector<core::InputRun> coord_runs;
  std::vector<core::InputRun> local;
  int local_layer = -1;
  int avail_from = 0;                  // first layer at which frames are taken
  uint32_t box_at = 0;                 // arena offset of the window
  // >= 0: the window is a *view* (plan/arena.cpp, Views): no bytes of its
  // own, it lies in layer view_of's window of the same box (view_k), where
  // the data already is: outputs computed in place there, read before they
  // are overwritten. view_from: for a reader earlier than the outputs'
  // home, the layer that made them (a resumed inference starts no later:
  // resume_start), else -1.
  int view_of = -1, view_k = -1, view_from = -1;
};

// An input-channel share of a reduced layer (strategy `reduce`,
// core::kEntryPartial): the worker multiplies input channels [ci0, ci1) for
// every output channel into int32 partial sums, sends each other owner its
// block's sums and adds the sums it receives for its own block.
struct PartialShare {
  bool on = false;
  int32_t ci0 = 0, ci1 = 0;
  // Sums to the owners: operand core::kPsumOperand, offset = byte in the
  // owner's accumulator, count = bytes, pos = byte in this worker's sums.
  std::vector<core::Send> sends;
  int64_t recv_bytes = 0;   // bytes of sums received per inference
  uint32_t at = 0;          // arena offset of the own sums (int32, out.c x positions)
  uint32_t acc_at = 0;      // arena offset of the accumulator (int32, out_elems)
};

// One worker's part of one layer.
struct LayerShare {
  int node = -1;
  // Output regions computed here (runs of the flat C-H-W index or boxes),
  // disjoint; the outputs sit in one buffer, region after region.
  std::vector<core::Region> regions;
  // Empty, or (a fused layer, plan/fuse.h) the part of `regions` this worker
  // owns: the workers' owned regions tile the layer, and every reader of an
  // element that does not compute it itself receives it from its owner. The
  // rest of `regions` is recomputed here for this worker's own reader.
  std::vector<core::Region> owned;
  const std::vector<core::Region>& tiles() const { return owned.empty() ? regions : owned; }
  Run run;                  // the share when it is one run (neuron strategy), else empty
  int64_t out_elems = 0;    // outputs computed (sum over regions)
  int32_t oc_base = 0;      // Conv/Gemm: per-channel data held for
  int32_t oc_count = 0;     //   channels [oc_base, oc_base + oc_count)
  std::vector<InputNeed> inputs;  // one per node input (idle: no entries)
  std::vector<core::Send> sends;  // where every output goes (route pass)
  bool run_trigger = true;  // waits for the coordinator's RUN (relay)
  uint32_t out_at = 0;      // arena offset of the output buffer
  int out_until = -1;       // last layer that reads the outputs locally
  // 0, or the outputs are computed in place into the window of the layer
  // out_until reads them from (direct route, a share of whole rows): channel
  // pitch of that window (core::FragLayer::out_pitch).
  uint32_t out_pitch = 0;
  // > 0: the outputs stream into the next layer's line buffer, the chain
  // made this many rows of its last layer per pass (plan/streams.h,
  // core::kEntryStreamed); out_pitch is then the line buffer's.
  int32_t stream_step = 0;
  bool chained = false;     // a layer of a streamed chain on this worker (the last one too)
  int64_t ram_bytes = 0;    // arena: top of the buffers in use at this layer
  int64_t live_bytes = 0;   // their sum: what no placement goes below
  int64_t data_bytes = 0;   // weights/bias/mult/shift/lut bytes stored
  int64_t macs = 0;
  PartialShare psum;        // reduced layers only (psum.on)
  bool active() const { return out_elems > 0; }
  int64_t bytes_in() const;   // received over the network (partial sums included)
  int64_t bytes_out() const;  // sent over the network (to boards and the coordinator)
};

// The pieces and bytes the board handles for this share outside its kernel
// (core/layer_work.h): the same counts as its fragment entry's.
core::LayerWork layer_work(const LayerShare& ls);

// The first layer of the streamed chain node n is in (n if none): where an
// inference resumed at n goes on from (a chain is computed whole).
int chain_start(const Plan& p, int n);
// Input windows that are views (InputNeed::view_of) over every worker, and
// how many of them are read before their data's home layer (view_from).
struct ViewCount {
  int windows = 0, early = 0;
};
ViewCount view_count(const Plan& p);
// Where an inference resumed at n goes on from: chain_start, and no later
// than a layer whose in-place outputs a view after it reads (InputNeed::
// view_from; their home window holds them only from that layer on).
int resume_start(const Plan& p, int n);

// The step of node n's streamed shares (LayerShare::stream_step), 0 if no
// worker streams it.
int32_t stream_step(const Plan& p, int n);

// How the board computes this share of layer `d` (core/halo_first.h): the
// positions its sends to other boards read first, or at once (on() false).
core::HaloSplit halo_split_of(const core::LayerDesc& d, const LayerShare& ls);
// The seconds of a split share's second part at `s_per_mac` (0 without one).
double halo_second_s(const core::LayerDesc& d, const LayerShare& ls, const core::HaloSplit& hs, double s_per_mac);
// Inner rows first (core/halo_first.h, InnerRows): the positions of a share
// computed before its inputs from other boards are all in (on() false: one
// compute), and their compute time (src/plan/overlap.cpp).
core::HaloSplit inner_split_of(const core::LayerDesc& d, const LayerShare& ls);
double inner_first_s(const core::LayerDesc& d, const LayerShare& ls, const core::HaloSplit& is, double s_per_mac);

struct WorkerPlan {
  int board = 0;            // Board::id
  double rating = 0;        // rating before storage adjustment
  double share = 0;         // final share the split used
  double kc = 0;            // measured (bytes in + out) / bytes out; direct route:
                            // (bytes in + bytes sent to anyone) / bytes computed
  std::vector<LayerShare> layers;  // one per QGraph node, in order
  int64_t flash_bytes = 0;  // fragment bytes, exactly
  int64_t data_bytes = 0;   // model data stored (part of flash_bytes)
  int64_t peak_ram_bytes = 0;  // kWorkerFixedArena + max layer ram_bytes
  int peak_layer = -1;      // node of the max (-1 if the worker does nothing)
  int64_t macs = 0;
  int64_t recomputed_macs = 0;  // part of macs for outputs it does not own (fused)
  int64_t bytes_in = 0;     // activations received per inference
  int64_t bytes_out = 0;    // activations sent per inference

  // What the board's arena holds while it computes layer `node`, as its
  // DONE measures it: kWorkerFixedArena + the layer's ram_bytes; 0 for a
  // layer it does not compute (it sends no DONE for it).
  int64_t computing_ram_bytes(size_t node) const;
  // The max of that over the layers: the peak an inference measures (0 for a
  // board with no share; peak_ram_bytes, which sizes its arena, still counts
  // the fixed part and windows held across layers it does not compute).
  int64_t computing_peak_ram_bytes() const;
};

struct LayerStats {
  int node = -1;
  std::string name;
  int64_t bytes_in = 0;     // sum over workers of needed input elements
  int64_t bytes_out = 0;    // outputs returned (= output size)
  int64_t bytes_moved = 0;  // bytes_in + bytes_out
  int64_t unique_in = 0;    // distinct input elements needed by anyone
  int64_t max_worker_ram_bytes = 0;    // max layer ram_bytes (no fixed part)
  int64_t max_worker_bytes_moved = 0;  // max over workers of in + out
  int workers_active = 0;   // workers with a non-empty run
  int full_input_workers = 0;  // workers receiving some operand in full
  int max_fanout = 0;       // most workers any one input element goes to
  int64_t recomputed = 0;   // outputs computed on a board that does not own them (fused)
};

// Alg. 3 routing map. For one (tensor, consumer node, operand): a run of
// elements [offset, offset+count) with one producer worker (-1: the
// coordinator, i.e. the graph input) and one set of destination workers
// (sorted plan indices; may be empty). For a given (tensor, consumer,
// operand) the runs tile the whole tensor in order. The graph output has
// runs with consumer -1 and no destinations (it goes to the coordinator).
struct RouteRun {
  int tensor = -1;
  int consumer = -1;        // node index, or -1 for the graph output
  int operand = 0;          // input slot of the consumer
  int64_t offset = 0, count = 0;
  int producer = -1;        // plan worker index, -1 = coordinator
  std::vector<int> dests;
};

struct Plan {
  std::string strategy;
  std::vector<std::string> layer_strategy;  // per node: neuron | spatial | channel | reduce
  std::vector<double> est_layer_s;          // per node: cost model estimate (make_plan)
  double est_latency_s = 0;                 // their sum
  Route route = Route::Relay;
  Allocation alloc = Allocation::Even;
  uint32_t plan_id = 0;          // plan_hash(): model bytes, shares, workers
  std::string signature;         // the strategy's (SplitStrategy::signature), part of plan_id
  uint32_t model_crc = 0;        // the model's, part of plan_id (0 in a priced plan)
  int64_t model_bytes = 0;       // S_m: QGraph::weight_bytes()
  std::vector<double> ratings;   // per worker, before storage adjustment
  std::vector<double> shares;    // per worker, used by the split
  std::vector<WorkerPlan> workers;
  std::vector<LayerStats> layers;   // one per node
  std::vector<RouteRun> routes;     // empty unless PlanOptions::routing
  int64_t total_wire_bytes = 0;     // sum of layers' bytes_moved
  // Per node: how its outputs cross board links (core::kEntryCoded,
  // kEntryMasked), their estimated bytes per value and the cost model's price
  // (plan/coding.h). Empty on the relay route: every node plain.
  CodedLayers coding;
  // Bytes of activations that cross links per inference, headers left out:
  // all plain, and with the coded transfers at their estimated size (both
  // equal to total_wire_bytes when nothing is coded).
  int64_t plain_bytes = 0, coded_bytes = 0;
  int flash_rounds = 0;             // re-splits after the first (steps 2-3)
  std::string route_note;           // why the route is not the one asked for (route_fallback), or ""
  bool link_bound = false;          // `auto` chose within the boards' links (AutoChoice::link_bound)

  int n_workers() const { return int(workers.size()); }
};

// Past the boards' links make_plan plans the direct route on the boards
// within them, the first of the testbed when the boards are alike
// (PlanOptions::boards_used): that plan is the plan on those boards alone,
// with the others idle. This keeps such plans by their boards, so that
// another testbed starting with the same boards reuses one (the scenarios of
// `simulate --sweep`). Only for plans of one model and one set of options
// besides the testbed: whoever shares it promises that. Safe between threads.
class FirstBoardsMemo {
 public:
  std::shared_ptr<const Plan> find(const std::vector<Board>& boards) const;
  void keep(const std::vector<Board>& boards, std::shared_ptr<const Plan> p);

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::vector<Board>, std::shared_ptr<const Plan>>> kept_;
};

// The whole pipeline above. Throws ts::Error (one line) on an empty testbed,
// storage too small for the model, a board over its RAM (naming board id,
// layer and bytes) or flash (naming the board).
Plan make_plan(const QGraph& q, const Testbed& t, const PlanOptions& opt = {});

// A board's RAM is too small for its share (check_budgets throws it).
struct RamBudgetError : Error {
  using Error::Error;
};

// make_plan; when the boards' RAM is too small and they are all alike and
// started here, the one line also says how many such boards hold the model
// (a search over plans, up to 256 boards): what `run` and `plan` call.
Plan make_plan_or_count(const QGraph& q, const Testbed& t, const PlanOptions& opt = {});

// Steps 3 only, with given shares (one per board, >= 0, positive sum): no
// ratings, no allocation, no budget check. `ratings` of the result are the
// shares.
Plan plan_with_shares(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, bool routing = true, Route route = Route::Relay);

// plan_with_shares with only what pricing a plan reads (auto's candidates,
// the rating pass): shares, needs, received counts, local copies, RAM, data
// bytes, bytes moved, sends to the coordinator and partial sums. It leaves
// out the sends board to board (and so the direct route's Kc), the fragment
// sizes (flash_bytes 0), the distinct-input counts and the plan id, which
// cost most of a plan's time past a few dozen boards; so a priced plan is
// never deployed, simulated or fitted to flash.
Plan plan_for_pricing(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, Route route);
// plan_for_pricing of several strategies on the same boards, shares and
// route, side by side on the machine's cores; those that split alike
// (SplitStrategy::split_name) share one making of their shares and needs.
// The first failure in the strategies' order is the one thrown.
std::vector<Plan> plans_for_pricing(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                                    const std::vector<const SplitStrategy*>& strategies, Route route);
// For each strategy, the index of the first that splits alike
// (SplitStrategy::split_name; its own if none before it does).
std::vector<size_t> split_firsts(const std::vector<const SplitStrategy*>& strategies);

// Throws the one-line RAM / flash error for the first board over budget, or,
// on the direct route, for the first board over the links it holds
// (board_links).
void check_budgets(const QGraph& q, const Plan& p, const Testbed& t);

// Per plan worker, the links the direct route needs on it: the coordinator's,
// one to each board it sends to, one from each board that sends to it. All 0
// for a relay plan.
std::vector<int> direct_links(const Plan& p);

// The first board whose direct_links exceed board_links (`board` a plan
// worker index), or board -1.
struct LinkLoad {
  int board = -1;
  int links = 0;
  int limit = 0;
};
LinkLoad links_over_limit(const Plan& p, const Testbed& t);
// Per plan worker on the direct route, the boards it hears from and the
// boards it sends to (direct_links is 1 + both); all 0 for a relay plan.
std::vector<std::array<int, 2>> direct_peers(const Plan& p);
// direct_peers of the plan of these shares and strategy (made without its
// fragment sizes and statistics; `auto` checks its choice so).
std::vector<std::array<int, 2>> direct_peers_of(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                                                const SplitStrategy& strategy, Route route);

// Exact input elements of operand `input` of node `node` that output neurons
// [begin, end) read: the union of their receptive fields (padded taps are not
// inputs), as sorted, merged runs of flat C-H-W indices of that operand.
std::vector<core::InputRun> exact_input_runs(const QGraph& q, int node, int input, int64_t begin,
                                             int64_t end);

// Alg. 3 over a plan's needs (see RouteRun).
std::vector<RouteRun> build_routing(const QGraph& q, const Plan& p);

// Hash identifying a plan: CRC-32 over the serialised model, the strategy
// name, the worker count and the shares' bytes. Same inputs, same id.
uint32_t plan_hash(const QGraph& q, const std::vector<double>& shares, const std::string& strategy,
                   Route route = Route::Relay);

// Fixed part of every fragment of this model (header, one entry per layer,
// CRC): what make_plan subtracts from flash to get the storage S_it.
int64_t fragment_overhead_bytes(const QGraph& q);

}  // namespace ts::plan
