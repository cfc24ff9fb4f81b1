// The planner: split coverage, exact receptive fields against brute force,
// routing map consistency, memory plan, budgets, and bit-exact execution of
// every worker's fragment against the single-process int8 reference, on
// hand-built graphs and on MobileNetV2 (when models/mobilenetv2 is present).
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "core/fragment.h"
#include "model/pipeline.h"
#include "plan/fragment_writer.h"
#include "plan/plan_steps.h"

using namespace ts;
using namespace ts::plan;
using core::QOp;
using PlanRun = ts::plan::Run;

namespace {

// ---------------------------------------------------------------------------
// Hand-built quantised graphs
// ---------------------------------------------------------------------------

class Builder {
 public:
  explicit Builder(uint32_t seed) : rng_(seed) {}

  int input(int c, int h, int w) {
    q.input = tensor("input", c, h, w);
    return q.input;
  }

  int conv(int x, int cout, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int pb, int pr,
           int groups, bool relu = false) {
    const Shape s = q.shape(x);
    const int oh = (s.h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1;
    const int ow = (s.w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1;
    QNode n = node(QOp::Conv, {x}, cout, oh, ow);
    auto& g = n.geo;
    g.kh = kh; g.kw = kw; g.sh = sh; g.sw = sw; g.dh = dh; g.dw = dw;
    g.pad_t = pt; g.pad_l = pl; g.pad_b = pb; g.pad_r = pr;
    g.groups = groups;
    const int per = s.c / groups * kh * kw;
    per_channel(n, cout, per, 0.5 / std::sqrt(double(per)) / 40.0);
    if (relu) g.act_min = q.tensors[size_t(n.output)].zp;
    n.macs = int64_t(cout) * oh * ow * per;
    return push(std::move(n));
  }

  int gemm(int x, int nout) {
    const int fan = int(q.shape(x).size());
    QNode n = node(QOp::Gemm, {x}, nout, 1, 1);
    per_channel(n, nout, fan, 0.5 / std::sqrt(double(fan)) / 40.0);
    n.macs = int64_t(nout) * fan;
    return push(std::move(n));
  }

  int add(int a, int b) {
    const Shape s = q.shape(a);
    QNode n = node(QOp::Add, {a, b}, s.c, s.h, s.w);
    n.geo.left_shift = 20;
    quantize_multiplier(0.5, &n.geo.in_mult[0], &n.geo.in_shift[0]);
    quantize_multiplier(0.37, &n.geo.in_mult[1], &n.geo.in_shift[1]);
    quantize_multiplier(2.0 / double(1 << 20) * 0.9, &n.geo.out_mult, &n.geo.out_shift);
    n.macs = s.size();
    return push(std::move(n));
  }

  int mul(int a, int b) {
    const Shape s = q.shape(a);
    QNode n = node(QOp::Mul, {a, b}, s.c, s.h, s.w);
    quantize_multiplier(0.011, &n.geo.out_mult, &n.geo.out_shift);
    n.macs = s.size();
    return push(std::move(n));
  }

  int lut(int x) {
    const Shape s = q.shape(x);
    QNode n = node(QOp::Lut, {x}, s.c, s.h, s.w);
    n.lut.resize(256);
    for (auto& v : n.lut) v = int8_t(int(rng_() % 256) - 128);
    return push(std::move(n));
  }

  int pad(int x, int pt, int pl, int pb, int pr) {
    const Shape s = q.shape(x);
    QNode n = node(QOp::Pad, {x}, s.c, s.h + pt + pb, s.w + pl + pr);
    n.geo.pad_t = pt; n.geo.pad_l = pl; n.geo.pad_b = pb; n.geo.pad_r = pr;
    q.tensors[size_t(n.output)].zp = q.tensors[size_t(x)].zp;
    n.geo.out_zp = q.tensors[size_t(x)].zp;
    return push(std::move(n));
  }

  int pool(QOp op, int x, int k, int s, int pt, int pl, int pb, int pr, bool include_pad = false) {
    const Shape sh = q.shape(x);
    const int oh = (sh.h + pt + pb - k) / s + 1, ow = (sh.w + pl + pr - k) / s + 1;
    QNode n = node(op, {x}, sh.c, oh, ow);
    auto& g = n.geo;
    g.kh = g.kw = k;
    g.sh = g.sw = s;
    g.pad_t = pt; g.pad_l = pl; g.pad_b = pb; g.pad_r = pr;
    g.count_include_pad = include_pad ? 1 : 0;
    if (op == QOp::AvgPool) {
      n.mult.resize(size_t(k * k));
      n.shift.resize(size_t(k * k));
      for (int c = 1; c <= k * k; ++c) quantize_multiplier(0.9 / c, &n.mult[size_t(c - 1)], &n.shift[size_t(c - 1)]);
    } else {
      q.tensors[size_t(n.output)].zp = q.tensors[size_t(x)].zp;
      n.geo.out_zp = q.tensors[size_t(x)].zp;
    }
    n.macs = int64_t(sh.c) * oh * ow * k * k;
    return push(std::move(n));
  }

  int gap(int x) {
    const Shape s = q.shape(x);
    QNode n = node(QOp::GlobalAvgPool, {x}, s.c, 1, 1);
    quantize_multiplier(1.0 / double(s.h * s.w), &n.geo.out_mult, &n.geo.out_shift);
    n.macs = s.size();
    return push(std::move(n));
  }

  int concat(const std::vector<int>& xs) {
    int c = 0;
    for (int x : xs) c += q.shape(x).c;
    QNode n = node(QOp::Concat, xs, c, q.shape(xs[0]).h, q.shape(xs[0]).w);
    for (size_t k = 0; k < xs.size(); ++k)
      quantize_multiplier(0.6 + 0.2 * double(k), &n.geo.in_mult[k], &n.geo.in_shift[k]);
    return push(std::move(n));
  }

  QGraph finish(int out) {
    q.output = out;
    q.link();
    return q;
  }

  QGraph q;

 private:
  int tensor(const std::string& name, int c, int h, int w) {
    QTensor t;
    t.name = name;
    t.shape = Shape{c, h, w};
    t.scale = 0.05f;
    t.zp = int32_t(rng_() % 41) - 20;
    q.tensors.push_back(t);
    return int(q.tensors.size()) - 1;
  }

  QNode node(QOp op, const std::vector<int>& ins, int c, int h, int w) {
    QNode n;
    n.name = std::string(core::qop_name(op)) + "_" + std::to_string(q.nodes.size());
    n.op = op;
    n.inputs = ins;
    n.output = tensor(n.name + ":out", c, h, w);
    auto& g = n.geo;
    g.op = op;
    g.n_inputs = uint8_t(ins.size());
    for (size_t k = 0; k < ins.size(); ++k) {
      const Shape& s = q.shape(ins[k]);
      g.in[k] = core::Dims{s.c, s.h, s.w};
      g.in_zp[k] = q.tensors[size_t(ins[k])].zp;
    }
    g.out = core::Dims{c, h, w};
    g.out_zp = q.tensors[size_t(n.output)].zp;
    return n;
  }

  void per_channel(QNode& n, int cout, int per, double m) {
    n.weights.resize(size_t(cout) * size_t(per));
    for (auto& v : n.weights) v = int8_t(int(rng_() % 255) - 127);
    n.bias.resize(size_t(cout));
    n.mult.resize(size_t(cout));
    n.shift.resize(size_t(cout));
    for (int o = 0; o < cout; ++o) {
      n.bias[size_t(o)] = int32_t(rng_() % 4001) - 2000;
      quantize_multiplier(m * (0.5 + double(rng_() % 100) / 100.0), &n.mult[size_t(o)], &n.shift[size_t(o)]);
    }
  }

  int push(QNode n) {
    const int out = n.output;
    q.nodes.push_back(std::move(n));
    return out;
  }

  std::mt19937 rng_;
};

// Every op kind, odd sizes, asymmetric padding, dilation, groups with a
// channel multiplier, a residual edge, a broadcast Mul, a 1x1 stride-2 conv
// that skips inputs, and a Gemm.
QGraph small_graph(uint32_t seed = 1) {
  Builder b(seed);
  const int x = b.input(3, 13, 11);
  const int c1 = b.conv(x, 8, 3, 3, 2, 2, 1, 1, 1, 0, 1, 1, 1, true);      // 8x7x5
  const int dw = b.conv(c1, 16, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 8);          // 16x7x5
  const int pw = b.conv(dw, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1);           // 8x7x5
  const int ad = b.add(pw, c1);                                            // residual
  const int lu = b.lut(ad);
  const int m2 = b.mul(lu, ad);                                            // same-shape Mul
  const int pd = b.pad(m2, 1, 2, 0, 1);                                    // 8x8x8
  const int mp = b.pool(QOp::MaxPool, pd, 3, 2, 1, 1, 1, 1);               // 8x4x4
  const int ap = b.pool(QOp::AvgPool, pd, 3, 2, 1, 1, 1, 1, false);        // 8x4x4
  const int ap2 = b.pool(QOp::AvgPool, pd, 2, 2, 0, 0, 0, 0, true);        // 8x4x4
  const int ct = b.concat({mp, ap, ap2});                                  // 24x4x4
  const int gp = b.gap(ct);                                                // 24x1x1
  const int sc = b.conv(gp, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1);          // 24x1x1
  const int ml = b.mul(ct, sc);                                            // broadcast
  const int gc = b.conv(ml, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4);          // 12x2x2
  const int s2 = b.conv(ml, 12, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1);          // 12x2x2, skips
  const int a2 = b.add(gc, s2);
  const int fc = b.gemm(a2, 10);
  return b.finish(fc);
}

// A wider graph where runs of many workers fall inside one channel.
QGraph wide_graph(uint32_t seed = 2) {
  Builder b(seed);
  const int x = b.input(3, 40, 37);
  const int c1 = b.conv(x, 6, 5, 3, 2, 3, 1, 2, 2, 1, 3, 2, 1);
  const int dw = b.conv(c1, 6, 3, 3, 2, 1, 1, 1, 0, 1, 1, 0, 6);
  const int pw = b.conv(dw, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1);
  const int mp = b.pool(QOp::MaxPool, pw, 2, 2, 0, 0, 1, 1);
  const int gp = b.gap(mp);
  const int fc = b.gemm(gp, 7);
  return b.finish(fc);
}

const QGraph* mobilenet() {
  static std::unique_ptr<QGraph> g;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (std::filesystem::exists(std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json"))
      g = std::make_unique<QGraph>(quantized_model(std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json", 112,
                                                   QuantizeOptions{}));
  }
  return g.get();
}

#define NEED_MOBILENET(var)                                                                   \
  const QGraph* var = mobilenet();                                                            \
  if (!var) FAIL() << "models/mobilenetv2 is absent (run scripts/fetch_model.sh first)"

std::vector<double> random_shares(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> u(0.05, 5.0);
  std::vector<double> s(static_cast<size_t>(n));
  for (auto& v : s) v = u(rng);
  if (n >= 3 && rng() % 3 == 0) s[rng() % size_t(n)] = 0.0;  // an idle worker
  return s;
}

// ---------------------------------------------------------------------------
// Brute force
// ---------------------------------------------------------------------------

// Input elements (flat CHW) of operand k that output neuron o reads, found by
// walking the op's definition directly.
void brute_needs(const QGraph& q, int node, int k, int64_t o, std::vector<int64_t>* out) {
  const QNode& n = q.nodes[size_t(node)];
  const core::LayerDesc& d = n.geo;
  const core::Dims& X = d.in[k];
  const int64_t hw = int64_t(d.out.h) * d.out.w;
  const int64_t c = o / hw, oy = (o % hw) / d.out.w, ox = o % d.out.w;
  auto at = [&](int64_t ci, int64_t y, int64_t x) { return (ci * X.h + y) * X.w + x; };
  auto window = [&](int64_t ci0, int64_t nci, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl) {
    for (int64_t ci = ci0; ci < ci0 + nci; ++ci)
      for (int ky = 0; ky < kh; ++ky)
        for (int kx = 0; kx < kw; ++kx) {
          const int64_t y = oy * sh - pt + ky * dh, x = ox * sw - pl + kx * dw;
          if (y >= 0 && y < X.h && x >= 0 && x < X.w) out->push_back(at(ci, y, x));
        }
  };
  switch (n.op) {
    case QOp::Conv: {
      const int cin_g = X.c / d.groups, cout_g = d.out.c / d.groups;
      window((c / cout_g) * cin_g, cin_g, d.kh, d.kw, d.sh, d.sw, d.dh, d.dw, d.pad_t, d.pad_l);
      break;
    }
    case QOp::AvgPool:
    case QOp::MaxPool: window(c, 1, d.kh, d.kw, d.sh, d.sw, 1, 1, d.pad_t, d.pad_l); break;
    case QOp::Pad: window(c, 1, 1, 1, 1, 1, 1, 1, d.pad_t, d.pad_l); break;
    case QOp::GlobalAvgPool:
      for (int64_t i = 0; i < int64_t(X.h) * X.w; ++i) out->push_back(c * X.h * X.w + i);
      break;
    case QOp::Gemm:
      for (int64_t i = 0; i < X.size(); ++i) out->push_back(i);
      break;
    case QOp::Add:
    case QOp::Lut: out->push_back(o); break;
    case QOp::Mul:
      out->push_back(k == 1 && X.h == 1 && X.w == 1 && hw != 1 ? c : o);
      break;
    case QOp::Concat: {
      int64_t off = 0;
      for (int i = 0; i < k; ++i) off += d.in[i].c;
      if (c >= off && c < off + X.c) out->push_back(o - off * hw);
      break;
    }
  }
}

std::vector<int64_t> expand(const std::vector<core::InputRun>& runs) {
  std::vector<int64_t> v;
  for (const auto& r : runs)
    for (uint32_t i = 0; i < r.count; ++i) v.push_back(int64_t(r.offset) + i);
  return v;
}

void expect_sorted_merged(const std::vector<core::InputRun>& runs, int64_t size, const std::string& where) {
  int64_t prev = -1;
  for (const auto& r : runs) {
    ASSERT_GT(r.count, 0u) << where;
    ASSERT_GT(int64_t(r.offset), prev) << where << ": runs overlap, touch or are unsorted";
    prev = int64_t(r.offset) + r.count;
    ASSERT_LE(prev, size) << where;
  }
}

// Checks a plan's needs for every worker/layer/operand against brute force.
void check_needs_brute(const QGraph& q, const Plan& p) {
  for (int w = 0; w < p.n_workers(); ++w)
    for (size_t n = 0; n < q.nodes.size(); ++n) {
      const LayerShare& ls = p.workers[size_t(w)].layers[n];
      if (ls.run.empty()) {
        ASSERT_TRUE(ls.inputs.empty());
        continue;
      }
      for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) {
        std::vector<int64_t> want;
        for (int64_t o = ls.run.begin; o < ls.run.end; ++o) brute_needs(q, int(n), int(k), o, &want);
        std::sort(want.begin(), want.end());
        want.erase(std::unique(want.begin(), want.end()), want.end());
        const std::string where = "worker " + std::to_string(w) + " layer " + q.nodes[n].name + " operand " +
                                  std::to_string(k);
        const InputNeed& in = ls.inputs[k];
        expect_sorted_merged(in.runs, q.shape(in.tensor).size(), where);
        ASSERT_EQ(expand(in.runs), want) << where;
        ASSERT_EQ(in.elems, int64_t(want.size())) << where;
        // The exact set lies inside the RAM window.
        const core::Dims& X = q.nodes[n].geo.in[k];
        for (int64_t e : want) {
          const int64_t c = e / (int64_t(X.h) * X.w), y = (e / X.w) % X.h;
          ASSERT_TRUE(c >= in.box.c0 && c < in.box.c1 && y >= in.box.h0 && y < in.box.h1) << where;
        }
      }
    }
}

// Runs tile every layer; each output neuron is computed by exactly one worker.
void check_coverage(const QGraph& q, const Plan& p) {
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const int64_t total = q.shape(q.nodes[n].output).size();
    std::vector<int> count(size_t(total), 0);
    for (const auto& wp : p.workers) {
      const PlanRun& r = wp.layers[n].run;
      ASSERT_GE(r.begin, 0);
      ASSERT_LE(r.end, total);
      for (int64_t o = r.begin; o < r.end; ++o) count[size_t(o)]++;
    }
    for (int64_t o = 0; o < total; ++o) ASSERT_EQ(count[size_t(o)], 1) << q.nodes[n].name << " neuron " << o;
  }
}

// The routing map delivers to each worker exactly the elements it needs, the
// runs tile every routed tensor, and producers match the producing runs.
void check_routing(const QGraph& q, const Plan& p) {
  std::map<std::pair<int, int>, std::vector<const RouteRun*>> by_op;
  std::vector<const RouteRun*> outputs;
  for (const RouteRun& r : p.routes) {
    if (r.consumer < 0) outputs.push_back(&r);
    else by_op[{r.consumer, r.operand}].push_back(&r);
  }
  size_t n_ops = 0;
  for (size_t n = 0; n < q.nodes.size(); ++n) n_ops += q.nodes[n].inputs.size();
  ASSERT_EQ(by_op.size(), n_ops);
  auto producer_at = [&](int tensor, int64_t e) {
    const int prod = q.tensors[size_t(tensor)].producer;
    if (prod < 0) return -1;
    for (int w = 0; w < p.n_workers(); ++w) {
      const PlanRun& r = p.workers[size_t(w)].layers[size_t(prod)].run;
      if (e >= r.begin && e < r.end) return w;
    }
    return -2;
  };
  for (const auto& [key, routes] : by_op) {
    const int n = key.first, k = key.second;
    const int tensor = q.nodes[size_t(n)].inputs[size_t(k)];
    const int64_t size = q.shape(tensor).size();
    int64_t at = 0;
    std::vector<std::vector<core::InputRun>> got(static_cast<size_t>(p.n_workers()));
    for (const RouteRun* r : routes) {
      ASSERT_EQ(r->tensor, tensor);
      ASSERT_EQ(r->offset, at) << "routing runs must tile the tensor";
      ASSERT_GT(r->count, 0);
      ASSERT_EQ(r->producer, producer_at(tensor, r->offset));
      ASSERT_EQ(r->producer, producer_at(tensor, r->offset + r->count - 1));
      ASSERT_TRUE(std::is_sorted(r->dests.begin(), r->dests.end()));
      for (int d : r->dests) {
        auto& g = got[size_t(d)];
        if (!g.empty() && int64_t(g.back().offset) + g.back().count == r->offset)
          g.back().count += uint32_t(r->count);
        else
          g.push_back(core::InputRun{uint32_t(r->offset), uint32_t(r->count)});
      }
      at += r->count;
    }
    ASSERT_EQ(at, size);
    for (int w = 0; w < p.n_workers(); ++w) {
      const LayerShare& ls = p.workers[size_t(w)].layers[size_t(n)];
      const std::vector<core::InputRun> none;
      const auto& want = ls.inputs.empty() ? none : ls.inputs[size_t(k)].runs;
      ASSERT_EQ(got[size_t(w)].size(), want.size()) << "worker " << w << " node " << n << " operand " << k;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[size_t(w)][i].offset, want[i].offset);
        ASSERT_EQ(got[size_t(w)][i].count, want[i].count);
      }
    }
  }
  int64_t at = 0;
  for (const RouteRun* r : outputs) {
    ASSERT_EQ(r->tensor, q.output);
    ASSERT_EQ(r->offset, at);
    ASSERT_TRUE(r->dests.empty());
    ASSERT_EQ(r->producer, producer_at(q.output, r->offset));
    at += r->count;
  }
  ASSERT_EQ(at, q.shape(q.output).size());
}

