#include "model/fold.h"

#include <algorithm>
#include <cmath>

#include "core/ops/resize.h"

namespace ts {
namespace {

bool single_consumer(const Graph& g, int tensor) {
  return g.tensors[tensor].consumers.size() == 1 && tensor != g.output;
}

// Scales output channel o of a Conv/ConvTranspose/Gemm by s and adds t to its bias.
void scale_channel(Node& n, int o, double s, double t, size_t per_out) {
  for (size_t k = 0; k < per_out; ++k) n.weights[o * per_out + k] = float(n.weights[o * per_out + k] * s);
  n.bias[o] = float(n.bias[o] * s + t);
}

// A BatchNorm as y = x * s[c] + t[c].
struct Affine {
  std::vector<double> s, t;
};

Affine affine_of(const Node& n) {
  const size_t C = n.gamma.size();
  Affine a;
  a.s.resize(C);
  a.t.resize(C);
  for (size_t c = 0; c < C; ++c) {
    a.s[c] = double(n.gamma[c]) / std::sqrt(double(n.var[c]) + double(n.eps));
    a.t[c] = double(n.beta[c]) - double(n.mean[c]) * a.s[c];
  }
  return a;
}

// n becomes the BatchNorm of a (mean 0, var 1, eps 0: s and t as they are).
void set_affine(Node& n, const Affine& a) {
  const size_t C = a.s.size();
  n.gamma.resize(C);
  n.beta.resize(C);
  n.mean.assign(C, 0.f);
  n.var.assign(C, 1.f);
  n.eps = 0.f;
  for (size_t c = 0; c < C; ++c) {
    n.gamma[c] = float(a.s[c]);
    n.beta[c] = float(a.t[c]);
  }
}

// Whether every channel of a is x * s + t within float rounding.
bool affine_is(const Affine& a, double s, double t) {
  for (size_t c = 0; c < a.s.size(); ++c)
    if (std::fabs(a.s[c] - s) > 1e-6 * std::fabs(s) + 1e-7 || std::fabs(a.t[c] - t) > 1e-6 * std::fabs(t) + 1e-7)
      return false;
  return true;
}

// The producer node of tensor x, or nullptr (the graph's input).
Node* producer(Graph& g, int x) {
  const int p = g.tensors[x].producer;
  return p >= 0 ? &g.nodes[p] : nullptr;
}

// m = Mul(x, Clip(BatchNorm(x), 0, 6)), the BatchNorm x + 3 in every
// channel and both it and the Clip read by nothing else: m becomes
// HardSwish(x) with a post-affine of 6 (x * relu6(x + 3) = 6 hardswish(x)).
bool hardswish_times6(Graph& g, Node& m) {
  if (m.op != Op::Mul || m.inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    const int x = m.inputs[size_t(k)], r = m.inputs[size_t(1 - k)];
    Node* clip = producer(g, r);
    if (!clip || clip->op != Op::Clip || clip->lo != 0.f || clip->hi != 6.f || !single_consumer(g, r)) continue;
    Node* add = producer(g, clip->inputs[0]);
    if (!add || add->op != Op::BatchNorm || add->inputs[0] != x || !single_consumer(g, clip->inputs[0])) continue;
    if (!affine_is(affine_of(*add), 1.0, 3.0)) continue;
    const size_t C = size_t(g.shape(x).c);
    clip->op = Op::Identity;
    add->op = Op::Identity;
    m.op = Op::HardSwish;
    m.inputs = {x};
    m.post_s.assign(C, 6.f);
    m.post_t.assign(C, 0.f);
    return true;
  }
  return false;
}

// a = Add(x, Mul(x, g)) (either operand order in both), where g is a
// per-channel gate (C x 1 x 1, x's channels) made by an activation, and the
// Mul and the activation read by nothing else: x + x * g = x * (g + 1), so
// the activation's post-affine adds 1 and the Mul's result is a's (a
// squeeze-excite block with a residual, as PP-OCRv4's RSE layers write it).
bool residual_gate(Graph& g, Node& a) {
  if (a.op != Op::Add || a.inputs.size() != 2 || a.act != Act::None) return false;
  for (int k = 0; k < 2; ++k) {
    const int x = a.inputs[size_t(k)], m_out = a.inputs[size_t(1 - k)];
    Node* m = producer(g, m_out);
    if (!m || m->op != Op::Mul || m->inputs.size() != 2 || !single_consumer(g, m_out)) continue;
    const int j = m->inputs[0] == x ? 1 : m->inputs[1] == x ? 0 : -1;
    if (j < 0) continue;
    const int gate = m->inputs[size_t(j)];
    Node* act = producer(g, gate);
    const Shape gs = g.shape(gate), xs = g.shape(x);
    if (!act || !is_activation(act->op) || !single_consumer(g, gate)) continue;
    if (gs.c != xs.c || gs.h != 1 || gs.w != 1) continue;
    const size_t C = size_t(gs.c);
    if (act->post_s.empty()) act->post_s.assign(C, 1.f), act->post_t.assign(C, 0.f);
    for (size_t c = 0; c < C; ++c) act->post_t[c] += 1.f;
    a.op = Op::Identity;
    a.inputs = {m_out};
    return true;
  }
  return false;
}

// Whether a nearest Resize node maps output index o to o / f along both
// axes (f = out / in, whole factors): what an Add with an upsampled operand
// reads (core/ops/add.cpp).
bool resize_is_upsample(const Node& r, const Shape& in, const Shape& out, int* fh, int* fw) {
  if (r.interp != core::resize::kNearest || in.h < 1 || in.w < 1 || out.h % in.h || out.w % in.w) return false;
  *fh = out.h / in.h;
  *fw = out.w / in.w;
  for (int axis = 0; axis < 2; ++axis) {
    const int n = axis ? in.w : in.h, m = axis ? out.w : out.h, f = axis ? *fw : *fh;
    for (int o = 0; o < m; ++o)
      if (core::resize::nearest(r.coord, r.rounding, n, m, o) != o / f) return false;
  }
  return *fh > 1 || *fw > 1;
}

// a = Add(x, Resize(y)) (either operand order), the Resize nearest by whole
// factors and read by nothing else: a reads y upsampled (its sh x sw), the
// upsampled map is never made (feature pyramids' top-down paths).
bool upsample_into_add(Graph& g, Node& a) {
  if (a.op != Op::Add || a.inputs.size() != 2 || a.sh != 1 || a.sw != 1) return false;
  for (int k = 1; k >= 0; --k) {
    const int up = a.inputs[size_t(k)];
    Node* r = producer(g, up);
    if (!r || r->op != Op::Resize || !single_consumer(g, up)) continue;
    const int y = r->inputs[0];
    int fh = 1, fw = 1;
    if (!resize_is_upsample(*r, g.shape(y), g.shape(up), &fh, &fw)) continue;
    a.inputs = {a.inputs[size_t(1 - k)], y};
    a.sh = fh;
    a.sw = fw;
    r->op = Op::Identity;  // now read by nothing; compact drops it
    return true;
  }
  return false;
}

// One fold of BatchNorm n into its producer (step 3); false if none applies.
bool fold_affine(Graph& g, Node& n, FoldStats* st) {
  const int x = n.inputs[0];
  Node* p = producer(g, x);
  if (!p || !single_consumer(g, x)) return false;
  const Affine a = affine_of(n);
  const size_t C = a.s.size();
  if ((p->op == Op::Conv || p->op == Op::ConvTranspose || p->op == Op::Gemm) && p->act == Act::None) {
    if (p->bias.empty()) p->bias.assign(C, 0.f);
    const size_t per_out = p->weights.size() / C;
    for (size_t o = 0; o < C; ++o) scale_channel(*p, int(o), a.s[o], a.t[o], per_out);
    ++st->batchnorm_folded;
  } else if (p->op == Op::BatchNorm) {  // x * s1 + t1, then * s + t
    const Affine b = affine_of(*p);
    Affine c;
    for (size_t i = 0; i < C; ++i) {
      c.s.push_back(a.s[i] * b.s[i]);
      c.t.push_back(a.s[i] * b.t[i] + a.t[i]);
    }
    set_affine(*p, c);
    ++st->affines_composed;
  } else if (is_activation(p->op)) {  // f(x) * s0 + t0, then * s + t
    if (p->post_s.empty()) p->post_s.assign(C, 1.f), p->post_t.assign(C, 0.f);
    for (size_t i = 0; i < C; ++i) {
      p->post_t[i] = float(a.s[i] * double(p->post_t[i]) + a.t[i]);
      p->post_s[i] = float(a.s[i] * double(p->post_s[i]));
    }
    ++st->affines_into_activation;
  } else {
    return false;
  }
  n.op = Op::Identity;
  return true;
}

// Bytes of activations alive at once when g's nodes run in `order` (a
// node's inputs and output alive while it runs; a tensor from its producer
// to its last reader, the graph's output to the end): the most, and the sum
// over the nodes (what a split keeps on its boards layer after layer).
struct Live {
  int64_t peak = 0, sum = 0;
};
Live live_bytes(const Graph& g, const std::vector<int>& order) {
  std::vector<int> left(g.tensors.size(), 0);
  for (const Node& n : g.nodes)
    for (int t : n.inputs) ++left[size_t(t)];
  int64_t live = g.shape(g.input).size();
  Live r{live, 0};
  for (int i : order) {
    const Node& n = g.nodes[size_t(i)];
    live += g.shape(n.output).size();
    r.peak = std::max(r.peak, live);
    r.sum += live;
    for (int t : n.inputs)
      if (--left[size_t(t)] == 0 && t != g.output) live -= g.shape(t).size();
  }
  return r;
}

// A topological order that keeps fewer activation bytes alive: of the nodes
// whose inputs are made, the first in the graph's order, unless some node
// frees more than it makes (the last reader of inputs larger than its
// output): then the one that frees most. So a feature pyramid's reduction
// of a level runs as soon as the level's last other reader has, instead of
// after the larger levels. Used only where it holds less than the graph's
// own order, and never more at its peak.
std::vector<int> memory_order(const Graph& g) {
  const size_t N = g.nodes.size();
  std::vector<int> left(g.tensors.size(), 0), waiting(N, 0);  // reads to come; inputs not yet made
  for (size_t i = 0; i < N; ++i)
    for (int t : g.nodes[i].inputs) {
      ++left[size_t(t)];
      if (g.tensors[size_t(t)].producer >= 0) ++waiting[i];
    }
  // Bytes node n adds if it runs now: its output, less each input it reads last.
  auto adds = [&](const Node& n) {
    int64_t add = g.shape(n.output).size();
    const auto in = n.inputs.begin();
    for (auto it = in; it != n.inputs.end(); ++it)
      if (std::find(in, it, *it) == it && *it != g.output && left[size_t(*it)] == std::count(in, n.inputs.end(), *it))
        add -= g.shape(*it).size();
    return add;
  };
  std::vector<char> done(N, 0);
  std::vector<int> order;
  for (size_t step = 0; step < N; ++step) {
    int best = -1;
    int64_t best_add = 0;
    for (size_t i = 0; i < N; ++i) {
      if (done[i] || waiting[i] > 0) continue;
      const int64_t add = adds(g.nodes[i]);
      // The first in the graph's order, unless a node frees more than it makes.
      if (best < 0 || add < std::min<int64_t>(best_add, 0)) best = int(i), best_add = add;
    }
    const Node& n = g.nodes[size_t(best)];
    done[size_t(best)] = 1;
    order.push_back(best);
    for (int t : n.inputs) --left[size_t(t)];
    // consumers lists a reader once per operand it reads the tensor as, as waiting counts it.
    for (int c : g.tensors[size_t(n.output)].consumers) --waiting[size_t(c)];
  }
  return order;
}

// Step 6 of fold: g's nodes in memory_order where it holds fewer bytes over
// the nodes and never more at once than g's own order.
void reorder_for_memory(Graph& g, FoldStats* st) {
  g.validate();
  std::vector<int> own(g.nodes.size());
  for (size_t i = 0; i < own.size(); ++i) own[i] = int(i);
  const std::vector<int> order = memory_order(g);
  const Live mine = live_bytes(g, order), theirs = live_bytes(g, own);
  if (mine.peak > theirs.peak || mine.sum >= theirs.sum) return;
  std::vector<Node> nodes;
  for (int i : order) nodes.push_back(std::move(g.nodes[size_t(i)]));
  for (size_t i = 0; i < order.size(); ++i) st->reordered += order[i] != int(i);
  g.nodes = std::move(nodes);
  g.validate();
}

}  // namespace

Graph fold(const Graph& src, FoldStats* stats) {
  Graph g = src;
  g.validate();
  FoldStats st;

  // 1. Pad merged into the Convs that read it.
  for (auto& n : g.nodes) {
    if (n.op != Op::Pad) continue;
    const auto& users = g.tensors[n.output].consumers;
    bool all_conv = !users.empty() && n.output != g.output;
    for (int u : users) all_conv = all_conv && g.nodes[u].op == Op::Conv;
    if (!all_conv) continue;
    for (int u : users) {
      Node& c = g.nodes[u];
      c.pad_t += n.pad_t;
      c.pad_b += n.pad_b;
      c.pad_l += n.pad_l;
      c.pad_r += n.pad_r;
    }
    n.op = Op::Identity;
    ++st.pads_merged;
  }
  g.compact();

  // 2. x * Clip(x + 3, 0, 6), how some exporters write hardswish (times 6):
  //    one HardSwish with a post-affine of 6 (the "/ 6" that follows is a
  //    BatchNorm, step 3 folds it in).
  for (auto& m : g.nodes)
    if (hardswish_times6(g, m)) ++st.hardswish_found;
  g.compact();

  // 3. BatchNorms (y = x * s[c] + t[c]) folded, until none can be: into the
  //    Conv/Gemm before them, into a BatchNorm before them, or into an
  //    activation before them (its post-affine), when that producer's output
  //    has no other consumer.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& n : g.nodes)
      if (n.op == Op::BatchNorm && fold_affine(g, n, &st)) changed = true;
    g.compact();
  }
  // What is left follows something else (or a shared tensor): a depthwise
  // 1x1 convolution computes x*s + t.
  for (auto& n : g.nodes) {
    if (n.op != Op::BatchNorm) continue;
    const Affine a = affine_of(n);
    const int C = int(a.s.size());
    n.op = Op::Conv;
    n.groups = C;
    n.kh = n.kw = 1;
    n.weights.assign(C, 0.f);
    n.bias.assign(C, 0.f);
    for (int c = 0; c < C; ++c) {
      n.weights[c] = float(a.s[c]);
      n.bias[c] = float(a.t[c]);
    }
    n.gamma.clear(); n.beta.clear(); n.mean.clear(); n.var.clear();
    ++st.batchnorm_as_conv;
  }
  g.compact();

