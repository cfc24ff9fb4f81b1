#include "plan/plan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "core/crc32.h"
#include "core/partial.h"
#include "core/worker.h"
#include "model/bytes.h"
#include "plan/fragment_writer.h"

namespace ts::plan {

using core::InputRun;
using core::QOp;

int64_t LayerShare::bytes_in() const {
  int64_t s = 0;
  for (const auto& in : inputs) s += in.recv_elems;
  return s + psum.recv_bytes;
}

int64_t LayerShare::bytes_out() const {
  int64_t s = 0;
  for (const auto& sd : sends)
    if (sd.peer == core::kPeerCoordinator) s += sd.count;
  return s;
}

namespace {

// ----------------------------------------------------------------------------
// Exact receptive fields
// ----------------------------------------------------------------------------

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
                                  // cin_g inputs of group o / cout_g
};

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
    tmp_ = compute(a, b);
    return tmp_;
  }

 private:
  // Columns read by output columns [xa, xb) of one row.
  const std::vector<uint8_t>& columns(int32_t xa, int32_t xb) {
    for (auto& c : colcache_)
      if (c.xa == xa && c.xb == xb) return c.mask;
    if (colcache_.size() >= 4) colcache_.erase(colcache_.begin());
    ColMask m{xa, xb, std::vector<uint8_t>(size_t(g_.win), 0)};
    for (int32_t ox = xa; ox < xb; ++ox)
      for (int32_t kx = 0; kx < g_.kw; ++kx) {
        const int32_t ix = ox * g_.sw - g_.pl + kx * g_.dw;
        if (ix >= 0 && ix < g_.win) m.mask[size_t(ix)] = 1;
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
    const int32_t lo = std::max(0, y0 * g_.sh - g_.pt);
    const int32_t hi = std::min(g_.hin, y1 * g_.sh - g_.pt + (g_.kh - 1) * g_.dh + 1);
    if (hi <= lo) return runs;
    bits_.assign(size_t(hi - lo) * size_t(g_.win), 0);
    for (int32_t oy = y0; oy <= y1; ++oy) {
      const int32_t xa = oy == y0 ? a % W : 0;
      const int32_t xb = oy == y1 ? (b - 1) % W + 1 : W;
      const std::vector<uint8_t>& m = columns(xa, xb);
      for (int32_t ky = 0; ky < g_.kh; ++ky) {
        const int32_t iy = oy * g_.sh - g_.pt + ky * g_.dh;
        if (iy < lo || iy >= hi) continue;
        uint8_t* row = bits_.data() + size_t(iy - lo) * size_t(g_.win);
        for (int32_t x = 0; x < g_.win; ++x) row[x] |= m[size_t(x)];
      }
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
  std::vector<uint8_t> bits_;
  std::vector<ColMask> colcache_;
};

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
    const int64_t ci0 = grp * g.cin_g;
    if (pr->size() == 1 && (*pr)[0].first == 0 && (*pr)[0].second == hw_in) {
      sink.add(ci0 * hw_in, int64_t(g.cin_g) * hw_in);
      continue;
    }
    for (int64_t ci = ci0; ci < ci0 + g.cin_g; ++ci)
      for (const auto& r : *pr) sink.add(ci * hw_in + r.first, r.second - r.first);
  }
}

Window window_of(const core::LayerDesc& d) {
  Window g;
  g.hin = d.in[0].h;
  g.win = d.in[0].w;
  g.hout = d.out.h;
  g.wout = d.out.w;
  switch (d.op) {
    case QOp::Conv:
      g.kh = d.kh; g.kw = d.kw; g.sh = d.sh; g.sw = d.sw; g.dh = d.dh; g.dw = d.dw;
      g.pt = d.pad_t; g.pl = d.pad_l;
      g.cin_g = d.in[0].c / d.groups;
      g.cout_g = d.out.c / d.groups;
      break;
    case QOp::AvgPool:
    case QOp::MaxPool:
      g.kh = d.kh; g.kw = d.kw; g.sh = d.sh; g.sw = d.sw;
      g.pt = d.pad_t; g.pl = d.pad_l;
      break;
    case QOp::Pad:
      g.pt = d.pad_t; g.pl = d.pad_l;
      break;
    default: break;
  }
  return g;
}

bool is_windowed(QOp op) { return op == QOp::Conv || op == QOp::AvgPool || op == QOp::MaxPool || op == QOp::Pad; }

// All receptive-field state of one node, shared by its workers.
class NodeNeeds {
 public:
  NodeNeeds(const QGraph& q, int node) : d_(q.desc(node)) {
    if (is_windowed(d_.op)) {
      win_ = window_of(d_);
      field_ = std::make_unique<WindowField>(win_);
    }
  }

  void operand(int k, int64_t begin, int64_t end, std::vector<InputRun>* out) {
    out->clear();
    if (end <= begin) return;
    RunSink sink{out};
    const core::Dims& X = d_.in[k];
    const int64_t hw_out = int64_t(d_.out.h) * d_.out.w;
    const int64_t hw_in = int64_t(X.h) * X.w;
    switch (d_.op) {
      case QOp::Conv:
      case QOp::AvgPool:
      case QOp::MaxPool:
      case QOp::Pad:
        window_needs(win_, *field_, begin, end, out);
        return;
      case QOp::Gemm:
        sink.add(0, X.size());  // every output reads the whole input
        return;
      case QOp::GlobalAvgPool:
        sink.add(begin * hw_in, (end - begin) * hw_in);  // whole channels
        return;
      case QOp::Add:
      case QOp::Lut:
        sink.add(begin, end - begin);  // same position
        return;
      case QOp::Mul:
        if (k == 1 && X.h == 1 && X.w == 1 && hw_out != 1) {
          // Per-channel operand: one element per output channel touched.
          const int64_t oc0 = begin / hw_out, oc1 = (end - 1) / hw_out;
          sink.add(oc0, oc1 - oc0 + 1);
        } else {
          sink.add(begin, end - begin);
        }
        return;
      case QOp::Concat: {
        int64_t off = 0;
        for (int i = 0; i < k; ++i) off += d_.in[i].c;
        const int64_t lo = std::max(begin, off * hw_out);
        const int64_t hi = std::min(end, (off + X.c) * hw_out);
        if (hi > lo) sink.add(lo - off * hw_out, hi - lo);
        return;
      }
    }
  }

