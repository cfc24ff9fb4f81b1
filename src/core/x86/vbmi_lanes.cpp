// Depthwise-like convolutions (one input channel per output channel) on at
// most 16 output positions (the 3x3 planes at input 112) with channels in
// the lanes: 16 channels per vector, one accumulator per output position,
// one vpdpwssd per (position, tap). Compiled with the VBMI flags (vpermt2b;
// called only after has_vbmi(): x86_kernels.h).
//
// vbmi.cpp's narrow-plane path puts positions in the lanes: on a 3x3 plane 9
// of 16 lanes work, and each channel pays for its own set-up, loads and
// requantiser (about 45 cycles per channel of 81 multiply-adds). Here:
//  - each channel's input span (the bytes the positions read, at most 64) is
//    loaded once and 16 channels are transposed to [input byte][channel]
//    with byte permutes; input byte q becomes one vector X[q] of 16 int32,
//    x - zp (in [-256, 255]: the path takes |zp| <= 128);
//  - the 16 channels' taps likewise become W[t], lane k = w(k, t) as an
//    int16 with a zero high half, so that vpdpwssd's second product (the
//    high halves) is 0 and each lane adds exactly (x - zp) * w;
//  - a tap outside the image reads a zero vector (adding 0, as the portable
//    code's skipped tap does), so the accumulators start at the bias: no
//    zero-point correction;
//  - accumulation is exact in int32 (core/op.h bounds the sum; vpdpwssd
//    wraps like the portable code);
//  - the requantiser has each constant a vector (lane k channel k's; see
//    requant_block for the forms); then the bytes go back to
//    [channel][position] with saturating packs and byte permutes.
// Where rows lie at a fixed stride within 192 bytes (the weights; whole
// planes of consecutive channels) they are transposed from three loads, and
// a block whose output is contiguous is stored 64 bytes at a time.
#include <stdint.h>

#include "core/layer.h"
#include "core/ops/common.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/rq_avx512.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

namespace {

using namespace opk;

constexpr int32_t kMaxPos = 16;   // output positions per call
constexpr int32_t kMaxTaps = 16;  // taps per channel
constexpr int32_t kMaxSpan = 64;  // input bytes per channel

// Where each output position's taps read, the same for every channel: the
// view offsets [lo, lo + span) hold every byte read; tap t of position j
// reads input byte lo + q, whose vector is at byte off[j][t] = 64 q of the
// input vectors, or, for a tap outside the image, the zero vector after
// them (64 span): it adds 0, as the portable code's skipped tap does.
struct LanePlan {
  int32_t n = 0, span = 0;
  int64_t lo = 0;
  int32_t off[kMaxPos][kMaxTaps];
};

bool plan_lanes(const LayerDesc& L, const View& v, int32_t p0, int32_t p1, LanePlan* P) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, taps = L.kh * L.kw;
  int64_t at[kMaxPos][kMaxTaps];
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  P->n = p1 - p0;
  int32_t dy[kMaxTaps], dx[kMaxTaps];  // each tap's offsets (no divisions below)
  for (int32_t t = 0, ky = 0, kx = 0; t < taps; ++t) {
    dy[t] = ky * L.dh - L.pad_t;
    dx[t] = kx * L.dw - L.pad_l;
    if (++kx == L.kw) kx = 0, ++ky;
  }
  for (int32_t j = 0, oy = p0 / W, ox = p0 % W; j < P->n; ++j) {
    for (int32_t t = 0; t < taps; ++t) {
      const int32_t iy = oy * L.sh + dy[t], ix = ox * L.sw + dx[t];
      at[j][t] = -1;
      if (iy < 0 || iy >= X.h || ix < 0 || ix >= X.w) continue;
      const int64_t a = int64_t(iy - v.h0) * X.w + ix;
      at[j][t] = a;
      lo = a < lo ? a : lo;
      hi = a > hi ? a : hi;
    }
    if (++ox == W) ox = 0, ++oy;
  }
  if (lo > hi) lo = 0, hi = -1;  // every tap in the padding: nothing is read
  if (hi - lo + 1 > kMaxSpan) return false;
  P->lo = lo;
  P->span = int32_t(hi - lo + 1);
  for (int32_t j = 0; j < P->n; ++j)
    for (int32_t t = 0; t < taps; ++t) P->off[j][t] = 64 * int32_t(at[j][t] < 0 ? P->span : at[j][t] - lo);
  return true;
}

