// Exact input needs: the access patterns of core/op.h enumerated as runs
// (see needs.h). A sliding window keeps per-node state (scratch bitmaps, the
// receptive field of a whole output plane, which every worker whose run
// covers a whole channel shares); the other patterns are closed forms.
#include "plan/needs.h"

#include <algorithm>

#include "plan/plan.h"

namespace ts::plan {

using core::Access;
using core::InputRun;

namespace {

// Appends [off, off+n) to a sorted run list, merging with the last run when
// contiguous. Callers append in increasing offset order.
struct RunSink {
  std::vector<InputRun>* out;
  void add(int64_t off, int64_t n) {
    if (n <= 0) return;
    if (!out->empty()) {
      InputRun& b = out->back();
      if (int64_t(b.offset) + b.count == off) {
        b.count = uint32_t(b.count + n);
        return;
      }
    }
    out->push_back(InputRun{uint32_t(off), uint32_t(n)});
  }
};

// Half-open runs [first, second) of positions within one input plane.
using PlaneRuns = std::vector<std::pair<int32_t, int32_t>>;

// A sliding window over one plane: output (oy, ox) reads input
// (oy*sh - pt + ky*dh, ox*sw - pl + kx*dw) for taps inside the input. Conv,
// pools and Pad (a 1x1 window shifted by the padding) are all this.
struct Window {
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
  int32_t hin = 0, win = 0, hout = 0, wout = 0;
  int32_t cin_g = 1, cout_g = 1;  // channel grouping: out channel o reads the
                                  // cin_g inputs of group o / cout_g, from
  int32_t c_off = 0, c_step = 1;  // input channel c_off + (o / cout_g) * c_step
  // Access::kSpans (upsampling): output row oy reads input rows span(0, oy),
  // output column ox columns span(1, ox), in place of the taps above.
  const core::LayerDesc* d = nullptr;
  void (*span)(const core::LayerDesc&, int, int32_t, int32_t*, int32_t*) = nullptr;
};

Window window_of(const core::LayerDesc& d, const Access& a, int k) {
  Window g;
  g.hin = d.in[k].h;
  g.win = d.in[k].w;
  g.hout = d.out.h;
  g.wout = d.out.w;
  g.kh = a.kh; g.kw = a.kw; g.sh = a.sh; g.sw = a.sw; g.dh = a.dh; g.dw = a.dw;
  g.pt = a.pt; g.pl = a.pl;
  g.cin_g = a.cin_g;
  g.cout_g = a.cout_g;
  g.c_off = a.c_off;
  g.c_step = a.c_step ? a.c_step : a.cin_g;
  if (a.kind == Access::kSpans) {
    g.d = &d;
    g.span = a.span;
  }
  return g;
}

PlaneRuns union_runs(const PlaneRuns& a, const PlaneRuns& b) {
  PlaneRuns all;
  all.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all));
  PlaneRuns out;
  for (const auto& r : all) {
    if (!out.empty() && r.first <= out.back().second)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

// Per-node state for receptive-field computations: scratch buffers and the
// receptive field of a whole output plane, which every worker whose run
// covers a whole channel shares.
class WindowField {
 public:
  explicit WindowField(const Window& g) : g_(g) {}

  // Input-plane runs read by output positions [a, b) of one output plane.
  const PlaneRuns& interval(int32_t a, int32_t b) {
    if (a == 0 && b == g_.hout * g_.wout) {
      if (!have_full_) {
        full_ = compute(a, b);
        have_full_ = true;
      }
      return full_;
    }
    // A band of a depthwise layer asks the same interval of every channel.
    if (a != tmp_a_ || b != tmp_b_) {
      tmp_ = compute(a, b);
      tmp_a_ = a;
      tmp_b_ = b;
    }
    return tmp_;
  }

 private:
  // Columns read by output columns [xa, xb) of one row.
  const std::vector<uint8_t>& columns(int32_t xa, int32_t xb) {
    for (auto& c : colcache_)
      if (c.xa == xa && c.xb == xb) return c.mask;
    if (colcache_.size() >= 4) colcache_.erase(colcache_.begin());
    ColMask m{xa, xb, std::vector<uint8_t>(size_t(g_.win), 0)};
    for (int32_t ox = xa; ox < xb; ++ox) {
      if (g_.span) {
        int32_t lo, hi;
        g_.span(*g_.d, 1, ox, &lo, &hi);
        for (int32_t ix = lo; ix < hi; ++ix) m.mask[size_t(ix)] = 1;
        continue;
      }
      for (int32_t kx = 0; kx < g_.kw; ++kx) {
        const int32_t ix = ox * g_.sw - g_.pl + kx * g_.dw;
        if (ix >= 0 && ix < g_.win) m.mask[size_t(ix)] = 1;
      }
    }
    colcache_.push_back(std::move(m));
    return colcache_.back().mask;
  }

  PlaneRuns compute(int32_t a, int32_t b) {
    PlaneRuns runs;
    if (b <= a) return runs;
    const int32_t W = g_.wout;
    const int32_t y0 = a / W, y1 = (b - 1) / W;
    // Input rows any of these outputs can touch, clipped to the input.
    int32_t lo = std::max(0, y0 * g_.sh - g_.pt);
    int32_t hi = std::min(g_.hin, y1 * g_.sh - g_.pt + (g_.kh - 1) * g_.dh + 1);
    if (g_.span) {  // spans are non-decreasing in the output row
      int32_t a0, a1, b0, b1;
      g_.span(*g_.d, 0, y0, &a0, &a1);
      g_.span(*g_.d, 0, y1, &b0, &b1);
      lo = a0;
      hi = b1;
    }
    if (hi <= lo) return runs;
    bits_.assign(size_t(hi - lo) * size_t(g_.win), 0);
    for (int32_t oy = y0; oy <= y1; ++oy) {
      const int32_t xa = oy == y0 ? a % W : 0;
      const int32_t xb = oy == y1 ? (b - 1) % W + 1 : W;
      const std::vector<uint8_t>& m = columns(xa, xb);
      auto mark = [&](int32_t iy) {
        if (iy < lo || iy >= hi) return;
        uint8_t* row = bits_.data() + size_t(iy - lo) * size_t(g_.win);
        for (int32_t x = 0; x < g_.win; ++x) row[x] |= m[size_t(x)];
      };
      if (g_.span) {
        int32_t r0, r1;
        g_.span(*g_.d, 0, oy, &r0, &r1);
        for (int32_t iy = r0; iy < r1; ++iy) mark(iy);
        continue;
      }
      for (int32_t ky = 0; ky < g_.kh; ++ky) mark(oy * g_.sh - g_.pt + ky * g_.dh);
    }
    // Bitmap -> runs of plane positions (rows are contiguous in the plane).
    const int32_t n = (hi - lo) * g_.win;
    const int32_t base = lo * g_.win;
    int32_t i = 0;
    while (i < n) {
      while (i < n && !bits_[size_t(i)]) ++i;
      if (i >= n) break;
      int32_t j = i;
      while (j < n && bits_[size_t(j)]) ++j;
      runs.emplace_back(base + i, base + j);
      i = j;
    }
    return runs;
  }

  struct ColMask {
    int32_t xa, xb;
    std::vector<uint8_t> mask;
  };
  Window g_;
  bool have_full_ = false;
  PlaneRuns full_, tmp_;
  int32_t tmp_a_ = -1, tmp_b_ = -1;  // the interval tmp_ holds
  std::vector<uint8_t> bits_;
  std::vector<ColMask> colcache_;
};

namespace {

// Exact needs of a windowed op for outputs [begin, end).
void window_needs(const Window& g, WindowField& field, int64_t begin, int64_t end, std::vector<InputRun>* out) {
  RunSink sink{out};
  const int64_t hw_out = int64_t(g.hout) * g.wout;
  const int64_t hw_in = int64_t(g.hin) * g.win;
  const int64_t oc0 = begin / hw_out, oc1 = (end - 1) / hw_out;
  auto lo_of = [&](int64_t oc) { return int32_t(oc == oc0 ? begin % hw_out : 0); };
  auto hi_of = [&](int64_t oc) { return int32_t(oc == oc1 ? (end - 1) % hw_out + 1 : hw_out); };
  const int64_t g0 = oc0 / g.cout_g, g1 = oc1 / g.cout_g;
  for (int64_t grp = g0; grp <= g1; ++grp) {
    // Output channels of this group inside the run: only the run's first and
    // last channel can be partial, so the union of their positions is the
    // union of at most two intervals (or the whole plane).
    const int64_t ga = std::max(oc0, grp * g.cout_g);
    const int64_t gb = std::min(oc1, grp * g.cout_g + g.cout_g - 1);
    PlaneRuns plane;
    const PlaneRuns* pr;
    if (gb - ga >= 2 || (lo_of(ga) == 0 && hi_of(ga) == hw_out) || (lo_of(gb) == 0 && hi_of(gb) == hw_out)) {
      pr = &field.interval(0, int32_t(hw_out));
    } else if (ga == gb) {
      pr = &field.interval(lo_of(ga), hi_of(ga));
    } else {
      // Two partial channels: [lo(ga), hw) and [0, hi(gb)).
      const int32_t la = lo_of(ga), hb = hi_of(gb);
      if (hb >= la) {
        pr = &field.interval(0, int32_t(hw_out));
      } else {
        plane = field.interval(la, int32_t(hw_out));
        plane = union_runs(plane, field.interval(0, hb));
        pr = &plane;
      }
    }
    const int64_t ci0 = g.c_off + grp * g.c_step;
    if (pr->size() == 1 && (*pr)[0].first == 0 && (*pr)[0].second == hw_in) {
      sink.add(ci0 * hw_in, int64_t(g.cin_g) * hw_in);
      continue;
    }
    for (int64_t ci = ci0; ci < ci0 + g.cin_g; ++ci)
      for (const auto& r : *pr) sink.add(ci * hw_in + r.first, r.second - r.first);
  }
}

// Exact needs of a permutation of the axes (Transpose) for outputs
// [begin, end): each output element reads one input element. Each output row
// piece is one run of input elements (the columns' input axis is the last) or
// one element per output (it is not); sorted, the pieces merge into runs.
void permute_needs(const Access& a, const core::Dims& X, const core::Dims& Y, int64_t begin, int64_t end,
                   std::vector<InputRun>* out) {
  const int64_t stride[3] = {int64_t(X.h) * X.w, X.w, 1};
  const int64_t sc = stride[a.perm[0]], sy = stride[a.perm[1]], sx = stride[a.perm[2]];
  const int64_t W = Y.w, hw = int64_t(Y.h) * Y.w;
  std::vector<std::pair<int64_t, int64_t>> parts;  // (input offset, count)
  for (int64_t e = begin; e < end;) {
    const int64_t c = e / hw, y = (e % hw) / W, x0 = e % W;
    const int64_t x1 = std::min(W, x0 + (end - e));
    const int64_t base = c * sc + y * sy;
    if (sx == 1)
      parts.emplace_back(base + x0, x1 - x0);
    else
      for (int64_t x = x0; x < x1; ++x) parts.emplace_back(base + x * sx, 1);
    e += x1 - x0;
  }
  std::sort(parts.begin(), parts.end());
  RunSink sink{out};
  for (const auto& p : parts) sink.add(p.first, p.second);
}

}  // namespace

NodeNeeds::NodeNeeds(const QGraph& q, int node) : d_(q.desc(node)) {
  const core::OpDef* op = core::op_def(d_.op);
  for (int k = 0; k < d_.n_inputs; ++k) {
    access_.push_back(op->access(d_, k));
    const Access::Kind kind = access_.back().kind;
    field_.push_back(kind == Access::kWindow || kind == Access::kSpans
                         ? std::make_unique<WindowField>(window_of(d_, access_.back(), k))
                         : nullptr);
  }
}

NodeNeeds::~NodeNeeds() = default;

void NodeNeeds::operand(int k, int64_t begin, int64_t end, std::vector<InputRun>* out) {
  out->clear();
  if (end <= begin) return;
  RunSink sink{out};
  const core::Dims& X = d_.in[k];
  const int64_t hw_out = int64_t(d_.out.h) * d_.out.w;
  const int64_t hw_in = int64_t(X.h) * X.w;
  const Access& a = access_[size_t(k)];
  switch (a.kind) {
    case Access::kWindow:
    case Access::kSpans:
      window_needs(window_of(d_, a, k), *field_[size_t(k)], begin, end, out);
      return;
    case Access::kAll:
      sink.add(0, X.size());  // every output reads the whole input
      return;
    case Access::kPlanes:
      sink.add(begin * hw_in, (end - begin) * hw_in);  // whole channels
      return;
    case Access::kSame:
      sink.add(begin, end - begin);  // same position
      return;
    case Access::kPerChannel: {
      // One element per output channel touched.
      const int64_t oc0 = begin / hw_out, oc1 = (end - 1) / hw_out;
      sink.add(oc0, oc1 - oc0 + 1);
      return;
    }
    case Access::kChannelShuffle: {
      // Each output channel's positions, from its source channel; sorted by
      // source so the runs come out in increasing order.
      const int64_t oc0 = begin / hw_out, oc1 = (end - 1) / hw_out;
      std::vector<std::pair<int64_t, int64_t>> parts;  // (input offset, count)
      for (int64_t oc = oc0; oc <= oc1; ++oc) {
        const int64_t lo = oc == oc0 ? begin % hw_out : 0, hi = oc == oc1 ? (end - 1) % hw_out + 1 : hw_out;
        const int64_t src = core::shuffle_source(int32_t(oc), a.cout_g, X.c);
        parts.emplace_back(src * hw_in + lo, hi - lo);
      }
      std::sort(parts.begin(), parts.end());
      for (const auto& p : parts) sink.add(p.first, p.second);
      return;
    }
    case Access::kPermute:
      permute_needs(a, X, d_.out, begin, end, out);
      return;
    case Access::kChannelSlice: {
      const int64_t off = a.offset;
      const int64_t lo = std::max(begin, off * hw_out);
      const int64_t hi = std::min(end, (off + X.c) * hw_out);
      if (hi > lo) sink.add(lo - off * hw_out, hi - lo);
      return;
    }
  }
}

bool NodeNeeds::same_needs(int k, int64_t b0, int64_t e0, int64_t b1, int64_t e1) const {
  if (e0 <= b0 || e1 <= b1) return false;
  const Access& a = access_[size_t(k)];
  if (a.kind == Access::kAll) return true;
  if ((a.kind != Access::kWindow && a.kind != Access::kSpans) || k != 0) return false;
  const int64_t hw = int64_t(d_.out.h) * d_.out.w;
  const int64_t c0 = b0 / hw, c1 = b1 / hw;
  if ((e0 - 1) / hw != c0 || (e1 - 1) / hw != c1) return false;  // more than one channel
  return c0 / a.cout_g == c1 / a.cout_g && b0 - c0 * hw == b1 - c1 * hw && e0 - c0 * hw == e1 - c1 * hw;
}

std::vector<InputRun> exact_input_runs(const QGraph& q, int node, int input, int64_t begin, int64_t end) {
  if (node < 0 || node >= int(q.nodes.size())) throw Error("plan: node index out of range");
  const QNode& n = q.nodes[size_t(node)];
  if (input < 0 || input >= int(n.inputs.size())) throw Error("plan: input index out of range");
  if (begin < 0 || end > q.shape(n.output).size() || begin > end) throw Error("plan: run outside the layer");
  NodeNeeds needs(q, node);
  std::vector<InputRun> out;
  needs.operand(input, begin, end, &out);
  return out;
}

}  // namespace ts::plan