  // True when outputs [b1, e1) need exactly the input runs of operand k that
  // outputs [b0, e0) need, known without computing them: a windowed op's
  // outputs inside one channel each, in the same group and at the same
  // positions of the plane (the output channels of a 1x1 convolution all
  // read the same rows of every input channel), or any two ranges of a Gemm.
  bool same_needs(int k, int64_t b0, int64_t e0, int64_t b1, int64_t e1) const {
    if (e0 <= b0 || e1 <= b1) return false;
    if (d_.op == QOp::Gemm) return true;
    if (!is_windowed(d_.op) || k != 0) return false;
    const int64_t hw = int64_t(d_.out.h) * d_.out.w;
    const int64_t c0 = b0 / hw, c1 = b1 / hw;
    if ((e0 - 1) / hw != c0 || (e1 - 1) / hw != c1) return false;  // more than one channel
    return c0 / win_.cout_g == c1 / win_.cout_g && b0 - c0 * hw == b1 - c1 * hw && e0 - c0 * hw == e1 - c1 * hw;
  }

  const core::LayerDesc& desc() const { return d_; }

 private:
  core::LayerDesc d_;
  Window win_;
  std::unique_ptr<WindowField> field_;
};

// ----------------------------------------------------------------------------
// Sweeps over needs: layer statistics and the routing map (alg. 3)
// ----------------------------------------------------------------------------

struct ProducerRun {
  int64_t begin, end;
  int worker;  // -1: coordinator
};

std::vector<ProducerRun> producer_runs(const QGraph& q, const Plan& p, int tensor) {
  std::vector<ProducerRun> out;
  const int64_t size = q.shape(tensor).size();
  const int prod = q.tensors[size_t(tensor)].producer;
  if (prod < 0) {
    out.push_back({0, size, -1});
    return out;
  }
  const core::Dims d = q.desc(prod).out;
  for (int w = 0; w < p.n_workers(); ++w)
    for (const core::Region& r : p.workers[size_t(w)].layers[size_t(prod)].regions)
      r.segments(d, [&](int32_t b, int32_t e) {
        out.push_back({b, e, w});
        return true;
      });
  std::sort(out.begin(), out.end(), [](const ProducerRun& a, const ProducerRun& b) { return a.begin < b.begin; });
  // Merge neighbours of the same producer.
  std::vector<ProducerRun> merged;
  for (const ProducerRun& r : out) {
    if (!merged.empty() && merged.back().worker == r.worker && merged.back().end == r.begin) merged.back().end = r.end;
    else merged.push_back(r);
  }
  return merged;
}

struct SweepResult {
  int64_t unique = 0;
  int max_fanout = 0;
};

// Distinct elements of operand k of node n needed by anyone, and the most
// workers any one element goes to: a difference array over the tensor.
SweepResult count_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<int32_t>& diff) {
  const int tensor = q.nodes[size_t(n)].inputs[size_t(k)];
  const int64_t size = q.shape(tensor).size();
  diff.assign(size_t(size) + 1, 0);
  for (const WorkerPlan& wp : p.workers) {
    const LayerShare& ls = wp.layers[size_t(n)];
    if (ls.inputs.empty()) continue;
    for (const InputRun& r : ls.inputs[size_t(k)].runs) {
      diff[r.offset]++;
      diff[size_t(r.offset) + r.count]--;
    }
  }
  SweepResult res;
  int32_t active = 0;
  for (int64_t i = 0; i < size; ++i) {
    active += diff[size_t(i)];
    if (active > 0) ++res.unique;
    res.max_fanout = std::max(res.max_fanout, int(active));
  }
  return res;
}