// Memory plan: per layer sum of arena blocks, peak = fixed + max.
void check_memory(const QGraph& q, const Plan& p) {
  int64_t total = 0;
  for (const auto& st : p.layers) total += st.bytes_moved;
  EXPECT_EQ(total, p.total_wire_bytes);
  for (int w = 0; w < p.n_workers(); ++w) {
    const WorkerPlan& wp = p.workers[size_t(w)];
    int64_t mx = 0, in = 0, out = 0;
    for (size_t n = 0; n < q.nodes.size(); ++n) {
      const LayerShare& ls = wp.layers[n];
      int64_t ram = 0;
      if (!ls.run.empty()) {
        ram = core::arena_block(uint32_t(ls.run.size()));
        for (size_t k = 0; k < ls.inputs.size(); ++k)
          ram += core::arena_block(uint32_t(ls.inputs[k].box.elems(q.nodes[n].geo.in[k].w)));
      }
      ASSERT_EQ(ls.ram_bytes, ram);
      mx = std::max(mx, ram);
      in += ls.bytes_in();
      out += ls.bytes_out();
    }
    EXPECT_EQ(wp.peak_ram_bytes, int64_t(core::kWorkerFixedArena) + mx);
    EXPECT_EQ(wp.bytes_in, in);
    EXPECT_EQ(wp.bytes_out, out);
    EXPECT_EQ(wp.flash_bytes, int64_t(write_fragment(q, p, w).size()));
  }
}

