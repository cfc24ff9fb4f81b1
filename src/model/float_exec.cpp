// Float reference executor. See float_exec.h.
#include "model/float_exec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/op.h"
#include "core/ops/resize.h"

namespace ts {

float unary_value(const Node& n, float x, int channel) {
  switch (n.op) {
    case Op::LeakyRelu: return x >= 0.f ? x : n.alpha * x;
    case Op::Tanh: return std::tanh(x);
    case Op::PRelu: return x >= 0.f ? x : n.weights.at(size_t(channel)) * x;
    default: throw Error("node '" + n.name + "' (" + op_name(n.op) + "): not an elementwise activation");
  }
}

namespace {

[[noreturn]] void bad(const Node& n, const std::string& why) {
  throw Error("float executor: node '" + n.name + "' (" + op_name(n.op) + "): " + why);
}

// Smallest o with o*s + off >= 0, and one past the largest o with o*s + off <= limit-1,
// both clamped to [0, n): the outputs whose input coordinate is inside [0, limit).
void valid_range(int off, int s, int limit, int n, int& lo, int& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = limit - 1 - off >= 0 ? (limit - 1 - off) / s + 1 : 0;
  lo = std::min(lo, n);
  hi = std::clamp(hi, lo, n);
}

void conv(const Node& n, const Shape& is, const float* in, const Shape& os, float* out) {
  const int G = n.groups;
  if (G <= 0 || is.c % G || os.c % G) bad(n, "channels do not divide into groups");
  const int cin_g = is.c / G, cout_g = os.c / G;
  const size_t wsize = size_t(os.c) * cin_g * n.kh * n.kw;
  if (n.weights.size() != wsize) bad(n, "weight count does not match the shapes");
  if (!n.bias.empty() && int(n.bias.size()) != os.c) bad(n, "bias count does not match the output channels");
  const int H = is.h, W = is.w, OH = os.h, OW = os.w;
  const size_t plane = size_t(OH) * OW;
  for (int oc = 0; oc < os.c; ++oc)
    std::fill(out + oc * plane, out + (oc + 1) * plane, n.bias.empty() ? 0.f : n.bias[size_t(oc)]);

  // Pointwise (1x1, stride 1, no padding, one group): a matrix product
  // out[oc][p] += w[oc][ic] * in[ic][p], four output channels at a time over
  // tiles of pixels that stay in cache. Same summation order as below.
  if (n.kh == 1 && n.kw == 1 && n.sh == 1 && n.sw == 1 && G == 1 && OH == H && OW == W && n.pad_t == 0 &&
      n.pad_l == 0) {
    const size_t P = plane, tile = 1024;
    const float* wt = n.weights.data();
    for (size_t p0 = 0; p0 < P; p0 += tile) {
      const size_t p1 = std::min(P, p0 + tile);
      int oc = 0;
      for (; oc + 4 <= os.c; oc += 4) {
        float* o0 = out + size_t(oc) * P;
        float* o1 = o0 + P;
        float* o2 = o1 + P;
        float* o3 = o2 + P;
        for (int ic = 0; ic < cin_g; ++ic) {
          const float w0 = wt[size_t(oc) * cin_g + ic], w1 = wt[size_t(oc + 1) * cin_g + ic];
          const float w2 = wt[size_t(oc + 2) * cin_g + ic], w3 = wt[size_t(oc + 3) * cin_g + ic];
          const float* xp = in + size_t(ic) * P;
          for (size_t p = p0; p < p1; ++p) {
            const float v = xp[p];
            o0[p] += w0 * v;
            o1[p] += w1 * v;
            o2[p] += w2 * v;
            o3[p] += w3 * v;
          }
        }
      }
      for (; oc < os.c; ++oc) {
        float* o = out + size_t(oc) * P;
        for (int ic = 0; ic < cin_g; ++ic) {
          const float w = wt[size_t(oc) * cin_g + ic];
          const float* xp = in + size_t(ic) * P;
          for (size_t p = p0; p < p1; ++p) o[p] += w * xp[p];
        }
      }
    }
    return;
  }

  // General case, weight-stationary: for every weight, add w * (shifted
  // input) to the output plane. The inner loop runs over a contiguous output row.
  for (int oc = 0; oc < os.c; ++oc) {
    const int g = oc / cout_g;
    float* o = out + size_t(oc) * plane;
    for (int icg = 0; icg < cin_g; ++icg) {
      const float* x = in + size_t(g * cin_g + icg) * H * W;
      const float* wk = n.weights.data() + (size_t(oc) * cin_g + icg) * n.kh * n.kw;
      for (int ky = 0; ky < n.kh; ++ky) {
        const int offy = ky * n.dh - n.pad_t;  // iy = oy*sh + offy
        int oy0, oy1;
        valid_range(offy, n.sh, H, OH, oy0, oy1);
        for (int kx = 0; kx < n.kw; ++kx) {
          const float w = wk[ky * n.kw + kx];
          const int offx = kx * n.dw - n.pad_l;  // ix = ox*sw + offx
          int ox0, ox1;
          valid_range(offx, n.sw, W, OW, ox0, ox1);
          for (int oy = oy0; oy < oy1; ++oy) {
            const float* xr = x + size_t(oy * n.sh + offy) * W + offx;
            float* orow = o + size_t(oy) * OW;
            if (n.sw == 1) {
              for (int ox = ox0; ox < ox1; ++ox) orow[ox] += w * xr[ox];
            } else {
              const int sw = n.sw;
              for (int ox = ox0; ox < ox1; ++ox) orow[ox] += w * xr[ox * sw];
            }
          }
        }
      }
    }
  }
}

void pool(const Node& n, const Shape& is, const float* in, const Shape& os, float* out, bool avg) {
  const int H = is.h, W = is.w;
  for (int c = 0; c < os.c; ++c) {
    const float* x = in + size_t(c) * H * W;
    float* o = out + size_t(c) * os.h * os.w;
    for (int oy = 0; oy < os.h; ++oy) {
      const int y0 = oy * n.sh - n.pad_t;
      const int y1 = std::min(y0 + n.kh, H + n.pad_b);  // window clipped to the padded image
      const int vy0 = std::max(y0, 0), vy1 = std::min(y1, H);
      for (int ox = 0; ox < os.w; ++ox) {
        const int x0 = ox * n.sw - n.pad_l;
        const int x1 = std::min(x0 + n.kw, W + n.pad_r);
        const int vx0 = std::max(x0, 0), vx1 = std::min(x1, W);
        if (avg) {
          float s = 0.f;
          for (int y = vy0; y < vy1; ++y)
            for (int xx = vx0; xx < vx1; ++xx) s += x[y * W + xx];
          const int count = n.count_include_pad ? (y1 - y0) * (x1 - x0) : (vy1 - vy0) * (vx1 - vx0);
          o[oy * os.w + ox] = count > 0 ? s / float(count) : 0.f;
        } else {
          float m = -std::numeric_limits<float>::infinity();  // padding never wins
          for (int y = vy0; y < vy1; ++y)
            for (int xx = vx0; xx < vx1; ++xx) m = std::max(m, x[y * W + xx]);
          o[oy * os.w + ox] = m;
        }
      }
    }
  }
}

void apply_act(const Node& n, std::vector<float>& y) {
  float lo, hi;
  switch (n.act) {
    case Act::None: return;
    case Act::Relu:
      lo = 0.f;
      hi = std::numeric_limits<float>::infinity();
      break;
    case Act::Relu6:
      lo = 0.f;
      hi = 6.f;
      break;
    case Act::Clip:
      lo = n.act_lo;
      hi = n.act_hi;
      break;
    default: return;
  }
  for (float& v : y) v = std::min(std::max(v, lo), hi);
}

// What one node's evaluation reads: the node, its operands and shapes.
struct Operands {
  const Graph& g;
  const Node& n;
  const std::vector<const std::vector<float>*>& in;
  const Shape& is;  // shape of operand 0
  const Shape& os;  // output shape
  const std::vector<float>& x() const { return *in[0]; }
  void need(size_t k) const {
    if (in.size() < k) bad(n, "needs " + std::to_string(k) + " inputs");
  }
  void same_size(const std::vector<float>& y) const {
    if (x().size() != y.size()) bad(n, "input and output sizes differ");
  }
};

// The activation itself (is_activation(n.op)), then its post-affine.
void eval_activation(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const std::vector<float>& x = a.x();
  a.same_size(y);
  const size_t N = y.size(), plane = size_t(a.is.h) * a.is.w;
  for (size_t i = 0; i < N; ++i) {
    const float v = x[i];
    switch (n.op) {
      case Op::Relu: y[i] = std::max(v, 0.f); break;
      case Op::Clip: y[i] = std::min(std::max(v, n.lo), n.hi); break;
      case Op::HardSigmoid: y[i] = std::max(0.f, std::min(1.f, n.alpha * v + n.beta_hs)); break;
      case Op::HardSwish: y[i] = v * std::min(std::max(v + 3.f, 0.f), 6.f) / 6.f; break;
      case Op::Sigmoid: y[i] = 1.f / (1.f + std::exp(-v)); break;
      default: y[i] = unary_value(n, v, int(i / plane)); break;  // LeakyRelu, Tanh, PRelu
    }
  }
  if (n.post_s.empty()) return;
  for (size_t i = 0; i < N; ++i) y[i] = y[i] * n.post_s[i / plane] + n.post_t[i / plane];
}

// The elementwise ops of one operand; false if n is not one.
bool eval_unary(const Operands& a, std::vector<float>& y) {
  if (is_activation(a.n.op)) {
    eval_activation(a, y);
    return true;
  }
  if (a.n.op != Op::Flatten && a.n.op != Op::Identity) return false;
  a.same_size(y);
  y = a.x();
  return true;
}

void eval_batch_norm(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const std::vector<float>& x = a.x();
  a.same_size(y);
  const size_t C = size_t(a.is.c);
  if (n.gamma.size() != C || n.beta.size() != C || n.mean.size() != C || n.var.size() != C)
    bad(n, "parameter count does not match the channels");
  const size_t p = size_t(a.is.h) * a.is.w;
  for (size_t c = 0; c < C; ++c) {
    const float inv = 1.f / std::sqrt(n.var[c] + n.eps);
    for (size_t i = c * p; i < (c + 1) * p; ++i) y[i] = (x[i] - n.mean[c]) * inv * n.gamma[c] + n.beta[c];
  }
}

void eval_add(const Operands& a, std::vector<float>& y) {
  a.need(2);
  const std::vector<float>& x = a.x();
  const std::vector<float>& b = *a.in[1];
  const size_t N = y.size();
  if (x.size() != N) bad(a.n, "operand sizes differ");
  const int sh = a.n.sh, sw = a.n.sw;
  if (sh == 1 && sw == 1) {
    if (b.size() != N) bad(a.n, "operand sizes differ");
    for (size_t i = 0; i < N; ++i) y[i] = x[i] + b[i];
    return;
  }
  // The second operand nearest-upsampled by sh x sw (a folded Resize).
  const int C = a.os.c, H = a.os.h, W = a.os.w, hb = H / sh, wb = W / sw;
  if (b.size() != size_t(C) * hb * wb) bad(a.n, "upsampled operand's size differs");
  for (int c = 0; c < C; ++c)
    for (int yy = 0; yy < H; ++yy)
      for (int xx = 0; xx < W; ++xx) {
        const size_t i = (size_t(c) * H + yy) * W + xx;
        y[i] = x[i] + b[(size_t(c) * hb + yy / sh) * wb + xx / sw];
      }
}

// Mul: the second operand of the same shape, per channel (C,1,1) or a scalar.
void eval_mul(const Operands& a, std::vector<float>& y) {
  a.need(2);
  const std::vector<float>& x = a.x();
  const std::vector<float>& b = *a.in[1];
  const size_t N = y.size();
  const size_t plane = size_t(a.os.h) * a.os.w;
  a.same_size(y);
  if (b.size() == N) {
    for (size_t i = 0; i < N; ++i) y[i] = x[i] * b[i];
  } else if (b.size() == size_t(a.os.c)) {  // per channel
    for (size_t c = 0; c < size_t(a.os.c); ++c)
      for (size_t i = c * plane; i < (c + 1) * plane; ++i) y[i] = x[i] * b[c];
  } else if (b.size() == 1) {
    for (size_t i = 0; i < N; ++i) y[i] = x[i] * b[0];
  } else {
    bad(a.n, "second operand is neither the same shape nor per channel");
  }
}

// CHW: concatenating along channels is appending the blocks.
void eval_concat(const Operands& a, std::vector<float>& y) {
  size_t at = 0;
  for (size_t k = 0; k < a.in.size(); ++k) {
    const Shape& s = a.g.shape(a.n.inputs[k]);
    if (s.h != a.os.h || s.w != a.os.w || at + a.in[k]->size() > y.size()) bad(a.n, "operand shapes do not fit the output");
    std::copy(a.in[k]->begin(), a.in[k]->end(), y.begin() + ptrdiff_t(at));
    at += a.in[k]->size();
  }
  if (at != y.size()) bad(a.n, "operands do not fill the output");
}

void eval_global_avg(const Operands& a, std::vector<float>& y) {
  const std::vector<float>& x = a.x();
  if (a.is.c != a.os.c || y.size() != size_t(a.os.c)) bad(a.n, "output is not (C,1,1)");
  const size_t p = size_t(a.is.h) * a.is.w;
  for (size_t c = 0; c < size_t(a.is.c); ++c) {
    double s = 0;
    for (size_t i = c * p; i < (c + 1) * p; ++i) s += x[i];
    y[c] = float(s / double(p));
  }
}

void eval_gemm(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const std::vector<float>& x = a.x();
  const size_t K = x.size(), N = y.size();
  if (n.weights.size() != N * K) bad(n, "weight count does not match the shapes");
  if (!n.bias.empty() && n.bias.size() != N) bad(n, "bias count does not match the outputs");
  for (size_t o = 0; o < N; ++o) {
    const float* w = n.weights.data() + o * K;
    float s = 0.f;
    for (size_t i = 0; i < K; ++i) s += w[i] * x[i];
    y[o] = s + (n.bias.empty() ? 0.f : n.bias[o]);
  }
}

void eval_pad(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const Shape &is = a.is, &os = a.os;
  if (os.c != is.c || os.h != is.h + n.pad_t + n.pad_b || os.w != is.w + n.pad_l + n.pad_r)
    bad(n, "output shape does not match the padding");
  for (int c = 0; c < is.c; ++c)
    for (int yy = 0; yy < is.h; ++yy) {
      const float* src = a.x().data() + (size_t(c) * is.h + yy) * is.w;
      float* dst = y.data() + (size_t(c) * os.h + yy + n.pad_t) * os.w + n.pad_l;
      std::copy(src, src + is.w, dst);
    }
}

void eval_slice(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const Shape &is = a.is, &os = a.os;
  for (int c = 0; c < os.c; ++c)
    for (int yy = 0; yy < os.h; ++yy)
      for (int xx = 0; xx < os.w; ++xx)
        y[(size_t(c) * os.h + yy) * os.w + xx] =
            a.x()[(size_t(n.pad_b + c * n.dh) * is.h + (n.pad_t + yy * n.sh)) * is.w + (n.pad_l + xx * n.sw)];
}

void eval_shuffle(const Operands& a, std::vector<float>& y) {
  const size_t plane = size_t(a.is.h) * a.is.w;
  for (int c = 0; c < a.os.c; ++c) {
    const size_t src = size_t(core::shuffle_source(c, a.n.groups, a.is.c));
    std::copy(a.x().begin() + ptrdiff_t(src * plane), a.x().begin() + ptrdiff_t((src + 1) * plane),
              y.begin() + ptrdiff_t(size_t(c) * plane));
  }
}

// Transpose: output (o0, o1, o2) is the input element whose axis perm[a] is o[a].
void eval_transpose(const Operands& a, std::vector<float>& y) {
  const Shape &is = a.is, &os = a.os;
  const size_t stride[3] = {size_t(is.h) * is.w, size_t(is.w), 1};
  const size_t sc = stride[a.n.perm[0]], sy = stride[a.n.perm[1]], sx = stride[a.n.perm[2]];
  size_t k = 0;
  for (int c = 0; c < os.c; ++c)
    for (int yy = 0; yy < os.h; ++yy)
      for (int xx = 0; xx < os.w; ++xx) y[k++] = a.x()[size_t(c) * sc + size_t(yy) * sy + size_t(xx) * sx];
}

// Resize: nearest copies the element core/ops/resize.h picks (the same
// rational coordinates as the int8 kernel); linear blends in double.
void eval_resize(const Operands& a, std::vector<float>& y) {
  namespace rs = core::resize;
  const Node& n = a.n;
  const Shape &is = a.is, &os = a.os;
  if (os.c != is.c) bad(n, "channel count changes");
  // Per axis: the two sources and the weight of the second.
  auto axis = [&](int in, int out, std::vector<int>& i0, std::vector<int>& i1, std::vector<double>& w) {
    i0.resize(size_t(out)); i1.resize(size_t(out)); w.assign(size_t(out), 0.0);
    for (int o = 0; o < out; ++o) {
      if (n.interp == rs::kNearest) {
        i0[size_t(o)] = i1[size_t(o)] = rs::nearest(n.coord, n.rounding, in, out, o);
        continue;
      }
      int64_t num, den;
      rs::source(n.coord, in, out, o, &num, &den);
      const double src = std::clamp(double(num) / double(den), 0.0, double(in - 1));
      const int f = std::min(int(src), in - 1);
      i0[size_t(o)] = f;
      i1[size_t(o)] = std::min(f + 1, in - 1);
      w[size_t(o)] = src - f;
    }
  };
  std::vector<int> y0, y1, x0, x1;
  std::vector<double> wy, wx;
  axis(is.h, os.h, y0, y1, wy);
  axis(is.w, os.w, x0, x1, wx);
  for (int c = 0; c < os.c; ++c) {
    const float* x = a.x().data() + size_t(c) * is.h * is.w;
    float* o = y.data() + size_t(c) * os.h * os.w;
    for (int oy = 0; oy < os.h; ++oy) {
      const float* r0 = x + size_t(y0[size_t(oy)]) * is.w;
      const float* r1 = x + size_t(y1[size_t(oy)]) * is.w;
      for (int ox = 0; ox < os.w; ++ox) {
        const size_t a0 = size_t(x0[size_t(ox)]), a1 = size_t(x1[size_t(ox)]);
        const double top = r0[a0] + (r0[a1] - double(r0[a0])) * wx[size_t(ox)];
        const double bot = r1[a0] + (r1[a1] - double(r1[a0])) * wx[size_t(ox)];
        o[size_t(oy) * os.w + ox] = float(top + (bot - top) * wy[size_t(oy)]);
      }
    }
  }
}

// ConvTranspose: every input element scatters its kernel into the output
// (weights stored as Conv's, [o][cin/groups][kh][kw]).
void eval_conv_transpose(const Operands& a, std::vector<float>& y) {
  const Node& n = a.n;
  const Shape &is = a.is, &os = a.os;
  const int G = n.groups;
  if (G <= 0 || is.c % G || os.c % G) bad(n, "channels do not divide into groups");
  const int cin_g = is.c / G, cout_g = os.c / G;
  if (n.weights.size() != size_t(os.c) * cin_g * n.kh * n.kw) bad(n, "weight count does not match the shapes");
  const size_t plane = size_t(os.h) * os.w;
  for (int oc = 0; oc < os.c; ++oc) {
    float* o = y.data() + size_t(oc) * plane;
    std::fill(o, o + plane, n.bias.empty() ? 0.f : n.bias[size_t(oc)]);
    const int ci0 = (oc / cout_g) * cin_g;
    for (int ci = 0; ci < cin_g; ++ci) {
      const float* x = a.x().data() + size_t(ci0 + ci) * is.h * is.w;
      const float* wk = n.weights.data() + (size_t(oc) * cin_g + ci) * n.kh * n.kw;
      for (int iy = 0; iy < is.h; ++iy)
        for (int ky = 0; ky < n.kh; ++ky) {
          const int oy = iy * n.sh - n.pad_t + ky;
          if (oy < 0 || oy >= os.h) continue;
          for (int ix = 0; ix < is.w; ++ix) {
            const float v = x[size_t(iy) * is.w + ix];
            for (int kx = 0; kx < n.kw; ++kx) {
              const int ox = ix * n.sw - n.pad_l + kx;
              if (ox >= 0 && ox < os.w) o[size_t(oy) * os.w + ox] += wk[ky * n.kw + kx] * v;
            }
          }
        }
    }
  }
}

void eval_softmax(const Operands& a, std::vector<float>& y) {
  const std::vector<float>& x = a.x();
  const size_t N = y.size();
  a.same_size(y);
  if (a.os.h != 1 || a.os.w != 1) bad(a.n, "softmax needs a (C,1,1) tensor");
  if (N == 0) return;
  const float m = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (size_t i = 0; i < N; ++i) s += std::exp(double(x[i] - m));
  for (size_t i = 0; i < N; ++i) y[i] = float(std::exp(double(x[i] - m)) / s);
}

}  // namespace

std::vector<float> eval_node(const Graph& g, const Node& n, const std::vector<const std::vector<float>*>& inputs) {
  if (inputs.size() != n.inputs.size()) bad(n, "wrong number of input values");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i] || int64_t(inputs[i]->size()) != g.shape(n.inputs[i]).size())
      bad(n, "input " + std::to_string(i) + " has the wrong size for shape " + to_string(g.shape(n.inputs[i])));
  if (inputs.empty()) bad(n, "needs 1 inputs");
  const Operands a{g, n, inputs, g.shape(n.inputs[0]), g.shape(n.output)};
  std::vector<float> y(size_t(a.os.size()));
  if (!eval_unary(a, y)) {
    switch (n.op) {
      case Op::Conv: conv(n, a.is, a.x().data(), a.os, y.data()); break;
      case Op::BatchNorm: eval_batch_norm(a, y); break;
      case Op::Add: eval_add(a, y); break;
      case Op::Mul: eval_mul(a, y); break;
      case Op::Concat: eval_concat(a, y); break;
      case Op::AvgPool:
      case Op::MaxPool:
        if (a.is.c != a.os.c) bad(n, "channel count changes");
        pool(n, a.is, a.x().data(), a.os, y.data(), n.op == Op::AvgPool);
        break;
      case Op::GlobalAvgPool: eval_global_avg(a, y); break;
      case Op::Gemm: eval_gemm(a, y); break;
      case Op::Pad: eval_pad(a, y); break;
      case Op::Softmax: eval_softmax(a, y); break;
      case Op::Slice: eval_slice(a, y); break;
      case Op::Shuffle: eval_shuffle(a, y); break;
      case Op::Transpose: eval_transpose(a, y); break;
      case Op::Resize: eval_resize(a, y); break;
      case Op::ConvTranspose: eval_conv_transpose(a, y); break;
      default: bad(n, "unknown op");
    }
  }
  apply_act(n, y);
  return y;
}