  // 3b. x + x * g, g a per-channel gate from an activation: x * (g + 1).
  for (auto& a : g.nodes)
    if (residual_gate(g, a)) ++st.residual_gates;
  g.compact();

  // 3c. x + Resize(y), nearest by whole factors: the Add reads y upsampled.
  for (auto& a : g.nodes)
    if (upsample_into_add(g, a)) ++st.upsamples_into_add;
  g.compact();

  // 4. Relu/Clip into Conv/Gemm/Add.
  for (auto& n : g.nodes) {
    if ((n.op != Op::Relu && n.op != Op::Clip) || !n.post_s.empty()) continue;
    const int x = n.inputs[0];
    Node* pp = producer(g, x);
    if (!pp || !single_consumer(g, x)) continue;
    Node& prod = *pp;
    const bool fusable = prod.op == Op::Conv || prod.op == Op::ConvTranspose || prod.op == Op::Gemm || prod.op == Op::Add;
    if (!fusable || prod.act != Act::None) continue;
    if (n.op == Op::Relu) {
      prod.act = Act::Relu;
    } else if (n.lo == 0.f && n.hi == 6.f) {
      prod.act = Act::Relu6;
      prod.act_lo = 0.f;
      prod.act_hi = 6.f;
    } else {
      prod.act = Act::Clip;
      prod.act_lo = n.lo;
      prod.act_hi = n.hi;
    }
    n.op = Op::Identity;
    ++st.activations_fused;
  }

  // 5. Flatten is the identity on C-H-W data.
  for (auto& n : g.nodes)
    if (n.op == Op::Flatten) {
      n.op = Op::Identity;
      ++st.removed;
    }
  g.compact();

  // 6. A node order that holds fewer activations, where there is one.
  reorder_for_memory(g, &st);
  if (stats) *stats = st;
  return g;
}

}  // namespace ts