// Alg. 3 for operand k of node n: sweeps the workers' needs over the tensor
// and emits every maximal segment with one producer and one destination set.
void route_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<RouteRun>* routes) {
  struct Event {
    uint32_t worker;
    int32_t delta;
  };
  const int tensor = q.nodes[size_t(n)].inputs[size_t(k)];
  const int64_t size = q.shape(tensor).size();
  // Counting sort of run boundaries by position (positions are < size + 1);
  // inserting workers in order keeps each position's events in worker order.
  std::vector<uint32_t> first(size_t(size) + 2, 0);
  size_t n_ev = 0;
  for (const WorkerPlan& wp : p.workers) {
    const LayerShare& ls = wp.layers[size_t(n)];
    if (ls.inputs.empty()) continue;
    for (const InputRun& r : ls.inputs[size_t(k)].runs) {
      first[size_t(r.offset) + 1]++;
      first[size_t(r.offset) + r.count + 1]++;
      n_ev += 2;
    }
  }
  for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
  std::vector<Event> ev(n_ev);
  {
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (int w = 0; w < p.n_workers(); ++w) {
      const LayerShare& ls = p.workers[size_t(w)].layers[size_t(n)];
      if (ls.inputs.empty()) continue;
      for (const InputRun& r : ls.inputs[size_t(k)].runs) {
        ev[fill[r.offset]++] = Event{uint32_t(w), +1};
        ev[fill[size_t(r.offset) + r.count]++] = Event{uint32_t(w), -1};
      }
    }
  }
  const std::vector<ProducerRun> prod = producer_runs(q, p, tensor);
  std::vector<int> active;
  size_t pi = 0;
  const size_t first_route = routes->size();
  int64_t x = 0;
  while (x < size) {
    for (uint32_t e = first[size_t(x)]; e < first[size_t(x) + 1]; ++e) {
      const int w = int(ev[e].worker);
      auto it = std::lower_bound(active.begin(), active.end(), w);
      if (ev[e].delta > 0)
        active.insert(it, w);
      else if (it != active.end() && *it == w)
        active.erase(it);
    }
    while (pi + 1 < prod.size() && prod[pi].end <= x) ++pi;
    // Next position where something changes: an event or a producer edge.
    int64_t next = size;
    if (pi < prod.size() && prod[pi].end > x) next = std::min(next, prod[pi].end);
    for (int64_t y = x + 1; y < next; ++y)
      if (first[size_t(y) + 1] > first[size_t(y)]) {
        next = y;
        break;
      }
    const int producer = pi < prod.size() ? prod[pi].worker : -1;
    RouteRun* last = routes->size() > first_route ? &routes->back() : nullptr;
    if (last && last->producer == producer && last->dests == active && last->offset + last->count == x)
      last->count += next - x;
    else
      routes->push_back(RouteRun{tensor, n, k, x, next - x, producer, active});
    x = next;
  }
}

// ----------------------------------------------------------------------------
// Plan assembly
// ----------------------------------------------------------------------------

uint32_t hash_plan(uint32_t model_crc, const std::vector<double>& shares, const std::string& strategy,
                   Route route) {
  ByteWriter b;
  b.u32(model_crc);
  // The route joins the strategy name only when it is not the paper's, so a
  // relay plan keeps the identity it always had.
  const std::string name = route == Route::Relay ? strategy : strategy + "/" + route_name(route);
  b.str(name);
  b.u32(uint32_t(shares.size()));
  for (double s : shares) {
    uint64_t v;
    std::memcpy(&v, &s, 8);
    b.u64(v);
  }
  return crc32(b.buf.data(), b.buf.size());
}

// CRC-32 of the model's .tsqm serialisation. That format ends with the CRC
// of everything before it, so the trailer is the hash (a CRC taken over the
// whole file including its own CRC would be the same constant for every
// model).
uint32_t model_crc(const QGraph& q) {
  const std::vector<uint8_t> bytes = serialize_qgraph(q);
  return crc32(bytes.data(), bytes.size() - 4);
}

// Which worker computes each element of a node's output, where it sits in
// that worker's output buffer, and where its region segment ends.
struct Owners {
  std::vector<int32_t> worker;
  std::vector<int64_t> pos;
  std::vector<int64_t> seg_end;
};

Owners owners_of(const QGraph& q, const Plan& p, int node) {
  Owners o;
  const core::Dims d = q.desc(node).out;
  const size_t n = size_t(d.size());
  o.worker.assign(n, -1);
  o.pos.assign(n, 0);
  o.seg_end.assign(n, 0);
  for (int w = 0; w < p.n_workers(); ++w) {
    int64_t at = 0;
    for (const core::Region& r : p.workers[size_t(w)].layers[size_t(node)].regions)
      r.segments(d, [&](int32_t b, int32_t e) {
        for (int32_t i = b; i < e; ++i) {
          o.worker[size_t(i)] = w;
          o.pos[size_t(i)] = at + (i - b);
          o.seg_end[size_t(i)] = e;
        }
        at += e - b;
        return true;
      });
  }
  return o;
}

void add_run(std::vector<InputRun>* v, int64_t off, int64_t n, bool merge) {
  if (merge && !v->empty() && int64_t(v->back().offset) + v->back().count == off) {
    v->back().count = uint32_t(v->back().count + n);
    return;
  }
  v->push_back(InputRun{uint32_t(off), uint32_t(n)});
}

// Every output segment of a share goes to the coordinator (relay, and the
// graph's output in direct mode).
void send_all_to_coordinator(const core::Dims& d, LayerShare& ls) {
  uint32_t pos = 0;
  for (const core::Region& r : ls.regions)
    r.segments(d, [&](int32_t b, int32_t e) {
      core::Send s;
      s.peer = core::kPeerCoordinator;
      s.layer = uint16_t(ls.node);
      s.offset = uint32_t(b);
      s.count = uint32_t(e - b);
      s.pos = pos;
      ls.sends.push_back(s);
      pos += uint32_t(e - b);
      return true;
    });
}

// Partial sums of reduced layers (direct route): every worker with input
// channels sends each other owner the sums of that owner's output block,
// straight to it, in one send (the worker cuts it into frames).
void route_partials(const QGraph& q, Plan& p) {
  const size_t N = size_t(p.n_workers());
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    if (p.layer_strategy[n] != "reduce") continue;
    const core::LayerDesc& d = q.desc(int(n));
    const int64_t P = core::partial_positions(d);
    for (size_t w = 0; w < N; ++w) {
      p.workers[w].layers[n].psum.sends.clear();
      p.workers[w].layers[n].psum.recv_bytes = 0;
    }
    for (size_t r = 0; r < N; ++r) {
      LayerShare& owner = p.workers[r].layers[n];
      if (!owner.active()) continue;
      const int64_t o0 = owner.regions[0].v[0] / P, o1 = owner.regions[0].v[1] / P;
      for (size_t w = 0; w < N; ++w) {
        LayerShare& from = p.workers[w].layers[n];
        if (w == r || !from.active() || from.psum.ci1 <= from.psum.ci0) continue;
        core::Send s;
        s.peer = uint16_t(r);
        s.layer = uint16_t(n);
        s.operand = uint8_t(core::kPsumOperand);
        s.offset = 0;
        s.count = uint32_t((o1 - o0) * P * 4);
        s.pos = uint32_t(o0 * P * 4);
        from.psum.sends.push_back(s);
        owner.psum.recv_bytes += s.count;
      }
    }
  }
}