// Executes every worker's fragment layer by layer from the reference tensors
// and compares with the reference bit for bit. Each input window holds the
// reference value only at the elements the fragment says are routed to the
// worker; every other byte of the window is poison, so a kernel reading an
// element that was not routed would (almost surely) differ.
void check_bit_exact(const QGraph& q, const Plan& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> input(size_t(q.shape(q.input).size()));
  for (auto& v : input) v = int8_t(int(rng() % 256) - 128);
  const auto ref = run_int8_all(q, input);
  std::vector<std::vector<int>> covered(q.nodes.size());
  for (size_t n = 0; n < q.nodes.size(); ++n) covered[n].assign(size_t(q.shape(q.nodes[n].output).size()), 0);

  for (int w = 0; w < p.n_workers(); ++w) {
    const std::vector<uint8_t> frag = write_fragment(q, p, w);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(frag.data(), frag.size()), core::FragStatus::Ok) << "worker " << w;
    ASSERT_EQ(rd.layer_count(), q.nodes.size());
    ASSERT_EQ(rd.header().plan_id, p.plan_id);
    ASSERT_EQ(rd.header().arena_bytes, uint32_t(p.workers[size_t(w)].peak_ram_bytes));
    for (uint32_t i = 0; i < rd.layer_count(); ++i) {
      core::FragLayer fl;
      ASSERT_EQ(rd.layer(i, &fl), core::FragStatus::Ok);
      if (fl.run_begin == fl.run_end) continue;
      const QNode& node = q.nodes[fl.node];
      std::vector<std::vector<int8_t>> bufs(node.inputs.size());
      core::View views[core::kMaxInputs];
      for (int k = 0; k < fl.desc.n_inputs; ++k) {
        const core::Box& b = fl.box[k];
        const core::Dims& X = fl.desc.in[k];
        auto& buf = bufs[size_t(k)];
        buf.resize(size_t(b.elems(X.w)));
        for (auto& v : buf) v = int8_t(int(rng() % 256) - 128);
        const auto& src = ref[size_t(node.inputs[size_t(k)])];
        uint64_t got = 0;
        for (uint32_t r = 0; r < fl.n_runs[k]; ++r) {
          const core::InputRun run = fl.run(k, r);
          for (uint32_t j = 0; j < run.count; ++j) {
            const int64_t e = int64_t(run.offset) + j;
            const int64_t c = e / (int64_t(X.h) * X.w), y = (e / X.w) % X.h, x = e % X.w;
            buf[size_t(((c - b.c0) * (b.h1 - b.h0) + (y - b.h0)) * X.w + x)] = src[size_t(e)];
          }
          got += run.count;
        }
        ASSERT_EQ(got, fl.expected[k]);
        views[k] = core::View{buf.empty() ? nullptr : buf.data(), b.c0, b.c1 - b.c0, b.h0, b.h1 - b.h0};
      }
      std::vector<int8_t> out(size_t(fl.run_end - fl.run_begin));
      ASSERT_EQ(core::compute_range(fl.desc, views, fl.run_begin, fl.run_end, out.data(), fl.oc_count),
                core::KernelStatus::Ok)
          << "worker " << w << " layer " << node.name;
      const auto& want = ref[size_t(node.output)];
      for (int32_t o = fl.run_begin; o < fl.run_end; ++o) {
        ASSERT_EQ(out[size_t(o - fl.run_begin)], want[size_t(o)])
            << "worker " << w << " layer " << node.name << " neuron " << o;
        covered[fl.node][size_t(o)]++;
      }
    }
  }
  for (size_t n = 0; n < q.nodes.size(); ++n)
    for (size_t o = 0; o < covered[n].size(); ++o) ASSERT_EQ(covered[n][o], 1) << q.nodes[n].name << " " << o;
}

