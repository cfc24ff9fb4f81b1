// int8 kernels over runs of output neurons (src/core/layer.h, kernels.cpp).
//
// For every QOp, on random int8 data and random parameters:
//  (a) compute_range over [0, N) equals a naive reference written here
//      (int64 accumulation over explicit loops, then the same requantisation
//      primitive from core/qmath.h);
//  (b) the split property: cutting [0, N) into random runs and computing each
//      run from views that hold EXACTLY core::input_box(L, i, begin, end)
//      (copied out of the full tensor into a compact, exactly sized buffer,
//      so an out-of-box read is an out-of-bounds read under ASan), with a
//      descriptor that carries only the run's output channels
//      (oc_base/oc_count), gives bit-identical results to the full run;
//  (c) a view smaller than the box gives ViewTooSmall, a descriptor missing
//      a channel of the run gives MissingData, bad ranges give BadRange, and
//      inconsistent descriptors give BadLayer -- never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/qmath.h"
#include "model/qgraph.h"

namespace {

using ts::core::Box;
using ts::core::Dims;
using ts::core::input_box;
using ts::core::KernelStatus;
using ts::core::LayerDesc;
using ts::core::QOp;
using ts::core::View;
using ts::core::compute_range;

using Rng = std::mt19937;

int rnd(Rng& r, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(r); }
double rndf(Rng& r, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(r); }

std::vector<int8_t> random_i8(Rng& r, size_t n) {
  std::vector<int8_t> v(n);
  for (auto& x : v) x = int8_t(rnd(r, -128, 127));
  return v;
}

// A layer and everything it points to. Not copyable: the descriptor holds
// pointers into the vectors (bind() refreshes them).
struct TLayer {
  std::string name;
  LayerDesc d;
  std::vector<std::vector<int8_t>> x;  // full input tensors
  std::vector<int8_t> w, lut;
  std::vector<int32_t> bias, mult, shift;

  TLayer() = default;
  TLayer(const TLayer&) = delete;
  TLayer& operator=(const TLayer&) = delete;

