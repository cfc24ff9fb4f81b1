// The layer scheduler of a board (core/worker.h): which layer runs when.
// Layers run in order; a layer's inputs (INPUT, INPUTS, partial sums) are
// admitted into its windows once the board has reached the layer that
// produces them (until then a peer's frame is held, which stops its sender
// through the window); a layer starts when its inputs are complete (and its
// RUN came, when it needs one), computes its share from the arena (a reduced
// layer in two phases, core/partial.h) and hands its results to the sender.
//
// A resumed inference (RESUME, after a failover): the board starts at the
// layer named and computes nothing before it. Every input operand of a later
// layer that an earlier layer made (its *cut* operands) comes from the
// coordinator, the runs this board would have copied from its own earlier
// outputs (local runs) included; nothing is copied locally for them.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/halo_first.h"
#include "core/stream.h"
#include "core/worker_api.h"

namespace ts {
namespace core {

class DeploySession;
class LinkSet;
class Sender;
class Worker;

class LayerScheduler {
 public:
  // `base` is where the planned buffers start (after the fixed arena).
  void init(const WorkerConfig* cfg, Port* port, WorkerStats* stats, DeploySession* deploy, LinkSet* links,
            Sender* sender, Worker* worker, uint8_t* base, uint32_t fixed);
  // Drops every layer in progress (the next layer to run is past the end).
  void reset();
  // No layer is receiving inputs and no results are being sent.
  bool idle() const;
  // idle(), with no layer left to run.
  bool at_rest() const;

  Verdict on_input(int link, const wire::FrameHeader& h, const uint8_t* payload);
  Verdict on_run(int link, const wire::FrameHeader& h);
  // RESUME: only at rest (between inferences).
  Verdict on_resume(int link, const wire::FrameHeader& h);
  // Layers before the resume point that computed their outputs in place into
  // a later layer's window (FragLayer::out_pitch): that window's rows come
  // from the coordinator. At most kMaxInPlaceCuts (RESUME refused past it).
  struct InPlaceCut {
    uint32_t home = 0;  // the layer whose window holds them (out_until)
    int k = 0;          // its operand
    int32_t c0 = 0, c1 = 0, y0 = 0, y1 = 0;  // the rows: channels x rows, full width
    uint32_t elems = 0;
  };
  static constexpr int kMaxInPlaceCuts = 8;
  // Starts ready layers and sends their results while the windows allow;
  // false if a link or a layer failed.
  bool drive();

 private:
  struct Open {
    bool used = false, run = false;
    uint16_t layer = 0;
    uint32_t run_seq = 0;
    uint32_t received[kMaxInputs] = {};
    uint32_t expect[kMaxInputs] = {};  // expected(e, k), worked out when the slot opens
    // Partial sums (kEntryPartial): own sums computed and sent (phase 1),
    // the accumulator zeroed, bytes of sums received.
    bool ps_done = false, acc_ready = false;
    uint32_t ps_received = 0;
  };

