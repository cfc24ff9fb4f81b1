// tinysplit simulator: one inference of a Plan against a timing model, as a
// discrete-event simulation of the same protocol the execution engine speaks.
//
// What is simulated is exactly what `tinysplit run` does (src/coord,
// src/core/worker.cpp, src/net/host_board.cpp), with sockets replaced by
// timed links:
//
//   * Layer by layer. For every layer the coordinator starts one "thread" per
//     board with a non-empty share; the next layer starts when the last of
//     them has received its board's DONE (and acknowledged it).
//   * Coordinator -> board: every run of LayerShare::inputs[k].runs is one
//     INPUT message, cut into frames of at most wire::kMaxPayload payload
//     bytes (wire::frame_payload); then one RUN frame. A frame is sent only while fewer
//     than W frames are unacknowledged (wire::SendWindow, the same class the
//     engine uses); the frame that fills the window carries ACK_REQ.
//   * The board acknowledges (wire::AckTracker, ACK every
//     wire::kBoardAckEvery frames or on LAST/ACK_REQ; an ACK frame is
//     wire::kAckFrameBytes), computes its share when RUN arrives, then sends
//     its outputs as OUTPUT frames and a DONE frame under its own window W;
//     the coordinator ACKs every wire::kCoordAckEvery frames or on
//     LAST/ACK_REQ.
//   * The board is one sequential processor, like the worker loop: it takes
//     every frame that has arrived (one "receive"), handles them in order,
//     and only then looks at the link again. Its optional software delay
//     (TimingModel::board_op_delay_s, the `--delay-ms` of `tinysplit run`
//     and the paper's Table 2) is paid once per receive and once before every
//     frame it sends.
//   * Links. A frame from the coordinator to board b is serialised on the
//     coordinator's link (shared by all boards), crosses the switch, and is
//     serialised on board b's link; the reverse way likewise. So every
//     relayed activation crosses the coordinator's link twice (once in, once
//     out). Board links take their bandwidth B and per-KB delay d from the
//     testbed (eq. 1: d + 1/B seconds per KB); every frame also pays a fixed
//     one-way latency. The coordinator has one CPU that handles frames one
//     at a time (TimingModel::coord_frame_s each).
//   * Compute: a board's MACs for the layer (LayerShare::macs) times the
//     layer's cycles per MAC (its op's measured figure with `costs`, else
//     cycles_per_mac) over its clock, plus a fixed per-layer overhead.
//
// Reported, as the engine reports them: per layer wall time, compute = the
// slowest board's compute time (at most the wall time), communication = the
// rest; their sums over layers; bytes per layer (activation payload and whole
// frames both ways); each board's planned arena peak per layer (the figure
// the boards measure, tests/run_test.cpp checks they are equal).
//
// Pure: no threads, no clock, no sockets. Deterministic: same inputs, same
// result, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/wire.h"
#include "model/qgraph.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::sim {

struct TimingModel {
  // Protocol.
  int window = 32;                   // frames in flight each way, 1 = stop-and-wait
  int board_ack_every = wire::kBoardAckEvery;  // the engine's ACK intervals (wire.h)
  int coord_ack_every = wire::kCoordAckEvery;

  // Compute on the boards.
  double cycles_per_mac = 1.0;       // cycles per MAC of the board's kernels
  // A board type's measured per-op prices (data/costs/<costs>.json, the
  // planner's: plan::CostModel::type_cycles_per_mac): each layer at its op's
  // figure, cycles_per_mac for ops the file has none for. "" = cycles_per_mac
  // for every layer.
  std::string costs;
  double layer_overhead_s = 0.0;     // fixed cost per board per layer it computes
  // The boards' CPU outside their kernels (core/layer_work.h), in cycles per
  // layer, piece and byte: the type's measured figures (costs' file,
  // plan::CostModel::type_protocol) or none (the ideal board). Added to a
  // share's compute, after its halos when it splits for them.
  core::ProtocolCost protocol;