// The route pass: where every input comes from and where every output goes.
void route_plan(const QGraph& q, Plan& p, Route route) {
  const size_t N = size_t(p.n_workers());
  for (size_t w = 0; w < N; ++w)
    for (LayerShare& ls : p.workers[w].layers) {
      ls.sends.clear();
      ls.run_trigger = route == Route::Relay && ls.active();
      ls.out_until = ls.node;
      for (InputNeed& in : ls.inputs) {
        in.recv.clear();
        in.coord_runs.clear();
        in.local.clear();
        in.local_layer = -1;
        in.recv_elems = 0;
        in.avail_from = ls.node;
      }
    }
  if (route == Route::Relay) {
    for (size_t w = 0; w < N; ++w)
      for (LayerShare& ls : p.workers[w].layers) {
        if (!ls.active()) continue;
        for (InputNeed& in : ls.inputs) {
          in.recv = in.runs;
          in.coord_runs = in.runs;
          in.recv_elems = in.elems;
        }
        send_all_to_coordinator(q.desc(ls.node).out, ls);
      }
    return;
  }
  // Direct: split every needed run by who computes it.
  int cached = -1;
  Owners own;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int prod = q.tensors[size_t(node.inputs[k])].producer;
      if (prod >= 0 && prod != cached) {
        own = owners_of(q, p, prod);
        cached = prod;
      }
      for (size_t w = 0; w < N; ++w) {
        LayerShare& ls = p.workers[w].layers[n];
        if (!ls.active()) continue;
        InputNeed& in = ls.inputs[k];
        for (const InputRun& r : in.runs) {
          if (prod < 0) {
            add_run(&in.recv, r.offset, r.count, true);
            add_run(&in.coord_runs, r.offset, r.count, true);
            in.recv_elems += r.count;
            continue;
          }
          int64_t i = r.offset;
          const int64_t end = int64_t(r.offset) + r.count;
          while (i < end) {
            const int32_t from = own.worker[size_t(i)];
            const int64_t stop = std::min(end, own.seg_end[size_t(i)]);
            if (from < 0) throw Error("plan: an input of layer '" + node.name + "' is computed by no worker");
            if (size_t(from) == w) {
              add_run(&in.local, i, stop - i, false);
              in.local_layer = prod;
              LayerShare& src = p.workers[w].layers[size_t(prod)];
              src.out_until = std::max(src.out_until, int(n));
            } else {
              add_run(&in.recv, i, stop - i, true);
              in.recv_elems += stop - i;
              in.avail_from = prod;
              core::Send s;
              s.peer = uint16_t(w);
              s.layer = uint16_t(n);
              s.operand = uint8_t(k);
              s.offset = uint32_t(i);
              s.count = uint32_t(stop - i);
              s.pos = uint32_t(own.pos[size_t(i)]);
              p.workers[size_t(from)].layers[size_t(prod)].sends.push_back(s);
            }
            i = stop;
          }
        }
      }
    }
  }
  // Within each group of sends to one peer, layer and operand (the worker
  // gathers a group into INPUTS frames, core/worker.cpp), equal lengths go
  // together in offset order: a halo of a band of plane positions is a
  // partial row, whole rows and a partial row in every channel, and sorted
  // this way each kind becomes one strided block per frame instead of one
  // 12-byte block header per channel and row piece. The receiver places
  // blocks by offset, so the order within a group is free.
  for (size_t w = 0; w < N; ++w)
    for (LayerShare& ls : p.workers[w].layers) {
      std::vector<core::Send>& v = ls.sends;
      size_t i = 0;
      while (i < v.size()) {
        size_t j = i + 1;
        while (j < v.size() && v[j].peer == v[i].peer && v[j].layer == v[i].layer && v[j].operand == v[i].operand) ++j;
        std::stable_sort(v.begin() + long(i), v.begin() + long(j), [](const core::Send& a, const core::Send& b) {
          return a.count != b.count ? a.count < b.count : a.offset < b.offset;
        });
        i = j;
      }
    }
  // The graph's output goes to the coordinator.
  const int last = q.tensors[size_t(q.output)].producer;
  if (last >= 0)
    for (size_t w = 0; w < N; ++w) {
      LayerShare& ls = p.workers[w].layers[size_t(last)];
      if (ls.active()) {
        std::vector<core::Send> keep = std::move(ls.sends);
        ls.sends.clear();
        send_all_to_coordinator(q.desc(last).out, ls);
        ls.sends.insert(ls.sends.end(), keep.begin(), keep.end());
      }
    }
  route_partials(q, p);
}

