// The Cortex-M7 DSP kernel table (src/core/arm/dsp.cpp) against the portable
// table, bit for bit, on the host: the same kernel source, with the DSP
// instructions in plain C++ (src/core/arm/dsp_ops.h). The firmware's
// `selftest` runs the same comparison on the target with the real
// instructions (tests/firmware_test.cpp). Shapes are chosen to go through
// the DSP paths (channel counts and fan-ins multiple of 4, 3x3 depthwise with
// strides 1 and 2, single-group convolutions with small patches) and their
// fallbacks, on whole layers and on random runs of outputs computed from
// windows of the input, as boards compute them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/arm/dsp_kernels.h"
#include "core/arm/dsp_ops.h"
#include "core/arm/mve_ops.h"
#include "core/kernel_table.h"
#include "core/layer.h"

namespace {

using namespace ts::core;
using Rng = std::mt19937;

int rnd(Rng& r, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(r); }

const KernelTable* dsp_table() {
  const KernelTable* t = find_kernels("dsp");
  EXPECT_NE(t, nullptr);
  return t;
}

TEST(ArmDsp, InstructionModels) {
  using namespace ts::core::dsp;
  // The portable versions, on values whose results are known.
  const uint32_t v = 0x80FF7F01u;  // bytes 01 7F FF 80
  EXPECT_EQ(sxtb16(v), pack16(1, -1));
  EXPECT_EQ(sxtb16_ror8(v), pack16(127, -128));
  EXPECT_EQ(smlad(pack16(-255, 255), pack16(-128, 127), 10), 10 + 255 * 128 + 255 * 127);
  EXPECT_EQ(smladx(pack16(2, 3), pack16(5, 7), 1), 1 + 2 * 7 + 3 * 5);
  EXPECT_EQ(smlabb(pack16(-3, 9), pack16(4, 9), 0), -12);
  EXPECT_EQ(smlatb(pack16(9, -3), pack16(4, 9), 0), -12);
  EXPECT_EQ(smlabt(pack16(-3, 9), pack16(9, 4), 0), -12);
  EXPECT_EQ(pkhbt(pack16(5, 6), pack16(7, 8)), pack16(5, 7));
  EXPECT_EQ(pkhtb(pack16(5, 6), pack16(7, 8)), pack16(6, 8));
  EXPECT_EQ(ssub16(pack16(-128, 127), pack16(127, -128)), pack16(-255, 255));
  EXPECT_EQ(sadd16(pack16(-128, 127), pack16(-128, 127)), pack16(-256, 254));
  EXPECT_EQ(sadd16(pack16(32767, -32768), pack16(1, -1)), pack16(-32768, 32767));  // wraps
  // smmlar: acc + floor((a*b + 2^31) / 2^32), modulo 2^32.
  EXPECT_EQ(smmlar(1 << 30, 1 << 30, 5), 5 + (1 << 28));
  EXPECT_EQ(smmlar(1, INT32_MIN, 0), 0);         // -2^31 + 2^31 = 0
  EXPECT_EQ(smmlar(-1, INT32_MIN, 0), 1);        // 2^31 + 2^31 = 2^32
  EXPECT_EQ(smmlar(3, -(1 << 30), 0), -1);       // floor((-3*2^30 + 2^31) / 2^32) = floor(-0.25)
  EXPECT_EQ(smmlar(INT32_MIN, INT32_MIN, 0), 1 << 30);
  EXPECT_EQ(smmlar(INT32_MIN, INT32_MIN, INT32_MAX), int32_t(0xBFFFFFFFu));  // wraps
  EXPECT_EQ(bfi8<8>(0x11223344u, 0xFFFFFFABu), 0x1122AB44u);
  EXPECT_EQ(bfi8<24>(0x11223344u, 0x80u), 0x80223344u);
}

// The Helium instructions' plain-C++ models (mve_ops.h), on known values.
TEST(ArmDsp, HeliumInstructionModels) {
  using namespace ts::core::mve;
  int8_t a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = int8_t(i % 2 ? -128 : 127), b[i] = int8_t(i % 3 ? -128 : 127);
  int32_t want = 7;
  for (int i = 0; i < 16; ++i) want += a[i] * b[i];
  EXPECT_EQ(dot_acc(7, ld8(a), ld8(b)), want);
  EXPECT_EQ(dot_acc(0, ld8_z(a, first8(3)), ld8(b)), a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
  EXPECT_EQ(sum_acc(1, ld8(a)), 1 + 8 * 127 - 8 * 128);
  int8_t t[256] = {};
  scatter8(t + 5, rows16(), ld8(a));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(t[16 * i + 5], a[i]);
  const int32_t x[4] = {INT32_MIN, 1 << 30, -3, INT32_MAX};
  const i32x4 q = qrdmulh_n(ld32x4(x), INT32_MIN);  // saturates only for INT32_MIN * INT32_MIN
  int8_t o[4];
  st8x4(o, min_n(max_n(q, -1), 1));
  EXPECT_EQ(o[0], 1);   // INT32_MAX
  EXPECT_EQ(o[1], -1);  // -2^30
  EXPECT_EQ(o[2], 1);   // 3
  EXPECT_EQ(o[3], -1);
  const int32_t y[4] = {-3, 3, -4, 5};
  const i32x4 r = rshl_n(ld32x4(y), -1);  // (y + 1) >> 1: half rounds up
  st8x4(o, r);
  EXPECT_EQ(o[0], -1);
  EXPECT_EQ(o[1], 2);
  EXPECT_EQ(o[2], -2);
  EXPECT_EQ(o[3], 3);
  int8_t p[4] = {9, 9, 9, 9};
  st8x4_p(p, r, first32(2));
  EXPECT_EQ(p[1], 2);
  EXPECT_EQ(p[2], 9);
}

TEST(ArmDsp, FastScaleEqualsRequant) {
  Rng r(1);
  int checked = 0;
  for (int it = 0; it < 200000; ++it) {
    const int32_t m = rnd(r, 0, 9) == 0 ? (1 << 30) : (rnd(r, 0, 9) == 0 ? INT32_MAX : int32_t((1u << 30) | (uint32_t(r()) >> 2)));
    const int32_t s = -rnd(r, 1, 31);
    ASSERT_TRUE(arm::fast_requant_ok_any(m, s));
    ASSERT_EQ(arm::fast_requant_ok(m, s), s <= -2);
    int32_t x;
    switch (rnd(r, 0, 5)) {
      case 0: x = rnd(r, 0, 1) ? INT32_MIN : INT32_MAX; break;
      case 1: x = rnd(r, -2, 2); break;
      case 2: x = int32_t(r()); break;
      default: x = rnd(r, -300000, 300000); break;
    }
    const Requant rq(m, s, 0, -128, 127);
    ASSERT_EQ(arm::fast_scale(x, m, s), rq.scale(x)) << "x " << x << " m " << m << " s " << s;
    ++checked;
  }
  EXPECT_EQ(checked, 200000);
  // Outside the domain the kernels use Requant itself.
  EXPECT_FALSE(arm::fast_requant_ok((1 << 30) - 1, -8));
  EXPECT_FALSE(arm::fast_requant_ok(INT32_MIN, -8));
  EXPECT_FALSE(arm::fast_requant_ok(1 << 30, -1));
  EXPECT_FALSE(arm::fast_requant_ok(1 << 30, 3));
  EXPECT_FALSE(arm::fast_requant_ok(1 << 30, -32));
  EXPECT_FALSE(arm::fast_requant_ok_any(1 << 30, 0));
  EXPECT_FALSE(arm::fast_requant_ok_any((1 << 30) - 1, -1));
}

// The doubled-sum requantiser of the pointwise kernel (SMMLAR) against
// Requant over its whole domain: |acc| < 2^30, right shifts 1 to 21, zero
// points -128 to 127, multipliers 2^30 to INT32_MAX; outside it, declined.
TEST(ArmDsp, Requant2EqualsRequant) {
  Rng r(7);
  int checked = 0;
  for (int it = 0; it < 300000; ++it) {
    const int32_t m = rnd(r, 0, 9) == 0 ? (1 << 30) : (rnd(r, 0, 9) == 0 ? INT32_MAX : int32_t((1u << 30) | (uint32_t(r()) >> 2)));
    const int32_t s = -rnd(r, 1, 21);
    const int32_t zp = rnd(r, 0, 4) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    const int32_t lim = (1 << 30) - 1;
    int32_t x;
    switch (rnd(r, 0, 6)) {
      case 0: x = rnd(r, 0, 1) ? lim : -lim; break;
      case 1: x = rnd(r, -3, 3); break;
      case 2: x = rnd(r, -lim, lim); break;
      case 3: {  // around a rounding tie: acc * m near an odd multiple of 2^(30 + e)
        const int64_t tie = (int64_t(2 * rnd(r, -2000, 2000) + 1) << (30 - s)) / m;
        x = tie > -lim + 2 && tie < lim - 2 ? int32_t(tie + rnd(r, -2, 2)) : rnd(r, -1000, 1000);
        break;
      }
      default: x = rnd(r, -300000, 300000); break;
    }
    bool ok = false;
    const int32_t got = arm::fast_requant2(x, m, s, zp, &ok);
    ASSERT_TRUE(ok);
    const Requant rq(m, s, zp, -128, 127);
    ASSERT_EQ(got, int32_t(rq(x))) << "x " << x << " m " << m << " s " << s << " zp " << zp;
    ++checked;
  }
  EXPECT_EQ(checked, 300000);
  bool ok = true;
  arm::fast_requant2(5, (1 << 30) - 1, -5, 0, &ok);
  EXPECT_FALSE(ok);
  arm::fast_requant2(5, 1 << 30, -22, 0, &ok);
  EXPECT_FALSE(ok);
  arm::fast_requant2(5, 1 << 30, 0, 0, &ok);
  EXPECT_FALSE(ok);
  arm::fast_requant2(5, INT32_MIN, -5, 0, &ok);
  EXPECT_FALSE(ok);
}

// Add's operand scaler (doubled values, SMMLAR) against Requant.scale over
// its domain: x = (v - z) * 2^left with left <= 20, shifts 0 to -21.
TEST(ArmDsp, AddOperandScaleEqualsRequant) {
  Rng r(10);
  for (int it = 0; it < 200000; ++it) {
    const int32_t m = rnd(r, 0, 5) == 0 ? (1 << 30) : (rnd(r, 0, 9) == 0 ? INT32_MAX : int32_t((1u << 30) | (uint32_t(r()) >> 2)));
    const int32_t s = -rnd(r, 0, 21);
    const int32_t left = rnd(r, 0, 3) == 0 ? rnd(r, 0, 20) : 20;
    const int32_t x = rnd(r, 0, 9) == 0 ? rnd(r, -3, 3) : rnd(r, -255, 255) * (1 << left) + (rnd(r, 0, 4) == 0 ? rnd(r, -2, 2) : 0);
    bool ok = false;
    const int32_t got = arm::fast_op_scale(x, m, s, &ok);
    ASSERT_TRUE(ok);
    ASSERT_EQ(got, Requant(m, s, 0, -128, 127).scale(x)) << "x " << x << " m " << m << " s " << s;
  }
  bool ok = true;
  arm::fast_op_scale(5, (1 << 30) - 1, -3, &ok);
  EXPECT_FALSE(ok);
  arm::fast_op_scale(5, 1 << 30, -22, &ok);
  EXPECT_FALSE(ok);
  arm::fast_op_scale(5, 1 << 30, 1, &ok);
  EXPECT_FALSE(ok);
}

void random_mult(Rng& r, int32_t* m, int32_t* s) {
  switch (rnd(r, 0, 9)) {
    case 0: *m = INT32_MIN; break;
    case 1: *m = INT32_MAX; break;
    case 2: *m = 1 << 30; break;
    case 3: *m = rnd(r, 1, (1 << 30) - 1); break;
    default: *m = int32_t((1u << 30) | (uint32_t(r()) >> 2)); break;
  }
  switch (rnd(r, 0, 7)) {
    case 0: *s = rnd(r, 1, 30); break;
    case 1: *s = rnd(r, -33, -28); break;
    case 2: *s = rnd(r, -1, 0); break;
    default: *s = rnd(r, -12, -2); break;
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

TEST(ArmDsp, RequantRowMatchesPortable) {
  Rng r(2);
  const KernelTable* t = dsp_table();
  ASSERT_NE(t, nullptr);
  std::vector<int32_t> acc(67);
  std::vector<int8_t> want(acc.size()), got(acc.size());
  for (int it = 0; it < 5000; ++it) {
    int32_t m, s, zp, lo, hi;
    random_mult(r, &m, &s);
    random_clamp(r, &zp, &lo, &hi);
    const Requant rq(m, s, zp, lo, hi);
    for (auto& a : acc) a = rnd(r, 0, 4) == 0 ? int32_t(r()) : rnd(r, -100000, 100000);
    acc[0] = INT32_MIN;
    acc[1] = INT32_MAX;
    portable_kernels().requant_row(acc.data(), int32_t(acc.size()), rq, want.data());
    t->requant_row(acc.data(), int32_t(acc.size()), rq, got.data());
    for (size_t k = 0; k < acc.size(); ++k) ASSERT_EQ(int(got[k]), int(want[k])) << "m " << m << " s " << s;
  }
}

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
  // All outputs at once from the whole input, or as `parts` boards would:
  // random runs of outputs, each from a copy of only its input window.
  std::vector<int8_t> run(const KernelTable* t, Rng& r, int parts) const {
    set_kernels(t);
    std::vector<int8_t> out(size_t(d.out.size()));
    const int32_t ch = d.op == QOp::Conv || d.op == QOp::Gemm ? d.out.c : 0;
    std::vector<int32_t> cuts{0, d.out.size()};
    for (int k = 1; k < parts; ++k) cuts.push_back(rnd(r, 0, d.out.size()));
    std::sort(cuts.begin(), cuts.end());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int32_t b = cuts[k], e = cuts[k + 1];
      if (b == e) continue;
      std::vector<int8_t> win[2];
      View v[2];
      for (int i = 0; i < d.n_inputs; ++i) {
        const Box box = input_box(d, i, b, e);
        const Dims& X = d.in[i];
        for (int32_t c = box.c0; c < box.c1; ++c)
          for (int32_t y = box.h0; y < box.h1; ++y)
            for (int32_t xx = 0; xx < X.w; ++xx) win[i].push_back(x[i][(size_t(c) * X.h + y) * X.w + xx]);
        win[i].push_back(0);  // never empty
        v[i] = View{win[i].data(), box.c0, box.c1 - box.c0, box.h0, box.h1 - box.h0};
      }
      const KernelStatus st = compute_range(d, v, b, e, out.data() + b, ch);
      EXPECT_EQ(st, KernelStatus::Ok);
    }
    set_kernels(nullptr);
    return out;
  }
};

void fill(Rng& r, std::vector<int8_t>& v, size_t n) {
  v.resize(n);
  for (auto& e : v) e = int8_t(rnd(r, -128, 127));
}

void per_channel(Rng& r, Layer& L, int32_t cout, int32_t per) {
  fill(r, L.w, size_t(cout) * per);
  L.bias.resize(cout);
  L.mult.resize(cout);
  L.shift.resize(cout);
  for (int32_t o = 0; o < cout; ++o) {
    L.bias[o] = rnd(r, -100000, 100000);
    if (rnd(r, 0, 4) == 0) {
      random_mult(r, &L.mult[o], &L.shift[o]);
    } else {  // as the quantiser makes them
      L.mult[o] = int32_t((1u << 30) | (uint32_t(r()) >> 2));
      L.shift[o] = -rnd(r, 5, 12);
    }
  }
  random_clamp(r, &L.d.out_zp, &L.d.act_min, &L.d.act_max);
  L.bind();
}

int conv_out(int in, int k, int s, int p0, int p1) { return (in + p0 + p1 - k) / s + 1; }

// Both Arm tables: the DSP one and the Cortex-M55's Helium one (its own
// pointwise kernel, src/core/arm/helium.cpp; the DSP kernels for the rest).
void expect_same(const Layer& L, Rng& r, const std::string& what) {
  const std::vector<int8_t> want = L.run(&portable_kernels(), r, 1);
  for (const char* name : {"dsp", "helium"}) {
    const KernelTable* t = find_kernels(name);
    ASSERT_NE(t, nullptr) << name;
    for (int parts : {1, 3, 7}) {
      const std::vector<int8_t> got = L.run(t, r, parts);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(int(got[i]), int(want[i])) << name << ": " << what << " parts " << parts << " at " << i;
    }
  }
}

TEST(ArmDsp, ConvMatchesPortable) {
  Rng r(3);
  int n = 0;
  for (int it = 0; it < 240; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    // pointwise, depthwise 3x3, single-group kxk (patches), grouped/other
    const int kind = it % 4;
    int cin, cout, groups = 1, k = 1, s = 1, pt = 0, pl = 0, pb = 0, pr = 0;
    if (kind == 0) {
      cin = rnd(r, 0, 5) == 0 ? rnd(r, 1, 40) : 4 * rnd(r, 1, 40);
      if (it % 40 == 0) cin = 4 * rnd(r, 129, 260);  // deeper than one chunk
      cout = rnd(r, 1, 70);
    } else if (kind == 1) {
      cin = cout = groups = rnd(r, 1, 12);
      k = 3;
      s = rnd(r, 1, 2);
      pt = rnd(r, 0, 2); pl = rnd(r, 0, 2); pb = rnd(r, 0, 2); pr = rnd(r, 0, 2);
    } else if (kind == 2) {
      cin = rnd(r, 1, 6);
      cout = rnd(r, 1, 40);
      k = rnd(r, 1, 5);
      s = rnd(r, 1, 3);
      // Patches past 512 taps, in parts of whole input channels.
      if (it % 12 == 2) k = rnd(r, 2, 5), cin = rnd(r, 512 / (k * k) + 1, 1300 / (k * k));
      pt = pl = rnd(r, 0, k - 1); pb = pr = rnd(r, 0, k - 1);
    } else {
      groups = rnd(r, 2, 3);
      cin = groups * rnd(r, 1, 6);
      cout = groups * rnd(r, 1, 6);
      k = rnd(r, 1, 3);
      s = rnd(r, 1, 2);
    }
    const int H = rnd(r, k, 30), W = rnd(r, k, 30);
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.kh = d.kw = k;
    d.sh = s;
    d.sw = s;
    if (kind == 1 && rnd(r, 0, 4) == 0) d.sh = 3 - s;  // different row and column strides
    d.pad_t = pt; d.pad_l = pl; d.pad_b = pb; d.pad_r = pr;
    d.groups = groups;
    d.out = Dims{cout, conv_out(H, k, d.sh, pt, pb), conv_out(W, k, d.sw, pl, pr)};
    if (d.out.h < 1 || d.out.w < 1) continue;
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, cin / groups * k * k);
    if (rnd(r, 0, 5) == 0) L.bias.clear(), L.bind();
    expect_same(L, r, "conv kind " + std::to_string(kind) + " it " + std::to_string(it));
    if (HasFatalFailure()) return;
    ++n;
  }
  EXPECT_GT(n, 200);
}

// MobileNetV2's own shapes (as the firmware's selftest has them), whole and split.
TEST(ArmDsp, MobileNetShapesMatchPortable) {
  Rng r(4);
  struct S { int cin, cout, H, k, s, groups; };
  for (const S& s : {S{3, 32, 40, 3, 2, 1}, S{32, 32, 20, 3, 1, 32}, S{96, 96, 20, 3, 2, 96}, S{144, 32, 14, 1, 1, 1},
                     S{16, 96, 14, 1, 1, 1}, S{960, 24, 7, 1, 1, 1}, S{576, 576, 7, 3, 1, 576},
                     // The 112 model's small late maps (depthwise channels
                     // sharing one padded frame), a 16-channel expansion over
                     // several chunks of positions (256 each), and inputs whose
                     // chunk is 1 or 2 tiles (1024 and 512 channels).
                     S{960, 960, 4, 3, 1, 960}, S{160, 160, 4, 3, 2, 160}, S{16, 96, 28, 1, 1, 1},
                     S{1024, 8, 5, 1, 1, 1}, S{512, 12, 6, 1, 1, 1},
                     // PP-OCRv4's 3x3 convolutions over 96 channels: 864
                     // taps, a patch in two parts.
                     S{96, 24, 12, 3, 1, 1}, S{96, 24, 9, 3, 2, 1}}) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    d.in[0] = Dims{s.cin, s.H, s.H};
    d.in_zp[0] = -3;
    d.kh = d.kw = s.k;
    d.sh = d.sw = s.s;
    d.pad_t = d.pad_l = s.k / 2;
    d.pad_b = d.pad_r = s.s == 2 ? 0 : s.k / 2;
    d.groups = s.groups;
    d.out = Dims{s.cout, conv_out(s.H, s.k, s.s, d.pad_t, d.pad_b), conv_out(s.H, s.k, s.s, d.pad_l, d.pad_r)};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, s.cout, s.cin / s.groups * s.k * s.k);
    expect_same(L, r, "cin " + std::to_string(s.cin) + " k " + std::to_string(s.k));
    if (HasFatalFailure()) return;
    if (s.groups == 1 && s.k > 1) {  // the widened patches take it (in parts past 512 taps)
      const int32_t P = d.out.h * d.out.w;
      std::vector<int8_t> o(size_t(d.out.size()));
      EXPECT_TRUE(dsp_table()->conv_block(d, View{L.x[0].data(), 0, s.cin, 0, s.H}, 0, s.cout, 0, P, o.data(), P))
          << "cin " << s.cin;
    }
  }
}

