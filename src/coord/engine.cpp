// The coordinator's inference engine: one loop for every route and for
// pipelined inferences (coordinator.h). The route is data of the plan: the
// coordinator is one more peer that sends a layer's inputs where a share's
// InputNeed::coord_runs say so (relay: every input; direct: the graph's),
// sends RUN where a share's run_trigger says so (relay), and collects the
// outputs a share sends to peer kPeerCoordinator (relay: every output;
// direct: the graph's). Every board's link thread follows its board through
// its active layers; before it sends a layer's inputs or RUN it waits until
// the coordinator holds every output it collects of the layers before (on
// the relay route that is the paper's barrier per layer: the coordinator
// holds the layer's inputs only then; on the direct route nothing waits).
// A resumed inference (Coordinator::resume) is the same loop from a later
// layer, the coordinator also sending what the layers before it made.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "coord/coordinator.h"

namespace ts::coord {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

namespace {

bool sends_to_coordinator(const plan::LayerShare& s) {
  for (const core::Send& sd : s.sends)
    if (sd.peer == core::kPeerCoordinator) return true;
  return false;
}

bool takes_from_coordinator(const plan::LayerShare& s) {
  if (s.run_trigger) return true;
  for (const auto& need : s.inputs)
    if (!need.coord_runs.empty()) return true;
  return false;
}

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

// The coordinator's part in the plan, per layer: how many boards return
// outputs to it, and the earlier layers whose outputs it must hold before
// it feeds a layer.
struct Coordinator::Roles {
  std::vector<int> collected;           // [node] boards sending outputs to the coordinator
  std::vector<std::vector<int>> gate;   // [node] earlier nodes with collected > 0
};

// What the board threads of one run share (under mu).
struct Coordinator::Sync {
  std::mutex mu;
  std::condition_variable cv;
  int completed = 0;  // inferences every board reported (and `done` saw), in order
  size_t resumed = 0;  // boards that have the RESUME of a resumed inference
  bool failed = false;
};

// One inference in flight: its tensors at the coordinator, its reports.
struct Coordinator::Slot {
  InferenceResult r;
  std::vector<std::vector<int8_t>> t;
  std::vector<int> owed;                                // [node] boards yet to return their outputs
  std::vector<std::vector<wire::DonePayload>> done;  // [board][node]: what the board measured
  std::vector<std::vector<int64_t>> wire;
  Clock::time_point start{};
  bool started = false;
  size_t boards_done = 0;
};

Coordinator::Roles Coordinator::roles() const {
  const size_t L = q_.nodes.size(), B = links_.size();
  Roles r;
  r.collected.assign(L, 0);
  r.gate.resize(L);
  for (size_t node = 0; node < L; ++node) {
    bool any = false;
    for (size_t w = 0; w < B; ++w) {
      const plan::LayerShare& s = plan().workers[w].layers[node];
      if (!s.active()) continue;
      any = true;
      if (sends_to_coordinator(s)) ++r.collected[node];
    }
    if (!any) throw Error("plan gives layer '" + q_.nodes[node].name + "' to no board");
    for (size_t m = 0; m < node; ++m)
      if (r.collected[m] > 0) r.gate[node].push_back(int(m));
  }
  return r;
}

// A slot made ready for the inference of `input`.
void Coordinator::reset_slot(Slot& S, const Roles& roles, const std::vector<int8_t>& input,
                             const ResumePoint& at) const {
  const size_t L = q_.nodes.size(), B = links_.size();
  S.r = InferenceResult();
  S.r.boards.resize(B);
  for (size_t i = 0; i < B; ++i) {
    auto& b = S.r.boards[i];
    b.index = int(i);
    b.board_id = plan().workers[i].board;
    b.planned_peak_ram_bytes = plan().workers[i].computing_peak_ram_bytes();
    b.flash_bytes = plan().workers[i].flash_bytes;
    b.layer_peak.assign(L, 0);
    b.layer_outputs.assign(L, 0);
    b.layer_digest.assign(L, 0);
  }
  S.t.assign(q_.tensors.size(), {});
  S.t[q_.input] = input;
  for (size_t node = 0; node < L; ++node)
    if (roles.collected[node] > 0) S.t[q_.nodes[node].output].assign(size_t(q_.shape(q_.nodes[node].output).size()), 0);
  S.owed = roles.collected;
  // Resumed: the layers before the resume point are done, their outputs the
  // verified ones.
  for (size_t node = 0; node < size_t(std::max(0, at.from)) && node < L; ++node) {
    S.owed[node] = 0;
    S.t[q_.nodes[node].output] = (*at.verified)[q_.nodes[node].output];
  }
  S.r.resumed_from = at.from;
  S.done.assign(B, std::vector<wire::DonePayload>(L));
  S.wire.assign(B, std::vector<int64_t>(L, 0));
  S.started = false;
  S.boards_done = 0;
}

void Coordinator::check_inputs(const std::vector<const std::vector<int8_t>*>& inputs) const {
  for (const auto* x : inputs)
    if (!x || int64_t(x->size()) != q_.shape(q_.input).size()) throw Error("input has the wrong size for the model");
}

InferenceResult Coordinator::infer(const std::vector<int8_t>& input) {
  for (auto& l : links_) l->set_inference(0);  // one at a time: untagged (after a pipelined batch too)
  InferenceResult res;
  run({&input}, {0}, 1, false, [&](int, InferenceResult& r) { res = std::move(r); });
  return res;
}

InferenceResult Coordinator::resume(const std::vector<int8_t>& input, const ResumePoint& at) {
  if (at.from <= 0) return infer(input);
  if (at.from >= int(q_.nodes.size()) || !at.verified || at.verified->size() != q_.tensors.size())
    throw Error("resume: no layer " + std::to_string(at.from) + " or no verified tensors to resume from");
  if (const int start = plan::resume_start(plan(), at.from); start != at.from)
    throw Error("resume: layer " + std::to_string(at.from) + " cannot start an inference (a streamed chain or a view " +
                "reads what an earlier layer made); from layer " + std::to_string(start));
  for (auto& l : links_) l->set_inference(0);
  InferenceResult res;
  run({&input}, {0}, 1, false, [&](int, InferenceResult& r) { res = std::move(r); }, at);
  return res;
}

void Coordinator::infer_pipelined(const std::vector<const std::vector<int8_t>*>& inputs, int window,
                                  const std::function<void(int, InferenceResult&)>& done) {
  if (plan().route != plan::Route::Direct) throw Error("pipelined inferences need the direct route");
  if (inputs.empty()) return;
  window = std::max(1, std::min(window, 64));
  check_inputs(inputs);
  (void)roles();  // refuses a plan that gives a layer to no board before any tag is taken
  std::vector<uint16_t> tags(inputs.size(), 0);
  for (uint16_t& tag : tags) {
    tag = next_tag_;
    next_tag_ = wire::next_inference_tag(next_tag_);
  }
  run(inputs, tags, window, true, done);
}

// Inferences inputs[0..n) with at most `window` in flight (slot k % window
// holds inference k). Inference k's frames carry tags[k]; a board's thread
// starts inference k once its board reported DONE for its last layer of
// k-1 (so the coordinator's link never has to wait behind a frame the board
// holds) and inference k-window is complete. A board still on k holds its
// peers' frames of k+1 unread (core/worker.h), so no board mixes two
// inferences. `done(k, result)` is called in order, under the lock, once
// every board reported inference k.
void Coordinator::run(const std::vector<const std::vector<int8_t>*>& inputs, const std::vector<uint16_t>& tags,
                      int window, bool pipelined, const std::function<void(int, InferenceResult&)>& done,
                      const ResumePoint& at) {
  const int n = int(inputs.size());
  const size_t L = q_.nodes.size(), B = links_.size();
  check_inputs(inputs);
  const Roles plan_roles = roles();
  const size_t W = size_t(std::min(window, n));
  std::vector<Slot> slots(W);
  for (size_t s = 0; s < W; ++s) reset_slot(slots[s], plan_roles, *inputs[s], at);
  const int from = std::max(0, at.from);
  Sync sync;
  // Every board reported inference k: its figures, then `done`, then the
  // slot takes inference k + W. With sync.mu held.
  auto finish = [&](int k) {
    Slot& S = slots[size_t(k) % W];
    const Clock::time_point end = Clock::now();
    if (!S.started) S.start = end;  // a plan whose boards take nothing from the coordinator: none here
    S.r.total_s = seconds_between(S.start, end);
    summarise_layers(S.r, S.done, S.wire);
    S.r.output = S.t[q_.output];
    done(k, S.r);
    ++sync.completed;
    if (k + int(W) < n) reset_slot(S, plan_roles, *inputs[size_t(k) + W], ResumePoint{});
    sync.cv.notify_all();
  };
  // Per board, the layer its thread waits on (a PeerLost report names it).
  std::unique_ptr<std::atomic<int>[]> waiting(new std::atomic<int>[B]);
  for (size_t w = 0; w < B; ++w) waiting[w] = -1;
  std::vector<int> all;
  for (size_t i = 0; i < B; ++i) all.push_back(int(i));
  auto each = [&](int w) {
    BoardLink& l = *links_[size_t(w)];
    int64_t wire0 = int64_t(l.stats().wire_out + l.stats().wire_in);
    try {
      if (from > 0 && !resume_board(l, from, slots[0], sync)) return;
      for (int k = 0; k < n; ++k) {
        {
          // At most W in flight: inference k waits for k - W (its slot).
          std::unique_lock<std::mutex> lock(sync.mu);
          sync.cv.wait(lock, [&] { return sync.failed || k < sync.completed + int(W); });
          if (sync.failed) return;
        }
        Slot& S = slots[size_t(k) % W];
        l.set_inference(tags[size_t(k)]);
        for (size_t node = size_t(from); node < L; ++node) {
          if (!plan().workers[size_t(w)].layers[node].active()) continue;
          waiting[size_t(w)] = int(node);
          try {
            if (!board_layer(l, size_t(w), node, S, plan_roles, sync, wire0, from)) return;
          } catch (const BoardError& e) {
            const int peer_node = !pipelined && e.lost_peer >= 0 && size_t(e.lost_peer) < B
                                      ? waiting[size_t(e.lost_peer)].load()
                                      : -1;
            rethrow_in(e, l, node, peer_node, pipelined ? k : -1);
          }
        }
        std::lock_guard<std::mutex> lock(sync.mu);
        if (++S.boards_done == B) finish(k);
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(sync.mu);
        sync.failed = true;
      }
      sync.cv.notify_all();
      throw;
    }
  };
  progress_.clear();
  try {
    parallel(all, each);
  } catch (...) {
    // Every board's thread has ended: what they reported stays for a resume.
    if (!pipelined) progress_ = slots[0].r.boards;
    throw;
  }
}

// A resumed inference starts with RESUME on every board, and no board goes
// on before all have it: a board that got a peer's frame first would take it
// for the start of an inference from its first layer. False if the run
// failed elsewhere while it waited.
bool Coordinator::resume_board(BoardLink& l, int from, Slot& S, Sync& sync) const {
  l.send(MsgType::Resume, uint16_t(from), 0, nullptr, 0, wire::kFlagLast, plan().plan_id);
  l.flush();
  std::unique_lock<std::mutex> lock(sync.mu);
  if (++sync.resumed == links_.size()) sync.cv.notify_all();
  sync.cv.wait(lock, [&] { return sync.failed || sync.resumed == links_.size(); });
  if (sync.failed) return false;
  if (!S.started) {
    S.started = true;
    S.start = Clock::now();
  }
  return true;
}

// One board, one layer of one inference: once the coordinator holds what
// the layer takes from it, its inputs and RUN (as the plan says), then its
// outputs to the coordinator and DONE. False if the run failed elsewhere
// while it waited.
bool Coordinator::board_layer(BoardLink& l, size_t w, size_t node, Slot& S, const Roles& roles, Sync& sync,
                              int64_t& wire0, int from) const {
  const plan::LayerShare& s = plan().workers[w].layers[node];
  if (takes_from_coordinator(s)) {
    std::unique_lock<std::mutex> lock(sync.mu);
    sync.cv.wait(lock, [&] {
      if (sync.failed) return true;
      for (int m : roles.gate[node])
        if (S.owed[size_t(m)] > 0) return false;
      return true;
    });
    if (sync.failed) return false;
    if (!S.started) {
      S.started = true;
      S.start = Clock::now();
    }
  }
  BoardRunStats& bs = S.r.boards[w];
  send_inputs(l, w, s, node, S.t, bs, from);
  if (s.run_trigger) l.send(MsgType::Run, uint16_t(node), 0, nullptr, 0, wire::kFlagLast, plan().plan_id);
  // Only telemetry is due from this board (its outputs go to other boards,
  // and it has later layers): its DONE reports are read in batches. The
  // DONE of its last layer, which ends its part of the inference, is read
  // at once.
  bool last = true;
  for (size_t m = node + 1; m < q_.nodes.size() && last; ++m) last = !plan().workers[w].layers[m].active();
  l.pause_before_waits(!sends_to_coordinator(s) && !last ? kTelemetryPause : std::chrono::microseconds(0));
  const wire::DonePayload d = collect_layer(l, s, node, S.t[q_.nodes[node].output], bs);
  S.done[w][node] = d;
  const int64_t wn = int64_t(l.stats().wire_out + l.stats().wire_in);
  S.wire[w][node] = wn - wire0;
  wire0 = wn;
  if (sends_to_coordinator(s)) {
    std::lock_guard<std::mutex> lock(sync.mu);
    if (--S.owed[node] == 0) sync.cv.notify_all();
  }
  return true;
}

// rethrow_at, and for a pipelined inference (k >= 0) its number in the message.
void Coordinator::rethrow_in(const BoardError& e, const BoardLink& l, size_t node, int peer_node, int k) const {
  if (k < 0) rethrow_at(e, l, node, peer_node);
  try {
    rethrow_at(e, l, node, peer_node);
  } catch (const BoardError& named) {
    BoardError out(std::string(named.what()) + " (pipelined inference " + std::to_string(k) + ")", named.board,
                   named.layer);
    out.lost_peer = named.lost_peer;
    throw out;
  }
}

// The per-layer figures of one inference, from what each board measured
// and reported in its DONE (wire.h DonePayload), for the layer's slowest
// board (the longest time from being ready for the layer to having handed
// over its results): its time, its compute, its wait for inputs, and its
// communication = time - compute (the wait included). The totals: compute
// is the sum over layers, communication the rest of the coordinator's
// end-to-end time.
void Coordinator::summarise_layers(InferenceResult& res, const std::vector<std::vector<wire::DonePayload>>& done,
                                   const std::vector<std::vector<int64_t>>& wire) const {
  for (size_t node = 0; node < q_.nodes.size(); ++node) {
    LayerTiming lt;
    lt.node = int(node);
    lt.name = q_.nodes[node].name;
    uint32_t compute = 0, span = 0, wait = 0;
    for (size_t w = 0; w < done.size(); ++w) {
      if (!plan().workers[w].layers[node].active()) continue;
      const wire::DonePayload& d = done[w][node];
      const uint32_t s = std::max(d.span_us, d.elapsed_us + d.wait_us);
      if (s >= span) span = s, compute = d.elapsed_us, wait = d.wait_us;
      lt.result_frames += d.frames_sent;
      lt.result_bytes += d.bytes_sent;
      lt.wire_bytes += wire[w][node];
      lt.max_peak_ram = std::max<int64_t>(lt.max_peak_ram, res.boards[w].layer_peak[node]);
    }
    lt.wall_s = span * 1e-6;
    lt.compute_s = compute * 1e-6;
    lt.wait_s = wait * 1e-6;
    lt.comm_s = lt.wall_s - lt.compute_s;
    lt.payload_bytes = plan().layers[node].bytes_moved;
    res.compute_s += lt.compute_s;
    res.payload_bytes += lt.payload_bytes;
    res.wire_bytes += lt.wire_bytes;
    res.result_frames += lt.result_frames;
    res.result_bytes += lt.result_bytes;
    res.layers.push_back(lt);
  }
  res.comm_s = std::max(0.0, res.total_s - res.compute_s);
}

}  // namespace ts::coord