  // Links.
  double frame_latency_s = 0.0;      // one-way latency of every frame (wire, switch, stacks)
  double coord_bandwidth_kbps = 125000.0;  // coordinator's link, KB/s, shared; 0 = unlimited
  // Board links: when > 0 these replace every board's testbed figures.
  double board_bandwidth_kbps = 0.0; // KB/s; 0 = the testbed's bandwidth_kbps
  double board_delay_s_per_kb = -1;  // s/KB; < 0 = the testbed's delay_s_per_kb

  // Software costs.
  double board_op_delay_s = 0.0;     // before every board send and every board receive
  double coord_frame_s = 0.0;        // coordinator CPU per frame sent or received
  double board_frame_s = 0.0;        // direct route: board CPU per data frame sent or received

  // Emulation only (validating against `tinysplit run` on this host): the
  // emulated boards sleep to inject their delay and to stretch compute to
  // the emulated clock, and every sleep overshoots by the OS's timer slack
  // and wake-up latency. Added to every board delay and every compute.
  double sleep_overshoot_s = 0.0;

  // Host boards (validating against `tinysplit run` on this machine; sim/host.h, docs/simulator.md
  // "Host boards"). The boards are processes sharing `host_cores` cores (0 = each board has a CPU
  // of its own, as real boards do; a testbed's host_cores is used when this is 0). A compute is
  // CPU work of host_s_per_mac per MAC, served by those cores shared equally among the boards
  // computing at the moment (processor sharing), and an emulated compute then sleeps up to its
  // emulated time (macs x cycles_per_mac / clock). Every wake-up of a board process (after a
  // sleep, or when a frame reaches a board blocked in poll) and of the coordinator for the last
  // result takes a scheduling delay drawn from `wake_quantiles_s` (equally likely values: the
  // measured distribution of the overshoot of a sleep on this host; scripts/calibrate_host.sh),
  // with a fixed seed; a frame wake-up does not pay the timer slack (timer_slack_s) a sleep does.
  // With a table, it replaces sleep_overshoot_s.
  int host_cores = 0;
  double host_s_per_mac = 0.0;
  std::vector<double> wake_quantiles_s;
  double timer_slack_s = 0.0;
  uint64_t wake_seed = 1;
  double wake_slot_s = 0.0;  // > 0: wake-ups in the same slot of this length share one draw (host.h)

  // Direct route only: images run back to back, each board taking the next
  // image's layers as soon as it has done its last layer of the previous one
  // (pipelining). 1 = one inference. The relay route has a barrier per
  // layer and ignores it.
  int images = 1;
};

// Throws ts::Error (one line) on a bad model: window outside 1..64, negative
// or non-finite times, cycles_per_mac <= 0, etc.
void validate(const TimingModel& m);

// One board's part of one layer (times in seconds from the layer's start).
struct BoardLayer {
  bool active = false;
  double run_at_s = 0;       // RUN handled by the board: all inputs are in
  double compute_s = 0;      // its compute time for the layer
  double done_s = 0;         // its DONE handled by the coordinator
  int64_t bytes_in = 0, bytes_out = 0;   // activation payload
  int64_t wire_bytes = 0;    // every frame both ways, ACKs included
  int64_t frames = 0;        // frames both ways
  int64_t peak_ram_bytes = 0;  // planned arena high-water (0 when inactive)
};

struct LayerResult {
  int node = 0;
  std::string name;
  double start_s = 0, wall_s = 0, compute_s = 0, comm_s = 0;
  int64_t payload_bytes = 0, wire_bytes = 0, frames = 0;
  int64_t max_peak_ram_bytes = 0;
  int active_boards = 0;
};