// The pointwise kernel with widened weights (inputs of up to 256 channels):
// its unrolled depths (16, 24, 32 channels) and the looped ones, output
// channels beyond one weight block (128, or fewer for deeper inputs) and
// beyond the weight buffer (widened again per chunk of positions), chunks of
// positions with partial tiles, biases on both sides of the doubled sums'
// limit (2^29), multipliers and shifts outside the doubled requantiser, clamps.
TEST(ArmDsp, PointwiseWidenedWeightsMatchPortable) {
  Rng r(8);
  for (int it = 0; it < 120; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Conv;
    const int depths[] = {16, 24, 32, 4, 8, 12, 20, 28};
    const int cin = it % 3 == 0 ? 4 * rnd(r, 9, 64) : depths[rnd(r, 0, 7)];
    const int cout = it % 7 == 0 ? rnd(r, 129, 170) : rnd(r, 1, 60);
    const int H = rnd(r, 1, 24), W = rnd(r, 1, 24);
    d.in[0] = Dims{cin, H, W};
    d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
    d.kh = d.kw = 1;
    d.out = Dims{cout, H, W};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, cout, cin);
    for (int32_t o = 0; o < cout; ++o) {
      if (rnd(r, 0, 5) == 0) L.bias[o] = rnd(r, 0, 1) ? (1 << 29) + rnd(r, -1, 1) : -(1 << 29) + rnd(r, -1, 1);
      if (rnd(r, 0, 9) == 0) L.bias[o] = rnd(r, -(1 << 30), 1 << 30);
      if (rnd(r, 0, 9) == 0) L.shift[o] = -rnd(r, 20, 23);
    }
    if (rnd(r, 0, 5) == 0) L.bias.clear();
    L.bind();
    expect_same(L, r, "pointwise cin " + std::to_string(cin) + " cout " + std::to_string(cout) + " it " +
                          std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

// A random 3x3 depthwise layer of up to max_c channels on a plane of up to
// max_h x max_w (strides 1-2 either way, padding 0-2 on each side, zero
// points at the extremes sometimes), its input and per-channel data filled;
// false if the output would be empty.
bool random_depthwise(Rng& r, Layer* L, int max_c, int max_h, int max_w) {
  LayerDesc& d = L->d;
  d.op = QOp::Conv;
  const int c = rnd(r, 1, max_c);
  d.in[0] = Dims{c, rnd(r, 1, max_h), rnd(r, 1, max_w)};
  d.in_zp[0] = rnd(r, 0, 3) == 0 ? (rnd(r, 0, 1) ? -128 : 127) : rnd(r, -128, 127);
  d.kh = d.kw = 3;
  d.sw = rnd(r, 1, 2);
  d.sh = rnd(r, 0, 3) == 0 ? 3 - d.sw : d.sw;
  d.pad_t = rnd(r, 0, 2); d.pad_l = rnd(r, 0, 2); d.pad_b = rnd(r, 0, 2); d.pad_r = rnd(r, 0, 2);
  d.groups = c;
  d.out = Dims{c, conv_out(d.in[0].h, 3, d.sh, d.pad_t, d.pad_b), conv_out(d.in[0].w, 3, d.sw, d.pad_l, d.pad_r)};
  if (d.out.h < 1 || d.out.w < 1) return false;
  fill(r, L->x[0], size_t(d.in[0].size()));
  per_channel(r, *L, c, 9);
  return true;
}

// A box of random channels and rows of d's output (columns left to the
// caller): c0, c1, y0, y1 drawn in that order.
OutBox random_channels_and_rows(Rng& r, const LayerDesc& d) {
  OutBox b;
  b.c0 = rnd(r, 0, d.out.c - 1);
  b.c1 = rnd(r, b.c0 + 1, d.out.c);
  b.y0 = rnd(r, 0, d.out.h - 1);
  b.y1 = rnd(r, b.y0 + 1, d.out.h);
  return b;
}

// Depthwise 3x3 computed as boards compute boxes narrower than the plane:
// one call per row of the box, all its channels (the DSP table's single-row
// path, kDwRowMax outputs at most), and full-width boxes, against the
// portable table's whole layer.
TEST(ArmDsp, DepthwiseBoxesMatchPortable) {
  Rng r(9);
  int narrow = 0;
  for (int it = 0; it < 150; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    if (!random_depthwise(r, &L, 40, 20, it % 5 == 0 ? 60 : 20)) continue;
    const int c = d.in[0].c;
    for (int32_t o = 0; o < c; ++o)
      if (rnd(r, 0, 9) == 0) L.bias[o] = rnd(r, 0, 1) ? (1 << 29) + 1 : -(1 << 29);
    L.bind();
    const std::vector<int8_t> want = L.run(&portable_kernels(), r, 1);
    const View v{L.x[0].data(), 0, c, 0, d.in[0].h};
    for (const char* name : {"dsp", "helium"}) {
      set_kernels(find_kernels(name));
      for (int b = 0; b < 8; ++b) {
        OutBox box = random_channels_and_rows(r, d);
        box.x0 = b % 4 == 0 ? 0 : rnd(r, 0, d.out.w - 1);
        box.x1 = b % 4 == 0 ? d.out.w : rnd(r, box.x0 + 1, d.out.w);
        narrow += box.x1 - box.x0 < d.out.w;
        std::vector<int8_t> got(size_t(box.elems()));
        ASSERT_EQ(compute_box(d, &v, box, got.data(), d.out.c), KernelStatus::Ok);
        size_t i = 0;
        for (int32_t oc = box.c0; oc < box.c1; ++oc)
          for (int32_t y = box.y0; y < box.y1; ++y)
            for (int32_t x = box.x0; x < box.x1; ++x, ++i)
              ASSERT_EQ(int(got[i]), int(want[(size_t(oc) * d.out.h + y) * d.out.w + x]))
                  << name << " it " << it << " box c " << box.c0 << "-" << box.c1 << " y " << box.y0 << "-" << box.y1
                  << " x " << box.x0 << "-" << box.x1 << " at c " << oc << " y " << y << " x " << x;
      }
      set_kernels(nullptr);
    }
  }
  EXPECT_GT(narrow, 300);
}

// The window of input 0 that box b reads, as a board holds it: exactly the
// channels and rows input_box names, starting at c0/h0 > 0 where it does.
struct Window {
  std::vector<int8_t> bytes;
  View v;
  Window(const LayerDesc& d, const std::vector<int8_t>& x, const OutBox& b) {
    const Box box = input_box(d, 0, b);
    const Dims& X = d.in[0];
    for (int32_t c = box.c0; c < box.c1; ++c)
      for (int32_t y = box.h0; y < box.h1; ++y)
        for (int32_t xx = 0; xx < X.w; ++xx) bytes.push_back(x[(size_t(c) * X.h + y) * X.w + xx]);
    bytes.push_back(0);  // never empty
    v = View{bytes.data(), box.c0, box.c1 - box.c0, box.h0, box.h1 - box.h0};
  }
};

// Depthwise 3x3 on narrow maps (planes 1-16 wide, some up to 40 for single
// rows and narrow boxes of wider planes), as boards compute them: boxes
// (compute_box, the conv_box entry), bands of plane positions with partial
// first and last rows over a block of channels (compute_positions), random
// runs (compute_range), each from a window of exactly its input; strides 1
// and 2, padding 0-2 on each side, weights and zero points at the extremes.
// Every output is checked against the portable table's whole layer, and the
// narrow-span kernel must have taken both kinds of call.
TEST(ArmDsp, DepthwiseNarrowSpansMatchPortable) {
  Rng r(24);
  const ts::core::arm::DwCalls before = ts::core::arm::dw_calls;
  int boxes = 0, bands = 0;
  for (int it = 0; it < 300; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    if (!random_depthwise(r, &L, 24, 18, it % 6 == 0 ? 40 : 16)) continue;
    const int c = d.in[0].c;
    const int wk = rnd(r, 0, 5);  // weights all -128 / all 127 sometimes
    if (wk < 2)
      for (auto& w : L.w) w = int8_t(wk == 0 ? -128 : 127);
    for (int32_t o = 0; o < c; ++o)
      if (rnd(r, 0, 9) == 0) L.bias[o] = rnd(r, 0, 1) ? (1 << 29) + 1 : -(1 << 29);
    L.bind();
    const std::vector<int8_t> want = L.run(&portable_kernels(), r, 1);
    auto expect_at = [&](int32_t oc, int32_t p, int8_t got, const char* what) {
      ASSERT_EQ(int(got), int(want[size_t(oc) * d.out.h * d.out.w + p]))
          << what << " it " << it << " c " << oc << " position " << p << " plane " << d.out.h << "x" << d.out.w
          << " stride " << d.sh << "," << d.sw << " pad " << d.pad_t << d.pad_l << d.pad_b << d.pad_r;
    };
    set_kernels(dsp_table());
    for (int k = 0; k < 6; ++k) {
      OutBox b = random_channels_and_rows(r, d);
      if (k < 3) {  // a box, often narrower than the plane
        b.x0 = rnd(r, 0, d.out.w - 1);
        b.x1 = rnd(r, b.x0 + 1, d.out.w);
        const Window w(d, L.x[0], b);
        std::vector<int8_t> got(size_t(b.elems()));
        ASSERT_EQ(compute_box(d, &w.v, b, got.data(), d.out.c), KernelStatus::Ok);
        size_t i = 0;
        for (int32_t oc = b.c0; oc < b.c1; ++oc)
          for (int32_t y = b.y0; y < b.y1; ++y)
            for (int32_t x = b.x0; x < b.x1; ++x) expect_at(oc, y * d.out.w + x, got[i++], "box");
        boxes += b.x1 - b.x0 < d.out.w;
      } else {  // a band of positions, partial rows at either end
        const int32_t p0 = b.y0 * d.out.w + rnd(r, 0, d.out.w - 1);
        const int32_t p1 = rnd(r, p0 + 1, b.y1 * d.out.w);
        b.y1 = (p1 - 1) / d.out.w + 1;
        b.x0 = 0;
        b.x1 = d.out.w;
        const Window w(d, L.x[0], b);
        const int64_t pitch = p1 - p0 + rnd(r, 0, 3);
        std::vector<int8_t> got(size_t(pitch * (b.c1 - b.c0)));
        ASSERT_EQ(compute_positions(d, &w.v, b.c0, b.c1, p0, p1, got.data(), d.out.c, pitch), KernelStatus::Ok);
        for (int32_t oc = b.c0; oc < b.c1; ++oc)
          for (int32_t p = p0; p < p1; ++p) expect_at(oc, p, got[size_t((oc - b.c0) * pitch + (p - p0))], "band");
        ++bands;
      }
    }
    set_kernels(nullptr);
    for (int parts : {3, 7}) {
      const std::vector<int8_t> got = L.run(dsp_table(), r, parts);
      for (size_t i = 0; i < got.size(); ++i)
        expect_at(int32_t(i / (d.out.h * d.out.w)), int32_t(i % (d.out.h * d.out.w)), got[i], "runs");
    }
  }
  EXPECT_GT(boxes, 400);
  EXPECT_GT(bands, 600);
  // The narrow kernel took the boxes and the runs (not only its fallbacks).
  EXPECT_GT(ts::core::arm::dw_calls.boxes - before.boxes, 400u);
  EXPECT_GT(ts::core::arm::dw_calls.runs - before.runs, 2000u);
}

TEST(ArmDsp, GemmMatchesPortable) {
  Rng r(5);
  for (int it = 0; it < 60; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Gemm;
    d.in[0] = it % 5 == 0 ? Dims{rnd(r, 1, 300), rnd(r, 1, 3), 1} : Dims{4 * rnd(r, 1, 600), 1, 1};
    d.in_zp[0] = rnd(r, -128, 127);
    d.out = Dims{rnd(r, 1, 40), 1, 1};
    fill(r, L.x[0], size_t(d.in[0].size()));
    per_channel(r, L, d.out.c, d.in[0].size());
    expect_same(L, r, "gemm " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

TEST(ArmDsp, AddMatchesPortable) {
  Rng r(6);
  for (int it = 0; it < 200; ++it) {
    Layer L;
    LayerDesc& d = L.d;
    d.op = QOp::Add;
    d.n_inputs = 2;
    d.out = d.in[0] = d.in[1] = Dims{rnd(r, 1, 6), rnd(r, 1, 12), rnd(r, 1, 12)};
    d.in_zp[0] = rnd(r, -128, 127);
    d.in_zp[1] = rnd(r, -128, 127);
    int32_t s;
    if (rnd(r, 0, 3) == 0) {
      random_mult(r, &d.in_mult[0], &d.in_shift[0]);
      random_mult(r, &d.in_mult[1], &d.in_shift[1]);
      random_mult(r, &d.out_mult, &d.out_shift);
      d.left_shift = rnd(r, 0, 22);
    } else {  // as the quantiser makes them
      random_mult(r, &d.in_mult[0], &s);
      d.in_mult[0] = int32_t((1u << 30) | (uint32_t(r()) >> 2));
      d.in_mult[1] = int32_t((1u << 30) | (uint32_t(r()) >> 2));
      d.out_mult = int32_t((1u << 30) | (uint32_t(r()) >> 2));
      d.in_shift[0] = -rnd(r, 0, 4);
      d.in_shift[1] = -rnd(r, 0, 4);
      if (rnd(r, 0, 1)) d.in_mult[rnd(r, 0, 1)] = 1 << 30;  // 0.5, as the larger operand gets
      d.out_shift = -rnd(r, 17, 21);
      d.left_shift = 20;
    }
    random_clamp(r, &d.out_zp, &d.act_min, &d.act_max);
    fill(r, L.x[0], size_t(d.out.size()));
    fill(r, L.x[1], size_t(d.out.size()));
    expect_same(L, r, "add " + std::to_string(it));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