// With even shares and N >= 2, no worker holds all kernels of a conv layer
// with >= N kernels, nor all outputs of a layer with >= N outputs. Returns
// the layers where some worker receives a whole input operand (broadcast).
std::vector<std::string> check_no_whole_layer(const QGraph& q, const Plan& p) {
  const int N = p.n_workers();
  std::vector<std::string> broadcast;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    const int64_t total = q.shape(node.output).size();
    for (const auto& wp : p.workers) {
      const LayerShare& ls = wp.layers[n];
      if (total >= N) {
        EXPECT_LT(ls.run.size(), total) << node.name;
      }
      if ((node.op == QOp::Conv || node.op == QOp::Gemm) && node.geo.out.c >= N) {
        EXPECT_LT(ls.oc_count, node.geo.out.c) << node.name;
      }
    }
    if (p.layers[n].full_input_workers > 0) broadcast.push_back(node.name);
  }
  return broadcast;
}

Testbed bed(int n, int64_t ram = 1 << 30, int64_t flash = int64_t(1) << 30) {
  return default_testbed(n, "local", ram, flash);
}

// `auto` on the direct route, without the routing map; `fallback`: as when
// --route is not given (PlanOptions::route_fallback).
PlanOptions auto_direct(bool fallback) {
  PlanOptions o;
  o.strategy = "auto";
  o.route = Route::Direct;
  o.route_fallback = fallback;
  o.routing = false;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------
// Exact receptive fields
// ---------------------------------------------------------------------------

TEST(PlanNeeds, RandomWindowsMatchBruteForce) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    Builder b{uint32_t(iter)};
    const int cin = 1 + int(rng() % 6), h = 1 + int(rng() % 14), w = 1 + int(rng() % 14);
    const int x = b.input(cin, h, w);
    const int kind = int(rng() % 4);
    int out = -1;
    const int kh = 1 + int(rng() % 4), kw = 1 + int(rng() % 4);
    const int sh = 1 + int(rng() % 3), sw = 1 + int(rng() % 3);
    const int pt = int(rng() % 3), pl = int(rng() % 3), pb = int(rng() % 3), pr = int(rng() % 3);
    if (kind == 0) {
      const int dh = 1 + int(rng() % 3), dw = 1 + int(rng() % 3);
      if (h + pt + pb < (kh - 1) * dh + 1 || w + pl + pr < (kw - 1) * dw + 1) continue;
      int groups = 1;
      for (int g = cin; g >= 1; --g)
        if (cin % g == 0 && rng() % 2) { groups = g; break; }
      const int cout = groups * (1 + int(rng() % 3));
      out = b.conv(x, cout, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups);
    } else if (kind == 1) {
      const int k = std::min(kh, std::min(h + pt + pb, w + pl + pr));
      if (std::max(pt, std::max(pl, std::max(pb, pr))) >= k) continue;
      out = b.pool(rng() % 2 ? QOp::MaxPool : QOp::AvgPool, x, k, sh, pt, pl, pb, pr, rng() % 2);
    } else if (kind == 2) {
      out = b.pad(x, pt, pl, pb, pr);
    } else {
      out = b.gap(x);
    }
    QGraph q = b.finish(out);
    const int64_t total = q.shape(out).size();
    for (int r = 0; r < 20; ++r) {
      int64_t b0 = int64_t(rng() % uint64_t(total)), e0 = int64_t(rng() % uint64_t(total + 1));
      if (b0 > e0) std::swap(b0, e0);
      const auto runs = exact_input_runs(q, 0, 0, b0, e0);
      std::vector<int64_t> want;
      for (int64_t o = b0; o < e0; ++o) brute_needs(q, 0, 0, o, &want);
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      ASSERT_NO_FATAL_FAILURE(expect_sorted_merged(runs, q.shape(q.input).size(), "random window"));
      ASSERT_EQ(expand(runs), want) << "iter " << iter << " op " << core::qop_name(q.nodes[0].op) << " run [" << b0
                                    << "," << e0 << ")";
    }
  }
}

TEST(PlanNeeds, PaddedTapsAndSkippedInputsAreNotNeeded) {
  QGraph q = small_graph();
  // The 1x1 stride-2 conv reads only even rows and columns of its input.
  int s2 = -1;
  for (size_t n = 0; n < q.nodes.size(); ++n)
    if (q.nodes[n].op == QOp::Conv && q.nodes[n].geo.kh == 1 && q.nodes[n].geo.sh == 2) s2 = int(n);
  ASSERT_GE(s2, 0);
  const auto runs = exact_input_runs(q, s2, 0, 0, q.shape(q.nodes[size_t(s2)].output).size());
  const Shape in = q.shape(q.nodes[size_t(s2)].inputs[0]);
  EXPECT_EQ(expand(runs).size(), size_t(in.c * ((in.h + 1) / 2) * ((in.w + 1) / 2)));
  // The first conv's top-left output reads 2x3 real taps of each channel
  // (pad top 1 and left 0 hide the rest of its 3x3 window).
  const auto first = exact_input_runs(q, 0, 0, 0, 1);
  EXPECT_EQ(expand(first).size(), size_t(3 * 2 * 3));
}

// ---------------------------------------------------------------------------
// Plans on hand-built graphs, N = 1..64, random ratings
// ---------------------------------------------------------------------------

TEST(PlanSmall, RandomSharesAllProperties) {
  std::mt19937 rng(11);
  for (const QGraph& q : {small_graph(), wide_graph()}) {
    for (int N = 1; N <= 64; ++N) {
      const std::vector<double> shares = random_shares(rng, N);
      const Plan p = plan_with_shares(q, bed(N), shares, NeuronStrategy());
      SCOPED_TRACE("N=" + std::to_string(N));
      ASSERT_NO_FATAL_FAILURE(check_coverage(q, p));
      ASSERT_NO_FATAL_FAILURE(check_needs_brute(q, p));
      ASSERT_NO_FATAL_FAILURE(check_routing(q, p));
      ASSERT_NO_FATAL_FAILURE(check_memory(q, p));
      ASSERT_NO_FATAL_FAILURE(check_bit_exact(q, p, uint32_t(N)));
    }
  }
}

TEST(PlanSmall, EvenSharesNeverGiveOneWorkerAWholeLayer) {
  const QGraph q = small_graph();
  std::set<std::string> broadcast;
  for (int N = 2; N <= 64; ++N) {
    const Plan p = plan_with_shares(q, bed(N), std::vector<double>(size_t(N), 1.0), NeuronStrategy());
    for (const auto& name : check_no_whole_layer(q, p)) broadcast.insert(name);
  }
  // Inputs that are necessarily broadcast: the Gemm reads its whole input.
  EXPECT_TRUE(broadcast.count(q.nodes.back().name));
  std::string list;
  for (const auto& b : broadcast) list += " " + b;
  std::printf("[ info ] layers where some worker receives a whole input operand:%s\n", list.c_str());
}

TEST(PlanSmall, MoreWorkersThanNeuronsGivesEmptyRuns) {
  const QGraph q = small_graph();
  const int N = 64;  // the Gemm has 10 outputs, the 2x2 convs 48
  const Plan p = plan_with_shares(q, bed(N), std::vector<double>(N, 1.0), NeuronStrategy());
  const size_t fc = q.nodes.size() - 1;
  int idle = 0;
  for (const auto& wp : p.workers) {
    const LayerShare& ls = wp.layers[fc];
    if (ls.run.empty()) {
      ++idle;
      EXPECT_TRUE(ls.inputs.empty());
      EXPECT_EQ(ls.ram_bytes, 0);
      EXPECT_EQ(ls.oc_count, 0);
    } else {
      EXPECT_EQ(ls.run.size(), 1);
    }
  }
  EXPECT_EQ(idle, N - 10);
  ASSERT_NO_FATAL_FAILURE(check_bit_exact(q, p, 3));
}

TEST(PlanSmall, KernelsStoredOncePerWorker) {
  const QGraph q = small_graph();
  const Plan p = plan_with_shares(q, bed(5), {1, 2, 3, 1, 1}, NeuronStrategy());
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    if (node.op != QOp::Conv) continue;
    const int64_t hw = int64_t(node.geo.out.h) * node.geo.out.w;
    for (const auto& wp : p.workers) {
      const LayerShare& ls = wp.layers[n];
      if (ls.run.empty()) continue;
      const ChannelUse u = channels_touched(ls.run, node.geo.out.c, node.geo.out.h, node.geo.out.w);
      EXPECT_EQ(ls.oc_base, u.first);
      EXPECT_EQ(ls.oc_count, u.count());
      EXPECT_EQ(ls.data_bytes, int64_t(u.count()) * node.bytes_per_channel());
      EXPECT_LE(ls.oc_count, (ls.run.size() + hw - 1) / hw + 1);
    }
  }
}