  Verdict admit(int link, const wire::FrameHeader& h, const FragLayer& e, Open** slot);
  Verdict on_partial(int link, const wire::FrameHeader& h, const uint8_t* payload, const FragLayer& e, Open* slot);
  Verdict on_blocks(int link, const wire::FrameHeader& h, const uint8_t* payload, const FragLayer& e, Open* slot);
  Verdict malformed_code(int link, const wire::FrameHeader& h);
  const FragLayer* entry(uint16_t layer, uint32_t seq, int link);
  Open* find_open(uint16_t layer);
  Open* new_slot(uint16_t layer);
  // Computes layer `e` if its inputs are complete (and its RUN came, when it
  // needs one); sets *started.
  bool start(const FragLayer& e, Open* slot, bool* started);
  bool copy_local_inputs(const FragLayer& e);
  // Operand k of e is cut: a resumed inference, and its local runs come from
  // a layer before the one it resumed at.
  bool cut(const FragLayer& e, int k) const {
    return resume_at_ > 0 && e.n_local[k] > 0 && e.local_layer[k] < resume_at_;
  }
  // The in-place cut that lands in operand k of layer `node`, or nullptr.
  const InPlaceCut* in_place_cut(uint32_t node, int k) const;
  // Elements of operand k that arrive over the network in this inference.
  uint32_t expected(const FragLayer& e, int k) const;
  // Whether [e0, e0 + n) of operand k may arrive over the network.
  bool may_receive(const FragLayer& e, uint32_t k, RunFinder& runs, RunFinder& local, uint32_t e0, uint32_t n) const;
  bool sums_phase(const FragLayer& e, Open* slot, uint32_t t0);
  KernelStatus compute(const FragLayer& e, Open* slot, const View* views, int8_t* out);
  // Halos first (core/halo_first.h): the rows other boards read, their
  // sends, then the other rows; *us the compute time of both parts.
  bool halos_first(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out, uint32_t t0, uint32_t seq,
                   uint32_t* us);
  // Inner rows first (core/halo_first.h, InnerRows): while e's inputs from
  // other boards are still coming, the positions that read none of them,
  // once per layer (inner_); false if a kernel or the arena failed.
  bool inner_first(const FragLayer& e);
  // Halos first's split of e (core/halo_first.h): inner_first's when it
  // worked it out for e (a walk over e's sends, once per layer).
  HaloSplit halos_of(const FragLayer& e) const;
  // Positions [u, v) of a split band of e: region by region in the share's
  // buffer, or (in place) straight into the later layer's window.
  KernelStatus band_part(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out, int32_t u,
                         int32_t v);
  // Both ends of a split band, [p0, q0) and [q1, p1).
  KernelStatus band_ends(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out);
  void set_views(const FragLayer& e, View* views);
  // The fragment's arena fits this board's; else OUT_OF_MEMORY is reported.
  bool arena_fits();
  // Streamed chains (core/stream.h): e and the entries after it computed
  // row by row; their digests and times kept for their reports.
  bool run_chain(const FragLayer& e, const View* views, uint32_t seq);
  // Layer `node` was computed by the last chain run: its report.
  bool chained(uint32_t node) const { return chain_n_ > 0 && node > chain_first_ && node < chain_first_ + chain_n_; }
  // `shown`: the port already saw the results (Port::results); `digest`:
  // the outputs' digest when the compute took it (a streamed layer).
  void finish(const FragLayer& e, Open* slot, int8_t* out, uint32_t us, bool shown = false,
              const uint64_t* digest = nullptr);
  // The sender finished a layer's results: where the schedule goes next.
  void sent();
  void touch(uint32_t at, uint32_t bytes);
  uint8_t* buffer(uint32_t at) { return base_ + at; }
  void report(wire::ErrorCode code, uint32_t seq, const char* text);

  const WorkerConfig* cfg_ = nullptr;
  Port* port_ = nullptr;
  WorkerStats* stats_ = nullptr;
  DeploySession* deploy_ = nullptr;
  LinkSet* links_ = nullptr;
  Sender* sender_ = nullptr;
  Worker* worker_ = nullptr;
  uint8_t* base_ = nullptr;
  uint32_t fixed_ = 0;  // the arena's fixed part (the transmit buffer)
  // The next layer to run, and the layers receiving inputs.
  uint32_t cursor_ = 0;
  // The layer the inference in progress resumed at (RESUME), 0 = none.
  uint32_t resume_at_ = 0;
  InPlaceCut in_place_[kMaxInPlaceCuts];
  int n_in_place_ = 0;
  bool find_in_place_cuts(uint32_t layer);
  // Board clock (Port::now_us) when the board became ready for its next
  // layer: its last layer's results handed over, or the first frame of an
  // inference; and the wait of the layer in progress (ready -> start).
  uint32_t ready_us_ = 0, wait_us_ = 0;
  Open open_[kMaxOpenLayers];
  uint32_t touched_ = 0;  // top of the planned buffers used since the last layer's DONE
  // The last chain run: its first layer, its length, per layer the digest
  // (streamed layers) and the compute time.
  uint32_t chain_first_ = 0;
  int chain_n_ = 0;
  uint64_t chain_digest_[kMaxChain] = {};
  uint32_t chain_us_[kMaxChain] = {};
  uint32_t chain_top_ = 0;  // top of the buffers the chain touched
  // Inner rows first, for the layer at the cursor: its split worked out
  // (checked), and its inner positions computed (done, in `us`); the
  // layer's halos-first split if that was worked out on the way (halo_known).
  struct Inner {
    bool checked = false, done = false, halo_known = false;
    uint32_t node = 0, us = 0;
    HaloSplit split, halo;
  } inner_;
};

}  // namespace core
}  // namespace ts