std::vector<float> run_float(const Graph& g, const std::vector<float>& input_chw,
                             std::vector<std::vector<float>>* all_tensors) {
  if (g.input < 0 || g.input >= int(g.tensors.size()) || g.output < 0 || g.output >= int(g.tensors.size()))
    throw Error("float executor: graph has no input or output");
  if (int64_t(input_chw.size()) != g.shape(g.input).size())
    throw Error("float executor: input has " + std::to_string(input_chw.size()) + " values, the graph takes " +
                to_string(g.shape(g.input)) + " = " + std::to_string(g.shape(g.input).size()));
  const size_t T = g.tensors.size();
  std::vector<std::vector<float>> val(T);
  std::vector<char> have(T, 0);
  val[size_t(g.input)] = input_chw;
  have[size_t(g.input)] = 1;

  // Last reader of each tensor, to free intermediates early when not keeping them.
  std::vector<int> last(T, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int t : g.nodes[i].inputs)
      if (t >= 0 && size_t(t) < T) last[size_t(t)] = int(i);

  std::vector<const std::vector<float>*> ins;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    ins.clear();
    for (int t : n.inputs) {
      if (t < 0 || size_t(t) >= T || !have[size_t(t)]) bad(n, "input tensor is not computed before the node");
      ins.push_back(&val[size_t(t)]);
    }
    if (n.output < 0 || size_t(n.output) >= T) bad(n, "bad output tensor");
    val[size_t(n.output)] = eval_node(g, n, ins);
    have[size_t(n.output)] = 1;
    if (!all_tensors)
      for (int t : n.inputs)
        if (last[size_t(t)] == int(i) && t != g.output) std::vector<float>().swap(val[size_t(t)]);
  }
  if (!have[size_t(g.output)]) throw Error("float executor: the graph output is never computed");
  std::vector<float> out = val[size_t(g.output)];
  if (all_tensors) *all_tensors = std::move(val);
  return out;
}

}  // namespace ts