TEST(PlanSmall, DeterministicAndIdentified) {
  const QGraph q = small_graph();
  const Plan a = plan_with_shares(q, bed(4), {1, 2, 3, 4}, NeuronStrategy());
  const Plan b = plan_with_shares(q, bed(4), {1, 2, 3, 4}, NeuronStrategy());
  const Plan c = plan_with_shares(q, bed(4), {1, 2, 3, 5}, NeuronStrategy());
  const Plan d = plan_with_shares(small_graph(99), bed(4), {1, 2, 3, 4}, NeuronStrategy());
  EXPECT_EQ(a.plan_id, b.plan_id);
  EXPECT_NE(a.plan_id, c.plan_id);
  EXPECT_NE(a.plan_id, d.plan_id);

  EXPECT_EQ(a.plan_id, plan_hash(q, {1, 2, 3, 4}, "neuron"));
  for (int w = 0; w < 4; ++w) EXPECT_EQ(write_fragment(q, a, w), write_fragment(q, b, w));
}

TEST(PlanSmall, TrafficTotals) {
  const QGraph q = small_graph();
  const Plan p1 = plan_with_shares(q, bed(1), {1}, NeuronStrategy());
  // One worker: each layer sends its whole (read) inputs and returns its output.
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const LayerStats& st = p1.layers[n];
    EXPECT_EQ(st.bytes_out, q.shape(q.nodes[n].output).size());
    EXPECT_EQ(st.bytes_in, st.unique_in);
    EXPECT_EQ(st.max_fanout, 1);
  }
  const Plan p8 = plan_with_shares(q, bed(8), std::vector<double>(8, 1.0), NeuronStrategy());
  EXPECT_GE(p8.total_wire_bytes, p1.total_wire_bytes);  // halos and broadcasts only add
  for (size_t n = 0; n < q.nodes.size(); ++n) EXPECT_EQ(p8.layers[n].unique_in, p1.layers[n].unique_in);
  EXPECT_EQ(p8.layers.back().max_fanout, 8);  // Gemm input goes to everyone
}

// ---------------------------------------------------------------------------
// make_plan: allocation, ratings, budgets, errors
// ---------------------------------------------------------------------------

TEST(PlanMake, AllocationModes) {
  const QGraph q = small_graph();
  Testbed t = bed(3);
  t.boards[0].clock_mhz = 600;
  t.boards[1].clock_mhz = 300;
  t.boards[2].clock_mhz = 150;
  t.boards[2].delay_s_per_kb = 0.01;
  PlanOptions o;
  o.alloc = Allocation::Even;
  const Plan even = make_plan(q, t, o);
  EXPECT_EQ(even.shares, (std::vector<double>{1, 1, 1}));
  o.alloc = Allocation::Frequency;
  const Plan freq = make_plan(q, t, o);
  EXPECT_EQ(freq.shares, (std::vector<double>{600, 300, 150}));
  EXPECT_GT(freq.workers[0].macs, freq.workers[2].macs);
  o.alloc = Allocation::Rating;
  const Plan rate = make_plan(q, t, o);
  // Kc from the even plan, then eq. 5 per board.
  const Plan pre = plan_with_shares(q, t, {1, 1, 1}, NeuronStrategy(), false);
  std::vector<double> kc;
  for (const auto& wp : pre.workers) kc.push_back(double(wp.bytes_in + wp.bytes_out) / double(wp.bytes_out));
  EXPECT_EQ(rate.ratings, compute_ratings(t, Allocation::Rating, kDefaultK1, kc));
  EXPECT_GT(rate.shares[0], rate.shares[2]);
  for (const auto& wp : rate.workers) EXPECT_GT(wp.kc, 1.0);
  ASSERT_NO_FATAL_FAILURE(check_routing(q, rate));
}

TEST(PlanMake, FlashCapsShiftWork) {
  const QGraph q = small_graph();
  const int64_t overhead = fragment_overhead_bytes(q);
  Testbed t = bed(3);
  // Board 0 can hold barely more than its fixed overhead: eq. 6-7 move its
  // share to the others, and the real fragment must fit.
  t.boards[0].flash_bytes = overhead + q.weight_bytes() / 10;
  const Plan p = make_plan(q, t, PlanOptions{});
  EXPECT_LT(p.shares[0], p.shares[1]);
  for (int w = 0; w < 3; ++w) EXPECT_LE(p.workers[size_t(w)].flash_bytes, t.boards[size_t(w)].flash_bytes);
}

TEST(PlanMake, Errors) {
  const QGraph q = small_graph();
  auto one_line = [](const std::string& s) { return s.find('\n') == std::string::npos; };
  // Empty testbed.
  try {
    make_plan(q, Testbed{}, PlanOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no boards"), std::string::npos) << e.what();
  }
  // Storage too small for the model.
  try {
    make_plan(q, bed(2, 1 << 30, fragment_overhead_bytes(q) + 10), PlanOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(one_line(m));
    EXPECT_NE(m.find(std::to_string(q.weight_bytes())), std::string::npos) << m;
    EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  }
  // RAM too small: names the board id, the layer and the bytes.
  const int64_t tight = int64_t(core::kWorkerFixedArena) + 100;
  Testbed t = bed(2, tight);
  t.boards[0].id = 7;
  t.boards[1].id = 9;
  try {
    make_plan(q, t, PlanOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(one_line(m));
    EXPECT_NE(m.find("board 7"), std::string::npos) << m;
    const Plan p = plan_with_shares(q, t, {1, 1}, NeuronStrategy(), false);
    EXPECT_NE(m.find("'" + q.nodes[size_t(p.workers[0].peak_layer)].name + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(p.workers[0].peak_ram_bytes)), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(tight)), std::string::npos) << m;
  }
  // A fragment over flash names the board (checked without the allocation,
  // which would otherwise move the work away).
  const Plan p = plan_with_shares(q, bed(2), {1, 1}, NeuronStrategy(), false);
  Testbed tf = bed(2);
  tf.boards[1].flash_bytes = p.workers[1].flash_bytes - 1;
  try {
    check_budgets(q, p, tf);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(one_line(m));
    EXPECT_NE(m.find("board 1"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(p.workers[1].flash_bytes)), std::string::npos) << m;
  }
  EXPECT_THROW(make_strategy("tiles"), Error);
  PlanOptions bad;
  bad.strategy = "tiles";
  EXPECT_THROW(make_plan(q, bed(2), bad), Error);
}

TEST(PlanSmall, ThousandWorkers) {
  const QGraph q = wide_graph();
  const Plan p = plan_with_shares(q, bed(1000), std::vector<double>(1000, 1.0), NeuronStrategy());
  ASSERT_NO_FATAL_FAILURE(check_coverage(q, p));
  ASSERT_NO_FATAL_FAILURE(check_routing(q, p));
  ASSERT_NO_FATAL_FAILURE(check_memory(q, p));
  ASSERT_NO_FATAL_FAILURE(check_bit_exact(q, p, 5));
}

// ---------------------------------------------------------------------------
// MobileNetV2 at 112
// ---------------------------------------------------------------------------

TEST(PlanMobileNet, RandomSharesOneTo64) {
  NEED_MOBILENET(q);
  std::mt19937 rng(21);
  for (int N = 1; N <= 64; ++N) {
    const std::vector<double> shares = random_shares(rng, N);
    const Plan p = plan_with_shares(*q, bed(N), shares, NeuronStrategy());
    SCOPED_TRACE("N=" + std::to_string(N));
    ASSERT_NO_FATAL_FAILURE(check_coverage(*q, p));
    ASSERT_NO_FATAL_FAILURE(check_routing(*q, p));
    ASSERT_NO_FATAL_FAILURE(check_memory(*q, p));
    // Executing every fragment costs about one inference per N; a spread of
    // worker counts keeps the test short.
    if (N <= 8 || N % 7 == 0 || N == 64) {
      ASSERT_NO_FATAL_FAILURE(check_bit_exact(*q, p, uint32_t(N)));
    }
  }
}

TEST(PlanMobileNet, NeedsMatchBruteForceOnSampledRuns) {
  NEED_MOBILENET(q);
  std::mt19937 rng(5);
  for (size_t n = 0; n < q->nodes.size(); ++n) {
    const int64_t total = q->shape(q->nodes[n].output).size();
    for (int r = 0; r < 6; ++r) {
      const int64_t b0 = int64_t(rng() % uint64_t(total));
      const int64_t e0 = std::min(total, b0 + 1 + int64_t(rng() % uint64_t(r < 3 ? 64 : total)));
      for (size_t k = 0; k < q->nodes[n].inputs.size(); ++k) {
        std::vector<int64_t> want;
        for (int64_t o = b0; o < e0; ++o) brute_needs(*q, int(n), int(k), o, &want);
        std::sort(want.begin(), want.end());
        want.erase(std::unique(want.begin(), want.end()), want.end());
        ASSERT_EQ(expand(exact_input_runs(*q, int(n), int(k), b0, e0)), want) << q->nodes[n].name;
      }
    }
  }
}

TEST(PlanMobileNet, EvenSplitHoldsNoWholeLayer) {
  NEED_MOBILENET(q);
  std::set<std::string> broadcast;
  for (int N : {2, 3, 8, 64}) {
    const Plan p = plan_with_shares(*q, bed(N), std::vector<double>(size_t(N), 1.0), NeuronStrategy(), false);
    for (const auto& name : check_no_whole_layer(*q, p)) broadcast.insert(name);
  }
  std::printf("[ info ] MobileNetV2 layers where some worker receives a whole input operand (%zu):", broadcast.size());
  for (const auto& b : broadcast) std::printf(" %s", b.c_str());
  std::printf("\n");
}

TEST(PlanMobileNet, ThousandWorkersInSeconds) {
  NEED_MOBILENET(q);
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const Plan p = make_plan(*q, bed(1000, 512 * 1024, 8 << 20), PlanOptions{});
  const double cpu = double(std::clock() - c0) / CLOCKS_PER_SEC;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] MobileNetV2 @112 on 1000 workers: planned with routing in %.2f s (%.2f s CPU), %zu route runs, "
              "%lld wire bytes\n",
              s, cpu, p.routes.size(), (long long)p.total_wire_bytes);
  ASSERT_NO_FATAL_FAILURE(check_coverage(*q, p));
  ASSERT_NO_FATAL_FAILURE(check_routing(*q, p));
  ASSERT_NO_FATAL_FAILURE(check_memory(*q, p));
}