// The share's one region as channels [c0, c1) x rows [y0, y1) of full
// width, if it is one (core::FragLayer::whole_rows, on the plan's side).
bool whole_rows(const core::Dims& d, const LayerShare& ls, int32_t* c0, int32_t* c1, int32_t* y0, int32_t* y1) {
  if (ls.regions.size() != 1) return false;
  const core::Region& g = ls.regions[0];
  const int64_t hw = int64_t(d.h) * d.w;
  if (g.kind == core::RegionKind::Box) {
    if (g.v[4] != 0 || g.v[5] != d.w) return false;
    *c0 = g.v[0]; *c1 = g.v[1]; *y0 = g.v[2]; *y1 = g.v[3];
    return true;
  }
  if (hw <= 0 || g.v[0] % hw || g.v[1] % hw) return false;
  *c0 = int32_t(g.v[0] / hw); *c1 = int32_t(g.v[1] / hw); *y0 = 0; *y1 = d.h;
  return true;
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
    if (!ls.active() || ls.out_until <= ls.node || ls.psum.on) continue;  // partial: dense output
    const core::Dims d = q.desc(ls.node).out;
    int32_t c0, c1, y0, y1;
    if (!whole_rows(d, ls, &c0, &c1, &y0, &y1)) continue;
    LayerShare& last = wp.layers[size_t(ls.out_until)];
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

// The arena plan of one worker: every buffer gets an offset such that buffers
// in use at the same layer never overlap (first fit, in layer order); each
// layer's ram_bytes is the top of what is in use while it runs.
void layout_worker(const QGraph& q, WorkerPlan& wp) {
  struct Buf {
    int64_t bytes;
    int from, to;
    uint32_t* at;
    int64_t placed = -1;
  };
  const std::vector<int> home = place_in_place(q, wp);
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
  // First fit in two orders, keeping the one with the lower peak: by first
  // use (layer order), and by size, largest first (a big window placed
  // first leaves no hole under it that a later, larger buffer cannot use).
  auto place = [&](std::vector<Buf>& v) {
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
  };
  std::vector<Buf> by_size = bufs;
  std::stable_sort(bufs.begin(), bufs.end(), [](const Buf& a, const Buf& b) { return a.from < b.from; });
  std::stable_sort(by_size.begin(), by_size.end(), [](const Buf& a, const Buf& b) { return a.bytes > b.bytes; });
  if (place(by_size) < place(bufs)) bufs = std::move(by_size);
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

Plan build_plan(const QGraph& q, const Testbed& t, const std::vector<double>& shares, const SplitStrategy& strategy,
                bool routing, uint32_t mcrc, Route route) {
  const size_t N = shares.size();
  if (N == 0) throw Error("plan: no workers");
  if (t.boards.size() != N)
    throw Error("plan: " + std::to_string(N) + " shares for " + std::to_string(t.boards.size()) + " boards");
  if (N > 65535) throw Error("plan: at most 65535 workers (got " + std::to_string(N) + ")");
  if (q.nodes.size() > 0xFFFF) throw Error("plan: the model has more layers than the fragment format can number");
  Plan p;
  p.strategy = strategy.name();
  p.layer_strategy.resize(q.nodes.size());
  for (size_t n = 0; n < q.nodes.size(); ++n) p.layer_strategy[n] = strategy.layer_name(q, int(n));
  p.route = route;
  p.model_bytes = q.weight_bytes();
  p.ratings = shares;
  p.shares = shares;
  p.workers.resize(N);
  for (size_t w = 0; w < N; ++w) {
    p.workers[w].board = t.boards[w].id;
    p.workers[w].rating = shares[w];
    p.workers[w].share = shares[w];
    p.workers[w].layers.resize(q.nodes.size());
  }
  p.layers.resize(q.nodes.size());

  // 1. Shares and their needs.
  std::vector<uint8_t> cover;
  for (size_t n = 0; n < q.nodes.size(); ++n)
    if (p.layer_strategy[n] == "reduce") {
      if (!ReduceStrategy::reducible(q, int(n)))
        throw Error("plan: layer '" + q.nodes[n].name + "' cannot be split by input channels (a Conv 1x1 or a Gemm can)");
      if (route != Route::Direct)
        throw Error("plan: strategy 'reduce' (partial sums reduced board to board) needs --route direct; the relay route has no path for partial sums");
    }
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    const int64_t total = q.shape(node.output).size();
    if (total > int64_t(std::numeric_limits<int32_t>::max()))
      throw Error("plan: layer '" + node.name + "' has more than 2^31 outputs");
    const std::vector<std::vector<core::Region>> regions = strategy.split_regions(q, int(n), shares);
    if (regions.size() != N) throw Error("plan: strategy '" + strategy.name() + "' returned the wrong number of shares");
    NodeNeeds needs(q, int(n));
    const core::LayerDesc& d = needs.desc();
    const int64_t hw = int64_t(d.out.h) * d.out.w;
    // The regions must tile the layer: every output exactly once.
    cover.assign(size_t(total), 0);
    int64_t covered = 0;
    for (const auto& rs : regions)
      for (const core::Region& r : rs) {
        if (!r.valid(d.out)) throw Error("plan: strategy '" + strategy.name() + "' gave a region outside layer '" + node.name + "'");
        r.segments(d.out, [&](int32_t b, int32_t e) {
          for (int32_t i = b; i < e; ++i) {
            if (cover[size_t(i)]++) throw Error("plan: strategy '" + strategy.name() + "' regions overlap in layer '" + node.name + "'");
          }
          covered += e - b;
          return true;
        });
      }
    if (covered != total) throw Error("plan: strategy '" + strategy.name() + "' regions do not cover layer '" + node.name + "'");

    for (size_t w = 0; w < N; ++w) {
      LayerShare& ls = p.workers[w].layers[n];
      ls.node = int(n);
      ls.regions = regions[w];
      ls.out_elems = 0;
      for (const core::Region& r : ls.regions) ls.out_elems += r.elems();
      ls.run = ls.regions.size() == 1 && ls.regions[0].kind == core::RegionKind::Run
                   ? Run{ls.regions[0].v[0], ls.regions[0].v[1]}
                   : Run{};
      if (!ls.active()) continue;
      int64_t ch0 = std::numeric_limits<int64_t>::max(), ch1 = -1;
      for (const core::Region& r : ls.regions) {
        if (r.kind == core::RegionKind::Box) {
          ch0 = std::min<int64_t>(ch0, r.v[0]);
          ch1 = std::max<int64_t>(ch1, r.v[1] - 1);
        } else {
          ch0 = std::min<int64_t>(ch0, r.v[0] / hw);
          ch1 = std::max<int64_t>(ch1, (r.v[1] - 1) / hw);
        }
      }
      if (node.op == QOp::Conv || node.op == QOp::Gemm) {
        ls.oc_base = int32_t(ch0);
        ls.oc_count = int32_t(ch1 - ch0 + 1);
      }
      ls.data_bytes = int64_t(ls.oc_count) * node.bytes_per_channel() + node.shared_bytes();
      ls.macs = 0;
      for (const core::Region& r : ls.regions)
        r.segments(d.out, [&](int32_t b, int32_t e) {
          ls.macs += int64_t(core::range_macs(d, b, e));
          return true;
        });
      ls.inputs.resize(node.inputs.size());
      if (p.layer_strategy[n] == "reduce") {
        // Input channels [ci0, ci1), whole planes; weights of those channels
        // for every output channel, requantisation data of the own block.
        const auto blocks = ReduceStrategy::input_blocks(q, int(n), shares);
        PartialShare& ps = ls.psum;
        ps.on = true;
        ps.ci0 = blocks[w].first;
        ps.ci1 = blocks[w].second;
        const int64_t kper = core::partial_k_per_channel(d);
        const int64_t hw_in = int64_t(d.in[0].h) * d.in[0].w;
        ls.data_bytes = int64_t(d.out.c) * (ps.ci1 - ps.ci0) * kper +
                        int64_t(ls.oc_count) * 4 * ((node.bias.empty() ? 0 : 1) + 2);
        ls.macs = int64_t(d.out.c) * core::partial_positions(d) * (ps.ci1 - ps.ci0) * kper;
        InputNeed& in = ls.inputs[0];
        in.tensor = node.inputs[0];
        in.runs.clear();
        in.box = core::Box{};
        if (ps.ci1 > ps.ci0) {
          in.runs.push_back(InputRun{uint32_t(ps.ci0 * hw_in), uint32_t((ps.ci1 - ps.ci0) * hw_in)});
          in.box = core::Box{ps.ci0, ps.ci1, 0, d.in[0].h};
        }
        in.elems = (ps.ci1 - ps.ci0) * hw_in;
        continue;
      }
      std::vector<InputRun> tmp;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        InputNeed& in = ls.inputs[k];
        in.tensor = node.inputs[k];
        in.runs.clear();
        in.box = core::Box{};
        // Segments of a box often need exactly the runs the segment before
        // them needed (a 1x1 convolution's output channels all read the same
        // rows of every input channel): adding them again would only give the
        // sort below duplicates to merge (up to 409,600 runs per layer at 112,
        // most of the planning time). [pb, pe) is the last segment whose runs
        // were added.
        int64_t pb = 0, pe = 0;
        for (const core::Region& r : ls.regions)
          r.segments(d.out, [&](int32_t b, int32_t e) {
            if (!needs.same_needs(int(k), pb, pe, b, e)) {
              needs.operand(int(k), b, e, &tmp);
              in.runs.insert(in.runs.end(), tmp.begin(), tmp.end());
              pb = b;
              pe = e;
            }
            const core::Box s = core::input_box(d, int(k), b, e);
            if (!s.empty()) {
              if (in.box.empty()) {
                in.box = s;
              } else {
                in.box.c0 = std::min(in.box.c0, s.c0);
                in.box.c1 = std::max(in.box.c1, s.c1);
                in.box.h0 = std::min(in.box.h0, s.h0);
                in.box.h1 = std::max(in.box.h1, s.h1);
              }
            }
            return true;
          });
        if (ls.regions.size() > 1 || ls.regions[0].kind == core::RegionKind::Box) {
          // Several segments: sort and merge their runs.
          std::sort(in.runs.begin(), in.runs.end(), [](const InputRun& a, const InputRun& b) { return a.offset < b.offset; });
          std::vector<InputRun> merged;
          for (const InputRun& r : in.runs) {
            if (!merged.empty() && int64_t(merged.back().offset) + merged.back().count >= r.offset) {
              const int64_t e = std::max<int64_t>(int64_t(merged.back().offset) + merged.back().count, int64_t(r.offset) + r.count);
              merged.back().count = uint32_t(e - merged.back().offset);
            } else {
              merged.push_back(r);
            }
          }
          in.runs = std::move(merged);
        }
        in.elems = 0;
        for (const InputRun& r : in.runs) in.elems += r.count;
      }
    }
  }

  // 2-3. Routes and the arena plan.
  route_plan(q, p, route);
  for (size_t w = 0; w < N; ++w) layout_worker(q, p.workers[w]);

  // 4. Statistics.
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const core::LayerDesc& d = q.desc(int(n));
    LayerStats& st = p.layers[n];
    st.node = int(n);
    st.name = q.nodes[n].name;
    for (size_t w = 0; w < N; ++w) {
      const LayerShare& ls = p.workers[w].layers[n];
      if (!ls.active()) continue;
      bool full = false;
      for (size_t k = 0; k < ls.inputs.size(); ++k)
        if (ls.inputs[k].elems == d.in[k].size()) full = true;
      st.workers_active++;
      st.full_input_workers += full ? 1 : 0;
      st.bytes_in += ls.bytes_in();
      st.bytes_out += ls.bytes_out();
      st.max_worker_ram_bytes = std::max(st.max_worker_ram_bytes, ls.ram_bytes);
      st.max_worker_bytes_moved = std::max(st.max_worker_bytes_moved, ls.bytes_in() + ls.bytes_out());
      WorkerPlan& wp = p.workers[w];
      wp.macs += ls.macs;
      wp.bytes_in += ls.bytes_in();
      wp.bytes_out += ls.bytes_out();
      wp.data_bytes += ls.data_bytes;
    }
    st.bytes_moved = st.bytes_in + st.bytes_out;
    p.total_wire_bytes += st.bytes_moved;
  }
  for (size_t w = 0; w < N; ++w) {
    WorkerPlan& wp = p.workers[w];
    if (route == Route::Direct) {
      // What the board moves (received + sent to anyone) per byte it computes.
      int64_t produced = 0, sent = 0;
      for (const LayerShare& ls : wp.layers) {
        produced += ls.out_elems;
        for (const core::Send& sd : ls.sends) sent += sd.count;
        for (const core::Send& sd : ls.psum.sends) sent += sd.count;
      }
      wp.kc = produced > 0 ? double(wp.bytes_in + sent) / double(produced) : 0.0;
      continue;
    }
    wp.kc = wp.bytes_out > 0 ? double(wp.bytes_in + wp.bytes_out) / double(wp.bytes_out) : 0.0;
  }
  for (size_t w = 0; w < N; ++w) p.workers[w].flash_bytes = fragment_bytes(q, p, int(w));

  // Distinct inputs and fan-out per layer; the routing map if asked.
  std::vector<int32_t> diff;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) {
      const SweepResult r = count_operand(q, p, int(n), int(k), diff);
      p.layers[n].unique_in += r.unique;
      p.layers[n].max_fanout = std::max(p.layers[n].max_fanout, r.max_fanout);
    }
  }
  if (routing) p.routes = build_routing(q, p);
  p.plan_id = hash_plan(mcrc, shares, strategy.signature(), route);
  return p;
}

}  // namespace

