// The coordinator (alg. 4): deploys fragments, probes links, and runs
// inferences. One loop (engine.cpp) serves every route: the coordinator is
// one more peer of the plan, sending the inputs the shares' coord_runs name
// and collecting the outputs they send to kPeerCoordinator. In the paper's
// relay mode that is every activation (board -> coordinator -> boards, so
// the coordinator feeds a layer once it holds the layer before: a barrier
// per layer); in direct mode the boards send activations to each other and
// the coordinator sends the graph's input and collects its output. Each
// board's link has its own thread that follows its board through its
// layers, so one board computes while the coordinator is still sending to
// the next (communication overlaps compute).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coord/link.h"
#include "model/qgraph.h"
#include "plan/plan.h"

namespace ts::coord {

struct CoordOptions {
  std::chrono::milliseconds timeout{10000};    // longest wait for a board
  bool progress = false;                       // progress bar on stderr
};

struct BoardInfo {
  int index = 0;
  wire::HelloPayload hello;
  std::string peer;
};

struct DeployResult {
  int sent = 0, cached = 0;      // boards sent their whole fragment / that had it already
  int patched = 0;               // boards sent a patch of the fragment they held
  int64_t bytes = 0;             // fragment bytes sent (STORE and PATCH payloads)
  int64_t full_bytes = 0;        // the plan's fragments, whole: what a deploy from nothing sends
  double seconds = 0;
};

// A fragment a board holds, as the coordinator deployed it (shared: a
// failover's coordinator patches against what the previous one deployed).
using HeldFragment = std::shared_ptr<const std::vector<uint8_t>>;

struct ProbeResult {
  double rtt_s = 0;              // small-message round trip
  double delay_s_per_kb = 0;     // d of eq. 1: one-way latency charged per KB message
  double bandwidth_kbps = 0;     // B of eq. 1: bulk throughput, KB/s
};

struct LayerTiming {
  int node = 0;
  std::string name;
  // Measured on the layer's slowest board (DONE): its time on the layer
  // (ready -> results handed over), compute, wait for inputs; comm = wall -
  // compute (the wait included).
  double wall_s = 0, compute_s = 0, comm_s = 0, wait_s = 0;
  int64_t payload_bytes = 0;                       // activations in + out
  int64_t wire_bytes = 0;                          // all frames, both ways
  int64_t max_peak_ram = 0;                        // max board arena high-water
  int64_t result_frames = 0;  // frames the boards' results took (OUTPUT, INPUT, INPUTS), from DONE
  int64_t result_bytes = 0;   // and their bytes, headers included (DONE's bytes_sent)
};

struct BoardRunStats {
  int index = 0;
  int board_id = 0;
  uint32_t peak_ram_bytes = 0;        // measured arena high-water (max over layers)
  int64_t planned_peak_ram_bytes = 0;  // plan::WorkerPlan::computing_peak_ram_bytes
  int64_t flash_bytes = 0;
  double compute_s = 0;
  // Instructions the board's kernels took over the inference (sum of DONE's
  // compute_instructions); -1 once any DONE did not count them (host boards).
  int64_t kernel_instructions = 0;
  void add_instructions(uint32_t n) {
    if (n == 0 || kernel_instructions < 0)
      kernel_instructions = -1;
    else
      kernel_instructions += n;
  }
  int64_t bytes_in = 0, bytes_out = 0;  // activation payload to / from the board
  std::vector<uint32_t> layer_peak;     // measured per node (0 = no share)
  // Per node, from DONE: outputs the board computed and their digest
  // (core/digest.h); compared with the reference by coord/verify.h.
  std::vector<uint32_t> layer_outputs;
  std::vector<uint64_t> layer_digest;
};

struct InferenceResult {
  std::vector<int8_t> output;
  double total_s = 0, compute_s = 0, comm_s = 0;
  int64_t wire_bytes = 0, payload_bytes = 0;
  int64_t result_frames = 0;  // sum over layers
  int64_t result_bytes = 0;   // sum over layers
  std::vector<LayerTiming> layers;
  std::vector<BoardRunStats> boards;
  // > 0: a resumed inference (Coordinator::resume): the boards computed
  // layers from this one on; the layers before it were computed and
  // verified by digest before a failover (their figures here are 0).
  int resumed_from = 0;
};

// What a resumed inference starts from: the layer, and every tensor of the
// single-process int8 reference (run_int8_all) for the input, whose digests
// the boards matched for every layer before it.
struct ResumePoint {
  int from = 0;
  const std::vector<std::vector<int8_t>>* verified = nullptr;
};

class Coordinator {
 public:
  Coordinator(const QGraph& q, const plan::Plan& p, std::vector<std::unique_ptr<BoardLink>> links,
              CoordOptions opt = {});
  ~Coordinator();

