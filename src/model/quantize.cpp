#include "model/quantize.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/op.h"
#include "model/float_exec.h"

namespace ts {

using core::QOp;

CalibMethod parse_calib_method(const std::string& s) {
  if (s == "minmax") return CalibMethod::MinMax;
  if (s == "percentile") return CalibMethod::Percentile;
  throw Error("unknown calibration method '" + s + "' (use minmax or percentile)");
}

Calibration calibrate(const Graph& g, const std::vector<std::vector<float>>& inputs, const CalibOptions& opt) {
  if (inputs.empty()) throw Error("calibration needs at least one image");
  if (opt.method == CalibMethod::Percentile && !(opt.percentile > 50 && opt.percentile <= 100))
    throw Error("calibration percentile must be in (50, 100]");
  Calibration cal;
  const size_t nt = g.tensors.size();
  cal.lo.assign(nt, 0.f);
  cal.hi.assign(nt, 0.f);
  std::vector<double> sum_lo(nt, 0), sum_hi(nt, 0);
  std::vector<float> mn(nt, INFINITY), mx(nt, -INFINITY);
  std::vector<float> tmp;
  for (const auto& x : inputs) {
    std::vector<std::vector<float>> all;
    run_float(g, x, &all);
    for (size_t t = 0; t < nt; ++t) {
      const auto& v = all[t];
      if (v.empty()) continue;
      const auto [a, b] = std::minmax_element(v.begin(), v.end());
      mn[t] = std::min(mn[t], *a);
      mx[t] = std::max(mx[t], *b);
      if (opt.method == CalibMethod::Percentile) {
        tmp = v;
        const double q = opt.percentile / 100.0;
        const size_t n = tmp.size();
        const size_t khi = std::min(n - 1, size_t(std::floor(q * double(n - 1) + 0.5)));
        const size_t klo = std::min(n - 1, size_t(std::floor((1.0 - q) * double(n - 1) + 0.5)));
        std::nth_element(tmp.begin(), tmp.begin() + khi, tmp.end());
        sum_hi[t] += tmp[khi];
        std::nth_element(tmp.begin(), tmp.begin() + klo, tmp.end());
        sum_lo[t] += tmp[klo];
      }
    }
  }
  for (size_t t = 0; t < nt; ++t) {
    if (opt.method == CalibMethod::MinMax) {
      cal.lo[t] = mn[t];
      cal.hi[t] = mx[t];
    } else {
      cal.lo[t] = float(sum_lo[t] / double(inputs.size()));
      cal.hi[t] = float(sum_hi[t] / double(inputs.size()));
    }
    if (!std::isfinite(cal.lo[t]) || !std::isfinite(cal.hi[t])) cal.lo[t] = cal.hi[t] = 0.f;
  }
  cal.images = int(inputs.size());
  cal.method = opt.method == CalibMethod::MinMax ? "minmax" : "percentile " + std::to_string(opt.percentile);
  return cal;
}

namespace {

void choose_params(float lo, float hi, float* scale, int32_t* zp) {
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  // A tensor that never left zero during calibration (a dead channel group)
  // gets a unit range: any positive scale represents it exactly, and a sane
  // one keeps its producer's multiplier in range.
  if (hi - lo < 1e-6f) hi = lo + 1.f;
  *scale = (hi - lo) / 255.f;
  const long z = std::lround(-128.0 - double(lo) / double(*scale));
  *zp = int32_t(std::clamp<long>(z, -128, 127));
}

int32_t q_of(float real, float scale, int32_t zp) {
  const long v = std::lround(double(real) / double(scale)) + zp;
  return int32_t(std::clamp<long>(v, -128, 127));
}

void act_clamp(const Node& n, float scale, int32_t zp, core::LayerDesc& d) {
  d.act_min = -128;
  d.act_max = 127;
  switch (n.act) {
    case Act::None: break;
    case Act::Relu: d.act_min = std::max(-128, zp); break;
    case Act::Relu6:
    case Act::Clip:
      d.act_min = std::max(d.act_min, q_of(n.act_lo, scale, zp));
      d.act_max = std::min(d.act_max, q_of(n.act_hi, scale, zp));
      break;
  }
}

core::Dims dims(const Shape& s) { return core::Dims{s.c, s.h, s.w}; }

float apply_unary(const Node& n, float x) {
  switch (n.op) {
    case Op::Relu: return std::max(x, 0.f);
    case Op::Clip: return std::min(std::max(x, n.lo), n.hi);
    case Op::HardSigmoid: return std::max(0.f, std::min(1.f, n.alpha * x + n.beta_hs));
    case Op::HardSwish: return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f));
    case Op::Sigmoid: return 1.f / (1.f + std::exp(-x));
    default: return unary_value(n, x, 0);
  }
}