std::vector<core::InputRun> exact_input_runs(const QGraph& q, int node, int input, int64_t begin, int64_t end) {
  if (node < 0 || node >= int(q.nodes.size())) throw Error("plan: node index out of range");
  const QNode& n = q.nodes[size_t(node)];
  if (input < 0 || input >= int(n.inputs.size())) throw Error("plan: input index out of range");
  if (begin < 0 || end > q.shape(n.output).size() || begin > end) throw Error("plan: run outside the layer");
  NodeNeeds needs(q, node);
  std::vector<InputRun> out;
  needs.operand(input, begin, end, &out);
  return out;
}

std::vector<RouteRun> build_routing(const QGraph& q, const Plan& p) {
  std::vector<RouteRun> routes;
  for (size_t n = 0; n < q.nodes.size(); ++n)
    for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) route_operand(q, p, int(n), int(k), &routes);
  for (const ProducerRun& r : producer_runs(q, p, q.output))
    routes.push_back(RouteRun{q.output, -1, 0, r.begin, r.end - r.begin, r.worker, {}});
  return routes;
}

uint32_t plan_hash(const QGraph& q, const std::vector<double>& shares, const std::string& strategy, Route route) {
  return hash_plan(model_crc(q), shares, strategy, route);
}

int64_t fragment_overhead_bytes(const QGraph& q) {
  return int64_t(kFragHeaderBytes) + int64_t(q.nodes.size()) * kFragLayerBytes + 4;
}

