// The arena plan of one worker: outputs computed in place into a later
// layer's window where that saves a copy (direct route), then an offset for
// every buffer (input windows, outputs, partial sums) such that buffers in use
// at the same layer never overlap; each layer's ram_bytes and the peak. The
// board checks the same rules when it reads the fragment (core/fragment.cpp).
#include <algorithm>

#include "core/op.h"
#include "core/partial.h"
#include "plan/plan_steps.h"
#include "plan/streams.h"

namespace ts::plan {

namespace {

using streams::whole_rows;

// The outputs of `ls` (a share of whole rows) computed in place into window
// `in`: their channel pitch there, and where its sends read them (from the
// share's first element).
void home_in(const core::Dims& d, LayerShare& ls, const InputNeed& in) {
  int32_t c0, c1, y0, y1;
  whole_rows(d, ls, &c0, &c1, &y0, &y1);
  ls.out_pitch = uint32_t(in.box.h1 - in.box.h0) * uint32_t(d.w);
  const int64_t hw = int64_t(d.h) * d.w;
  for (core::Send& sd : ls.sends) {
    const int64_t c = sd.offset / hw, r = sd.offset % hw;
    sd.pos = uint32_t((c - c0) * int64_t(ls.out_pitch) + r - int64_t(y0) * d.w);
  }
}

// In place (direct route): a share of whole rows whose outputs this worker
// reads again is computed straight into the window of the last layer that
// reads it (its rows widened to hold the share when needed). That layer then
// copies nothing, the outputs need no buffer of their own, and earlier local
// readers copy from the window. Returns the home operand per node (-1: none).
std::vector<int> place_in_place(const QGraph& q, WorkerPlan& wp) {
  std::vector<int> home(wp.layers.size(), -1);
  for (LayerShare& ls : wp.layers) {
    ls.out_pitch = 0;
    for (InputNeed& in : ls.inputs) in.view_of = in.view_k = in.view_from = -1;
    if (!ls.active() || ls.out_until <= ls.node || ls.psum.on) continue;  // partial: dense output
    const core::Dims d = q.desc(ls.node).out;
    int32_t c0, c1, y0, y1;
    if (!whole_rows(d, ls, &c0, &c1, &y0, &y1)) continue;
    LayerShare& last = wp.layers[size_t(ls.out_until)];
    if (last.psum.on) continue;  // a partial share's window is its input block exactly (core/partial.h)
    for (size_t k = 0; k < last.inputs.size(); ++k) {
      InputNeed& in = last.inputs[k];
      if (in.local_layer != ls.node || in.box.empty() || in.box.c0 > c0 || in.box.c1 < c1) continue;
      in.box.h0 = std::min(in.box.h0, y0);
      in.box.h1 = std::max(in.box.h1, y1);
      in.local.clear();
      in.local_layer = -1;
      in.avail_from = std::min(in.avail_from, ls.node);
      home_in(d, ls, in);
      home[size_t(ls.node)] = int(k);
      break;
    }
  }
  return home;
}

// Views (InputNeed::view_of): windows that hold no bytes of their own.
class Views {
 public:
  Views(const QGraph& q, WorkerPlan& wp, const std::vector<int>& home) : q_(q), wp_(wp), home_(home) {}

  // (1) An elementwise layer computed in place into a later window computes
  // over its operand: the operand's window, where the producer computed its
  // outputs in place, becomes a view of that later window (the chain
  // producer -> elementwise -> reader in one buffer). Latest layers first,
  // so that a chain of them ends in one host. (2) Then a reader earlier than
  // an in-place output's home reads it where it sits: its window becomes a
  // view of the home's host, nothing copied.
  void make() {
    for (int e = int(wp_.layers.size()) - 1; e >= 0; --e) over_operand(e);
    for (int v = 0; v < int(wp_.layers.size()); ++v)
      for (size_t k = 0; k < wp_.layers[size_t(v)].inputs.size(); ++k) early_reader(v, k);
  }