struct BoardResult {
  int board_id = 0;
  double clock_mhz = 0;
  double compute_s = 0;      // sum of its compute
  double active_s = 0;       // sum over layers of (DONE - layer start)
  double comm_s = 0;         // active_s - compute_s
  int64_t macs = 0, bytes_in = 0, bytes_out = 0, wire_bytes = 0, frames = 0;
  int64_t peak_ram_bytes = 0;    // planned, max over layers
  int64_t ram_budget_bytes = 0;
  double k1 = 0;             // eq. 2: KB of output per Mcycle of its work
  double kc = 0;             // (in + out) / out
  double eq1_s = 0;          // eq. 1 with its W, f, d, B, K1, Kc
  // Of compute_s: its CPU outside the kernels (TimingModel::protocol), per
  // price in core::kProtocolPrices' order (the plan's counts x the price).
  double protocol_s[core::kNumProtocolPrices] = {};
};

struct SimResult {
  int workers = 0;
  double total_s = 0, compute_s = 0, comm_s = 0;
  int64_t payload_bytes = 0, wire_bytes = 0, frames = 0;
  int64_t max_peak_ram_bytes = 0;
  int64_t events = 0;        // events processed (for benchmarks)
  std::vector<LayerResult> layers;
  std::vector<BoardResult> boards;
  std::vector<std::vector<BoardLayer>> board_layers;  // [board][node]
  std::vector<double> image_done_s;  // direct route: when the coordinator had each image's output
};

// One entry per frame event, when a trace is asked for (tests, debugging).
enum class TraceKind : uint8_t {
  LayerStart,    // coordinator starts a layer (board = -1)
  CoordSend,     // coordinator hands a frame to its link
  BoardRecv,     // the board handles a frame
  ComputeStart,
  ComputeEnd,
  BoardSend,     // the board hands a frame to its link
  CoordRecv,     // the coordinator handles a frame
  LayerEnd,      // every board of the layer is done (board = -1)
};
const char* trace_kind_name(TraceKind k);

struct TraceEvent {
  double t = 0;
  TraceKind kind = TraceKind::LayerStart;
  int board = -1;
  int layer = 0;
  uint8_t type = 0;          // wire::MsgType of the frame, 0 if none
  uint16_t flags = 0;        // wire flags of the frame
  uint32_t seq = 0;          // sequence number (0 for ACK)
  int32_t bytes = 0;         // frame size on the wire (header included)
  int32_t payload = 0;       // payload bytes
  uint32_t in_flight = 0;    // CoordSend/BoardSend: frames unacknowledged after this one
};

// Direct route (plans made with --route direct; sim_direct.cpp): there is no
// per-layer barrier. Every board runs its layers in order; a layer starts
// when the board is free and every element it receives for the layer has
// arrived (its local runs are on the board already); it computes, then hands
// every send of the layer (one message per send record, cut into frames) to
// its link in order, then a DONE to the coordinator. Each board's link is a
// FIFO server each way (its bandwidth and delay per KB), frames cross a
// switch with the one-way latency, and a board's incoming link serves frames
// from all senders in arrival order; the coordinator sends the graph's input
// over its own link at time 0 and receives the output. The inference ends
// when the coordinator has handled the last output and DONE frame. Between
// boards the engine's window holds: at most W frames unacknowledged per link,
// the frame that fills it asks for an ACK, and the receiver ACKs every
// board_ack_every frames or on that request when it reads its link (a board
// that is computing does not); a sender whose window is full waits, reading
// only its own link. Frames to and from the coordinator are not windowed
// (their ACKs are counted). Per layer: wall = when the last
// board finished the layer (compute done, frames handed over) minus the same
// for the previous layer (0 if earlier), compute = the slowest board's.
// Both routes run on one core (sim/core.h: events, links, compute, the
// engine's wire::SendWindow and wire::AckTracker, the figures).

// Simulates one inference. The testbed gives each board's clock, link and RAM
// budget and must match the plan (same number of boards, in order). Throws
// ts::Error on a mismatch or a bad model.
SimResult simulate(const QGraph& q, const plan::Plan& p, const plan::Testbed& t, const TimingModel& m,
                   std::vector<TraceEvent>* trace = nullptr);

}  // namespace ts::sim