// An activation as a table of its 256 inputs: one (Lut), or one per channel
// when it depends on the channel (PRelu, a post-affine that differs between
// channels: ChannelLut). The post-affine is part of the function tabled.
void tables(const Node& n, const QTensor& xin, const QTensor& out, QNode& qn) {
  const bool per_channel = per_channel_table(n);
  qn.op = per_channel ? QOp::ChannelLut : QOp::Lut;
  const int C = per_channel ? xin.shape.c : 1;
  qn.lut.resize(size_t(C) * 256);
  for (int c = 0; c < C; ++c)
    for (int v = -128; v < 128; ++v) {
      const float x = xin.scale * float(v - xin.zp);
      float y = n.op == Op::PRelu ? unary_value(n, x, c) : apply_unary(n, x);
      if (!n.post_s.empty()) y = y * n.post_s[size_t(c)] + n.post_t[size_t(c)];
      qn.lut[size_t(c) * 256 + size_t(v + 128)] = int8_t(q_of(y, out.scale, out.zp));
    }
}

// Conv, ConvTranspose, Gemm: per-output-channel int8 weights (symmetric, the
// channel's largest magnitude at 127), int32 bias at s_in * ws, and the
// requantisation multiplier of each channel.
void quantize_weights(const Node& n, float s_in, const QTensor& out, QNode& qn) {
  const int C = out.shape.c;
  const size_t per = n.weights.size() / size_t(C);
  qn.weights.resize(n.weights.size());
  qn.bias.resize(C);
  qn.mult.resize(C);
  qn.shift.resize(C);
  for (int o = 0; o < C; ++o) {
    float amax = 0.f;
    for (size_t k = 0; k < per; ++k) amax = std::max(amax, std::fabs(n.weights[o * per + k]));
    double ws = amax > 0 ? double(amax) / 127.0 : 1.0;
    // A channel whose weights are (nearly) zero but whose bias is
    // large (BatchNorm folded into a dead filter): widen its weight
    // scale until the bias fits 2^30 steps of s_in * ws.
    const double bmax = n.bias.empty() ? 0.0 : std::fabs(double(n.bias[o]));
    ws = std::max(ws, bmax / (double(s_in) * double(1 << 30)));
    for (size_t k = 0; k < per; ++k)
      qn.weights[o * per + k] = int8_t(std::clamp<long>(std::lround(n.weights[o * per + k] / ws), -127, 127));
    const double b = n.bias.empty() ? 0.0 : double(n.bias[o]);
    const double bq = std::round(b / (double(s_in) * ws));
    if (std::fabs(bq) > 2147483647.0) throw Error("node '" + n.name + "': bias does not fit int32");
    qn.bias[o] = int32_t(bq);
    quantize_multiplier(double(s_in) * ws / double(out.scale), &qn.mult[o], &qn.shift[o]);
  }
}

}  // namespace