 private:
  LayerShare& at(int n) { return wp_.layers[size_t(n)]; }
  // The window that holds node n's outputs computed in place, and its layer.
  InputNeed* host_of_outputs(int n, int* layer, int* k) {
    const LayerShare& ls = at(n);
    if (!ls.out_pitch || ls.chained || home_[size_t(n)] < 0) return nullptr;
    InputNeed* h = &at(ls.out_until).inputs[size_t(home_[size_t(n)])];
    *layer = ls.out_until, *k = home_[size_t(n)];
    if (h->view_of >= 0) *layer = h->view_of, *k = h->view_k, h = &at(*layer).inputs[size_t(*k)];
    return line_buffer(*layer, *k) ? nullptr : h;
  }
  // A streamed chain's line buffer (streams.h): the window a layer of the
  // chain streams its rows into.
  bool line_buffer(int n, int k) {
    return k == 0 && n > 0 && at(n - 1).chained && at(n - 1).stream_step > 0;
  }
  void view(InputNeed& in, int layer, int k) {
    InputNeed& h = at(layer).inputs[size_t(k)];
    in.box = h.box;
    in.view_of = layer, in.view_k = k;
    h.avail_from = std::min(h.avail_from, in.avail_from);
  }
  // Whether node e's kernel may write its outputs over operand k: it reads
  // element i of it for output i alone, in the output's shape (core/op.h
  // Access::kSame).
  bool overwrites(int e, size_t k) const {
    const core::LayerDesc d = q_.desc(e);
    const core::Dims& x = d.in[k];
    return core::op_def(d.op)->access(d, int(k)).kind == core::Access::kSame && x.c == d.out.c && x.h == d.out.h &&
           x.w == d.out.w;
  }
  void over_operand(int e) {
    LayerShare& E = at(e);
    int hl, hk;
    if (!E.active() || E.psum.on || !host_of_outputs(e, &hl, &hk)) return;
    const core::Dims d = q_.desc(e).out;
    int32_t c0, c1, y0, y1, pc0, pc1, py0, py1;
    whole_rows(d, E, &c0, &c1, &y0, &y1);
    for (size_t k = 0; k < E.inputs.size(); ++k) {
      InputNeed& in = E.inputs[k];
      const int p = q_.tensors[size_t(in.tensor)].producer;
      if (p < 0 || !overwrites(e, k) || !in.local.empty() || in.view_of >= 0) continue;
      LayerShare& P = at(p);
      // The producer's outputs all in this window and inside E's own rows,
      // where frames for the host's other readers never land (the rest of
      // E's operand may come in frames: into E's rows too).
      if (!P.active() || !P.out_pitch || P.chained || P.out_until != e || home_[size_t(p)] != int(k)) continue;
      if (!whole_rows(d, P, &pc0, &pc1, &py0, &py1) || pc0 < c0 || pc1 > c1 || py0 < y0 || py1 > y1) continue;
      // The host, in use from the producer on, no more than a quarter larger
      // than the window it takes the place of.
      const InputNeed& h = at(hl).inputs[size_t(hk)];
      if (h.box.elems(d.w) * 4 > in.box.elems(d.w) * 5) continue;
      view(in, hl, hk);
      home_in(d, P, in);
      return;
    }
  }
  void early_reader(int v, size_t k) {
    LayerShare& V = at(v);
    InputNeed& in = V.inputs[k];
    const core::LayerDesc d = q_.desc(v);
    if (!V.active() || line_buffer(v, int(k)) || (V.psum.on && !core::partial_rows(d))) return;
    if (in.view_of >= 0 || in.local_layer < 0 || in.box.empty()) return;
    const int p = in.local_layer;
    int hl, hk;
    const InputNeed* h = at(p).out_until > v ? host_of_outputs(p, &hl, &hk) : nullptr;
    if (!h || (V.psum.on && (h->box.c0 != 0 || h->box.c1 != d.in[k].c))) return;  // a row share: every channel
    const core::Box& b = h->box;
    if (in.box.c0 < b.c0 || in.box.c1 > b.c1 || in.box.h0 < b.h0 || in.box.h1 > b.h1) return;
    // Frames for the view land in the host: only where the host holds the
    // same tensor (it is the outputs' own home, not a later layer's window
    // they were computed over), so that they agree with the host's own.
    if (!in.recv.empty() && hl != at(p).out_until) return;
    in.local.clear();
    in.local_layer = -1;
    in.view_from = p;
    view(in, hl, hk);
  }