  void bind() {
    d.weights = w.empty() ? nullptr : w.data();
    d.bias = bias.empty() ? nullptr : bias.data();
    d.mult = mult.empty() ? nullptr : mult.data();
    d.shift = shift.empty() ? nullptr : shift.data();
    d.lut = lut.empty() ? nullptr : lut.data();
    d.oc_base = 0;
  }
  int32_t n_out() const { return d.out.size(); }
  // Output channels that carry per-channel data.
  int32_t channels() const { return d.op == QOp::Conv || d.op == QOp::Gemm ? d.out.c : 0; }
};

void qmult(double m, int32_t* mult, int32_t* shift) { ts::quantize_multiplier(m, mult, shift); }

// Random real multiplier around the usual conv range, occasionally >= 1.
double random_multiplier(Rng& r) {
  const int kind = rnd(r, 0, 9);
  if (kind == 0) return rndf(r, 1.0, 4.0);
  if (kind == 1) return std::exp2(rndf(r, -20, -12));
  return std::exp2(rndf(r, -12, -1));
}

void random_activation(Rng& r, LayerDesc& d) {
  if (rnd(r, 0, 2) == 0) {
    d.act_min = rnd(r, -128, 0);
    d.act_max = rnd(r, 0, 127);
  }
}

int conv_out(int in, int k, int s, int d, int p0, int p1) { return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1; }

struct ConvGeo {
  int cin, cout, groups, H, W, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

std::unique_ptr<TLayer> make_conv(Rng& r, const ConvGeo& g, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Conv;
  d.n_inputs = 1;
  d.in[0] = Dims{g.cin, g.H, g.W};
  d.in_zp[0] = rnd(r, -128, 127);
  d.kh = g.kh; d.kw = g.kw; d.sh = g.sh; d.sw = g.sw; d.dh = g.dh; d.dw = g.dw;
  d.pad_t = g.pt; d.pad_l = g.pl; d.pad_b = g.pb; d.pad_r = g.pr;
  d.groups = g.groups;
  d.out = Dims{g.cout, conv_out(g.H, g.kh, g.sh, g.dh, g.pt, g.pb), conv_out(g.W, g.kw, g.sw, g.dw, g.pl, g.pr)};
  d.out_zp = rnd(r, -128, 127);
  random_activation(r, d);
  const int per = g.cin / g.groups * g.kh * g.kw;
  L->w = random_i8(r, size_t(g.cout) * per);
  for (auto& v : L->w) if (v == -128) v = -127;  // symmetric weights, as the quantiser makes
  L->bias.resize(g.cout);
  L->mult.resize(g.cout);
  L->shift.resize(g.cout);
  for (int o = 0; o < g.cout; ++o) {
    L->bias[o] = rnd(r, -20000, 20000);
    qmult(random_multiplier(r), &L->mult[o], &L->shift[o]);
  }
  L->x.push_back(random_i8(r, size_t(d.in[0].size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_gemm(Rng& r, Dims in, int n, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Gemm;
  d.in[0] = in;
  d.in_zp[0] = rnd(r, -128, 127);
  d.out = Dims{n, 1, 1};
  d.out_zp = rnd(r, -128, 127);
  random_activation(r, d);
  L->w = random_i8(r, size_t(n) * in.size());
  L->bias.resize(n);
  L->mult.resize(n);
  L->shift.resize(n);
  for (int o = 0; o < n; ++o) {
    L->bias[o] = rnd(r, -50000, 50000);
    qmult(random_multiplier(r) / 4, &L->mult[o], &L->shift[o]);
  }
  L->x.push_back(random_i8(r, size_t(in.size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_add(Rng& r, Dims s, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Add;
  d.n_inputs = 2;
  d.in[0] = d.in[1] = d.out = s;
  const double sa = rndf(r, 0.01, 0.1), sb = rndf(r, 0.01, 0.1), so = rndf(r, 0.02, 0.2);
  const double twice = 2 * std::max(sa, sb);
  d.left_shift = 20;
  qmult(sa / twice, &d.in_mult[0], &d.in_shift[0]);
  qmult(sb / twice, &d.in_mult[1], &d.in_shift[1]);
  qmult(twice / (double(1 << 20) * so), &d.out_mult, &d.out_shift);
  d.in_zp[0] = rnd(r, -128, 127);
  d.in_zp[1] = rnd(r, -128, 127);
  d.out_zp = rnd(r, -128, 127);
  random_activation(r, d);
  L->x.push_back(random_i8(r, size_t(s.size())));
  L->x.push_back(random_i8(r, size_t(s.size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_mul(Rng& r, Dims s, bool per_channel, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Mul;
  d.n_inputs = 2;
  d.in[0] = d.out = s;
  d.in[1] = per_channel ? Dims{s.c, 1, 1} : s;
  qmult(rndf(r, 0.0005, 0.05), &d.out_mult, &d.out_shift);
  d.in_zp[0] = rnd(r, -128, 127);
  d.in_zp[1] = rnd(r, -128, 127);
  d.out_zp = rnd(r, -128, 127);
  random_activation(r, d);
  L->x.push_back(random_i8(r, size_t(d.in[0].size())));
  L->x.push_back(random_i8(r, size_t(d.in[1].size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_concat(Rng& r, const std::vector<int>& chans, int H, int W, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Concat;
  d.n_inputs = uint8_t(chans.size());
  const double so = rndf(r, 0.02, 0.1);
  int total = 0;
  for (size_t k = 0; k < chans.size(); ++k) {
    d.in[k] = Dims{chans[k], H, W};
    d.in_zp[k] = rnd(r, -128, 127);
    qmult(rndf(r, 0.005, 0.3) / so, &d.in_mult[k], &d.in_shift[k]);  // ratios both < 1 and > 1
    total += chans[k];
    L->x.push_back(random_i8(r, size_t(d.in[k].size())));
  }
  d.out = Dims{total, H, W};
  d.out_zp = rnd(r, -128, 127);
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_pool(Rng& r, QOp op, Dims in, int kh, int kw, int sh, int sw, int pt, int pl, int pb, int pr,
                                  bool cip, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = op;
  d.in[0] = in;
  d.kh = kh; d.kw = kw; d.sh = sh; d.sw = sw;
  d.pad_t = pt; d.pad_l = pl; d.pad_b = pb; d.pad_r = pr;
  d.count_include_pad = cip ? 1 : 0;
  d.out = Dims{in.c, conv_out(in.h, kh, sh, 1, pt, pb), conv_out(in.w, kw, sw, 1, pl, pr)};
  if (op == QOp::AvgPool) {
    d.in_zp[0] = rnd(r, -128, 127);
    d.out_zp = rnd(r, -128, 127);
    const double ratio = rndf(r, 0.5, 2.0);  // s_in / s_out
    L->mult.resize(kh * kw);
    L->shift.resize(kh * kw);
    for (int c = 1; c <= kh * kw; ++c) qmult(ratio / c, &L->mult[c - 1], &L->shift[c - 1]);
    random_activation(r, d);
  } else {
    d.in_zp[0] = d.out_zp = rnd(r, -128, 127);  // MaxPool shares the input's quantisation
    if (rnd(r, 0, 3) == 0) d.act_min = rnd(r, -128, 0);
  }
  L->x.push_back(random_i8(r, size_t(in.size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_gap(Rng& r, Dims in, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::GlobalAvgPool;
  d.in[0] = in;
  d.out = Dims{in.c, 1, 1};
  d.in_zp[0] = rnd(r, -128, 127);
  d.out_zp = rnd(r, -128, 127);
  qmult(rndf(r, 0.5, 2.0) / (in.h * in.w), &d.out_mult, &d.out_shift);
  L->x.push_back(random_i8(r, size_t(in.size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_lut(Rng& r, Dims s, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  L->d.op = QOp::Lut;
  L->d.in[0] = L->d.out = s;
  L->lut = random_i8(r, 256);
  L->x.push_back(random_i8(r, size_t(s.size())));
  L->bind();
  return L;
}

std::unique_ptr<TLayer> make_pad(Rng& r, Dims in, int pt, int pl, int pb, int pr, const std::string& name) {
  auto L = std::make_unique<TLayer>();
  L->name = name;
  LayerDesc& d = L->d;
  d.op = QOp::Pad;
  d.in[0] = in;
  d.pad_t = pt; d.pad_l = pl; d.pad_b = pb; d.pad_r = pr;
  d.out = Dims{in.c, in.h + pt + pb, in.w + pl + pr};
  d.in_zp[0] = d.out_zp = rnd(r, -128, 127);
  L->x.push_back(random_i8(r, size_t(in.size())));
  L->bind();
  return L;
}

// ---------------------------------------------------------------- reference

int8_t requant_ref(int64_t acc, int32_t m, int32_t s, int32_t zp, int32_t lo, int32_t hi) {
  EXPECT_TRUE(acc >= INT32_MIN && acc <= INT32_MAX) << "accumulator overflows int32";
  const int32_t v = ts::core::multiply_by_quantized_multiplier(int32_t(acc), m, s) + zp;
  return int8_t(std::min(hi, std::max(lo, v)));
}

// Element (c, y, x) of input k, or nullopt-ish: `inside` false in padding.
int32_t at(const TLayer& L, int k, int c, int y, int x) {
  const Dims& D = L.d.in[k];
  return L.x[k][(size_t(c) * D.h + y) * D.w + x];
}

std::vector<int8_t> reference(const TLayer& L) {
  const LayerDesc& d = L.d;
  const Dims& O = d.out;
  std::vector<int8_t> out(size_t(O.size()));
  auto idx = [&](int c, int y, int x) { return (size_t(c) * O.h + y) * O.w + x; };
  switch (d.op) {
    case QOp::Conv: {
      const Dims& X = d.in[0];
      const int cin_g = X.c / d.groups, cout_g = O.c / d.groups;
      for (int o = 0; o < O.c; ++o)
        for (int oy = 0; oy < O.h; ++oy)
          for (int ox = 0; ox < O.w; ++ox) {
            int64_t acc = L.bias[o];
            for (int ic = 0; ic < cin_g; ++ic) {
              const int c = (o / cout_g) * cin_g + ic;
              for (int ky = 0; ky < d.kh; ++ky)
                for (int kx = 0; kx < d.kw; ++kx) {
                  const int iy = oy * d.sh - d.pad_t + ky * d.dh;
                  const int ix = ox * d.sw - d.pad_l + kx * d.dw;
                  if (iy < 0 || iy >= X.h || ix < 0 || ix >= X.w) continue;
                  const int wv = L.w[((size_t(o) * cin_g + ic) * d.kh + ky) * d.kw + kx];
                  acc += int64_t(at(L, 0, c, iy, ix) - d.in_zp[0]) * wv;
                }
            }
            out[idx(o, oy, ox)] = requant_ref(acc, L.mult[o], L.shift[o], d.out_zp, d.act_min, d.act_max);
          }
      break;
    }
    case QOp::Gemm: {
      const int K = d.in[0].size();
      for (int o = 0; o < O.c; ++o) {
        int64_t acc = L.bias[o];
        for (int k = 0; k < K; ++k) acc += int64_t(L.x[0][k] - d.in_zp[0]) * L.w[size_t(o) * K + k];
        out[o] = requant_ref(acc, L.mult[o], L.shift[o], d.out_zp, d.act_min, d.act_max);
      }
      break;
    }
    case QOp::Add:
      for (size_t i = 0; i < out.size(); ++i) {
        const int32_t a = (L.x[0][i] - d.in_zp[0]) * (1 << d.left_shift);
        const int32_t b = (L.x[1][i] - d.in_zp[1]) * (1 << d.left_shift);
        const int64_t sum = int64_t(ts::core::multiply_by_quantized_multiplier(a, d.in_mult[0], d.in_shift[0])) +
                            ts::core::multiply_by_quantized_multiplier(b, d.in_mult[1], d.in_shift[1]);
        out[i] = requant_ref(sum, d.out_mult, d.out_shift, d.out_zp, d.act_min, d.act_max);
      }
      break;
    case QOp::Mul:
      for (int c = 0; c < O.c; ++c)
        for (int y = 0; y < O.h; ++y)
          for (int x = 0; x < O.w; ++x) {
            const bool bc = d.in[1].h == 1 && d.in[1].w == 1 && O.h * O.w > 1;
            const int32_t a = at(L, 0, c, y, x) - d.in_zp[0];
            const int32_t b = (bc ? at(L, 1, c, 0, 0) : at(L, 1, c, y, x)) - d.in_zp[1];
            out[idx(c, y, x)] = requant_ref(int64_t(a) * b, d.out_mult, d.out_shift, d.out_zp, d.act_min, d.act_max);
          }
      break;
    case QOp::Concat: {
      int c_out = 0;
      for (int k = 0; k < d.n_inputs; ++k)
        for (int c = 0; c < d.in[k].c; ++c, ++c_out)
          for (int y = 0; y < O.h; ++y)
            for (int x = 0; x < O.w; ++x)
              out[idx(c_out, y, x)] = requant_ref(at(L, k, c, y, x) - d.in_zp[k], d.in_mult[k], d.in_shift[k], d.out_zp,
                                                  d.act_min, d.act_max);
      break;
    }
    case QOp::AvgPool:
    case QOp::MaxPool: {
      const Dims& X = d.in[0];
      for (int c = 0; c < O.c; ++c)
        for (int oy = 0; oy < O.h; ++oy)
          for (int ox = 0; ox < O.w; ++ox) {
            int64_t sum = 0;
            int count = 0, best = -1000;
            for (int ky = 0; ky < d.kh; ++ky)
              for (int kx = 0; kx < d.kw; ++kx) {
                const int iy = oy * d.sh - d.pad_t + ky, ix = ox * d.sw - d.pad_l + kx;
                if (iy < 0 || iy >= X.h || ix < 0 || ix >= X.w) continue;
                sum += at(L, 0, c, iy, ix) - d.in_zp[0];
                best = std::max(best, at(L, 0, c, iy, ix));
                ++count;
              }
            EXPECT_GT(count, 0) << "test geometry has a window entirely in padding";
            if (d.op == QOp::MaxPool) {
              out[idx(c, oy, ox)] = int8_t(std::min(d.act_max, std::max(d.act_min, best)));
            } else {
              const int div = d.count_include_pad ? d.kh * d.kw : count;
              out[idx(c, oy, ox)] = requant_ref(sum, L.mult[div - 1], L.shift[div - 1], d.out_zp, d.act_min, d.act_max);
            }
          }
      break;
    }
    case QOp::GlobalAvgPool: {
      const Dims& X = d.in[0];
      for (int c = 0; c < X.c; ++c) {
        int64_t sum = 0;
        for (int y = 0; y < X.h; ++y)
          for (int x = 0; x < X.w; ++x) sum += at(L, 0, c, y, x) - d.in_zp[0];
        out[c] = requant_ref(sum, d.out_mult, d.out_shift, d.out_zp, d.act_min, d.act_max);
      }
      break;
    }
    case QOp::Lut:
      for (size_t i = 0; i < out.size(); ++i) out[i] = L.lut[size_t(L.x[0][i] + 128)];
      break;
    case QOp::Pad: {
      const Dims& X = d.in[0];
      for (int c = 0; c < O.c; ++c)
        for (int y = 0; y < O.h; ++y)
          for (int x = 0; x < O.w; ++x) {
            const int iy = y - d.pad_t, ix = x - d.pad_l;
            const bool in = iy >= 0 && iy < X.h && ix >= 0 && ix < X.w;
            out[idx(c, y, x)] = in ? int8_t(at(L, 0, c, iy, ix)) : int8_t(d.out_zp);
          }
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------- harness

std::string show(const Box& b) {
  return "[c " + std::to_string(b.c0) + "," + std::to_string(b.c1) + ") x [h " + std::to_string(b.h0) + "," +
         std::to_string(b.h1) + ")";
}

std::vector<int8_t> run_full(const TLayer& L, KernelStatus* st) {
  View v[ts::core::kMaxInputs];
  for (int k = 0; k < L.d.n_inputs; ++k) v[k] = View{L.x[k].data(), 0, L.d.in[k].c, 0, L.d.in[k].h};
  std::vector<int8_t> out(size_t(L.n_out()), int8_t(0x5A));
  *st = compute_range(L.d, v, 0, L.n_out(), out.data(), L.channels());
  return out;
}

// Copy of box b of input k into an exactly sized buffer.
std::unique_ptr<int8_t[]> copy_box(const TLayer& L, int k, const Box& b) {
  const Dims& D = L.d.in[k];
  const size_t n = size_t(b.elems(D.w));
  std::unique_ptr<int8_t[]> buf(new int8_t[n ? n : 1]);
  size_t at_ = 0;
  for (int c = b.c0; c < b.c1; ++c)
    for (int y = b.h0; y < b.h1; ++y)
      for (int x = 0; x < D.w; ++x) buf[at_++] = L.x[k][(size_t(c) * D.h + y) * D.w + x];
  return buf;
}

// The per-board part of a descriptor: only channels [first, last] of the
// per-channel arrays, in separate exactly sized buffers.
struct Fragment {
  LayerDesc d;
  std::unique_ptr<int8_t[]> w;
  std::unique_ptr<int32_t[]> bias, mult, shift;
  int32_t oc_count = 0;
};

Fragment fragment(const TLayer& L, int32_t first, int32_t last) {
  Fragment f;
  f.d = L.d;
  if (L.channels() == 0) {
    f.oc_count = 0;
    return f;
  }
  const int32_t n = last - first + 1;
  const size_t per = L.w.size() / size_t(L.channels());
  f.w.reset(new int8_t[per * n]);
  f.bias.reset(new int32_t[n]);
  f.mult.reset(new int32_t[n]);
  f.shift.reset(new int32_t[n]);
  for (int32_t o = 0; o < n; ++o) {
    std::copy_n(L.w.data() + (first + o) * per, per, f.w.get() + size_t(o) * per);
    f.bias[o] = L.bias[first + o];
    f.mult[o] = L.mult[first + o];
    f.shift[o] = L.shift[first + o];
  }
  f.d.oc_base = first;
  f.d.weights = f.w.get();
  f.d.bias = f.bias.get();
  f.d.mult = f.mult.get();
  f.d.shift = f.shift.get();
  f.oc_count = n;
  return f;
}

void run_channels(const LayerDesc& d, int32_t b, int32_t e, int32_t* first, int32_t* last) {
  ts::core::output_channels(d, b, e, first, last);
}

// Computes run [b, e) from exact-box views and a fragment descriptor.
KernelStatus run_split(const TLayer& L, int32_t b, int32_t e, int8_t* out) {
  std::unique_ptr<int8_t[]> bufs[ts::core::kMaxInputs];
  View v[ts::core::kMaxInputs];
  for (int k = 0; k < L.d.n_inputs; ++k) {
    const Box box = input_box(L.d, k, b, e);
    if (box.empty()) {
      v[k] = View{};  // nothing may be read from this input
      continue;
    }
    // The box must lie inside the tensor.
    EXPECT_TRUE(box.c0 >= 0 && box.c1 <= L.d.in[k].c && box.h0 >= 0 && box.h1 <= L.d.in[k].h)
        << L.name << " run [" << b << "," << e << ") input " << k << " box " << show(box);
    bufs[k] = copy_box(L, k, box);
    v[k] = View{bufs[k].get(), box.c0, box.c1 - box.c0, box.h0, box.h1 - box.h0};
  }
  int32_t first, last;
  run_channels(L.d, b, e, &first, &last);
  Fragment f = fragment(L, first, last);
  return compute_range(f.d, v, b, e, out, f.oc_count);
}

// Random cut of [0, n) into runs: a mix of single neurons, short runs, runs
// crossing channel boundaries and the whole range.
std::vector<int32_t> random_cuts(Rng& r, int32_t n, int32_t hw) {
  std::vector<int32_t> cuts{0, n};
  const int mode = rnd(r, 0, 4);
  if (mode == 0) {
    for (int32_t i = 1; i < n; ++i) cuts.push_back(i);  // every neuron on its own
  } else if (mode == 1) {
    for (int32_t i = hw; i < n; i += hw) cuts.push_back(i);  // whole channels
    const int extra = rnd(r, 0, 3);
    for (int i = 0; i < extra; ++i) cuts.push_back(rnd(r, 1, std::max(1, n - 1)));
  } else {
    const int k = rnd(r, 1, std::min<int32_t>(n, mode == 2 ? 3 : 12));
    for (int i = 0; i < k; ++i) cuts.push_back(rnd(r, 0, n));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// (a) + (b) for one layer.
void check_layer(const TLayer& L, Rng& r, int splits = 12) {
  SCOPED_TRACE(L.name);
  KernelStatus st;
  const std::vector<int8_t> full = run_full(L, &st);
  ASSERT_EQ(st, KernelStatus::Ok);
  const std::vector<int8_t> ref = reference(L);
  ASSERT_EQ(full.size(), ref.size());
  int bad = 0;
  for (size_t i = 0; i < ref.size() && bad < 5; ++i)
    if (full[i] != ref[i]) {
      ++bad;
      ADD_FAILURE() << L.name << ": neuron " << i << " kernel " << int(full[i]) << " reference " << int(ref[i]);
    }
  if (bad) return;

  const int32_t n = L.n_out(), hw = L.d.out.h * L.d.out.w;
  for (int t = 0; t < splits; ++t) {
    const auto cuts = random_cuts(r, n, hw);
    std::vector<int8_t> got(size_t(n), int8_t(0x33));
    for (size_t j = 0; j + 1 < cuts.size(); ++j) {
      const int32_t b = cuts[j], e = cuts[j + 1];
      const KernelStatus s = run_split(L, b, e, got.data() + b);
      ASSERT_EQ(s, KernelStatus::Ok) << L.name << " run [" << b << "," << e << ")";
    }
    for (int32_t i = 0; i < n; ++i)
      ASSERT_EQ(int(got[size_t(i)]), int(full[size_t(i)])) << L.name << ": split " << t << " differs at neuron " << i;
  }
}

// (c) for one layer: smaller views, missing channels, bad ranges.
void check_errors(const TLayer& L, Rng& r) {
  SCOPED_TRACE(L.name);
  const int32_t n = L.n_out();
  for (int t = 0; t < 6; ++t) {
    const int32_t b = rnd(r, 0, n - 1), e = rnd(r, b + 1, n);
    std::vector<int8_t> out(size_t(e - b));
    std::unique_ptr<int8_t[]> bufs[ts::core::kMaxInputs];
    View v[ts::core::kMaxInputs];
    Box boxes[ts::core::kMaxInputs];
    for (int k = 0; k < L.d.n_inputs; ++k) {
      boxes[k] = input_box(L.d, k, b, e);
      if (boxes[k].empty()) continue;
      bufs[k] = copy_box(L, k, boxes[k]);
      v[k] = View{bufs[k].get(), boxes[k].c0, boxes[k].c1 - boxes[k].c0, boxes[k].h0, boxes[k].h1 - boxes[k].h0};
    }
    int32_t first, last;
    run_channels(L.d, b, e, &first, &last);
    {
      Fragment f = fragment(L, first, last);
      ASSERT_EQ(compute_range(f.d, v, b, e, out.data(), f.oc_count), KernelStatus::Ok);
    }
    // Each input, each side of its box shrunk by one; and no data at all.
    for (int k = 0; k < L.d.n_inputs; ++k) {
      if (boxes[k].empty()) continue;
      for (int side = 0; side < 5; ++side) {
        View s[ts::core::kMaxInputs];
        std::copy(v, v + ts::core::kMaxInputs, s);
        View& w = s[k];
        switch (side) {
          case 0: w.c0 += 1; w.nc -= 1; w.data = bufs[k].get() + size_t(boxes[k].h1 - boxes[k].h0) * L.d.in[k].w; break;
          case 1: w.nc -= 1; break;
          case 2: w.h0 += 1; w.nh -= 1; break;
          case 3: w.nh -= 1; break;
          case 4: w.data = nullptr; break;
        }
        if (side <= 1 && w.nc <= 0) { w.nc = 0; }
        if (side >= 2 && side <= 3 && w.nh <= 0) { w.nh = 0; }
        // Row-shrunk views keep pointing into the (larger) buffer: if the
        // kernel ignored the check it would read garbage, not crash.
        Fragment f = fragment(L, first, last);
        EXPECT_EQ(compute_range(f.d, s, b, e, out.data(), f.oc_count), KernelStatus::ViewTooSmall)
            << "input " << k << " side " << side << " run [" << b << "," << e << ") box " << show(boxes[k]);
      }
    }
    // Per-channel data that does not cover the run.
    if (L.channels() > 0) {
      {
        Fragment f = fragment(L, first, last);
        EXPECT_EQ(compute_range(f.d, v, b, e, out.data(), f.oc_count - 1), KernelStatus::MissingData);
      }
      if (last > first) {
        Fragment f = fragment(L, first + 1, last);
        EXPECT_EQ(compute_range(f.d, v, b, e, out.data(), f.oc_count), KernelStatus::MissingData);
      }
      if (first > 0) {
        Fragment f = fragment(L, 0, first - 1);
        EXPECT_EQ(compute_range(f.d, v, b, e, out.data(), f.oc_count), KernelStatus::MissingData);
      }
      {
        Fragment f = fragment(L, first, last);
        EXPECT_EQ(compute_range(f.d, v, b, e, out.data(), 0), KernelStatus::MissingData);
      }
    }
  }
  // Bad ranges, with full views.
  View v[ts::core::kMaxInputs];
  for (int k = 0; k < L.d.n_inputs; ++k) v[k] = View{L.x[k].data(), 0, L.d.in[k].c, 0, L.d.in[k].h};
  std::vector<int8_t> out(size_t(n) + 2);
  const int C = L.channels();
  EXPECT_EQ(compute_range(L.d, v, -1, 1, out.data(), C), KernelStatus::BadRange);
  EXPECT_EQ(compute_range(L.d, v, 0, n + 1, out.data(), C), KernelStatus::BadRange);
  EXPECT_EQ(compute_range(L.d, v, n, n + 1, out.data(), C), KernelStatus::BadRange);
  EXPECT_EQ(compute_range(L.d, v, 1, 0, out.data(), C), KernelStatus::BadRange);
  EXPECT_EQ(compute_range(L.d, v, INT32_MIN, INT32_MAX, out.data(), C), KernelStatus::BadRange);
  // An empty run is fine and needs nothing.
  View none[ts::core::kMaxInputs];
  EXPECT_EQ(compute_range(L.d, none, n / 2, n / 2, out.data(), 0), KernelStatus::Ok);
  EXPECT_TRUE(input_box(L.d, 0, 3, 3).empty());
}

// Views larger than the box, at offsets (a board holding more rows than it
// needs, or the coordinator's full tensors) give the same results.
void check_loose_views(const TLayer& L, Rng& r) {
  SCOPED_TRACE(L.name);
  KernelStatus st;
  const auto full = run_full(L, &st);
  ASSERT_EQ(st, KernelStatus::Ok);
  const int32_t n = L.n_out();
  for (int t = 0; t < 10; ++t) {
    const int32_t b = rnd(r, 0, n - 1), e = rnd(r, b + 1, n);
    std::unique_ptr<int8_t[]> bufs[ts::core::kMaxInputs];
    View v[ts::core::kMaxInputs];
    for (int k = 0; k < L.d.n_inputs; ++k) {
      Box box = input_box(L.d, k, b, e);
      if (box.empty()) box = Box{0, 1, 0, 1};
      box.c0 = rnd(r, 0, box.c0);
      box.c1 = rnd(r, box.c1, L.d.in[k].c);
      box.h0 = rnd(r, 0, box.h0);
      box.h1 = rnd(r, box.h1, L.d.in[k].h);
      bufs[k] = copy_box(L, k, box);
      v[k] = View{bufs[k].get(), box.c0, box.c1 - box.c0, box.h0, box.h1 - box.h0};
    }
    std::vector<int8_t> out(size_t(e - b));
    ASSERT_EQ(compute_range(L.d, v, b, e, out.data(), L.channels()), KernelStatus::Ok);
    for (int32_t i = b; i < e; ++i) ASSERT_EQ(out[size_t(i - b)], full[size_t(i)]) << "neuron " << i;
  }
}

void check_all(const TLayer& L, Rng& r) {
  check_layer(L, r);
  check_errors(L, r);
  check_loose_views(L, r);
}

// ---------------------------------------------------------------- fixed cases

TEST(Kernels, ConvRegular) {
  Rng r(1);
  check_all(*make_conv(r, {3, 4, 1, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "conv3x3"), r);
}

TEST(Kernels, ConvDepthwise) {
  Rng r(2);
  check_all(*make_conv(r, {5, 5, 5, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "depthwise"), r);
  check_all(*make_conv(r, {3, 6, 3, 6, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, "depthwise x2 stride 2"), r);
}

TEST(Kernels, ConvGrouped) {
  Rng r(3);
  check_all(*make_conv(r, {4, 6, 2, 6, 5, 3, 2, 1, 1, 1, 1, 0, 0, 0, 0}, "grouped"), r);
  check_all(*make_conv(r, {6, 9, 3, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "grouped pointwise"), r);
}

TEST(Kernels, ConvStride2) {
  Rng r(4);
  check_all(*make_conv(r, {3, 4, 1, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, "stride2"), r);
  check_all(*make_conv(r, {2, 3, 1, 10, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0}, "1x1 stride2 (not the fast path)"), r);
}

TEST(Kernels, ConvDilation2) {
  Rng r(5);
  check_all(*make_conv(r, {3, 2, 1, 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}, "dilation2"), r);
  check_all(*make_conv(r, {2, 2, 1, 11, 10, 3, 2, 2, 1, 2, 3, 1, 0, 2, 1}, "dilation 2x3 stride 2x1"), r);
}

TEST(Kernels, ConvAsymmetricPadding) {
  Rng r(6);
  check_all(*make_conv(r, {2, 3, 1, 7, 5, 2, 3, 2, 1, 1, 1, 0, 1, 2, 1}, "asym pad t0 l1 b2 r1"), r);
  // Padding wider than the kernel: whole output rows read no input, their
  // boxes are empty and the board gets no data for them.
  check_all(*make_conv(r, {2, 2, 1, 4, 4, 1, 1, 1, 1, 1, 1, 2, 1, 3, 0}, "pad beyond kernel"), r);
}

TEST(Kernels, ConvPointwiseFastPath) {
  Rng r(7);
  // 9x10 = 90 positions per channel > the kernel's 64-position chunk, so runs
  // cross chunk and row boundaries inside a channel.
  check_all(*make_conv(r, {8, 5, 1, 9, 10, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "pointwise"), r);
  check_all(*make_conv(r, {3, 4, 1, 1, 130, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "pointwise one long row"), r);
  check_all(*make_conv(r, {3, 2, 1, 12, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "3x3 over several chunks"), r);
}

TEST(Kernels, Gemm) {
  Rng r(8);
  check_all(*make_gemm(r, Dims{4, 3, 2}, 10, "gemm chw input"), r);
  check_all(*make_gemm(r, Dims{40, 1, 1}, 7, "gemm vector"), r);
}

TEST(Kernels, Add) {
  Rng r(9);
  check_all(*make_add(r, Dims{3, 5, 6}, "add"), r);
}

TEST(Kernels, Mul) {
  Rng r(10);
  check_all(*make_mul(r, Dims{3, 4, 7}, false, "mul same shape"), r);
  check_all(*make_mul(r, Dims{5, 4, 6}, true, "mul per-channel broadcast"), r);
  check_all(*make_mul(r, Dims{6, 1, 1}, false, "mul (C,1,1) x (C,1,1)"), r);
}

TEST(Kernels, ConcatThreeOperandsDifferentScales) {
  Rng r(11);
  check_all(*make_concat(r, {2, 3, 1}, 4, 5, "concat 2+3+1"), r);
}

TEST(Kernels, AvgPool) {
  Rng r(12);
  check_all(*make_pool(r, QOp::AvgPool, Dims{3, 7, 8}, 3, 3, 2, 2, 1, 1, 1, 1, false, "avg 3x3 s2 p1 cip0"), r);
  check_all(*make_pool(r, QOp::AvgPool, Dims{3, 7, 8}, 3, 3, 2, 2, 1, 1, 1, 1, true, "avg 3x3 s2 p1 cip1"), r);
  check_all(*make_pool(r, QOp::AvgPool, Dims{2, 6, 7}, 2, 3, 1, 2, 0, 2, 1, 1, false, "avg asym pad cip0"), r);
  check_all(*make_pool(r, QOp::AvgPool, Dims{2, 6, 7}, 2, 3, 1, 2, 0, 2, 1, 1, true, "avg asym pad cip1"), r);
  check_all(*make_pool(r, QOp::AvgPool, Dims{2, 6, 6}, 2, 2, 2, 2, 0, 0, 0, 0, false, "avg 2x2 s2"), r);
}

TEST(Kernels, GlobalAvgPool) {
  Rng r(13);
  check_all(*make_gap(r, Dims{6, 5, 7}, "gap"), r);
  check_all(*make_gap(r, Dims{3, 1, 1}, "gap 1x1"), r);
}

TEST(Kernels, MaxPool) {
  Rng r(14);
  check_all(*make_pool(r, QOp::MaxPool, Dims{3, 7, 7}, 3, 3, 2, 2, 1, 1, 1, 1, false, "max 3x3 s2 p1"), r);
  check_all(*make_pool(r, QOp::MaxPool, Dims{2, 6, 9}, 2, 2, 2, 2, 0, 0, 0, 1, false, "max 2x2 s2 pad r1"), r);
  check_all(*make_pool(r, QOp::MaxPool, Dims{2, 5, 5}, 5, 5, 1, 1, 2, 2, 2, 2, false, "max 5x5 pad2"), r);
}

TEST(Kernels, Lut) {
  Rng r(15);
  check_all(*make_lut(r, Dims{3, 5, 4}, "lut"), r);
}

TEST(Kernels, Pad) {
  Rng r(16);
  check_all(*make_pad(r, Dims{2, 4, 5}, 1, 2, 3, 0, "pad t1 l2 b3 r0"), r);
  check_all(*make_pad(r, Dims{2, 3, 3}, 0, 0, 4, 1, "pad bottom only"), r);
}

// ---------------------------------------------------------------- random fuzz

TEST(Kernels, RandomGeometries) {
  Rng r(2024);
  int layers = 0;
  for (int it = 0; it < 60; ++it) {
    // Conv with random everything.
    ConvGeo g{};
    g.groups = rnd(r, 1, 3);
    g.cin = g.groups * rnd(r, 1, 3);
    g.cout = g.groups * rnd(r, 1, 3);
    if (rnd(r, 0, 3) == 0) g.cin = g.cout = g.groups = rnd(r, 1, 5);  // depthwise
    g.kh = rnd(r, 1, 4); g.kw = rnd(r, 1, 4);
    g.sh = rnd(r, 1, 3); g.sw = rnd(r, 1, 3);
    g.dh = rnd(r, 1, 2); g.dw = rnd(r, 1, 2);
    g.pt = rnd(r, 0, 3); g.pb = rnd(r, 0, 3); g.pl = rnd(r, 0, 3); g.pr = rnd(r, 0, 3);
    g.H = rnd(r, (g.kh - 1) * g.dh + 1, 12);
    g.W = rnd(r, (g.kw - 1) * g.dw + 1, 12);
    if (conv_out(g.H, g.kh, g.sh, g.dh, g.pt, g.pb) < 1 || conv_out(g.W, g.kw, g.sw, g.dw, g.pl, g.pr) < 1) continue;
    check_layer(*make_conv(r, g, "random conv " + std::to_string(it)), r, 4);
    ++layers;

    // Pools with padding below the kernel size (no window entirely padding).
    const int kh = rnd(r, 1, 4), kw = rnd(r, 1, 4);
    const Dims in{rnd(r, 1, 3), rnd(r, kh, 10), rnd(r, kw, 10)};
    const int pt = rnd(r, 0, kh - 1), pb = rnd(r, 0, kh - 1), pl = rnd(r, 0, kw - 1), pr = rnd(r, 0, kw - 1);
    const QOp op = rnd(r, 0, 1) ? QOp::AvgPool : QOp::MaxPool;
    check_layer(*make_pool(r, op, in, kh, kw, rnd(r, 1, 3), rnd(r, 1, 3), pt, pl, pb, pr, rnd(r, 0, 1) == 1,
                           "random pool " + std::to_string(it)),
                r, 4);
    const Dims s{rnd(r, 1, 4), rnd(r, 1, 6), rnd(r, 1, 6)};
    check_layer(*make_add(r, s, "random add " + std::to_string(it)), r, 3);
    check_layer(*make_mul(r, s, rnd(r, 0, 1) == 1, "random mul " + std::to_string(it)), r, 3);
    std::vector<int> ch;
    for (int k = rnd(r, 1, 4); k > 0; --k) ch.push_back(rnd(r, 1, 3));
    check_layer(*make_concat(r, ch, s.h, s.w, "random concat " + std::to_string(it)), r, 3);
    check_layer(*make_pad(r, s, rnd(r, 0, 3), rnd(r, 0, 3), rnd(r, 0, 3), rnd(r, 0, 3), "random pad " + std::to_string(it)),
                r, 3);
    layers += 5;
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
  EXPECT_GT(layers, 200);
}

// Sizes on both sides of the kernels' internal blocking (input-channel and
// output-channel blocks of the pointwise path, position chunks of the
// stride-1 "same width" path, column chunks and the phase buffer of strided
// rows, partial tiles), so every code path the kernels choose by size is
// compared with the reference and split.
TEST(Kernels, ConvSizesAroundInternalBlocking) {
  Rng r(51);
  // Pointwise: deep inputs (taken in chunks), many and odd output channels,
  // positions that leave a partial tile.
  check_all(*make_conv(r, {300, 37, 1, 3, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "pointwise cin 300 cout 37"), r);
  check_all(*make_conv(r, {520, 6, 2, 2, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "grouped pointwise cin/g 260"), r);
  check_all(*make_conv(r, {256, 33, 1, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "pointwise cin 256 cout 33"), r);
  check_all(*make_conv(r, {257, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, "pointwise cin 257 one output"), r);
  // Stride 1 with output rows as wide as the input's, more than one chunk of
  // positions per channel; symmetric, one-sided and dilated horizontal pads.
  check_all(*make_conv(r, {2, 3, 1, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "same 3x3 on 20x20"), r);
  check_all(*make_conv(r, {2, 2, 1, 9, 31, 3, 3, 1, 1, 1, 1, 0, 2, 2, 0}, "same width, pad left 2 right 0"), r);
  check_all(*make_conv(r, {2, 2, 1, 9, 31, 2, 5, 1, 1, 1, 1, 1, 0, 0, 4}, "same width, pad left 0 right 4"), r);
  check_all(*make_conv(r, {3, 2, 1, 13, 23, 3, 3, 1, 1, 2, 2, 2, 1, 2, 3}, "same width, dilated, pads 1/3"), r);
  check_all(*make_conv(r, {4, 4, 4, 17, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "depthwise same 17x16"), r);
  check_all(*make_conv(r, {1, 1, 1, 3, 300, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1}, "same width, one long row of 300"), r);
  // Rows wider than the column chunk, strided rows below and above the phase
  // buffer, stride 1 with narrower output rows.
  check_all(*make_conv(r, {2, 2, 1, 3, 300, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, "stride 2, input width 300"), r);
  check_all(*make_conv(r, {1, 2, 1, 3, 600, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, "stride 2, input width 600"), r);
  check_all(*make_conv(r, {1, 2, 1, 4, 530, 2, 4, 1, 3, 1, 2, 0, 3, 1, 0}, "stride 3 dilation 2, width 530"), r);
  check_all(*make_conv(r, {2, 2, 1, 4, 140, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0}, "stride 1 valid, width 140"), r);
}

TEST(Kernels, RandomWideAndDeepGeometries) {
  Rng r(4048);
  for (int it = 0; it < 25; ++it) {
    ConvGeo g{};
    g.groups = rnd(r, 1, 2);
    g.cin = g.groups * (rnd(r, 0, 3) == 0 ? rnd(r, 200, 300) : rnd(r, 1, 4));
    g.cout = g.groups * rnd(r, 1, rnd(r, 0, 1) ? 3 : 20);
    g.kh = rnd(r, 1, 3); g.kw = rnd(r, 1, 5);
    g.sh = rnd(r, 1, 2); g.sw = rnd(r, 1, 3);
    g.dh = rnd(r, 1, 2); g.dw = rnd(r, 1, 2);
    g.pt = rnd(r, 0, 2); g.pb = rnd(r, 0, 2); g.pl = rnd(r, 0, 4); g.pr = rnd(r, 0, 4);
    if (rnd(r, 0, 1)) {  // aim at the stride-1 same-width path
      g.sw = 1;
      const int span = (g.kw - 1) * g.dw;
      g.pl = rnd(r, 0, span);
      g.pr = span - g.pl;
    }
    g.H = rnd(r, (g.kh - 1) * g.dh + 1, 6);
    g.W = rnd(r, std::max((g.kw - 1) * g.dw + 1, 100), 560);
    if (g.cin > 10) g.W = rnd(r, (g.kw - 1) * g.dw + 1, 12);
    if (conv_out(g.H, g.kh, g.sh, g.dh, g.pt, g.pb) < 1 || conv_out(g.W, g.kw, g.sw, g.dw, g.pl, g.pr) < 1) continue;
    check_layer(*make_conv(r, g, "wide/deep conv " + std::to_string(it)), r, 3);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

// The union of the boxes of a run's single neurons is contained in the run's
// box, and for a run inside one channel they span the same rows and
// channels: the box is no larger than needed.
TEST(Kernels, InputBoxIsTightWithinAChannel) {
  Rng r(31);
  auto L = make_conv(r, {4, 4, 2, 11, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1}, "box");
  const LayerDesc& d = L->d;
  const int32_t hw = d.out.h * d.out.w;
  for (int t = 0; t < 200; ++t) {
    const int32_t c = rnd(r, 0, d.out.c - 1);
    const int32_t b = c * hw + rnd(r, 0, hw - 1);
    const int32_t e = rnd(r, b + 1, (c + 1) * hw);
    const Box run = input_box(d, 0, b, e);
    Box u{1 << 30, -1, 1 << 30, -1};
    for (int32_t i = b; i < e; ++i) {
      const Box one = input_box(d, 0, i, i + 1);
      if (one.empty()) continue;
      u.c0 = std::min(u.c0, one.c0); u.c1 = std::max(u.c1, one.c1);
      u.h0 = std::min(u.h0, one.h0); u.h1 = std::max(u.h1, one.h1);
    }
    EXPECT_EQ(run.c0, u.c0); EXPECT_EQ(run.c1, u.c1);
    EXPECT_EQ(run.h0, u.h0); EXPECT_EQ(run.h1, u.h1);
  }
}

// Descriptors that make no sense must be refused, not crash.
TEST(Kernels, InconsistentDescriptorsAreBadLayer) {
  Rng r(41);
  auto L = make_conv(r, {4, 4, 2, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, "conv");
  View v{L->x[0].data(), 0, 4, 0, 5};
  std::vector<int8_t> out(size_t(L->n_out()));
  const int32_t n = L->n_out();
  {
    LayerDesc d = L->d;
    d.groups = 3;  // 4 channels do not split into 3 groups
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
  }
  {
    LayerDesc d = L->d;
    d.groups = 0;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
  }
  {
    LayerDesc d = L->d;
    d.groups = 8;  // more groups than output channels
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
  }
  {
    LayerDesc d = L->d;
    d.n_inputs = 0;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
    d.n_inputs = ts::core::kMaxInputs + 1;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
  }
  {
    LayerDesc d = L->d;
    d.weights = nullptr;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
    d = L->d;
    d.mult = nullptr;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
    d = L->d;
    d.shift = nullptr;
    EXPECT_EQ(compute_range(d, &v, 0, n, out.data(), 4), KernelStatus::BadLayer);
  }
  {
    auto T = make_lut(r, Dims{2, 2, 2}, "lut");
    LayerDesc d = T->d;
    d.lut = nullptr;
    View lv{T->x[0].data(), 0, 2, 0, 2};
    EXPECT_EQ(compute_range(d, &lv, 0, 8, out.data(), 0), KernelStatus::BadLayer);
  }
  {
    auto P = make_pool(r, QOp::AvgPool, Dims{2, 4, 4}, 2, 2, 2, 2, 0, 0, 0, 0, false, "avg");
    LayerDesc d = P->d;
    d.mult = nullptr;
    View pv{P->x[0].data(), 0, 2, 0, 4};
    EXPECT_EQ(compute_range(d, &pv, 0, P->n_out(), out.data(), 0), KernelStatus::BadLayer);
  }
  {
    auto G = make_gemm(r, Dims{3, 1, 1}, 2, "gemm");
    LayerDesc d = G->d;
    d.weights = nullptr;
    View gv{G->x[0].data(), 0, 3, 0, 1};
    EXPECT_EQ(compute_range(d, &gv, 0, 2, out.data(), 2), KernelStatus::BadLayer);
  }
}

// compute_box (core/layer.h) against compute_range, element by element, for
// every op on random shapes and random boxes (full-width and narrower, one
// or many channels), each box computed from views holding EXACTLY
// input_box(L, i, box) and a descriptor carrying only the box's channels.
void check_boxes(const TLayer& L, Rng& r, int n_boxes) {
  SCOPED_TRACE(L.name);
  KernelStatus st;
  const std::vector<int8_t> full = run_full(L, &st);
  ASSERT_EQ(st, KernelStatus::Ok);
  const Dims& O = L.d.out;
  for (int t = 0; t < n_boxes; ++t) {
    ts::core::OutBox b;
    b.c0 = rnd(r, 0, O.c - 1); b.c1 = rnd(r, b.c0 + 1, O.c);
    b.y0 = rnd(r, 0, O.h - 1); b.y1 = rnd(r, b.y0 + 1, O.h);
    if (rnd(r, 0, 1)) { b.x0 = 0; b.x1 = O.w; } else { b.x0 = rnd(r, 0, O.w - 1); b.x1 = rnd(r, b.x0 + 1, O.w); }
    const std::string where = "box c[" + std::to_string(b.c0) + "," + std::to_string(b.c1) + ") y[" +
                              std::to_string(b.y0) + "," + std::to_string(b.y1) + ") x[" + std::to_string(b.x0) +
                              "," + std::to_string(b.x1) + ")";
    Fragment f = fragment(L, b.c0, b.c1 - 1);
    View v[ts::core::kMaxInputs];
    std::unique_ptr<int8_t[]> bufs[ts::core::kMaxInputs];
    for (int k = 0; k < L.d.n_inputs; ++k) {
      const Box box = ts::core::input_box(L.d, k, b);
      bufs[k] = copy_box(L, k, box);
      v[k] = View{box.empty() ? nullptr : bufs[k].get(), box.c0, box.c1 - box.c0, box.h0, box.h1 - box.h0};
    }
    std::vector<int8_t> out(size_t(b.elems()), int8_t(0x5A));
    ASSERT_EQ(ts::core::compute_box(f.d, v, b, out.data(), f.oc_count), KernelStatus::Ok) << where;
    EXPECT_EQ(ts::core::box_macs(L.d, b), ts::core::range_macs(L.d, 0, 1) * uint64_t(b.elems())) << where;
    size_t i = 0;
    for (int c = b.c0; c < b.c1; ++c)
      for (int y = b.y0; y < b.y1; ++y)
        for (int x = b.x0; x < b.x1; ++x, ++i)
          ASSERT_EQ(int(out[i]), int(full[(size_t(c) * O.h + y) * O.w + x])) << where << " at " << c << "," << y << "," << x;
  }
  // Outside the output: BadRange; empty: Ok without touching anything.
  ts::core::OutBox bad{0, O.c + 1, 0, O.h, 0, O.w};
  View none[ts::core::kMaxInputs];
  int8_t dummy = 0;
  EXPECT_EQ(ts::core::compute_box(L.d, none, bad, &dummy, L.channels()), KernelStatus::BadRange);
  EXPECT_EQ(ts::core::compute_box(L.d, none, ts::core::OutBox{}, &dummy, L.channels()), KernelStatus::Ok);
}

TEST(Kernels, ComputeBoxEqualsComputeRange) {
  Rng r(77);
  for (int it = 0; it < 25; ++it) {
    ConvGeo g{};
    g.groups = rnd(r, 1, 3);
    g.cin = g.groups * rnd(r, 1, 4);
    g.cout = g.groups * rnd(r, 1, 4);
    if (rnd(r, 0, 2) == 0) g.cin = g.cout = g.groups = rnd(r, 1, 6);  // depthwise
    g.kh = rnd(r, 1, 3); g.kw = rnd(r, 1, 3);
    g.sh = rnd(r, 1, 2); g.sw = rnd(r, 1, 2);
    g.dh = rnd(r, 1, 2); g.dw = rnd(r, 1, 2);
    g.pt = rnd(r, 0, 2); g.pb = rnd(r, 0, 2); g.pl = rnd(r, 0, 2); g.pr = rnd(r, 0, 2);
    g.H = rnd(r, (g.kh - 1) * g.dh + 1, 12);
    g.W = rnd(r, (g.kw - 1) * g.dw + 1, 12);
    if (conv_out(g.H, g.kh, g.sh, g.dh, g.pt, g.pb) >= 1 && conv_out(g.W, g.kw, g.sw, g.dw, g.pl, g.pr) >= 1)
      check_boxes(*make_conv(r, g, "conv " + std::to_string(it)), r, 6);
    // Pointwise (the blocked fast path), grouped or not, deep or not.
    const int pg = rnd(r, 1, 2);
    check_boxes(*make_conv(r, {pg * rnd(r, 1, 40), pg * rnd(r, 1, 40), pg, rnd(r, 1, 9), rnd(r, 1, 9), 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                           "pointwise " + std::to_string(it)),
                r, 6);
    check_boxes(*make_gemm(r, Dims{rnd(r, 1, 8), rnd(r, 1, 3), rnd(r, 1, 3)}, rnd(r, 1, 12), "gemm " + std::to_string(it)),
                r, 4);
    const int kh = rnd(r, 1, 3), kw = rnd(r, 1, 3);
    const Dims in{rnd(r, 1, 4), rnd(r, kh, 10), rnd(r, kw, 10)};
    for (QOp op : {QOp::AvgPool, QOp::MaxPool})
      check_boxes(*make_pool(r, op, in, kh, kw, rnd(r, 1, 2), rnd(r, 1, 2), rnd(r, 0, kh - 1), rnd(r, 0, kw - 1),
                             rnd(r, 0, kh - 1), rnd(r, 0, kw - 1), rnd(r, 0, 1) == 1, "pool " + std::to_string(it)),
                  r, 4);
    check_boxes(*make_gap(r, in, "gap " + std::to_string(it)), r, 3);
    const Dims s{rnd(r, 1, 5), rnd(r, 1, 7), rnd(r, 1, 7)};
    check_boxes(*make_add(r, s, "add " + std::to_string(it)), r, 4);
    check_boxes(*make_mul(r, s, rnd(r, 0, 1) == 1, "mul " + std::to_string(it)), r, 4);
    std::vector<int> ch;
    for (int k = rnd(r, 1, 4); k > 0; --k) ch.push_back(rnd(r, 1, 3));
    check_boxes(*make_concat(r, ch, s.h, s.w, "concat " + std::to_string(it)), r, 4);
    check_boxes(*make_lut(r, s, "lut " + std::to_string(it)), r, 3);
    check_boxes(*make_pad(r, s, rnd(r, 0, 2), rnd(r, 0, 2), rnd(r, 0, 2), rnd(r, 0, 2), "pad " + std::to_string(it)), r, 4);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

}  // namespace