  // Reads every board's HELLO; checks each board's RAM and flash against the
  // plan (one clear error naming the board otherwise), and its links unless
  // `links` is false (the caller re-plans with told_links(), then set_plan
  // checks them).
  std::vector<BoardInfo> handshake(bool links = true);
  // The links each board told in its HELLO (plan worker order).
  std::vector<int> told_links() const;
  // The plan against the HELLOs: RAM, flash and (with `links`) links.
  void check_budgets(bool links = true) const;
  // The smallest idle limit the boards told in HELLO (0: none has one).
  std::chrono::milliseconds board_idle_limit() const;
  // Replaces the plan (e.g. after probing links and recomputing ratings) and
  // checks it against the boards' HELLOs.
  void set_plan(const plan::Plan& p);
  // Writes each board's fragment of the current plan and pushes it. A board
  // that already holds the identical fragment (same size and SHA-256)
  // receives nothing. With `held` (per board: the fragment it is known to
  // hold, or null), a board whose new fragment shares most of its bytes with
  // the held one gets a PATCH (coord/fragment_patch.h); each entry is
  // replaced by the new fragment once its board committed it, also when
  // deploy throws for another board.
  DeployResult deploy(std::vector<HeldFragment>* held = nullptr);
  ProbeResult probe(int board);
  // One inference. Relay: layer by layer (every layer's inputs come from
  // the coordinator, once it holds the previous layer's outputs). Direct:
  // each board's link thread follows that board through the whole
  // inference (graph input in, DONE per layer, graph output back) without a
  // rendezvous per layer: the boards pace themselves.
  InferenceResult infer(const std::vector<int8_t>& input);
  // Pipelined (direct route only): runs inputs[0..n) through the boards
  // with up to `window` inferences in flight. Every frame of inference k
  // carries its inference tag (wire.h); a board's thread sends inference
  // k's input once the board reported DONE for its last layer of k-1 and
  // inference k-window is complete, so a board that finished its part of
  // one image starts the next while the others are still on the previous
  // one (docs/execution.md, "Pipelined inferences"). `done(k, result)` is
  // called for every inference, in order, as soon as every board reported
  // it (under a lock: keep it short). The first board failure ends the run
  // with a BoardError that names the board, the layer and the inference.
  void infer_pipelined(const std::vector<const std::vector<int8_t>*>& inputs, int window,
                       const std::function<void(int, InferenceResult&)>& done);
  // The inference of `input` resumed at layer at.from (after a failover, on
  // the new plan): every board is told RESUME first (and the coordinator
  // waits until all have it), then computes its layers from at.from on; the
  // inputs of those layers that an earlier layer made, the runs a board
  // would have copied from its own outputs included, come from the
  // coordinator, from at.verified.
  InferenceResult resume(const std::vector<int8_t>& input, const ResumePoint& at);
  // After infer() or resume() threw: what each board reported before the
  // failure (per layer, from its DONE: layer_outputs and layer_digest; 0
  // outputs = no DONE came).
  const std::vector<BoardRunStats>& last_progress() const { return progress_; }
  void close();

 private:
  // The one inference loop (engine.cpp), for every route and for pipelined
  // inferences: inputs[k] tagged tags[k], at most `window` in flight.
  struct Roles;
  struct Slot;
  struct Sync;
  void run(const std::vector<const std::vector<int8_t>*>& inputs, const std::vector<uint16_t>& tags, int window,
           bool pipelined, const std::function<void(int, InferenceResult&)>& done, const ResumePoint& at = {});
  Roles roles() const;
  void check_inputs(const std::vector<const std::vector<int8_t>*>& inputs) const;
  void reset_slot(Slot& S, const Roles& roles, const std::vector<int8_t>& input, const ResumePoint& at) const;
  bool board_layer(BoardLink& l, size_t w, size_t node, Slot& S, const Roles& roles, Sync& sync,
                   int64_t& wire0, int from) const;
  bool resume_board(BoardLink& l, int from, Slot& S, Sync& sync) const;
  // One board, one layer: the coordinator's inputs (in a resumed inference,
  // also every input an earlier layer than `from` made); its outputs and DONE.
  void send_inputs(BoardLink& l, size_t w, const plan::LayerShare& s, size_t node,
                   const std::vector<std::vector<int8_t>>& t, BoardRunStats& bs, int from) const;
  void send_runs(BoardLink& l, size_t node, size_t k, const std::vector<core::InputRun>& runs,
                 const std::vector<int8_t>& src, BoardRunStats& bs) const;
  wire::DonePayload collect_layer(BoardLink& l, const plan::LayerShare& s, size_t node, std::vector<int8_t>& out,
                                  BoardRunStats& bs) const;
  // `peer_node`: with --route direct, the layer the coordinator was waiting on
  // for the board a PeerLost report names (-1: not known).
  [[noreturn]] void rethrow_at(const BoardError& e, const BoardLink& l, size_t node, int peer_node = -1) const;
  // rethrow_at; for a pipelined inference (k >= 0) the message names it.
  [[noreturn]] void rethrow_in(const BoardError& e, const BoardLink& l, size_t node, int peer_node, int k) const;
  // The per-layer figures and the totals of one inference from each board's
  // DONE time (seconds from the start), compute time, frames and wire bytes
  // per layer ([board][node]).
  void summarise_layers(InferenceResult& res, const std::vector<std::vector<wire::DonePayload>>& done,
                        const std::vector<std::vector<int64_t>>& wire) const;
  void parallel(const std::vector<int>& boards, const std::function<void(int)>& fn);
  struct Pool;
  void start_pool();
  void stop_pool();
  std::unique_ptr<Pool> pool_;
  // Direct routing: tells every board where the others listen.
  void send_peers();
  Frame commit(BoardLink& l, const wire::CommitPayload& c) const;
  void committed(BoardLink& l, const Frame& f) const;
  const QGraph& q_;
  const plan::Plan* pp_;
  const plan::Plan& plan() const { return *pp_; }
  std::vector<BoardInfo> info_;
  std::vector<std::unique_ptr<BoardLink>> links_;
  CoordOptions opt_;
  uint16_t next_tag_ = 1;  // inference tag of the next pipelined inference (wire.h)
  std::vector<int> producer_;  // [tensor] the node that makes it, -1 for the graph input
  std::vector<BoardRunStats> progress_;
};

}  // namespace ts::coord
