#include "model/fold.h"

#include <cmath>

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

  // 2. BatchNorm into its producer.
  for (auto& n : g.nodes) {
    if (n.op != Op::BatchNorm) continue;
    const int x = n.inputs[0];
    const int p = g.tensors[x].producer;
    const int C = int(n.gamma.size());
    std::vector<double> s(C), t(C);
    for (int c = 0; c < C; ++c) {
      s[c] = double(n.gamma[c]) / std::sqrt(double(n.var[c]) + double(n.eps));
      t[c] = double(n.beta[c]) - double(n.mean[c]) * s[c];
    }
    if (p >= 0 && single_consumer(g, x) && (g.nodes[p].op == Op::Conv || g.nodes[p].op == Op::ConvTranspose || g.nodes[p].op == Op::Gemm) &&
        g.nodes[p].act == Act::None) {
      Node& c = g.nodes[p];
      if (c.bias.empty()) c.bias.assign(C, 0.f);
      const size_t per_out = c.weights.size() / size_t(C);
      for (int o = 0; o < C; ++o) scale_channel(c, o, s[o], t[o], per_out);
      n.op = Op::Identity;
      ++st.batchnorm_folded;
    } else {
      // Standalone: a depthwise 1x1 convolution computes x*s + t.
      n.op = Op::Conv;
      n.groups = C;
      n.kh = n.kw = 1;
      n.weights.assign(C, 0.f);
      n.bias.assign(C, 0.f);
      for (int c = 0; c < C; ++c) {
        n.weights[c] = float(s[c]);
        n.bias[c] = float(t[c]);
      }
      n.gamma.clear(); n.beta.clear(); n.mean.clear(); n.var.clear();
      ++st.batchnorm_as_conv;
    }
  }
  g.compact();

  // 3. Relu/Clip into Conv/Gemm/Add.
  for (auto& n : g.nodes) {
    if (n.op != Op::Relu && n.op != Op::Clip) continue;
    const int x = n.inputs[0];
    const int p = g.tensors[x].producer;
    if (p < 0 || !single_consumer(g, x)) continue;
    Node& prod = g.nodes[p];
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

  // 4. Flatten is the identity on C-H-W data.
  for (auto& n : g.nodes)
    if (n.op == Op::Flatten) {
      n.op = Op::Identity;
      ++st.removed;
    }
  const size_t before = g.nodes.size();
  g.compact();
  (void)before;
  if (stats) *stats = st;
  return g;
}

}  // namespace ts