  const QGraph& q_;
  WorkerPlan& wp_;
  const std::vector<int>& home_;
};

// One buffer of a worker's arena: bytes, in use from layer `from` to `to`
// (both included), its offset once placed and where the plan keeps it.
struct Buf {
  int64_t bytes;
  int from, to;
  uint32_t* at;
  int64_t placed = -1;
};

// Places the buffers in the order given, each at the lowest offset where it
// overlaps no placed buffer in use at the same time; returns the top.
int64_t first_fit(std::vector<Buf>& v) {
  int64_t top = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    // Candidate offsets: 0 and the end of every placed buffer alive together.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j = 0; j < i; ++j)
      if (v[j].from <= v[i].to && v[i].from <= v[j].to) busy.emplace_back(v[j].placed, v[j].placed + v[j].bytes);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& b : busy) {
      if (at + v[i].bytes <= b.first) break;
      at = std::max(at, b.second);
    }
    v[i].placed = at;
    top = std::max(top, at + v[i].bytes);
  }
  return top;
}

int64_t held(const Buf& b) { return int64_t(b.to - b.from + 1); }

// The orders first_fit tries (layout_worker keeps the lowest top).
using BufOrder = bool (*)(const Buf&, const Buf&);
const BufOrder kOrders[] = {
    [](const Buf& a, const Buf& b) { return a.from < b.from; },
    [](const Buf& a, const Buf& b) { return a.bytes > b.bytes; },
    [](const Buf& a, const Buf& b) { return a.bytes * held(a) > b.bytes * held(b); },
    [](const Buf& a, const Buf& b) { return held(a) > held(b) || (held(a) == held(b) && a.bytes > b.bytes); },
};

}  // namespace

ViewCount view_count(const Plan& p) {
  ViewCount v;
  for (const WorkerPlan& wp : p.workers)
    for (const LayerShare& ls : wp.layers)
      for (const InputNeed& in : ls.inputs) {
        v.windows += in.view_of >= 0;
        v.early += in.view_from >= 0;
      }
  return v;
}