QGraph quantize(const Graph& g, const Calibration& cal) {
  if (cal.lo.size() != g.tensors.size()) throw Error("calibration does not match the graph");
  QGraph q;
  q.labels = g.labels;
  q.source = g.source;
  q.calibration = cal.method + " over " + std::to_string(cal.images) + " images";
  q.in_norm = g.in_norm;
  // Tensors: same indices as the float graph.
  q.tensors.resize(g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    q.tensors[t].name = g.tensors[t].name;
    q.tensors[t].shape = g.tensors[t].shape;
    choose_params(cal.lo[t], cal.hi[t], &q.tensors[t].scale, &q.tensors[t].zp);
  }
  q.input = g.input;
  q.output = g.output;

  for (const Node& n : g.nodes) {
    if (n.op == Op::Softmax) {
      if (n.output != g.output) throw Error("node '" + n.name + "': Softmax is only supported as the final layer");
      q.output = n.inputs[0];
      q.softmax_output = true;
      continue;
    }
    QNode qn;
    qn.name = n.name;
    qn.inputs = n.inputs;
    qn.output = n.output;
    qn.macs = node_macs(g, n);
    core::LayerDesc& d = qn.geo;
    d.n_inputs = uint8_t(n.inputs.size());
    if (n.inputs.size() > size_t(core::kMaxInputs))
      throw Error("node '" + n.name + "': more than " + std::to_string(core::kMaxInputs) + " inputs");
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      d.in[k] = dims(g.shape(n.inputs[k]));
      d.in_zp[k] = q.tensors[n.inputs[k]].zp;
    }
    QTensor& out = q.tensors[n.output];
    d.out = dims(out.shape);
    d.kh = n.kh; d.kw = n.kw; d.sh = n.sh; d.sw = n.sw; d.dh = n.dh; d.dw = n.dw;
    d.pad_t = n.pad_t; d.pad_l = n.pad_l; d.pad_b = n.pad_b; d.pad_r = n.pad_r;
    d.groups = n.groups;
    const float s_in = q.tensors[n.inputs[0]].scale;

    switch (n.op) {
      case Op::Conv:
      case Op::ConvTranspose:
      case Op::Gemm: {
        qn.op = n.op == Op::Conv ? QOp::Conv : n.op == Op::ConvTranspose ? QOp::ConvTranspose : QOp::Gemm;
        quantize_weights(n, s_in, out, qn);
        act_clamp(n, out.scale, out.zp, d);
        break;
      }
      case Op::Add: {
        qn.op = QOp::Add;
        const float sa = q.tensors[n.inputs[0]].scale, sb = q.tensors[n.inputs[1]].scale;
        const double twice = 2.0 * std::max(sa, sb);
        d.left_shift = 20;
        quantize_multiplier(sa / twice, &d.in_mult[0], &d.in_shift[0]);
        quantize_multiplier(sb / twice, &d.in_mult[1], &d.in_shift[1]);
        quantize_multiplier(twice / (double(1 << d.left_shift) * out.scale), &d.out_mult, &d.out_shift);
        act_clamp(n, out.scale, out.zp, d);
        break;
      }
      case Op::Mul: {
        qn.op = QOp::Mul;
        const float sa = q.tensors[n.inputs[0]].scale, sb = q.tensors[n.inputs[1]].scale;
        quantize_multiplier(double(sa) * sb / out.scale, &d.out_mult, &d.out_shift);
        break;
      }
      case Op::Concat: {
        qn.op = QOp::Concat;
        for (size_t k = 0; k < n.inputs.size(); ++k)
          quantize_multiplier(double(q.tensors[n.inputs[k]].scale) / out.scale, &d.in_mult[k], &d.in_shift[k]);
        break;
      }
      case Op::AvgPool: {
        qn.op = QOp::AvgPool;
        d.count_include_pad = n.count_include_pad ? 1 : 0;
        const int taps = n.kh * n.kw;
        qn.mult.resize(taps);
        qn.shift.resize(taps);
        for (int c = 1; c <= taps; ++c)
          quantize_multiplier(double(s_in) / (double(out.scale) * c), &qn.mult[c - 1], &qn.shift[c - 1]);
        break;
      }
      case Op::GlobalAvgPool: {
        qn.op = QOp::GlobalAvgPool;
        const Shape& xs = g.shape(n.inputs[0]);
        quantize_multiplier(double(s_in) / (double(out.scale) * xs.h * xs.w), &d.out_mult, &d.out_shift);
        break;
      }
      case Op::Resize:
        // The mode in kh, kw, dh (core/ops/resize.h); bilinear blends values
        // of one quantisation, so the output keeps the input's.
        d.kh = n.interp; d.kw = n.coord; d.dh = n.rounding;
        d.sh = d.sw = d.dw = 1;
        [[fallthrough]];
      case Op::Transpose:
        if (n.op == Op::Transpose) core::set_transpose_perm(d, n.perm);
        [[fallthrough]];
      case Op::MaxPool:
      case Op::Pad:
      case Op::Slice:
      case Op::Shuffle:
        // Same quantisation as the input: values are only moved.
        qn.op = n.op == Op::MaxPool ? QOp::MaxPool
                : n.op == Op::Pad   ? QOp::Pad
                : n.op == Op::Slice ? QOp::Slice
                : n.op == Op::Resize ? QOp::Resize
                : n.op == Op::Transpose ? QOp::Transpose
                                     : QOp::Shuffle;
        out.scale = q.tensors[n.inputs[0]].scale;
        out.zp = q.tensors[n.inputs[0]].zp;
        break;
      default:
        if (!is_activation(n.op))
          throw Error("node '" + n.name + "': op " + op_name(n.op) + " must be folded before quantisation");
        tables(n, q.tensors[n.inputs[0]], out, qn);
    }
    d.op = qn.op;
    d.out_zp = out.zp;
    q.nodes.push_back(std::move(qn));
  }
  // MaxPool/Pad changed their output parameters: refresh consumers' zero points
  // (the descriptors copied them before). Re-derive every input zp and the
  // multipliers that depend on the input scale.
  for (auto& qn : q.nodes)
    for (size_t k = 0; k < qn.inputs.size(); ++k)
      if (qn.geo.in_zp[k] != q.tensors[qn.inputs[k]].zp)
        throw Error("internal: quantisation parameters changed after use at node '" + qn.name + "'");
  q.link();
  return q;
}

}  // namespace ts