// `auto` with the fallback to the relay route prices a transfer over a
// board's links only as far as showing it is over, and in full once it
// knows some direct plan may keep within the links: it chooses exactly as
// when it prices everything in full (24 boards, where the links bind).
TEST(PlanMobileNet, PricingOverTheLinksLaterChoosesTheSame) {
  NEED_MOBILENET(q);
  const Testbed b24 = bed(24, 512 * 1024, 8 << 20);
  const std::vector<double> shares(24, 1.0);
  const CostModel m;
  const AutoChoice full = choose_strategies(*q, b24, shares, Route::Direct, m, false);
  const AutoChoice stopping = choose_strategies(*q, b24, shares, Route::Direct, m, true);
  EXPECT_EQ(stopping.out_of_links, "");
  EXPECT_TRUE(full.link_bound);
  EXPECT_EQ(stopping.link_bound, full.link_bound);
  EXPECT_EQ(stopping.per_node, full.per_node);
  EXPECT_EQ(stopping.est_s, full.est_s);
  // Boards of 4 links: no direct plan keeps within them; given up, with the
  // layer named.
  Testbed tight = bed(24, 300 * 1024, 8 << 20);
  for (Board& b : tight.boards) b.links = 4;
  tight.boards[5].links = 6;
  const AutoChoice out = choose_strategies(*q, tight, shares, Route::Direct, m, true);
  EXPECT_TRUE(out.per_node.empty());
  EXPECT_NE(out.out_of_links.find("' on that keeps every board within its links (the boards hold 4 to 6)"),
            std::string::npos)
      << out.out_of_links;
}

// A plan the fallback made on the direct route on k of t's boards: within
// their links, the others computing nothing, and the note saying so.
static void expect_direct_on(const Plan& p, const Testbed& t, int k) {
  EXPECT_EQ(p.route, Route::Direct);
  EXPECT_EQ(links_over_limit(p, t).board, -1);
  int busy = 0;
  for (const WorkerPlan& w : p.workers) busy += w.macs > 0;
  EXPECT_EQ(busy, k);
  const std::string note = "planned on the direct route on " + std::to_string(k) + " of the " +
                           std::to_string(t.boards.size()) + " boards (the others take no share): ";
  EXPECT_EQ(p.route_note.rfind(note, 0), 0u) << p.route_note;
}

// 64 boards of the host's links (MobileNetV2 at 112): no direct plan on all
// of them keeps within the links, and a band plan on 32 of them does, and is
// faster than the plan on the 20 that every direct plan keeps within them
// (each board sending to every other): the fallback takes it, the others
// idle, and the plan is the one on 32 boards alone. That holds for boards
// that spend nothing beside their kernels (--protocol-cpu off); priced with
// the Cortex-M7's measured CPU outside the kernels, which every board pays
// per layer and piece, more boards gain less: the fallback goes down the
// powers of two below 20 only while each is faster by the idle margin, and
// keeps 20 (16 and 8 are slower: 0.0492 and 0.0541 s against 0.0484 s).
TEST(PlanMobileNet, PastTheLinksAPowerOfTwoOfTheBoardsMayTakeTheShares) {
  NEED_MOBILENET(q);
  PlanOptions o = auto_direct(true);
  o.coding = Coding::Auto;  // as `plan` and `run`: coded where it pays,
  estimate_code_ratios(*q, &o);  // by the sizes on the reference input
  const Testbed all = bed(64, 512 * 1024, 8 << 20);
  const Plan priced = make_plan(*q, all, o);
  expect_direct_on(priced, all, 20);
  EXPECT_EQ(priced.est_latency_s, make_plan(*q, bed(20, 512 * 1024, 8 << 20), o).est_latency_s);
  // Fewer boards only when faster by the idle margin.
  for (int fewer : {16, 8}) {
    const double est = make_plan(*q, bed(fewer, 512 * 1024, 8 << 20), o).est_latency_s;
    EXPECT_GT(est, 0.9 * priced.est_latency_s) << fewer;
  }
  o.cost.protocol_cpu = false;
  const Plan p = make_plan(*q, all, o);
  expect_direct_on(p, all, 32);
  const Plan on32 = make_plan(*q, bed(32, 512 * 1024, 8 << 20), o);
  EXPECT_EQ(on32.route_note, "");
  EXPECT_EQ(p.est_latency_s, on32.est_latency_s);
  const Plan on20 = make_plan(*q, bed(20, 512 * 1024, 8 << 20), o);
  EXPECT_GT(on20.est_latency_s, p.est_latency_s);
}

// Six boards of 5 links (MobileNetV2 at 112): within the links on all six
// only slow direct plans are left, and the relay route is slower than the
// direct route on three of them, as many as every direct plan keeps within 5
// links; the other three are left idle, and the note says so.
TEST(PlanMobileNet, PastTheLinksSomeBoardsMayBeLeftIdle) {
  NEED_MOBILENET(q);
  const PlanOptions o = auto_direct(true);
  Testbed six = bed(6, 512 * 1024, 8 << 20);
  for (Board& b : six.boards) b.links = 5;
  const Plan p = make_plan(*q, six, o);
  expect_direct_on(p, six, 3);
  PlanOptions r = o;
  r.route = Route::Relay;
  r.route_fallback = false;
  EXPECT_LT(p.est_latency_s, 0.9 * make_plan(*q, six, r).est_latency_s);
  // Named, the direct route is not weighed against anything.
  PlanOptions named = o;
  named.route_fallback = false;
  const Plan d = make_plan(*q, six, named);
  EXPECT_EQ(d.route_note, "");
  int busy = 0;
  for (const WorkerPlan& w : d.workers) busy += w.macs > 0;
  EXPECT_GT(busy, 0);
}