// acc + the two int16 products of each lane of w and the vector at xb + off
// (wrapping); inline assembly for the reason dpbusd is (rq_avx512.h).
TS_ALWAYS_INLINE __m512i dpwssd_at(__m512i acc, __m512i w, const char* xb, int32_t off) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const __m512i*>(xb + off)));
  return acc;
}

// V[j] = bias + the taps' products of position j (j < n): TAPS taps with
// their weights in registers, two positions per step.
template <int TAPS>
TS_ALWAYS_INLINE void macs_fixed(const LanePlan& P, const __m512i* Xv, const __m512i* Wt, __m512i bias, __m512i* V) {
  const char* xb = reinterpret_cast<const char*>(Xv);
  __m512i w[TAPS];
  for (int t = 0; t < TAPS; ++t) w[t] = Wt[t];
  int32_t j = 0;
  for (; j + 1 < P.n; j += 2) {
    __m512i a = bias, b = bias;
    for (int t = 0; t < TAPS; ++t) {
      a = dpwssd_at(a, w[t], xb, P.off[j][t]);
      b = dpwssd_at(b, w[t], xb, P.off[j + 1][t]);
    }
    V[j] = a;
    V[j + 1] = b;
  }
  if (j < P.n) {
    __m512i a = bias;
    for (int t = 0; t < TAPS; ++t) a = dpwssd_at(a, w[t], xb, P.off[j][t]);
    V[j] = a;
  }
}

// The same for any number of taps (weights from memory).
TS_ALWAYS_INLINE void macs_any(const LanePlan& P, int32_t taps, const __m512i* Xv, const __m512i* Wt, __m512i bias,
                               __m512i* V) {
  const char* xb = reinterpret_cast<const char*>(Xv);
  for (int32_t j = 0; j < P.n; ++j) {
    __m512i a = bias;
    for (int32_t t = 0; t < taps; ++t) a = dpwssd_at(a, Wt[t], xb, P.off[j][t]);
    V[j] = a;
  }
}

// 16 rows of n <= 16 bytes lying `stride` bytes apart within 192 bytes (a
// layer's depthwise weights; the planes of consecutive channels where each
// is read whole): three masked loads and, per four columns, one vpermt2b
// over the first 128 bytes and one merge-masked vpermb from the last 64,
// instead of a load, an insert and four permutes per four rows.
struct RowPerm {
  int32_t stride = 0, n = 0;
  __m512i idx[4];  // Y_m byte 16c + k: row k's byte 4m + c (an index into the 192 bytes, mod 128)
  __mmask64 hi[4];  // the bytes of Y_m from the last 64
};

bool row_perm(int64_t stride, int32_t n, RowPerm* rp) {
  if (n < 1 || n > 16 || stride < n || 15 * stride + n > 192) return false;
  rp->stride = int32_t(stride);
  rp->n = n;
  alignas(64) uint8_t ix[64];
  for (int32_t m = 0; 4 * m < n; ++m) {
    uint64_t hi = 0;
    for (int32_t c = 0; c < 4; ++c)
      for (int32_t k = 0; k < 16; ++k) {
        const int32_t at = k * rp->stride + mini(4 * m + c, n - 1);
        ix[16 * c + k] = uint8_t(at & 127);
        if (at >= 128) hi |= uint64_t(1) << (16 * c + k);
      }
    rp->idx[m] = _mm512_load_si512(ix);
    rp->hi[m] = __mmask64(hi);
  }
  return true;
}

// The rows of the first nk channels at base (rows past nk read as 0: they
// start past the last row's end) as transpose16x16 gives them.
// (Addresses as integers: the last 64 or 128 bytes may lie past the data,
// where nothing is read.)
TS_ALWAYS_INLINE void rows_permuted(const int8_t* base, int32_t nk, const RowPerm& rp, __m512i* Y) {
  const int64_t total = int64_t(nk - 1) * rp.stride + rp.n;
  const uintptr_t at = uintptr_t(base);
  const __m512i r0 = _mm512_maskz_loadu_epi8(bits64(0, total), reinterpret_cast<const void*>(at));
  const __m512i r1 = _mm512_maskz_loadu_epi8(bits64(0, total - 64), reinterpret_cast<const void*>(at + 64));
  const __m512i r2 = _mm512_maskz_loadu_epi8(bits64(0, total - 128), reinterpret_cast<const void*>(at + 128));
  for (int32_t m = 0; 4 * m < rp.n; ++m)
    Y[m] = _mm512_mask_permutexvar_epi8(_mm512_permutex2var_epi8(r0, rp.idx[m], r1), rp.hi[m], rp.idx[m], r2);
}

