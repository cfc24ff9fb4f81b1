// int8 kernels over runs of output neurons. See layer.h.
//
// Every kernel walks its run one output channel at a time and, inside a
// channel, in chunks of up to kChunk consecutive positions with int32
// accumulators on the stack. That keeps the inner loops over contiguous
// positions (vectorisable for 1x1 convolutions) while needing no scratch
// memory beyond a fixed 256 bytes of stack, on a board or on the host.
#include "core/layer.h"

#include "core/qmath.h"

namespace ts {
namespace core {

namespace {

constexpr int32_t kChunk = 64;

inline int32_t mini(int32_t a, int32_t b) { return a < b ? a : b; }
inline int32_t maxi(int32_t a, int32_t b) { return a > b ? a : b; }

inline bool covers(const View& v, const Box& b) {
  if (b.empty()) return true;
  return v.data != nullptr && v.c0 <= b.c0 && v.c0 + v.nc >= b.c1 && v.h0 <= b.h0 && v.h0 + v.nh >= b.h1;
}

inline const int8_t* row_ptr(const View& v, int32_t W, int32_t c, int32_t y) {
  return v.data + (int64_t(c - v.c0) * v.nh + (y - v.h0)) * W;
}

inline int8_t requant(int32_t acc, int32_t m, int32_t s, int32_t zp, int32_t lo, int32_t hi) {
  return clamp_i8(multiply_by_quantized_multiplier(acc, m, s) + zp, lo, hi);
}

// Rows [h0,h1) of the input that output rows [oy0, oy1] read with a window of
// k taps, stride s, dilation d and top padding p, clipped to the input.
inline void window_rows(int32_t oy0, int32_t oy1, int32_t k, int32_t s, int32_t d, int32_t p, int32_t H,
                        int32_t* h0, int32_t* h1) {
  *h0 = maxi(0, oy0 * s - p);
  *h1 = mini(H, oy1 * s - p + (k - 1) * d + 1);
  if (*h1 < *h0) *h1 = *h0;
}

// Convolution of outputs [p0, p1) of channel o (positions within the channel).
KernelStatus conv_channel(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t cin_g = X.c / L.groups;
  const int32_t cout_g = L.out.c / L.groups;
  const int32_t g = o / cout_g;
  const int32_t ci0 = g * cin_g;
  const int32_t zp = L.in_zp[0];
  const int32_t ksz = cin_g * L.kh * L.kw;
  const int8_t* wo = L.weights + int64_t(o - L.oc_base) * ksz;
  const int32_t local = o - L.oc_base;
  const int32_t bias = L.bias ? L.bias[local] : 0;
  const int32_t m = L.mult[local], s = L.shift[local];
  const bool pointwise = L.kh == 1 && L.kw == 1 && L.sh == 1 && L.sw == 1 && L.pad_t == 0 && L.pad_l == 0 &&
                         X.w == W && X.h == L.out.h;
  int32_t acc[kChunk];
  for (int32_t c0 = p0; c0 < p1; c0 += kChunk) {
    const int32_t n = mini(kChunk, p1 - c0);
    for (int32_t k = 0; k < n; ++k) acc[k] = bias;
    if (pointwise) {
      // Positions map one to one onto input positions: contiguous rows.
      for (int32_t ci = 0; ci < cin_g; ++ci) {
        const int32_t w = wo[ci];
        int32_t pos = c0;
        int32_t k = 0;
        while (k < n) {
          const int32_t y = pos / W, x = pos % W;
          const int32_t run = mini(n - k, W - x);
          const int8_t* src = row_ptr(v, X.w, ci0 + ci, y) + x;
          for (int32_t j = 0; j < run; ++j) acc[k + j] += (int32_t(src[j]) - zp) * w;
          k += run;
          pos += run;
        }
      }
    } else {
      for (int32_t k = 0; k < n; ++k) {
        const int32_t pos = c0 + k;
        const int32_t oy = pos / W, ox = pos % W;
        const int32_t iy0 = oy * L.sh - L.pad_t, ix0 = ox * L.sw - L.pad_l;
        int32_t a = 0;
        for (int32_t ci = 0; ci < cin_g; ++ci) {
          const int8_t* wc = wo + ci * L.kh * L.kw;
          for (int32_t ky = 0; ky < L.kh; ++ky) {
            const int32_t iy = iy0 + ky * L.dh;
            if (iy < 0 || iy >= X.h) continue;  // zero padding contributes nothing
            const int8_t* row = row_ptr(v, X.w, ci0 + ci, iy);
            const int8_t* wr = wc + ky * L.kw;
            for (int32_t kx = 0; kx < L.kw; ++kx) {
              const int32_t ix = ix0 + kx * L.dw;
              if (ix < 0 || ix >= X.w) continue;
              a += (int32_t(row[ix]) - zp) * wr[kx];
            }
          }
        }
        acc[k] += a;
      }
    }
    for (int32_t k = 0; k < n; ++k) out[c0 - p0 + k] = requant(acc[k], m, s, L.out_zp, L.act_min, L.act_max);
  }
  return KernelStatus::Ok;
}

KernelStatus gemm_range(const LayerDesc& L, const View& v, int32_t begin, int32_t end, int8_t* out) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  // The full-input view is contiguous (covers() checked it spans everything).
  const int8_t* x = v.data;
  for (int32_t o = begin; o < end; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    int32_t acc = L.bias ? L.bias[local] : 0;
    for (int32_t i = 0; i < fan_in; ++i) acc += (int32_t(x[i]) - zp) * w[i];
    out[o - begin] = requant(acc, L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
  return KernelStatus::Ok;
}

KernelStatus pool_channel(const LayerDesc& L, const View& v, int32_t c, int32_t p0, int32_t p1, int8_t* out) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t zp = L.in_zp[0];
  for (int32_t pos = p0; pos < p1; ++pos) {
    const int32_t oy = pos / W, ox = pos % W;
    const int32_t iy0 = oy * L.sh - L.pad_t, ix0 = ox * L.sw - L.pad_l;
    int32_t acc = 0, count = 0, best = -128;
    for (int32_t ky = 0; ky < L.kh; ++ky) {
      const int32_t iy = iy0 + ky;
      if (iy < 0 || iy >= X.h) continue;
      const int8_t* row = row_ptr(v, X.w, c, iy);
      for (int32_t kx = 0; kx < L.kw; ++kx) {
        const int32_t ix = ix0 + kx;
        if (ix < 0 || ix >= X.w) continue;
        acc += int32_t(row[ix]) - zp;
        if (row[ix] > best) best = row[ix];
        ++count;
      }
    }
    int8_t r;
    if (L.op == QOp::MaxPool) {
      r = clamp_i8(best, L.act_min, L.act_max);
    } else {
      // Padded taps hold real zero, i.e. contribute nothing to acc; they
      // only change the divisor.
      const int32_t div = L.count_include_pad ? L.kh * L.kw : count;
      if (div <= 0) return KernelStatus::BadLayer;
      r = requant(acc, L.mult[div - 1], L.shift[div - 1], L.out_zp, L.act_min, L.act_max);
    }
    out[pos - p0] = r;
  }
  return KernelStatus::Ok;
}

}  // namespace

const char* qop_name(QOp op) {
  switch (op) {
    case QOp::Conv: return "Conv";
    case QOp::Gemm: return "Gemm";
    case QOp::Add: return "Add";
    case QOp::Mul: return "Mul";
    case QOp::Concat: return "Concat";
    case QOp::AvgPool: return "AvgPool";
    case QOp::GlobalAvgPool: return "GlobalAvgPool";
    case QOp::MaxPool: return "MaxPool";
    case QOp::Lut: return "Lut";
    case QOp::Pad: return "Pad";
  }
  return "?";
}

void output_channels(const LayerDesc& L, int32_t begin, int32_t end, int32_t* first, int32_t* last) {
  const int32_t hw = L.out.h * L.out.w;
  *first = begin / hw;
  *last = (end - 1) / hw;
}

Box input_box(const LayerDesc& L, int i, int32_t begin, int32_t end) {
  Box b;
  if (end <= begin || i < 0 || i >= L.n_inputs) return b;
  const Dims& X = L.in[i];
  const int32_t hw = L.out.h * L.out.w;
  int32_t oc0, oc1;
  output_channels(L, begin, end, &oc0, &oc1);
  // Output rows touched: exact within one channel, all rows across channels.
  int32_t oy0 = 0, oy1 = L.out.h - 1;
  if (oc0 == oc1) {
    oy0 = (begin % hw) / L.out.w;
    oy1 = ((end - 1) % hw) / L.out.w;
  }
  switch (L.op) {
    case QOp::Conv: {
      const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
      b.c0 = (oc0 / cout_g) * cin_g;
      b.c1 = (oc1 / cout_g + 1) * cin_g;
      window_rows(oy0, oy1, L.kh, L.sh, L.dh, L.pad_t, X.h, &b.h0, &b.h1);
      return b;
    }
    case QOp::AvgPool:
    case QOp::MaxPool:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      window_rows(oy0, oy1, L.kh, L.sh, 1, L.pad_t, X.h, &b.h0, &b.h1);
      return b;
    case QOp::GlobalAvgPool:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = 0;
      b.h1 = X.h;
      return b;
    case QOp::Gemm:
      b.c0 = 0;
      b.c1 = X.c;
      b.h0 = 0;
      b.h1 = X.h;
      return b;
    case QOp::Add:
    case QOp::Lut:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = oy0;
      b.h1 = oy1 + 1;
      return b;
    case QOp::Mul:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      if (i == 1 && X.h == 1 && X.w == 1 && (L.out.h != 1 || L.out.w != 1)) {
        b.h0 = 0;
        b.h1 = 1;
      } else {
        b.h0 = oy0;
        b.h1 = oy1 + 1;
      }
      return b;
    case QOp::Concat: {
      int32_t off = 0;
      for (int k = 0; k < i; ++k) off += L.in[k].c;
      b.c0 = maxi(oc0, off) - off;
      b.c1 = mini(oc1 + 1, off + X.c) - off;
      if (b.c1 <= b.c0) return Box{};
      b.h0 = oy0;
      b.h1 = oy1 + 1;
      return b;
    }
    case QOp::Pad:
      b.c0 = oc0;
      b.c1 = oc1 + 1;
      b.h0 = maxi(0, oy0 - L.pad_t);
      b.h1 = mini(X.h, oy1 - L.pad_t + 1);
      if (b.h1 < b.h0) b.h1 = b.h0;
      return b;
  }
  return b;
}

KernelStatus compute_range(const LayerDesc& L, const View* in, int32_t begin, int32_t end, int8_t* out,
                           int32_t oc_count) {
  const int32_t total = L.out.size();
  if (begin < 0 || end > total || begin > end) return KernelStatus::BadRange;
  if (begin == end) return KernelStatus::Ok;
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return KernelStatus::BadLayer;
  for (int i = 0; i < L.n_inputs; ++i)
    if (!covers(in[i], input_box(L, i, begin, end))) return KernelStatus::ViewTooSmall;
  const int32_t hw = L.out.h * L.out.w;
  const int32_t W = L.out.w;

  // Walk the run channel by channel: [c, p0..p1) slices.
  auto each_channel = [&](auto&& fn) -> KernelStatus {
    int32_t pos = begin;
    while (pos < end) {
      const int32_t c = pos / hw;
      const int32_t p0 = pos % hw;
      const int32_t p1 = mini(hw, p0 + (end - pos));
      KernelStatus st = fn(c, p0, p1, out + (pos - begin));
      if (st != KernelStatus::Ok) return st;
      pos += p1 - p0;
    }
    return KernelStatus::Ok;
  };

  switch (L.op) {
    case QOp::Conv: {
      if (L.groups <= 0 || L.in[0].c % L.groups || L.out.c % L.groups) return KernelStatus::BadLayer;
      int32_t oc0, oc1;
      output_channels(L, begin, end, &oc0, &oc1);
      if (oc0 < L.oc_base || oc1 >= L.oc_base + oc_count) return KernelStatus::MissingData;
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        return conv_channel(L, in[0], c, p0, p1, o);
      });
    }
    case QOp::Gemm: {
      if (begin < L.oc_base || end > L.oc_base + oc_count) return KernelStatus::MissingData;
      return gemm_range(L, in[0], begin, end, out);
    }
    case QOp::AvgPool:
    case QOp::MaxPool:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        return pool_channel(L, in[0], c, p0, p1, o);
      });
    case QOp::GlobalAvgPool: {
      const Dims& X = L.in[0];
      const int32_t zp = L.in_zp[0];
      for (int32_t c = begin; c < end; ++c) {
        int32_t acc = 0;
        const int8_t* src = row_ptr(in[0], X.w, c, 0);
        const int32_t n = X.h * X.w;
        for (int32_t k = 0; k < n; ++k) acc += int32_t(src[k]) - zp;
        out[c - begin] = requant(acc, L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
      }
      return KernelStatus::Ok;
    }
    case QOp::Add:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t a = (int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0]) * (int32_t(1) << L.left_shift);
          const int32_t b = (int32_t(row_ptr(in[1], W, c, y)[x]) - L.in_zp[1]) * (int32_t(1) << L.left_shift);
          const int32_t sa = multiply_by_quantized_multiplier(a, L.in_mult[0], L.in_shift[0]);
          const int32_t sb = multiply_by_quantized_multiplier(b, L.in_mult[1], L.in_shift[1]);
          o[p - p0] = requant(sa + sb, L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
        }
        return KernelStatus::Ok;
      });
    case QOp::Mul: {
      const bool bcast = L.in[1].h == 1 && L.in[1].w == 1 && (L.out.h != 1 || L.out.w != 1);
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t a = int32_t(row_ptr(in[0], W, c, y)[x]) - L.in_zp[0];
          const int32_t b = int32_t(bcast ? row_ptr(in[1], 1, c, 0)[0] : row_ptr(in[1], W, c, y)[x]) - L.in_zp[1];
          o[p - p0] = requant(a * b, L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
        }
        return KernelStatus::Ok;
      });
    }
    case QOp::Concat:
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        int32_t k = 0, off = 0;
        while (k < L.n_inputs && c >= off + L.in[k].c) off += L.in[k++].c;
        if (k >= L.n_inputs) return KernelStatus::BadLayer;
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          const int32_t v = int32_t(row_ptr(in[k], W, c - off, y)[x]) - L.in_zp[k];
          o[p - p0] = requant(v, L.in_mult[k], L.in_shift[k], L.out_zp, L.act_min, L.act_max);
        }
        return KernelStatus::Ok;
      });
    case QOp::Lut:
      if (!L.lut) return KernelStatus::BadLayer;
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W, x = p % W;
          o[p - p0] = L.lut[int32_t(row_ptr(in[0], W, c, y)[x]) + 128];
        }
        return KernelStatus::Ok;
      });
    case QOp::Pad: {
      const Dims& X = L.in[0];
      return each_channel([&](int32_t c, int32_t p0, int32_t p1, int8_t* o) {
        for (int32_t p = p0; p < p1; ++p) {
          const int32_t y = p / W - L.pad_t, x = p % W - L.pad_l;
          const bool inside = y >= 0 && y < X.h && x >= 0 && x < X.w;
          o[p - p0] = inside ? row_ptr(in[0], X.w, c, y)[x] : int8_t(L.out_zp);
        }
        return KernelStatus::Ok;
      });
    }
  }
  return KernelStatus::BadLayer;
}

}  // namespace core
}  // namespace ts