Plan plan_with_shares(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, bool routing, Route route) {
  return build_plan(q, t, shares, strategy, routing, model_crc(q), route);
}

void check_budgets(const QGraph& q, const Plan& p, const Testbed& t) {
  for (int w = 0; w < p.n_workers(); ++w) {
    const WorkerPlan& wp = p.workers[size_t(w)];
    const Board& b = t.boards.at(size_t(w));
    if (wp.peak_ram_bytes > b.ram_bytes) {
      const std::string layer = wp.peak_layer >= 0 ? q.nodes[size_t(wp.peak_layer)].name : "(none)";
      throw Error("board " + std::to_string(b.id) + ": layer '" + layer + "' needs " +
                  std::to_string(wp.peak_ram_bytes) + " bytes of RAM (" +
                  std::to_string(wp.peak_ram_bytes - int64_t(core::kWorkerFixedArena)) + " inputs+output + " +
                  std::to_string(core::kWorkerFixedArena) + " fixed), budget is " + std::to_string(b.ram_bytes) +
                  " bytes");
    }
    if (wp.flash_bytes > b.flash_bytes)
      throw Error("board " + std::to_string(b.id) + ": fragment needs " + std::to_string(wp.flash_bytes) +
                  " bytes of flash, budget is " + std::to_string(b.flash_bytes) + " bytes");
  }
  const LinkLoad l = links_over_limit(p, t);
  if (l.board >= 0)
    throw Error("board " + std::to_string(t.boards.at(size_t(l.board)).id) + ": the direct route needs " +
                std::to_string(l.links) +
                " links on it (coordinator, boards it sends to, boards that send to it), the board holds at most " +
                std::to_string(l.limit) + " (testbed key \"links\")");
}

std::vector<int> direct_links(const Plan& p) {
  const size_t N = size_t(p.n_workers());
  std::vector<int> out(N, 0);
  if (p.route != Route::Direct) return out;
  std::vector<std::vector<uint8_t>> talks(N, std::vector<uint8_t>(N, 0));  // [from][to]
  for (size_t w = 0; w < N; ++w)
    for (const LayerShare& ls : p.workers[w].layers)
      for (const auto* v : {&ls.sends, &ls.psum.sends})
        for (const core::Send& s : *v)
          if (s.peer != core::kPeerCoordinator && size_t(s.peer) < N) talks[w][s.peer] = 1;
  for (size_t w = 0; w < N; ++w) {
    out[w] = 1;
    for (size_t v = 0; v < N; ++v) out[w] += talks[w][v] + talks[v][w];
  }
  return out;
}