namespace steps {

namespace {

// layout_worker with or without views.
void arena_plan(const QGraph& q, WorkerPlan& wp, bool views) {
  const std::vector<int> home = place_in_place(q, wp);
  const std::vector<streams::Chain> chains = streams::lay_out(q, wp, home);
  if (views) Views(q, wp, home).make();
  std::vector<Buf> bufs;
  for (LayerShare& ls : wp.layers) {
    if (!ls.active()) continue;
    const core::LayerDesc& d = q.desc(ls.node);
    for (size_t k = 0; k < ls.inputs.size(); ++k) {
      InputNeed& in = ls.inputs[k];
      const int64_t n = in.box.elems(d.in[k].w);
      in.box_at = 0;
      if (n > 0 && in.view_of < 0) bufs.push_back(Buf{core::arena_block(uint32_t(n)), in.avail_from, ls.node, &in.box_at});
    }
    if (!ls.out_pitch)
      bufs.push_back(Buf{core::arena_block(uint32_t(ls.out_elems)), ls.node, ls.out_until, &ls.out_at});
    if (ls.psum.on) {
      // The own partial sums (every output channel) and the accumulator of
      // the sums received for the own block, both int32, this layer only.
      const int64_t own = int64_t(d.out.c) * core::partial_positions(d) * 4;
      bufs.push_back(Buf{core::arena_block(uint32_t(own)), ls.node, ls.node, &ls.psum.at});
      bufs.push_back(Buf{core::arena_block(uint32_t(ls.out_elems * 4)), ls.node, ls.node, &ls.psum.acc_at});
    }
  }
  // A chain is computed when its first layer runs: its last layer's
  // outputs, when they have a buffer of their own, are in use from then on
  // (the board's arena check reads the same, core/fragment.cpp).
  for (const streams::Chain& c : chains)
    for (Buf& b : bufs)
      if (b.at == &wp.layers[size_t(c.last)].out_at) b.from = std::min(b.from, c.first);
  // First fit in several orders, keeping the one with the lowest peak: by
  // first use (layer order); by size, largest first (a big window placed
  // first leaves no hole under it that a later, larger buffer cannot use);
  // by bytes x layers held, largest first, and by layers held, longest
  // first (the long-lived maps low, where nothing short-lived must step
  // over them: PP-OCRv4's neck keeps its levels' maps across many layers).
  int64_t best = -1;
  std::vector<Buf> chosen;
  for (const auto& order : kOrders) {
    std::vector<Buf> v = bufs;
    std::stable_sort(v.begin(), v.end(), order);
    const int64_t top = first_fit(v);
    if (best < 0 || top < best) best = top, chosen = std::move(v);
  }
  bufs = std::move(chosen);
  for (Buf& b : bufs) *b.at = uint32_t(b.placed);
  // A view sits where its host is (the same box).
  for (LayerShare& ls : wp.layers)
    for (InputNeed& in : ls.inputs)
      if (in.view_of >= 0) in.box_at = wp.layers[size_t(in.view_of)].inputs[size_t(in.view_k)].box_at;
  // Outputs in place: where their first element sits in the home window.
  for (LayerShare& ls : wp.layers) {
    if (!ls.out_pitch) continue;
    const core::Dims d = q.desc(ls.node).out;
    int32_t c0, c1, y0, y1;
    whole_rows(d, ls, &c0, &c1, &y0, &y1);
    const InputNeed& in = wp.layers[size_t(ls.out_until)].inputs[size_t(home[size_t(ls.node)])];
    ls.out_at = in.box_at + uint32_t(((c0 - in.box.c0) * (in.box.h1 - in.box.h0) + (y0 - in.box.h0)) * d.w);
  }
  wp.peak_layer = -1;
  for (LayerShare& ls : wp.layers) {
    // Also at layers this worker does not compute: windows filling for a
    // later layer and outputs kept for a later local use are still held.
    ls.ram_bytes = ls.live_bytes = 0;
    for (const Buf& b : bufs)
      if (b.from <= ls.node && ls.node <= b.to) {
        ls.ram_bytes = std::max(ls.ram_bytes, b.placed + b.bytes);
        ls.live_bytes += b.bytes;
      }
    if (ls.ram_bytes > 0 && (wp.peak_layer < 0 || ls.ram_bytes > wp.layers[size_t(wp.peak_layer)].ram_bytes))
      wp.peak_layer = ls.node;
  }
  wp.peak_ram_bytes = int64_t(core::kWorkerFixedArena) +
                      (wp.peak_layer >= 0 ? wp.layers[size_t(wp.peak_layer)].ram_bytes : 0);
}

}  // namespace

// The arena plan of one worker: every buffer gets an offset such that buffers
// in use at the same layer never overlap (first fit, the best of kOrders); each
// layer's ram_bytes is the top of what is in use while it runs. With views
// where they lower the peak, or keep it and lower the sum of the layers'
// tops: they hold no bytes, but a host they merge with lives longer and the
// placement moves, and `auto` weighs each layer's top against the budget
// (streamed chains lower some layers' tops and not others').
void layout_worker(const QGraph& q, WorkerPlan& wp) {
  WorkerPlan plain = wp;
  arena_plan(q, wp, true);
  bool any = false;
  for (const LayerShare& ls : wp.layers)
    for (const InputNeed& in : ls.inputs) any = any || in.view_of >= 0;
  if (!any) return;
  arena_plan(q, plain, false);
  if (wp.peak_ram_bytes < plain.peak_ram_bytes) return;
  int64_t with = 0, without = 0;
  for (size_t n = 0; n < wp.layers.size(); ++n) with += wp.layers[n].ram_bytes, without += plain.layers[n].ram_bytes;
  if (wp.peak_ram_bytes > plain.peak_ram_bytes || with > without) wp = std::move(plain);
}

}  // namespace steps

}  // namespace ts::plan