// The output of a block whose channels' rows are contiguous (cstride = n):
// byte k n + p of the block comes from P_{p/4} byte 16 (k/4) + 4 (p % 4) +
// k % 4 (store_channels' packs): per 64 bytes, a vpermt2b from P_0, P_1 and
// one from P_2, P_3 merged where p >= 8, one store.
struct OutPerm {
  int32_t n = 0;
  __m512i idx[4];
  __mmask64 hi[4];  // the bytes from P_2, P_3
};

bool out_perm(int32_t n, OutPerm* op) {
  if (n < 1 || n > 16) return false;
  op->n = n;
  alignas(64) uint8_t ix[64];
  for (int32_t g = 0; 64 * g < 16 * n; ++g) {
    uint64_t hi = 0;
    for (int32_t b = 0; b < 64; ++b) {
      const int32_t at = 64 * g + b, k = mini(at / n, 15), p = at >= 16 * n ? 0 : at % n;
      ix[b] = uint8_t(64 * ((p / 4) % 2) + 16 * (k / 4) + 4 * (p % 4) + k % 4);
      if (p >= 8) hi |= uint64_t(1) << b;
    }
    op->idx[g] = _mm512_load_si512(ix);
    op->hi[g] = __mmask64(hi);
  }
  return true;
}

// The byte permutes' indices (see transpose16x16 and untranspose).
struct Perms {
  __m512i in_e[2], in_y[2], out_g[2], out_o[2];
};

const Perms& perms() {
  static const Perms p = [] {
    Perms r;
    alignas(64) uint8_t ix[64];
    for (int h = 0; h < 2; ++h) {
      for (int b = 0; b < 8; ++b)  // E_h byte 8b + k: column b + 8h of channel k (Z_{k/4} byte 16 (k % 4) + col)
        for (int k = 0; k < 8; ++k) ix[8 * b + k] = uint8_t((k / 4) * 64 + 16 * (k % 4) + b + 8 * h);
      r.in_e[h] = _mm512_load_si512(ix);
      for (int c = 0; c < 4; ++c)  // Y_m byte 16c + k: column 4m + c (E or F byte 8 ((4m + c) % 8) + k % 8)
        for (int k = 0; k < 16; ++k) ix[16 * c + k] = uint8_t((k < 8 ? 0 : 64) + 8 * (4 * h + c) + k % 8);
      r.in_y[h] = _mm512_load_si512(ix);
      for (int k = 0; k < 8; ++k)  // G_h byte 8k + p: channel k + 8h at position p (P_{p/4} byte 16 (k'/4) + 4 (p % 4) + k' % 4)
        for (int p = 0; p < 8; ++p) {
          const int kk = k + 8 * h;
          ix[8 * k + p] = uint8_t((p / 4) * 64 + 16 * (kk / 4) + 4 * (p % 4) + kk % 4);
        }
      r.out_g[h] = _mm512_load_si512(ix);
      for (int i = 0; i < 4; ++i)  // O_a byte 16i + p: channel 4a + i (G or H byte 8 ((4a + i) % 8) + p % 8)
        for (int p = 0; p < 16; ++p) ix[16 * i + p] = uint8_t((p < 8 ? 0 : 64) + 8 * (4 * h + i) + p % 8);
      r.out_o[h] = _mm512_load_si512(ix);
    }
    return r;
  }();
  return p;
}