LinkLoad links_over_limit(const Plan& p, const Testbed& t) {
  const std::vector<int> links = direct_links(p);
  for (size_t w = 0; w < links.size(); ++w) {
    const int limit = board_links(t.boards.at(w));
    if (links[w] > limit) return {int(w), links[w], limit};
  }
  return {};
}

namespace {

Plan plan_on_route(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  if (t.boards.empty()) throw Error("plan: the testbed has no boards");
  validate_testbed(t, "testbed");
  if (q.nodes.empty()) throw Error("plan: the model has no layers");
  const size_t N = t.boards.size();
  const uint32_t mcrc = model_crc(q);
  const bool is_auto = opt.strategy == "auto";
  // For `auto`, the rating pass below splits evenly by spatial bands (the
  // usual winner); the strategies themselves are chosen once the ratings are known.
  std::unique_ptr<SplitStrategy> strategy = make_strategy(is_auto ? "spatial" : opt.strategy);

  // 1. Ratings.
  std::vector<double> ratings;
  if (opt.alloc == Allocation::Rating) {
    // Kc from the plan itself: split evenly once, measure each worker's
    // traffic per byte of output, then rate with eq. 5.
    const Plan pre = build_plan(q, t, std::vector<double>(N, 1.0), *strategy, false, mcrc, opt.route);
    // Per byte of output *computed*: in the relay every output goes out, so
    // this is the paper's figure; with the direct route most outputs stay on
    // the board, and dividing by the few that leave it would make Kc huge.
    std::vector<double> kc(N, kDefaultKc);
    for (size_t w = 0; w < N; ++w) {
      int64_t computed = 0;
      for (const LayerShare& ls : pre.workers[w].layers) computed += ls.out_elems;
      if (computed > 0 && pre.workers[w].bytes_in + pre.workers[w].bytes_out > 0)
        kc[w] = kc_from_traffic(double(pre.workers[w].bytes_in + pre.workers[w].bytes_out), double(computed));
    }
    ratings = compute_ratings(t, Allocation::Rating, opt.k1, kc);
  } else {
    ratings = compute_ratings(t, opt.alloc, opt.k1);
  }
  if (is_auto) strategy = std::make_unique<MixedStrategy>(choose_strategies(q, t, ratings, opt.route, opt.cost).per_node);

  // 2-3. Storage-aware allocation against flash, refined by real fragment sizes.
  const int64_t model_bytes = std::max<int64_t>(1, q.weight_bytes());
  const int64_t overhead = fragment_overhead_bytes(q);
  std::vector<int64_t> storage(N);
  int64_t flash_total = 0, storage_total = 0;
  for (size_t w = 0; w < N; ++w) {
    storage[w] = std::max<int64_t>(0, t.boards[w].flash_bytes - overhead);
    flash_total += t.boards[w].flash_bytes;
    storage_total += storage[w];
  }
  if (storage_total < model_bytes)
    throw Error("plan: the model needs " + std::to_string(model_bytes) + " bytes of flash for its data but the boards have " +
                std::to_string(storage_total) + " available (" + std::to_string(flash_total) + " bytes of flash minus " +
                std::to_string(overhead) + " bytes of fragment overhead per board)");
  // Eq. 6-7 on whole fragments: each candidate split is measured with the
  // fragment writer's size (WorkerPlan::flash_bytes = fragment_bytes()).
  Plan p;
  std::vector<int64_t> flash(N);
  for (size_t w = 0; w < N; ++w) flash[w] = t.boards[w].flash_bytes;
  const FittedStorage fit = fit_storage(ratings, flash, model_bytes, overhead, [&](const std::vector<double>& shares) {
    p = build_plan(q, t, shares, *strategy, false, mcrc, opt.route);
    std::vector<int64_t> sizes(N);
    for (size_t w = 0; w < N; ++w) sizes[w] = p.workers[w].flash_bytes;
    return sizes;
  });
  if (p.shares != fit.alloc.ratings) p = build_plan(q, t, fit.alloc.ratings, *strategy, false, mcrc, opt.route);
  p.alloc = opt.alloc;
  p.flash_rounds = fit.measurements - 1;
  p.ratings = ratings;
  for (size_t w = 0; w < N; ++w) p.workers[w].rating = ratings[w];

  p.est_layer_s = estimate_layer_seconds(q, p, t, opt.cost);
  p.est_latency_s = 0;
  for (double v : p.est_layer_s) p.est_latency_s += v;

  // 4. Budgets, then the routing map of the accepted plan.
  if (opt.check_budgets) check_budgets(q, p, t);
  if (opt.routing) p.routes = build_routing(q, p);
  return p;
}

}  // namespace

static_assert(kHostBoardLinks == core::kMaxLinks, "a host board holds core::kMaxLinks links");

Plan make_plan(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  if (opt.route != Route::Direct || !opt.route_fallback) return plan_on_route(q, t, opt);
  PlanOptions direct = opt;
  direct.check_budgets = false;
  direct.routing = false;
  Plan p = plan_on_route(q, t, direct);
  const LinkLoad l = links_over_limit(p, t);
  if (l.board < 0) {
    if (opt.check_budgets) check_budgets(q, p, t);
    if (opt.routing) p.routes = build_routing(q, p);
    return p;
  }
  PlanOptions relay = opt;
  relay.route = Route::Relay;
  Plan r = plan_on_route(q, t, relay);
  r.route_note = "planned on the relay route: the direct route needs " + std::to_string(l.links) + " links on board " +
                 std::to_string(t.boards.at(size_t(l.board)).id) + ", which holds at most " + std::to_string(l.limit);
  return r;
}

}  // namespace ts::plan