// The direct plan on the first boards within the links is made on those
// boards alone and widened by the idle others: it equals, fragment for
// fragment, the plan made on all the boards with the others left idle
// (PlanOptions::boards_used), plain and coded; a memo shared by testbeds that
// start with the same boards (simulate --sweep) gives the same plans again.
TEST(PlanMobileNet, APlanOnTheFirstBoardsWidenedIsThePlanOnAllWithTheOthersIdle) {
  NEED_MOBILENET(q);
  for (const Coding coding : {Coding::Off, Coding::Mask}) {
    PlanOptions o = auto_direct(true);
    o.coding = coding;
    o.first_boards = std::make_shared<FirstBoardsMemo>();
    for (int n : {6, 7, 6}) {
      SCOPED_TRACE(std::to_string(n) + " boards, coding " + std::to_string(int(coding)));
      Testbed t = bed(n, 512 * 1024, 8 << 20);
      for (Board& b : t.boards) b.links = 5;
      const Plan wide = make_plan(*q, t, o);
      ASSERT_EQ(wide.route_note.rfind("planned on the direct route on 3 of the " + std::to_string(n), 0), 0u)
          << wide.route_note;
      PlanOptions idle = o;
      idle.route_fallback = false;
      idle.boards_used = 3;
      idle.first_boards = nullptr;
      const Plan ref = make_plan(*q, t, idle);
      EXPECT_EQ(wide.plan_id, ref.plan_id);
      EXPECT_EQ(wide.shares, ref.shares);
      EXPECT_EQ(wide.ratings, ref.ratings);
      EXPECT_EQ(wide.layer_strategy, ref.layer_strategy);
      EXPECT_EQ(wide.est_layer_s, ref.est_layer_s);
      EXPECT_EQ(wide.total_wire_bytes, ref.total_wire_bytes);
      EXPECT_EQ(wide.coded_bytes, ref.coded_bytes);
      EXPECT_EQ(wide.coding.codec, ref.coding.codec);
      EXPECT_EQ(wide.flash_rounds, ref.flash_rounds);
      ASSERT_EQ(wide.n_workers(), ref.n_workers());
      for (int w = 0; w < n; ++w) {
        const WorkerPlan &a = wide.workers[size_t(w)], &b = ref.workers[size_t(w)];
        EXPECT_EQ(a.board, b.board);
        EXPECT_EQ(a.flash_bytes, b.flash_bytes) << w;
        EXPECT_EQ(a.peak_ram_bytes, b.peak_ram_bytes) << w;
        EXPECT_EQ(a.macs, b.macs) << w;
        EXPECT_EQ(a.kc, b.kc) << w;
        EXPECT_EQ(write_fragment(*q, wide, w), write_fragment(*q, ref, w)) << w;
      }
      EXPECT_EQ(wide.routes.size(), ref.routes.size());
    }
  }
}

// plans_for_pricing makes the candidates' plans with shared work (fused
// from spatial's shares and routes): each equals the plan made on its own.
TEST(PlanMobileNet, PricedPlansMadeTogetherEqualPlansMadeAlone) {
  NEED_MOBILENET(q);
  std::mt19937 rng(7);
  for (int n : {3, 9, 40}) {
    const Testbed t = bed(n);
    const std::vector<double> shares = random_shares(rng, n);
    std::vector<std::unique_ptr<SplitStrategy>> made;
    std::vector<const SplitStrategy*> strategies;
    for (const char* name : {"spatial", "channel", "fused", "neuron"}) {
      made.push_back(make_strategy(name));
      strategies.push_back(made.back().get());
    }
    const std::vector<Plan> together = plans_for_pricing(*q, t, shares, strategies, Route::Direct);
    for (size_t i = 0; i < strategies.size(); ++i) {
      SCOPED_TRACE(strategies[i]->name() + " on " + std::to_string(n));
      const Plan alone = plan_for_pricing(*q, t, shares, *strategies[i], Route::Direct);
      const Plan& p = together[i];
      EXPECT_EQ(p.layer_strategy, alone.layer_strategy);
      EXPECT_EQ(p.total_wire_bytes, alone.total_wire_bytes);
      for (size_t w = 0; w < size_t(n); ++w)
        for (size_t m = 0; m < q->nodes.size(); ++m) {
          const LayerShare &a = p.workers[w].layers[m], &b = alone.workers[w].layers[m];
          ASSERT_EQ(a.out_elems, b.out_elems) << w << " " << m;
          ASSERT_EQ(a.ram_bytes, b.ram_bytes) << w << " " << m;
          ASSERT_EQ(a.out_until, b.out_until) << w << " " << m;
          ASSERT_EQ(a.macs, b.macs) << w << " " << m;
          ASSERT_EQ(a.inputs.size(), b.inputs.size());
          for (size_t k = 0; k < a.inputs.size(); ++k) {
            ASSERT_EQ(a.inputs[k].recv_elems, b.inputs[k].recv_elems) << w << " " << m << " " << k;
            ASSERT_EQ(a.inputs[k].avail_from, b.inputs[k].avail_from) << w << " " << m << " " << k;
            ASSERT_EQ(a.inputs[k].local_layer, b.inputs[k].local_layer) << w << " " << m << " " << k;
            ASSERT_EQ(a.inputs[k].local.size(), b.inputs[k].local.size()) << w << " " << m << " " << k;
            ASSERT_EQ(a.inputs[k].coord_runs.size(), b.inputs[k].coord_runs.size()) << w << " " << m << " " << k;
          }
        }
    }
  }
}

// No relay plan is estimated under relay_floor_s, which make_plan reads to
// leave the relay route unplanned when it cannot be the choice.
TEST(PlanMobileNet, NoRelayPlanIsFasterThanTheRelayFloor) {
  NEED_MOBILENET(q);
  const CostModel m;
  const double floor = relay_floor_s(*q, m);
  EXPECT_GT(floor, 0.0);
  for (const char* strategy : {"neuron", "spatial", "channel", "auto"})
    for (int n : {1, 3, 16}) {
      PlanOptions o;
      o.strategy = strategy;
      o.route = Route::Relay;
      o.check_budgets = false;
      const double est = make_plan(*q, bed(n), o).est_latency_s;
      EXPECT_LE(floor, est) << strategy << " on " << n;
      // A floor, not a guess: within a few times of the best relay plan.
      if (n == 16) {
        EXPECT_GT(floor, 0.1 * est) << strategy;
      }
    }
}