// Rows src[k] (k < nk, n <= 16 bytes each; rows past nk are 0) transposed:
// Y[m] byte 16c + k = src[k][4m + c]. Four channels per vector (Z_j byte
// 16a + q = row 4j + a), then two rounds of four vpermt2b.
TS_ALWAYS_INLINE void transpose16x16(const int8_t* const* src, int32_t nk, int32_t n, const Perms& pm, __m512i* Y) {
  const __mmask16 m = __mmask16((1u << n) - 1);
  __m512i Z[4];
  for (int j = 0; j < 4; ++j) {
    __m128i r[4];
    for (int a = 0; a < 4; ++a) r[a] = 4 * j + a < nk ? _mm_maskz_loadu_epi8(m, src[4 * j + a]) : _mm_setzero_si128();
    Z[j] = _mm512_inserti32x4(
        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(r[0]), r[1], 1), r[2], 2), r[3], 3);
  }
  const __m512i E0 = _mm512_permutex2var_epi8(Z[0], pm.in_e[0], Z[1]), E1 = _mm512_permutex2var_epi8(Z[0], pm.in_e[1], Z[1]);
  const __m512i F0 = _mm512_permutex2var_epi8(Z[2], pm.in_e[0], Z[3]), F1 = _mm512_permutex2var_epi8(Z[2], pm.in_e[1], Z[3]);
  Y[0] = _mm512_permutex2var_epi8(E0, pm.in_y[0], F0);
  Y[1] = _mm512_permutex2var_epi8(E0, pm.in_y[1], F0);
  Y[2] = _mm512_permutex2var_epi8(E1, pm.in_y[0], F1);
  Y[3] = _mm512_permutex2var_epi8(E1, pm.in_y[1], F1);
}

// The four 16-byte quarters of v.
TS_ALWAYS_INLINE void quarters(__m512i v, __m128i* q) {
  q[0] = _mm512_castsi512_si128(v);
  q[1] = _mm512_extracti32x4_epi32(v, 1);
  q[2] = _mm512_extracti32x4_epi32(v, 2);
  q[3] = _mm512_extracti32x4_epi32(v, 3);
}

