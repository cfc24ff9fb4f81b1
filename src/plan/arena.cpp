// The arena plan of one worker: outputs computed in place into a later
// layer's window where that saves a copy (direct route), then an offset for
// every buffer (input windows, outputs, partial sums) such that buffers in use
// at the same layer never overlap; each layer's ram_bytes and the peak. The
// board checks the same rules when it reads the fragment (core/fragment.cpp).
#include <algorithm>

#include "core/partial.h"
#include "plan/plan_steps.h"
#include "plan/streams.h"

namespace ts::plan {

namespace {

using streams::whole_rows;

// In place (direct route): a share of whole rows whose outputs this worker
// reads again is computed straight into the window of the last layer that
// reads it (its rows widened to hold the share when needed). That layer then
// copies nothing, the outputs need no buffer of their own, and earlier local
// readers copy from the window. Returns the home operand per node (-1: none).
std::vector<int> place_in_place(const QGraph& q, WorkerPlan& wp) {
  std::vector<int> home(wp.layers.size(), -1);
  for (LayerShare& ls : wp.layers) {
    ls.out_pitch = 0;
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
      ls.out_pitch = uint32_t(in.box.h1 - in.box.h0) * uint32_t(d.w);
      home[size_t(ls.node)] = int(k);
      // Sends read the outputs where they now sit.
      const int64_t hw = int64_t(d.h) * d.w;
      for (core::Send& sd : ls.sends) {
        const int64_t c = sd.offset / hw, r = sd.offset % hw;
        sd.pos = uint32_t((c - c0) * int64_t(ls.out_pitch) + r - int64_t(y0) * d.w);
      }
      break;
    }
  }
  return home;
}

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

namespace steps {

// The arena plan of one worker: every buffer gets an offset such that buffers
// in use at the same layer never overlap (first fit, the best of kOrders); each
// layer's ram_bytes is the top of what is in use while it runs.
void layout_worker(const QGraph& q, WorkerPlan& wp) {
  const std::vector<int> home = place_in_place(q, wp);
  const std::vector<streams::Chain> chains = streams::lay_out(q, wp, home);
  std::vector<Buf> bufs;
  for (LayerShare& ls : wp.layers) {
    if (!ls.active()) continue;
    const core::LayerDesc& d = q.desc(ls.node);
    for (size_t k = 0; k < ls.inputs.size(); ++k) {
      InputNeed& in = ls.inputs[k];
      const int64_t n = in.box.elems(d.in[k].w);
      in.box_at = 0;
      if (n > 0) bufs.push_back(Buf{core::arena_block(uint32_t(n)), in.avail_from, ls.node, &in.box_at});
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
    ls.ram_bytes = 0;
    for (const Buf& b : bufs)
      if (b.from <= ls.node && ls.node <= b.to) ls.ram_bytes = std::max(ls.ram_bytes, b.placed + b.bytes);
    if (ls.ram_bytes > 0 && (wp.peak_layer < 0 || ls.ram_bytes > wp.layers[size_t(wp.peak_layer)].ram_bytes))
      wp.peak_layer = ls.node;
  }
  wp.peak_ram_bytes = int64_t(core::kWorkerFixedArena) +
                      (wp.peak_layer >= 0 ? wp.layers[size_t(wp.peak_layer)].ram_bytes : 0);
}

}  // namespace steps

}  // namespace ts::plan
