// Kernel variants (core/kernel_table.h) against the portable table, bit for
// bit: every variant this CPU supports (x86: avx2, vnni) on random shapes,
// strides, paddings, zero points, multipliers and activation clamps,
// including the requantiser's saturation corners (INT32_MIN and INT32_MAX
// multipliers, left shifts up to 30, right shifts to -31 and beyond,
// accumulators at the int32 extremes). On a CPU (or build) without a variant
// the variant's cases report it in the test log and check nothing else.
// Also the CRC-32: the build's crc32_update (zlib on the host) and the
// portable slicing-by-4 against a bitwise reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/crc32.h"
#include "core/kernel_table.h"
#include "core/layer.h"
#if defined(__x86_64__)
#include "core/x86/x86_kernels.h"
#endif

namespace {

using namespace ts::core;
using Rng = std::mt19937;

int rnd(Rng& r, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(r); }

std::vector<const KernelTable*> variants() {
  std::vector<const KernelTable*> v;
  for (const char* n : {"avx2", "vnni"}) {
    if (const KernelTable* t = find_kernels(n)) v.push_back(t);
    else std::printf("kernel variant %s: not available in this build or on this CPU\n", n);
  }
  return v;
}

// A multiplier/shift pair, often at the corners.
void random_mult(Rng& r, int32_t* m, int32_t* s) {
  switch (rnd(r, 0, 7)) {
    case 0: *m = INT32_MIN; break;
    case 1: *m = INT32_MAX; break;
    case 2: *m = 1 << 30; break;
    default: *m = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
  }
  switch (rnd(r, 0, 6)) {
    case 0: *s = rnd(r, 1, 30); break;        // left shifts (saturating)
    case 1: *s = rnd(r, -33, -28); break;     // extreme right shifts (incl. qmath's own path)
    case 2: *s = rnd(r, -21, -17); break;     // around the end of the fast requantiser's range (e <= 19)
    default: *s = rnd(r, -12, 0); break;
  }
}

void random_clamp(Rng& r, int32_t* zp, int32_t* lo, int32_t* hi) {
  *zp = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
  *lo = -128;
  *hi = 127;
  if (rnd(r, 0, 2) == 0) {
    *lo = rnd(r, -128, 0);
    *hi = rnd(r, 0, 127);
  }
}

TEST(KernelVariants, RequantRowMatchesPortableAtCorners) {
  Rng r(5);
  std::vector<int32_t> acc(203);
  std::vector<int8_t> want(acc.size()), got(acc.size());
  for (const KernelTable* t : variants()) {
    SCOPED_TRACE(t->name);
    for (int it = 0; it < 3000; ++it) {
      int32_t m, s, zp, lo, hi;
      random_mult(r, &m, &s);
      random_clamp(r, &zp, &lo, &hi);
      const Requant rq(m, s, zp, lo, hi);
      for (auto& a : acc) {
        switch (rnd(r, 0, 5)) {
          case 0: a = rnd(r, 0, 1) ? INT32_MIN : INT32_MAX; break;
          case 1: a = int32_t(r()); break;
          case 2: a = rnd(r, -3, 3); break;
          default: a = rnd(r, -200000, 200000); break;
        }
      }
      const int32_t n = rnd(r, 0, int(acc.size()));
      portable_kernels().requant_row(acc.data(), n, rq, want.data());
      t->requant_row(acc.data(), n, rq, got.data());
      for (int32_t k = 0; k < n; ++k)
        ASSERT_EQ(int(got[k]), int(want[k])) << "acc " << acc[k] << " m " << m << " s " << s << " zp " << zp << " ["
                                             << lo << "," << hi << "]";
    }
  }
}

TEST(KernelVariants, AddRowMatchesPortable) {
  Rng r(6);
  std::vector<int8_t> a(150), b(150), want(150), got(150);
  for (const KernelTable* t : variants()) {
    SCOPED_TRACE(t->name);
    for (int it = 0; it < 2000; ++it) {
      AddParams p;
      int32_t m, s, zp, lo, hi;
      random_mult(r, &m, &s);
      p.ra = Requant(m, rnd(r, 0, 1) ? -rnd(r, 0, 31) : s, 0, -128, 127);
      random_mult(r, &m, &s);
      p.rb = Requant(m, rnd(r, 0, 1) ? -rnd(r, 0, 31) : s, 0, -128, 127);
      random_mult(r, &m, &s);
      random_clamp(r, &zp, &lo, &hi);
      p.rout = Requant(m, s, zp, lo, hi);
      p.za = rnd(r, -128, 127);
      p.zb = rnd(r, -128, 127);
      p.left = rnd(r, 0, 3) == 0 ? rnd(r, 0, 22) : 20;
      for (auto& x : a) x = int8_t(rnd(r, -128, 127));
      for (auto& x : b) x = int8_t(rnd(r, -128, 127));
      const int32_t n = rnd(r, 0, 150);
      portable_kernels().add_row(a.data(), b.data(), n, p, want.data());
      t->add_row(a.data(), b.data(), n, p, got.data());
      for (int32_t k = 0; k < n; ++k) ASSERT_EQ(int(got[k]), int(want[k])) << "at " << k;
    }
  }
}

// Add with the quantiser's kind of parameters (left shift 20, or 9-22;
// operand multipliers from 2^(31 - left) - 1 to 2^31 - 1 with right shifts
// 0-12, output multipliers up to 2^31 - 1, past the by_sign form's bound,
// right shifts 1-20): the AVX-512 table's int32 path for them and its
// bounds on each side (multipliers, shifts and left shifts just outside
// fall back), operands and zero points at the extremes, 0-300 elements.
// With the usual output shift (2^-19) an operand's rescale one off does not
// show in the output, so a third of the cases have small operand
// multipliers (rescales of a few units to a few thousand) and an output
// shift of 1-4, where it does.
TEST(KernelVariants, AddRowUsualParametersMatchPortable) {
  Rng r(18);
  std::vector<int8_t> a(300), b(300), want(300), got(300);
  const int32_t bound = INT32_MAX - (1 << 28) + 1;
  for (const KernelTable* t : variants()) {
    SCOPED_TRACE(t->name);
    for (int it = 0; it < 3000; ++it) {
      AddParams p;
      p.left = rnd(r, 0, 3) == 0 ? rnd(r, 9, 22) : 20;
      const bool small = it % 3 == 0;
      auto operand = [&]() {
        const int32_t low = int32_t(1) << (31 - std::min(p.left, 30));
        int32_t m;
        switch (small ? 6 : rnd(r, 0, 5)) {
          case 0: m = low - rnd(r, 0, 1); break;
          case 1: m = INT32_MAX; break;
          case 2: m = 1 << 30; break;
          case 6: m = int32_t(std::min<int64_t>(INT32_MAX, (int64_t(low) << rnd(r, 0, 5)) + rnd(r, -1, low))); break;
          default: m = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
        }
        const int32_t s = rnd(r, 0, 2) ? -rnd(r, 0, 1) : -rnd(r, 0, 12);
        return Requant(m, s, 0, -128, 127);
      };
      p.ra = operand();
      p.rb = operand();
      int32_t zp, lo, hi, m;
      switch (rnd(r, 0, 5)) {
        case 0: m = bound + rnd(r, -1, 1); break;
        case 1: m = INT32_MAX; break;
        case 2: m = rnd(r, 1, 1000); break;
        default: m = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
      }
      const int32_t s = small ? -rnd(r, 1, 4) : rnd(r, 0, 3) == 0 ? -rnd(r, 1, 20) : -19;
      random_clamp(r, &zp, &lo, &hi);
      p.rout = Requant(m, s, zp, lo, hi);
      const int zmode = rnd(r, 0, 3);
      p.za = zmode == 0 ? -128 : zmode == 1 ? 127 : rnd(r, -128, 127);
      p.zb = zmode == 0 ? 127 : zmode == 1 ? -128 : rnd(r, -128, 127);
      const int xmode = rnd(r, 0, 3);
      for (auto& x : a) x = int8_t(xmode == 0 ? 127 : xmode == 1 ? -128 : rnd(r, -128, 127));
      for (auto& x : b) x = int8_t(xmode == 0 ? -128 : xmode == 1 ? 127 : rnd(r, -128, 127));
      const int32_t n = rnd(r, 0, 300);
      portable_kernels().add_row(a.data(), b.data(), n, p, want.data());
      t->add_row(a.data(), b.data(), n, p, got.data());
      for (int32_t k = 0; k < n; ++k) ASSERT_EQ(int(got[k]), int(want[k])) << "it " << it << " at " << k;
    }
  }
}

// A random layer with its data, run with compute_range over all outputs.
struct Layer {
  LayerDesc d;
  std::vector<int8_t> x[2], w;
  std::vector<int32_t> bias, mult, shift;
  void bind() {
    d.weights = w.empty() ? nullptr : w.data();
    d.bias = bias.empty() ? nullptr : bias.data();
    d.mult = mult.empty() ? nullptr : mult.data();
    d.shift = shift.empty() ? nullptr : shift.data();
  }
  std::vector<int8_t> run(const KernelTable* t) const {
    set_kernels(t);
    View v[2];
    for (int k = 0; k < d.n_inputs; ++k) v[k] = View{x[k].data(), 0, d.in[k].c, 0, d.in[k].h};
    std::vector<int8_t> out(size_t(d.out.size()));
    const int32_t ch = d.op == QOp::Conv || d.op == QOp::Gemm ? d.out.c : 0;
    const KernelStatus st = compute_range(d, v, 0, d.out.size(), out.data(), ch);
    set_kernels(nullptr);
    EXPECT_EQ(st, KernelStatus::Ok);
    return out;
  }
};

void fill(Rng& r, std::vector<int8_t>& v, size_t n) {
  v.resize(n);
  for (auto& e : v) e = int8_t(rnd(r, -128, 127));
}

void per_channel(Rng& r, Layer& L, int32_t cout, int32_t per) {
  fill(r, L.w, size_t(cout) * per);
  for (auto& e : L.w)
    if (e == -128 && rnd(r, 0, 1)) e = -127;
  L.bias.resize(cout);
  L.mult.resize(cout);
  L.shift.resize(cout);
  for (int32_t o = 0; o < cout; ++o) {
    L.bias[o] = rnd(r, -100000, 100000);
    random_mult(r, &L.mult[o], &L.shift[o]);
    if (L.shift[o] > 0 && rnd(r, 0, 1)) L.shift[o] = -rnd(r, 5, 12);  // keep many outputs unsaturated
  }
  random_clamp(r, &L.d.out_zp, &L.d.act_min, &L.d.act_max);
  L.bind();
}

int conv_out(int in, int k, int s, int d, int p0, int p1) { return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1; }

void expect_same(const Layer& L, const std::string& what) {
  const std::vector<int8_t> want = L.run(&portable_kernels());
  for (const KernelTable* t : variants()) {
    const std::vector<int8_t> got = L.run(t);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << t->name << " " << what << " at " << i;
  }
}

TEST(KernelVariants, ConvMatchesPortable) {
  Rng r(7);
  for (int it = 0; it < 120; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int kind = it % 4;  // pointwise, depthwise 3x3, general, grouped pointwise
    int cin, cout, groups = 1, k = 1, s = 1, p = 0;
    if (kind == 0) { cin = rnd(r, 1, 300); cout = rnd(r, 1, 70); }
    else if (kind == 1) { cin = cout = groups = rnd(r, 1, 40); k = 3; s = rnd(r, 1, 2); p = rnd(r, 0, 1); }
    else if (kind == 2) { cin = rnd(r, 1, 8); cout = rnd(r, 1, 8); k = rnd(r, 1, 4); s = rnd(r, 1, 3); p = rnd(r, 0, 2); }
    else { groups = rnd(r, 2, 3); cin = groups * rnd(r, 1, 20); cout = groups * rnd(r, 1, 10); }
    if (it == 4) cin = 1100;  // deeper than the variants' packed tile: their fallback
    const int H = rnd(r, k, 40), W = rnd(r, k, 40);
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.kh = d.kw = k; d.sh = d.sw = s;
    d.pad_t = d.pad_l = p; d.pad_b = rnd(r, 0, p); d.pad_r = rnd(r, 0, p);
    d.groups = groups;
    d.out = Dims{cout, conv_out(H, k, s, 1, d.pad_t, d.pad_b), conv_out(W, k, s, 1, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, cin / groups * k * k);
    if (rnd(r, 0, 5) == 0) L.bias.clear(), L.bind();
    expect_same(L, "conv kind " + std::to_string(kind) + " it " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

// A board's share: a random run of outputs (compute_range) or a random box
// (compute_box, often narrower than the plane), its input given as a window
// holding only the channels and rows input_box names, copied into a buffer of
// exactly that size (a kernel reading outside its window reads other data).
// Covers partial rows, windows that start at c0/h0 > 0 and every path of
// every variant (pointwise, depthwise and full 3x3 with both strides, the
// narrow-plane depthwise path, general kernels).
std::vector<int8_t> run_part(const Layer& L, const KernelTable* t, bool box, int32_t a, int32_t b, const OutBox& ob) {
  const LayerDesc& d = L.d;
  const Box in = box ? input_box(d, 0, ob) : input_box(d, 0, a, b);
  std::vector<int8_t> win(size_t(in.elems(d.in[0].w)) + 1);  // + 1: never empty
  for (int32_t c = in.c0; c < in.c1; ++c)
    for (int32_t y = in.h0; y < in.h1; ++y)
      for (int32_t x = 0; x < d.in[0].w; ++x)
        win[(size_t(c - in.c0) * (in.h1 - in.h0) + (y - in.h0)) * d.in[0].w + x] =
            L.x[0][(size_t(c) * d.in[0].h + y) * d.in[0].w + x];
  View v{win.data(), in.c0, in.c1 - in.c0, in.h0, in.h1 - in.h0};
  set_kernels(t);
  std::vector<int8_t> out(box ? size_t(ob.elems()) : size_t(b - a));
  const KernelStatus st = box ? compute_box(d, &v, ob, out.data(), d.out.c) : compute_range(d, &v, a, b, out.data(), d.out.c);
  set_kernels(nullptr);
  EXPECT_EQ(st, KernelStatus::Ok);
  return out;
}

// A random board share of a layer's outputs: a run [a, b) and a box.
struct Share {
  int32_t a = 0, b = 0;
  OutBox ob;
};

Share random_share(Rng& r, const Dims& out) {
  Share s;
  const int32_t total = out.size();
  s.a = rnd(r, 0, total - 1), s.b = rnd(r, s.a + 1, total);
  s.ob.c0 = rnd(r, 0, out.c - 1); s.ob.c1 = rnd(r, s.ob.c0 + 1, out.c);
  s.ob.y0 = rnd(r, 0, out.h - 1); s.ob.y1 = rnd(r, s.ob.y0 + 1, out.h);
  s.ob.x0 = rnd(r, 0, out.w - 1); s.ob.x1 = rnd(r, s.ob.x0 + 1, out.w);
  return s;
}

// The share as a run and as a box on every variant, against the portable kernels.
void expect_shares_same(const Layer& L, const Share& s, const std::string& what) {
  for (const bool box : {false, true}) {
    const std::vector<int8_t> want = run_part(L, &portable_kernels(), box, s.a, s.b, s.ob);
    for (const KernelTable* t : variants())
      ASSERT_EQ(run_part(L, t, box, s.a, s.b, s.ob), want) << t->name << " " << what << (box ? " box" : " range");
  }
}

TEST(KernelVariants, ConvSharesWithWindowsMatchPortable) {
  Rng r(11);
  for (int it = 0; it < 160; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int kind = it % 5;  // pointwise, depthwise 3x3, narrow depthwise, first-conv-like, general
    int cin, cout, groups = 1, k = 1, s = 1, p = 0, H, W;
    if (kind == 0) { cin = rnd(r, 1, 200); cout = rnd(r, 1, 40); H = rnd(r, 1, 20); W = rnd(r, 1, 20); }
    else if (kind == 1) { cin = cout = groups = rnd(r, 1, 24); k = 3; s = rnd(r, 1, 2); p = 1; H = rnd(r, 3, 40); W = rnd(r, 3, 40); }
    else if (kind == 2) { cin = cout = groups = rnd(r, 1, 40); k = 3; s = rnd(r, 1, 2); p = rnd(r, 0, 1); H = rnd(r, 3, 16); W = rnd(r, 3, 15 * s); }
    else if (kind == 3) { cin = rnd(r, 1, 4); cout = rnd(r, 1, 20); k = 3; s = rnd(r, 1, 2); p = rnd(r, 0, 1); H = rnd(r, 3, 40); W = rnd(r, 3, 40); }
    else { cin = rnd(r, 1, 6); cout = rnd(r, 1, 6); k = rnd(r, 1, 5); s = rnd(r, 1, 3); p = rnd(r, 0, 2); H = rnd(r, k, 24); W = rnd(r, k, 24); }
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.kh = d.kw = k; d.sh = d.sw = s;
    d.pad_t = d.pad_l = p; d.pad_b = rnd(r, 0, p); d.pad_r = rnd(r, 0, p);
    d.groups = groups;
    d.out = Dims{cout, conv_out(H, k, s, 1, d.pad_t, d.pad_b), conv_out(W, k, s, 1, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, cin / groups * k * k);
    for (int rep = 0; rep < 4; ++rep) {
      const bool box = rep % 2 == 1;
      Share sh = random_share(r, d.out);
      if (rnd(r, 0, 2) == 0) sh.ob.x0 = 0, sh.ob.x1 = d.out.w;
      const std::vector<int8_t> want = run_part(L, &portable_kernels(), box, sh.a, sh.b, sh.ob);
      for (const KernelTable* t : variants()) {
        const std::vector<int8_t> got = run_part(L, t, box, sh.a, sh.b, sh.ob);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(int(got[i]), int(want[i])) << t->name << " kind " << kind << " it " << it << (box ? " box" : " range")
                                               << " at " << i;
      }
    }
    if (HasFatalFailure()) return;
  }
}

// Convolutions 3 wide (the AVX2 table's vpmaddubsw block: kernel rows 1-5,
// row dilation 1-3, row stride 1-3, column stride 1-2, 1-5 input channels
// per group, planes 1 to 40 wide incl. the two-rows-per-vector case of <= 8)
// and their neighbours it must hand back (column dilation 2, column stride
// 3, more than 16 kernel rows), as whole layers and as board shares.
TEST(KernelVariants, ThreeWideConvMatchesPortable) {
  Rng r(12);
  for (int it = 0; it < 150; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    d.groups = rnd(r, 1, 3);
    const int cin_g = rnd(r, 1, it % 10 == 9 ? 7 : 5), cout_g = rnd(r, 1, 9);
    d.kh = rnd(r, 1, 5); d.kw = 3;
    d.dh = rnd(r, 1, 3); d.dw = it % 7 == 6 ? 2 : 1;
    d.sh = rnd(r, 1, 3); d.sw = it % 11 == 10 ? 3 : rnd(r, 1, 2);
    d.pad_t = rnd(r, 0, 2); d.pad_b = rnd(r, 0, 2); d.pad_l = rnd(r, 0, 2); d.pad_r = rnd(r, 0, 2);
    const int H = rnd(r, (d.kh - 1) * d.dh + 1, 30), W = rnd(r, 2 * d.dw + 1, it % 3 == 0 ? 12 : 40);
    d.in[0] = Dims{cin_g * d.groups, H, W};
    d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.out = Dims{cout_g * d.groups, conv_out(H, d.kh, d.sh, d.dh, d.pad_t, d.pad_b),
                 conv_out(W, d.kw, d.sw, d.dw, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, d.out.c, cin_g * d.kh * d.kw);
    expect_same(L, "3-wide it " + std::to_string(it));
    if (HasFatalFailure()) return;
    expect_shares_same(L, random_share(r, d.out), "3-wide it " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

// Depthwise planes as the AVX2 table's plane path takes them (8 positions
// per vector across row ends, one or two 16-byte windows per half): odd
// channel counts, planes 1 to 40 wide (widths not a multiple of the vector;
// 1 and 2, whose halves span several rows, handed back), kernel rows 1-3,
// row dilation 1-2, both strides, padding 0-2, and the operands that would
// saturate vpmaddubsw done naively: weights all -128 or all 127 or a mix of
// the two, inputs all -128 or 127, zero points -128 and 127; one plane of
// 72 x 72 (more positions than one chunk of the plan). Whole and as shares.
TEST(KernelVariants, DepthwisePlanesAtExtremesMatchPortable) {
  Rng r(13);
  for (int it = 0; it < 160; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int c = 2 * rnd(r, 0, 4) + 1;
    d.groups = c;
    d.kh = rnd(r, 1, 3); d.kw = 3;
    d.dh = rnd(r, 1, 2); d.dw = 1;
    d.sh = rnd(r, 1, 2); d.sw = rnd(r, 1, 2);
    d.pad_t = rnd(r, 0, 2); d.pad_b = rnd(r, 0, 2); d.pad_l = rnd(r, 0, 2); d.pad_r = rnd(r, 0, 2);
    int H = rnd(r, (d.kh - 1) * d.dh + 1, 40), W = rnd(r, 3, 40);
    if (it == 0) H = W = 72, d.sh = d.sw = 1;
    d.in[0] = Dims{c, H, W};
    const int zmode = rnd(r, 0, 2);
    d.in_zp[0] = zmode == 0 ? -128 : zmode == 1 ? 127 : rnd(r, -128, 127);
    d.out = Dims{c, conv_out(H, d.kh, d.sh, d.dh, d.pad_t, d.pad_b), conv_out(W, 3, d.sw, 1, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    const int xmode = rnd(r, 0, 3);
    for (auto& e : L.x[0]) e = xmode == 0 ? -128 : xmode == 1 ? 127 : e;
    per_channel(r, L, c, d.kh * 3);
    const int wmode = rnd(r, 0, 3);
    for (auto& e : L.w) e = wmode == 0 ? -128 : wmode == 1 ? 127 : wmode == 2 ? (rnd(r, 0, 1) ? -128 : 127) : e;
    expect_same(L, "depthwise plane it " + std::to_string(it));
    if (HasFatalFailure()) return;
    expect_shares_same(L, random_share(r, d.out), "depthwise plane it " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

// Depthwise 3x3 on rows 16 to 140 wide (the AVX-512 table's wide-row paths:
// at stride 1, 64 columns per step in four phases from 48 output columns,
// two rows per step for 16 to 32; 32 per step in two phases at stride 2),
// padding 0-2 on each side, both
// strides, most layers with every requantiser in the usual (fast) form, both
// sides of the by_sign multiplier bound, weights, inputs and zero points at
// the extremes; whole and as shares (partial rows, boxes).
TEST(KernelVariants, DepthwiseWideRowsMatchPortable) {
  Rng r(16);
  for (int it = 0; it < 200; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int c = rnd(r, 1, 5);
    d.groups = c;
    d.kh = d.kw = 3;
    d.sh = rnd(r, 1, 2); d.sw = it % 3 == 2 ? 2 : 1;
    d.pad_t = rnd(r, 0, 2); d.pad_b = rnd(r, 0, 2); d.pad_l = rnd(r, 0, 2); d.pad_r = rnd(r, 0, 2);
    const int H = rnd(r, 3, 10), W = it % 2 ? rnd(r, 16, 36) : rnd(r, 40, 140);
    d.in[0] = Dims{c, H, W};
    const int zmode = rnd(r, 0, 3);
    d.in_zp[0] = zmode == 0 ? -128 : zmode == 1 ? 127 : rnd(r, -128, 127);
    d.out = Dims{c, conv_out(H, 3, d.sh, 1, d.pad_t, d.pad_b), conv_out(W, 3, d.sw, 1, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    const int xmode = rnd(r, 0, 4);
    for (auto& e : L.x[0]) e = xmode == 0 ? -128 : xmode == 1 ? 127 : e;
    per_channel(r, L, c, 9);
    if (rnd(r, 0, 3) != 0) {
      const int32_t bound = INT32_MAX - (1 << 28) + 1;
      for (int32_t o = 0; o < c; ++o) {
        switch (rnd(r, 0, 4)) {
          case 0: L.mult[o] = bound - rnd(r, 0, 1); break;
          case 1: L.mult[o] = bound + rnd(r, 1, 2); break;
          default: L.mult[o] = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
        }
        L.shift[o] = -rnd(r, 2, 19);
      }
    }
    const int wmode = rnd(r, 0, 4);
    for (auto& e : L.w) e = wmode == 0 ? -128 : wmode == 1 ? 127 : wmode == 2 ? (rnd(r, 0, 1) ? -128 : 127) : e;
    expect_same(L, "wide depthwise it " + std::to_string(it));
    if (HasFatalFailure()) return;
    for (int rep = 0; rep < 2; ++rep) {
      Share sh = random_share(r, d.out);
      if (rep == 1) sh.ob.x0 = 0, sh.ob.x1 = d.out.w;
      expect_shares_same(L, sh, "wide depthwise it " + std::to_string(it));
      if (HasFatalFailure()) return;
    }
  }
}

// Depthwise convolutions on at most 16 output positions (the AVX-512 table's
// channels-in-lanes path, vbmi_lanes.cpp): 1x1 to 4x4 outputs from planes
// 1x1 to 9x9, kernels 1x1 to 3x3, strides 1 and 2, dilation 1 and 2,
// padding 0-2 (positions whose taps all lie in the padding), channel counts
// that are not multiples of 16 (and 16, 32), depth multipliers 1-3, zero
// points, inputs and weights at the extremes; the requantisers in each of the
// path's forms: by_sign per lane (multipliers within its bound, or above it
// with biases small enough), the fast form per lane (a bias near the int32
// extremes), and channels without the fast form inside a block of 16 (done
// lane by lane). Whole and as shares (ranges and boxes from windows).
TEST(KernelVariants, DepthwiseTinyPlanesMatchPortable) {
  Rng r(17);
  const int32_t bound = INT32_MAX - (1 << 28) + 1;
#if defined(__x86_64__)
  using ts::core::x86::Path;
  using ts::core::x86::path_count;
  const Path paths[] = {Path::kLanesSign, Path::kLanesFast, Path::kLanesScalar};
  int64_t before[3];
  for (int k = 0; k < 3; ++k) before[k] = path_count(paths[k]);
#endif
  for (int it = 0; it < 300; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int sizes[] = {1, 15, 16, 17, 32, 33, rnd(r, 1, 70)};
    const int c = sizes[rnd(r, 0, 6)], mult = rnd(r, 0, 4) == 0 ? rnd(r, 2, 3) : 1;
    d.groups = c;
    d.kh = rnd(r, 0, 3) == 0 ? rnd(r, 1, 3) : 3;
    d.kw = rnd(r, 0, 3) == 0 ? rnd(r, 1, 3) : 3;
    d.sh = rnd(r, 1, 2); d.sw = rnd(r, 1, 2);
    d.dh = rnd(r, 0, 4) == 0 ? 2 : 1; d.dw = rnd(r, 0, 4) == 0 ? 2 : 1;
    d.pad_t = rnd(r, 0, 2); d.pad_b = rnd(r, 0, 2); d.pad_l = rnd(r, 0, 2); d.pad_r = rnd(r, 0, 2);
    const int H = rnd(r, std::max(1, (d.kh - 1) * d.dh + 1 - d.pad_t - d.pad_b), 9);
    const int W = rnd(r, std::max(1, (d.kw - 1) * d.dw + 1 - d.pad_l - d.pad_r), 9);
    d.in[0] = Dims{c, H, W};
    d.out = Dims{c * mult, conv_out(H, d.kh, d.sh, d.dh, d.pad_t, d.pad_b), conv_out(W, d.kw, d.sw, d.dw, d.pad_l, d.pad_r)};
    if (d.out.h < 1 || d.out.w < 1 || d.out.h * d.out.w > 16) {
      --it;
      continue;
    }
    const int zmode = rnd(r, 0, 3);
    d.in_zp[0] = zmode == 0 ? -128 : zmode == 1 ? 127 : rnd(r, -128, 127);
    fill(r, L.x[0], size_t(d.in[0].size()));
    const int xmode = rnd(r, 0, 4);
    for (auto& e : L.x[0]) e = xmode == 0 ? -128 : xmode == 1 ? 127 : e;
    const int cout = d.out.c;
    per_channel(r, L, cout, d.kh * d.kw);
    const int rqmode = rnd(r, 0, 4);  // 0: per_channel's corners (lane by lane)
    for (int32_t o = 0; o < cout && rqmode > 0; ++o) {
      switch (rnd(r, 0, 4)) {
        case 0: L.mult[o] = bound - rnd(r, 0, 1); break;
        case 1: L.mult[o] = rqmode == 1 ? bound : bound + rnd(r, 1, 1 << 20); break;  // above: by_sign needs small biases
        case 2: L.mult[o] = rqmode == 1 ? bound : INT32_MAX; break;
        default: L.mult[o] = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
      }
      L.shift[o] = rnd(r, 0, 4) == 0 ? -(rnd(r, 0, 1) ? 2 : 19) : -rnd(r, 2, 19);
      if (rqmode == 3 && rnd(r, 0, 3) == 0)  // accumulators near the int32 extremes: the fast form
        L.bias[o] = rnd(r, 0, 1) ? INT32_MAX - (1 << 22) - rnd(r, 0, 1000) : INT32_MIN + (1 << 22) + rnd(r, 0, 1000);
      if (rqmode == 4 && rnd(r, 0, 1)) L.bias[o] = rnd(r, 0, 1) ? (1 << 29) - rnd(r, 0, 1) : -(1 << 29) + rnd(r, 0, 1);
      if (rqmode == 4 && o == cout - 1 && rnd(r, 0, 1)) L.bias[o] = (1 << 29) + 1;  // one channel past the bias bound
    }
    if (rnd(r, 0, 5) == 0) random_clamp(r, &d.out_zp, &d.act_min, &d.act_max);
    const int wmode = rnd(r, 0, 4);
    for (auto& e : L.w) e = wmode == 0 ? -128 : wmode == 1 ? 127 : wmode == 2 ? (rnd(r, 0, 1) ? -128 : 127) : e;
    if (rnd(r, 0, 6) == 0) L.bias.clear();
    L.bind();
    const std::string what = "tiny depthwise it " + std::to_string(it);
    expect_same(L, what);
    if (HasFatalFailure()) return;
    expect_shares_same(L, random_share(r, d.out), what);
    if (HasFatalFailure()) return;
  }
#if defined(__x86_64__)
  if (find_kernels("vnni") && ts::core::x86::has_vbmi()) {
    for (int k = 0; k < 3; ++k) EXPECT_GT(path_count(paths[k]), before[k]) << "path " << k << " not reached";
  }
#endif
}

// Pointwise convolutions of at most 12 positions (the AVX2 table's
// channels-in-lanes path): 1-12 positions (planes 1x1 to 3x4), input
// channels 1-300 (odd, and past the 16-channel transpose blocks), output
// channels 1-40 (blocks of 8 and their tails), groups, weights at -128 and
// 127, zero points at -128 and 127, multipliers at the corners (some
// channels of a block then leave the per-lane requantiser).
TEST(KernelVariants, PointwiseOnFewPositionsMatchesPortable) {
  Rng r(15);
#if defined(__x86_64__)
  using ts::core::x86::Path;
  using ts::core::x86::path_count;
  const int64_t lanes0 = path_count(Path::kFewLanes), one0 = path_count(Path::kFewRqS);
#endif
  for (int it = 0; it < 200; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    d.groups = rnd(r, 0, 3) == 0 ? rnd(r, 2, 3) : 1;
    const int cin = d.groups * rnd(r, 1, it % 4 == 0 ? 300 : 40), cout = d.groups * rnd(r, 1, 40);
    const int H = rnd(r, 1, 3), W = rnd(r, 1, 4);
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 2) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.out = Dims{cout, H, W};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, cin / d.groups);
    if (rnd(r, 0, 1) == 0)  // every channel of the requantisers' usual form (the per-lane path)
      for (int32_t o = 0; o < cout; ++o) L.mult[o] = int32_t((1u << 30) | (uint32_t(r()) >> 2)), L.shift[o] = -rnd(r, 2, 19);
    if (rnd(r, 0, 2) == 0)
      for (auto& e : L.w) e = rnd(r, 0, 1) ? -128 : 127;
    if (rnd(r, 0, 4) == 0) L.bias.clear(), L.bind();
    expect_same(L, "few-position pointwise it " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
#if defined(__x86_64__)
  if (find_kernels("vnni")) {  // both ways of requantising 16 channels
    EXPECT_GT(path_count(Path::kFewLanes), lanes0);
    EXPECT_GT(path_count(Path::kFewRqS), one0);
  }
#endif
}

// The AVX-512 kernels' requantisers set up 16 channels at a time
// (RqSignRow: the by_sign form where a channel's multiplier and shift allow
// it, an RqS for the others, channel by channel in one layer): pointwise
// layers on planes of 17-150 positions (the tile path; up to 300 output
// channels, past one block of 256 requantisers) and depthwise 3x3 layers on
// planes narrower than 16 columns (the narrow-plane path), each channel's
// multiplier and shift on or next to the form's bounds (2^31 - 2^28 + 1,
// right shifts 1, 2, 19, 20, left shifts), accumulators near the int32
// extremes, zero points and clamps at the extremes. Both kinds of channel must be reached on a CPU with the vnni table.
TEST(KernelVariants, RequantFormsPerChannelMatchPortable) {
  Rng r(16);
  const int32_t bound = INT32_MAX - (1 << 28) + 1;
#if defined(__x86_64__)
  using ts::core::x86::Path;
  using ts::core::x86::path_count;
  const Path paths[] = {Path::kPwSignRow, Path::kPwRqS, Path::kFlatSignRow, Path::kFlatRqS};
  int64_t before[4];
  for (int k = 0; k < 4; ++k) before[k] = path_count(paths[k]);
#endif
  for (int it = 0; it < 160; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const bool pw = it % 2 == 0;
    int cin, cout, H, W, s = 1, p = 0;
    if (pw) {
      cin = rnd(r, 1, 80);
      cout = rnd(r, 0, 3) == 0 ? rnd(r, 250, 300) : rnd(r, 1, 40);
      do { H = rnd(r, 1, 15); W = rnd(r, 1, 15); } while (H * W < 17);
    } else {
      cin = cout = d.groups = rnd(r, 1, 40);
      s = rnd(r, 1, 2);
      p = rnd(r, 0, 1);
      d.kh = d.kw = 3; d.sh = d.sw = s;
      d.pad_t = d.pad_l = d.pad_b = d.pad_r = p;
      H = rnd(r, 3, 15); W = rnd(r, 3, 15);
    }
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 2) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.out = pw ? Dims{cout, H, W} : Dims{cout, conv_out(H, 3, s, 1, p, p), conv_out(W, 3, s, 1, p, p)};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, pw ? cin : 9);
    for (int32_t o = 0; o < cout; ++o) {
      const int32_t ms[] = {bound - 1, bound, bound + 1, INT32_MAX, 1, 1 << 30, int32_t((1u << 30) | (uint32_t(r()) >> 2))};
      const int32_t ss[] = {-1, -2, -19, -20, 0, 1, -rnd(r, 2, 19)};
      L.mult[o] = ms[rnd(r, 0, 6)];
      L.shift[o] = rnd(r, 0, 2) == 0 ? ss[rnd(r, 0, 5)] : ss[6];
      // Accumulators near the int32 extremes (|sum of products| < 2^22 here).
      if (rnd(r, 0, 2) == 0) L.bias[o] = rnd(r, 0, 1) ? INT32_MAX - (1 << 22) - rnd(r, 0, 1000) : INT32_MIN + (1 << 22) + rnd(r, 0, 1000);
    }
    if (rnd(r, 0, 3) == 0)
      for (auto& e : L.w) e = rnd(r, 0, 1) ? -128 : 127;
    expect_same(L, std::string(pw ? "pointwise" : "depthwise") + " it " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
#if defined(__x86_64__)
  if (find_kernels("vnni") && ts::core::x86::has_vbmi()) {
    for (int k = 0; k < 4; ++k) EXPECT_GT(path_count(paths[k]), before[k]) << "path " << k << " not reached";
  }
#endif
}

// The AVX2 requantiser's shorter form holds for multipliers up to
// 2^31 - 2^28 and hands larger ones to the longer form: both sides of that
// bound, with every right shift of the fast forms' range and accumulators
// at the int32 extremes.
TEST(KernelVariants, RequantAtTheShortFormsBound) {
  Rng r(14);
  std::vector<int32_t> acc(64);
  std::vector<int8_t> want(acc.size()), got(acc.size());
  const int32_t bound = INT32_MAX - (1 << 28) + 1;
  for (const KernelTable* t : variants()) {
    SCOPED_TRACE(t->name);
    for (const int32_t m : {bound - 1, bound, bound + 1, INT32_MAX, 1 << 30, 1})
      for (int32_t e = 0; e <= 20; ++e)
        for (const int32_t zp : {-128, 0, 127}) {
          for (auto& a : acc) a = rnd(r, 0, 2) == 0 ? (rnd(r, 0, 1) ? INT32_MIN : INT32_MAX) : int32_t(r()) >> rnd(r, 0, 24);
          acc[0] = INT32_MIN; acc[1] = INT32_MAX; acc[2] = -1; acc[3] = 0;
          const Requant rq(m, -e, zp, -128, 127);
          portable_kernels().requant_row(acc.data(), int32_t(acc.size()), rq, want.data());
          t->requant_row(acc.data(), int32_t(acc.size()), rq, got.data());
          ASSERT_EQ(got, want) << "m " << m << " e " << e << " zp " << zp;
        }
  }
}

TEST(KernelVariants, GemmMatchesPortable) {
  Rng r(8);
  for (int it = 0; it < 60; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Gemm;
    d.in[0] = Dims{rnd(r, 1, 300), rnd(r, 1, 3), rnd(r, 1, 3)};
    d.in_zp[0] = rnd(r, -128, 127);
    d.out = Dims{rnd(r, 1, 40), 1, 1};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, d.out.c, d.in[0].size());
    expect_same(L, "gemm " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

TEST(KernelVariants, AddMatchesPortable) {
  Rng r(9);
  for (int it = 0; it < 60; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Add;
    d.n_inputs = 2;
    d.out = d.in[0] = d.in[1] = Dims{rnd(r, 1, 8), rnd(r, 1, 20), rnd(r, 1, 20)};
    d.in_zp[0] = rnd(r, -128, 127);
    d.in_zp[1] = rnd(r, -128, 127);
    // As the quantiser makes them (operands rescaled by about 1/2 after a
    // left shift of 20, the output by about 2^-20), with corners mixed in.
    int32_t s;
    random_mult(r, &d.in_mult[0], &s);
    d.in_shift[0] = rnd(r, 0, 4) ? -rnd(r, 0, 2) : -rnd(r, 0, 31);
    random_mult(r, &d.in_mult[1], &s);
    d.in_shift[1] = rnd(r, 0, 4) ? -rnd(r, 0, 2) : -rnd(r, 0, 31);
    random_mult(r, &d.out_mult, &d.out_shift);
    if (rnd(r, 0, 4)) d.out_shift = -rnd(r, 17, 21);
    d.left_shift = 20;
    random_clamp(r, &d.out_zp, &d.act_min, &d.act_max);
    fill(r, L.x[0], size_t(d.out.size()));
    fill(r, L.x[1], size_t(d.out.size()));
    expect_same(L, "add " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

// ------------------------------------------------------------------- CRC-32

uint32_t crc_bitwise(const uint8_t* p, size_t n) {
  uint32_t r = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    r ^= p[i];
    for (int b = 0; b < 8; ++b) r = (r & 1u) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
  }
  return ~r;
}

TEST(Crc32, FastAndPortableEqualBitwiseReference) {
  Rng r(10);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = uint8_t(r());
  EXPECT_EQ(ts::crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(ts::crc32_update_portable(0, "123456789", 9), 0xCBF43926u);
  // Every length 0..64 at every misalignment 0..7.
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; n <= 64; ++n) {
      const uint32_t want = crc_bitwise(buf.data() + off, n);
      ASSERT_EQ(ts::crc32(buf.data() + off, n), want) << off << " " << n;
      ASSERT_EQ(ts::crc32_update_portable(0, buf.data() + off, n), want) << off << " " << n;
    }
  // Random buffers, and the incremental form split at random points.
  for (int it = 0; it < 200; ++it) {
    const size_t off = size_t(rnd(r, 0, 15)), n = size_t(rnd(r, 0, 60000));
    const uint32_t want = crc_bitwise(buf.data() + off, n);
    ASSERT_EQ(ts::crc32(buf.data() + off, n), want);
    ASSERT_EQ(ts::crc32_update_portable(0, buf.data() + off, n), want);
    const size_t cut = n ? size_t(rnd(r, 0, int(n))) : 0;
    ASSERT_EQ(ts::crc32_update(ts::crc32_update(0, buf.data() + off, cut), buf.data() + off + cut, n - cut), want);
    ASSERT_EQ(ts::crc32_update_portable(ts::crc32_update_portable(0, buf.data() + off, cut), buf.data() + off + cut,
                                        n - cut),
              want);
  }
  EXPECT_EQ(ts::crc32_update(0x12345678u, nullptr, 0), 0x12345678u);
}

}  // namespace