// Rows src[k] (k < nk, n <= 64 bytes each) to T[64 (q % 16) + 16 (q / 16) + k]
// = src[k][q]: the 16 x 16 byte transpose of each 128-bit lane by unpacks
// (vector b's lane L ends up as column 16L + b).
TS_ALWAYS_INLINE void transpose16x64(const int8_t* const* src, int32_t nk, int32_t n, int8_t* T) {
  const __mmask64 m = n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1;
  __m512i r[16], t[16], u[16];
  for (int k = 0; k < 16; ++k) r[k] = k < nk ? _mm512_maskz_loadu_epi8(m, src[k]) : _mm512_setzero_si512();
  for (int i = 0; i < 8; ++i) {  // t[2i]: columns 0-7 of rows 2i, 2i + 1 (byte pairs); t[2i + 1]: 8-15
    t[2 * i] = _mm512_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + c]: columns 4c..4c+3 of rows 4i..4i+3 (dwords)
    u[4 * i] = _mm512_unpacklo_epi16(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi16(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi16(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi16(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 2; ++j)  // r[8j + m]: columns 2m, 2m + 1 of rows 8j..8j+7 (qwords)
    for (int c = 0; c < 4; ++c) {
      r[8 * j + 2 * c] = _mm512_unpacklo_epi32(u[8 * j + c], u[8 * j + 4 + c]);
      r[8 * j + 2 * c + 1] = _mm512_unpackhi_epi32(u[8 * j + c], u[8 * j + 4 + c]);
    }
  for (int mm = 0; mm < 8; ++mm) {  // column 2mm, 2mm + 1 of all 16 rows
    _mm512_store_si512(T + 64 * (2 * mm), _mm512_unpacklo_epi64(r[mm], r[8 + mm]));
    _mm512_store_si512(T + 64 * (2 * mm + 1), _mm512_unpackhi_epi64(r[mm], r[8 + mm]));
  }
}

// Requantises V[j] (j < n; lane k channel l0 + k, k < nk) in place, with
// per-lane constants: the by_sign form where sign_lanes_ok (rq_avx512.h)
// allows it (|acc| <= 2^29 + 16 * 256 * 128 < 2^30 where every |bias| <=
// 2^29 and |zp| <= 128), else the fast form, with the lanes whose channel
// lacks it redone by Requant. Returns the forms used (kUsed*).
constexpr int kUsedSign = 1, kUsedFast = 2, kUsedScalar = 4;

int requant_block(const LayerDesc& L, int32_t l0, int32_t nk, int32_t n, RqSignRow* sg, __m512i* V) {
  const bool all = rq_sign_row(L.mult + l0, L.shift + l0, nk, L.out_zp, L.act_min, L.act_max, sg);
  if (sign_lanes_ok(*sg, nk, all, bias_small(L.bias ? L.bias + l0 : nullptr, nk))) {
    SignLanes c;
    sign_lanes(*sg, nk, &c);
    for (int32_t j = 0; j < n; ++j) V[j] = sign_lanes_apply(V[j], c);
    return kUsedSign;
  }
  const __mmask16 live = __mmask16((1u << nk) - 1), fast = __mmask16(sg->fast16[0] & live);
  RqLanes512 c;
  rq_lanes_512(*sg, nk, &c);
  const __mmask16 slow = __mmask16(live & ~fast);
  Uninit<Requant, 16> rq_store;  // made and read only for the slow lanes
  Requant* const rq = rq_store.v;
  for (int32_t k = 0; k < nk; ++k)
    if (slow >> k & 1) rq[k] = Requant(L.mult[l0 + k], L.shift[l0 + k], L.out_zp, L.act_min, L.act_max);
  for (int32_t j = 0; j < n; ++j) {
    const __m512i r = rq_lanes_apply_512(V[j], c);
    if (!slow) {
      V[j] = r;
      continue;
    }
    alignas(64) int32_t a[16];
    _mm512_store_si512(a, V[j]);
    for (int32_t k = 0; k < nk; ++k)
      if (slow >> k & 1) a[k] = rq[k](a[k]);
    V[j] = _mm512_mask_blend_epi32(slow, r, _mm512_load_si512(a));
  }
  return (fast ? kUsedFast : 0) | (slow ? kUsedScalar : 0);
}

// V[j] (int32, lane k = channel k at position j, j < n; the others any) as
// bytes with saturation, channel k's n bytes to out + k * cstride (k < nk).
TS_ALWAYS_INLINE void store_channels(const __m512i* V, int32_t n, int32_t nk, const Perms& pm, const OutPerm* flat,
                                     int8_t* out, int64_t cstride) {
  __m512i P[4];  // P_m byte 16L + 4j + i: channel 4L + i at position 4m + j
  for (int m = 0; m < 4; ++m)
    P[m] = 4 * m < n ? _mm512_packs_epi16(_mm512_packs_epi32(V[4 * m], V[4 * m + 1]), _mm512_packs_epi32(V[4 * m + 2], V[4 * m + 3]))
                     : _mm512_setzero_si512();
  if (flat) {  // cstride == n: the block's bytes are contiguous
    const int32_t total = nk * n;
    for (int32_t g = 0; 64 * g < total; ++g) {
      __m512i b = _mm512_permutex2var_epi8(P[0], flat->idx[g], P[1]);
      if (n > 8) b = _mm512_mask_blend_epi8(flat->hi[g], b, _mm512_permutex2var_epi8(P[2], flat->idx[g], P[3]));
      if (total - 64 * g >= 64)
        _mm512_storeu_si512(out + 64 * g, b);
      else
        _mm512_mask_storeu_epi8(out + 64 * g, bits64(0, total - 64 * g), b);
    }
    return;
  }
  const __m512i G0 = _mm512_permutex2var_epi8(P[0], pm.out_g[0], P[1]), G1 = _mm512_permutex2var_epi8(P[0], pm.out_g[1], P[1]);
  const __m512i H0 = _mm512_permutex2var_epi8(P[2], pm.out_g[0], P[3]), H1 = _mm512_permutex2var_epi8(P[2], pm.out_g[1], P[3]);
  __m512i O[4];  // O_a byte 16i + p: channel 4a + i at position p
  O[0] = _mm512_permutex2var_epi8(G0, pm.out_o[0], H0);
  O[1] = _mm512_permutex2var_epi8(G0, pm.out_o[1], H0);
  O[2] = _mm512_permutex2var_epi8(G1, pm.out_o[0], H1);
  O[3] = _mm512_permutex2var_epi8(G1, pm.out_o[1], H1);
  const __mmask16 m = __mmask16((1u << n) - 1);
  for (int a = 0; 4 * a < nk; ++a) {
    __m128i r[4];
    quarters(O[a], r);
    for (int i = 0; i < 4 && 4 * a + i < nk; ++i) _mm_mask_storeu_epi8(out + (4 * a + i) * cstride, m, r[i]);
  }
}

}  // namespace

bool conv_lanes_vbmi(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t taps = L.kh * L.kw;
  if (X.c / L.groups != 1 || p1 - p0 > kMaxPos || p1 <= p0 || taps > kMaxTaps || L.kh < 1 || L.kw < 1) return false;
  if (L.in_zp[0] < -128 || L.in_zp[0] > 128) return false;  // x - zp as an int16; |acc| < 2^30 with |bias| <= 2^29
  LanePlan P;
  if (!plan_lanes(L, v, p0, p1, &P)) return false;
  const Perms& pm = perms();
  const int32_t n = P.n, cout_g = L.out.c / L.groups;
  const int64_t view_len = int64_t(v.nh) * X.w;
  const __m512i zp = _mm512_set1_epi32(L.in_zp[0]);
  RowPerm iperm, wperm;
  OutPerm operm;
  const bool in_rows = cout_g == 1 && P.span > 0 && P.span <= 16 && row_perm(view_len, P.span, &iperm);
  const bool w_rows = row_perm(taps, taps, &wperm);
  const bool out_rows = cstride == n && out_perm(n, &operm);
  alignas(64) int8_t T[16 * kMaxSpan];
  __m512i Xq[kMaxSpan + 4], Wt[kMaxTaps], V[kMaxPos];
  RqSignRow sg;
  int used = 0;  // the requantisers' forms used (for the tests: count_path once per call)
  for (int32_t ob = c0; ob < c1; ob += 16) {
    const int32_t nk = mini(16, c1 - ob), l0 = ob - L.oc_base;
    const int8_t* src[16];
    if (P.span > 0) {
      for (int32_t k = 0; k < nk; ++k)
        src[k] = v.data + (int64_t(cout_g == 1 ? ob + k : (ob + k) / cout_g) - v.c0) * view_len + P.lo;
      if (P.span <= 16) {
        __m512i Y[4];
        if (in_rows)
          rows_permuted(src[0], nk, iperm, Y);
        else
          transpose16x16(src, nk, P.span, pm, Y);
        for (int32_t m = 0; 4 * m < P.span; ++m) {
          __m128i b[4];
          quarters(Y[m], b);
          for (int c = 0; c < 4; ++c) Xq[4 * m + c] = _mm512_sub_epi32(_mm512_cvtepi8_epi32(b[c]), zp);
        }
      } else {
        transpose16x64(src, nk, P.span, T);
        for (int32_t q = 0; q < P.span; ++q)
          Xq[q] = _mm512_sub_epi32(
              _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(T + 64 * (q % 16) + 16 * (q / 16)))), zp);
      }
    }
    Xq[P.span] = _mm512_setzero_si512();  // the taps outside the image
    {
      __m512i Y[4];
      if (w_rows) {
        rows_permuted(L.weights + int64_t(l0) * taps, nk, wperm, Y);
      } else {
        for (int32_t k = 0; k < nk; ++k) src[k] = L.weights + int64_t(l0 + k) * taps;
        transpose16x16(src, nk, taps, pm, Y);
      }
      for (int32_t m = 0; 4 * m < taps; ++m) {  // int16 weights, high halves 0
        __m128i b[4];
        quarters(Y[m], b);
        for (int c = 0; c < 4; ++c) Wt[4 * m + c] = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(b[c]));
      }
    }
    const __mmask16 live = __mmask16((1u << nk) - 1);
    const __m512i bias = L.bias ? _mm512_maskz_loadu_epi32(live, L.bias + l0) : _mm512_setzero_si512();
    if (taps == 9)
      macs_fixed<9>(P, Xq, Wt, bias, V);
    else
      macs_any(P, taps, Xq, Wt, bias, V);
    for (int32_t j = n; j < kMaxPos; ++j) V[j] = _mm512_setzero_si512();  // packed, never stored
    used |= requant_block(L, l0, nk, n, &sg, V);
    store_channels(V, n, nk, pm, out_rows ? &operm : nullptr, out + int64_t(ob - c0) * cstride, cstride);
  }
  if (used & kUsedSign) count_path(Path::kLanesSign);
  if (used & kUsedFast) count_path(Path::kLanesFast);
  if (used & kUsedScalar) count_path(Path::kLanesScalar);
  return true;
}

}  // namespace x86
}  // namespace core
}  // namespace ts