// A host board holds kHostBoardLinks links (core::kMaxLinks). On 24 boards
// `auto`'s cheapest direct plan gathers whole tensors for some layers
// (2(N-1)+1 links); it chooses the cheapest plan within the links instead,
// which is faster than the relay route's. Where no direct plan fits (boards
// of 4 links that cannot hold block_1_expand alone), a named route is
// refused with one line and the default (route_fallback) plans on the
// relay route with a note naming the layer and the limit. Where the only
// direct plan within the links is slower than the relay route (4 links, a
// board holds every layer: the whole model on one board), the relay route
// is taken with both estimates.
TEST(PlanMobileNet, DirectPlansStayWithinTheBoardsLinks) {
  NEED_MOBILENET(q);
  PlanOptions o = auto_direct(false);
  const Testbed b24 = bed(24, 512 * 1024, 8 << 20);
  const Plan d24 = make_plan(*q, b24, o);
  EXPECT_EQ(d24.route, Route::Direct);
  EXPECT_TRUE(d24.link_bound);
  EXPECT_EQ(links_over_limit(d24, b24).board, -1);
  PlanOptions r = o;
  r.route = Route::Relay;
  EXPECT_LT(d24.est_latency_s, make_plan(*q, b24, r).est_latency_s);
  // The cheapest choice, unbounded, would need more links than a board holds.
  PlanOptions unchecked = o;
  unchecked.check_budgets = false;
  Testbed wide = b24;
  for (Board& b : wide.boards) b.links = kMaxBoardLinks;
  const Plan cheapest = make_plan(*q, wide, unchecked);
  EXPECT_FALSE(cheapest.link_bound);
  EXPECT_GT(links_over_limit(cheapest, b24).links, kHostBoardLinks);
  EXPECT_LE(cheapest.est_latency_s, d24.est_latency_s);

  Testbed tight = bed(24, 300 * 1024, 8 << 20);
  for (Board& b : tight.boards) b.links = 4;
  const Plan over = make_plan(*q, tight, unchecked);
  const LinkLoad l = links_over_limit(over, tight);
  ASSERT_GE(l.board, 0);
  EXPECT_EQ(l.limit, 4);
  try {
    make_plan(*q, tight, o);
    FAIL() << "a direct plan over the link limit should be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.rfind("board " + std::to_string(l.board) + ": the direct route needs " + std::to_string(l.links) +
                          " links",
                      0),
              0u)
        << m;
    EXPECT_NE(m.find("at most 4"), std::string::npos) << m;
  }
  // At the Teensy's prices (325 us per message) the relay route costs more
  // than a direct plan on the first boards, and the fallback takes that:
  // within the links, the others idle, said in the note.
  PlanOptions teensy = o;
  teensy.route_fallback = true;
  const Plan few = make_plan(*q, tight, teensy);
  EXPECT_EQ(few.route, Route::Direct);
  EXPECT_EQ(links_over_limit(few, tight).board, -1);
  EXPECT_NE(few.route_note.find("(the others take no share)"), std::string::npos) << few.route_note;
  // With messages at 30 us and every op at 2 cycles per MAC the relay route
  // is the cheaper: `auto` gives up on the direct route as soon as a block
  // shows that no choice of strategies keeps within the links (the direct
  // plan above is over them), and the plan is the relay route's.
  o.cost.frame_latency_s = 30e-6;
  o.cost.costs_dir = "none";
  o.route_fallback = true;
  const Plan p = make_plan(*q, tight, o);
  EXPECT_EQ(p.route, Route::Relay);
  EXPECT_EQ(direct_links(p), std::vector<int>(24, 0));
  EXPECT_EQ(p.route_note.rfind("planned on the relay route: the direct route has no choice of strategies from layer '", 0),
            0u)
      << p.route_note;
  EXPECT_NE(p.route_note.find("' on that keeps every board within its links (every board holds at most 4)"),
            std::string::npos)
      << p.route_note;
  PlanOptions relay = o;
  relay.route = Route::Relay;
  const Plan named = make_plan(*q, tight, relay);
  EXPECT_EQ(p.plan_id, named.plan_id);
  EXPECT_EQ(p.layer_strategy, named.layer_strategy);
  EXPECT_EQ(p.est_latency_s, named.est_latency_s);

  Testbed one = bed(24, 512 * 1024, 8 << 20);
  for (Board& b : one.boards) b.links = 4;
  const Plan w = make_plan(*q, one, o);
  EXPECT_EQ(w.route, Route::Relay);
  EXPECT_NE(w.route_note.find("within the boards' links the direct route is estimated at"), std::string::npos)
      << w.route_note;

  // On 16 boards the cheapest direct plan fits (no board can need more than
  // 31 links) and is taken as it is.
  Testbed b16 = bed(16, 512 * 1024, 8 << 20);
  const Plan d = make_plan(*q, b16, o);
  EXPECT_EQ(d.route, Route::Direct);
  EXPECT_EQ(d.route_note, "");
  EXPECT_FALSE(d.link_bound);
  const std::vector<int> dl = direct_links(d);
  const int most = *std::max_element(dl.begin(), dl.end());
  EXPECT_GT(most, kFirmwareLinks);  // so the firmware's limit matters below
  EXPECT_LE(most, kHostBoardLinks);
  // One board that holds fewer links than that plan needs on it: the plan
  // made keeps within that board's links, on either route.
  const int busiest = int(std::max_element(dl.begin(), dl.end()) - dl.begin());
  b16.boards[size_t(busiest)].links = kFirmwareLinks;
  b16.boards[size_t(busiest)].id = 70;
  EXPECT_EQ(links_over_limit(d, b16).board, busiest);
  const Plan f = make_plan(*q, b16, o);
  EXPECT_EQ(links_over_limit(f, b16).board, -1);
  EXPECT_LE(direct_links(f)[size_t(busiest)], kFirmwareLinks);
  // QEMU boards (and boards at an address) hold the firmware's links unless
  // the testbed says otherwise.
  EXPECT_EQ(board_links(default_testbed(1, "qemu").boards[0]), kFirmwareLinks);
  EXPECT_EQ(board_links(default_testbed(1, "10.0.0.2:7000").boards[0]), kFirmwareLinks);
  EXPECT_EQ(board_links(default_testbed(1, "local").boards[0]), kHostBoardLinks);
}

// kFirmwareLinks is the firmware's default MAX_LINKS.
TEST(PlanLinks, FirmwareDefaultMatchesTheMakefile) {
  std::ifstream mk(std::string(TS_SOURCE_DIR) + "/firmware/Makefile");
  ASSERT_TRUE(mk) << "firmware/Makefile";
  std::string line, value;
  while (std::getline(mk, line))
    if (line.rfind("MAX_LINKS ?=", 0) == 0) value = line.substr(line.find('=') + 1);
  value.erase(0, value.find_first_not_of(' '));
  ASSERT_FALSE(value.empty()) << "no 'MAX_LINKS ?=' line in firmware/Makefile";
  EXPECT_EQ(std::stoi(value), kFirmwareLinks);
}

TEST(PlanMobileNet, OneBoardAt112FitsAnd224IsRefused) {
  NEED_MOBILENET(q);
  const Plan p = make_plan(*q, bed(1, 512 * 1024, 8 << 20), PlanOptions{});
  EXPECT_LE(p.workers[0].peak_ram_bytes, 512 * 1024);
  EXPECT_LE(p.workers[0].flash_bytes, 8 << 20);
  const QGraph big = quantized_model(std::string(TS_SOURCE_DIR) + "/models/mobilenetv2/model.json", 224, QuantizeOptions{});
  try {
    make_plan(big, bed(1, 512 * 1024, 8 << 20), PlanOptions{});
    FAIL() << "224 on one 512K board should be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("board 0"), std::string::npos) << m;
    EXPECT_NE(m.find("524288"), std::string::npos) << m;
  }
}

// ---------------------------------------------------------------------------
// Owners (plan_steps.h): who holds each element of a layer's output
// ---------------------------------------------------------------------------

namespace {

// Owners::walk against the workers' owned regions element by element, on
// MobileNetV2's layers under bands, channels, runs of neurons and fused
// tiles: every piece names the worker that owns it and where it lies in its
// output buffer, pieces are in order and cover the walked range, whether a
// walk starts at the hint (runs in order) or far from it (the bucket index).
TEST(OwnersWalk, EveryElementAtItsOwnerFromAnyStart) {
  NEED_MOBILENET(q);
  std::mt19937 rng(11);
  const std::unique_ptr<SplitStrategy> kinds[] = {std::make_unique<SpatialStrategy>(),
                                                  std::make_unique<ChannelStrategy>(),
                                                  std::make_unique<NeuronStrategy>(),
                                                  std::make_unique<SpatialStrategy>(true)};
  for (const auto& st : kinds)
    for (int N : {3, 17}) {
      const Plan p = plan_with_shares(*q, bed(N), random_shares(rng, N), *st, false, Route::Direct);
      for (int node : {1, 4, 9, 30, int(q->nodes.size()) - 2}) {
        const core::Dims d = q->desc(node).out;
        // Element -> (worker, place in its buffer), from the owned regions.
        std::vector<std::pair<int32_t, int64_t>> at(size_t(d.size()), {-1, -1});
        std::vector<int64_t> pos_of(size_t(d.size()), -1);  // in one worker's buffer
        for (int w = 0; w < N; ++w) {
          const LayerShare& ls = p.workers[size_t(w)].layers[size_t(node)];
          int64_t pos = 0;
          for (const core::Region& r : ls.regions)
            r.segments(d, [&](int32_t b, int32_t e) {
              for (int32_t i = b; i < e; ++i) pos_of[size_t(i)] = pos++;
              return true;
            });
          // Fused shares compute more than they own (LayerShare::tiles()).
          for (const core::Region& r : ls.tiles())
            r.segments(d, [&](int32_t b, int32_t e) {
              for (int32_t i = b; i < e; ++i) at[size_t(i)] = {w, pos_of[size_t(i)]};
              return true;
            });
        }
        steps::Owners own;
        own.build(*q, p, node);
        size_t hint = 0;
        for (int trial = 0; trial < 200; ++trial) {
          const int64_t off = int64_t(rng() % uint64_t(d.size()));
          const int64_t n = 1 + int64_t(rng() % uint64_t(std::min<int64_t>(d.size() - off, 5000)));
          if (trial % 4 == 0) hint = rng() % 1000;  // a stale hint
          int64_t next = off;
          const bool whole = own.walk(off, n, hint, [&](const steps::Owners::Segment& sg, int64_t b, int64_t e) {
            ASSERT_EQ(b, next);
            ASSERT_LT(b, e);
            for (int64_t i = b; i < e; ++i) {
              ASSERT_EQ(sg.worker, at[size_t(i)].first) << "node " << node << " element " << i;
              ASSERT_EQ(sg.pos + (i - sg.begin), at[size_t(i)].second) << "node " << node << " element " << i;
            }
            next = e;
          });
          EXPECT_TRUE(whole);
          EXPECT_EQ(next, off + n) << "node " << node;
        }
      }
    }
}

}  // namespace
