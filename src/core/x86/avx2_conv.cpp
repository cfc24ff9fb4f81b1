// Convolutions 3 wide (dilation 1 across, column stride 1 or 2: depthwise
// 3x3, the first 3x3 conv) with AVX2's byte multiply-add, vpmaddubsw
// (compiled with -mavx2 -mfma; called only after select.cpp has checked the
// CPU). Layers with one input channel per group (depthwise) take the plane
// path (conv_narrow, further down: positions across row ends, one copy of
// each plane); the others, and planes it hands back, the row path below.
//
// An output channel's taps are taken a kernel row at a time: for input row
// r = (ci, ky), each 32-bit lane (one output column) gets the row's three
// input bytes and a fourth whose weight is 0, from one vpshufb of 16 input
// bytes (8 output columns per vector: 4 per 128-bit half, the upper half
// loaded 4 * stride columns on).
//
// vpmaddubsw multiplies unsigned by signed bytes and adds the pairs into
// int16 with saturation. It is exact here because the unsigned operand is
// |w| (<= 128) and the signed one x' = x, or ~x = -x - 1 where w < 0 (a byte
// XOR with the weight's sign): |w| * x' is w * x, or w * x + w, and a pair
// sum lies in [-32768, 32512]. vpmaddwd against ones adds the two pairs into
// int32. So the accumulator starts at bias - zp * sum(w) - sum(w < 0) and
// sum |w| * x' over all taps is then exactly sum (x - zp) * w, in int32
// (core/op.h bounds the true sum; wrapping cancels). Input columns outside
// the image read the zero point: each row is copied into a buffer with
// zero-point borders, so a padded tap adds (zp - zp) * w, i.e. its share of
// the -zp * sum(w) correction, and nothing is read outside the window.
// The accumulators are requantised in registers (rq_avx2.h).
#include <string.h>

#include "core/layer.h"
#include "core/ops/common.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

namespace {

using namespace opk;

constexpr int32_t kMaxRows = 16;   // (input channel, kernel row) pairs per output channel
constexpr int32_t kMaxOcG = 64;    // output channels set up at once
constexpr int32_t kMaxW = 1024;    // input and output row width
constexpr int32_t kPad = 32;       // buffer bytes before input column 0
constexpr int32_t kBufW = kPad + 2 * (kMaxW + 16) + 32;

struct Chan {
  int32_t wabs[kMaxRows], sign[kMaxRows];  // per row: |w| and the sign bytes (4th byte 0)
  int32_t init;
  Rq8 rq;
};

void chan_make(const LayerDesc& L, int32_t o, int32_t nrows, Chan* c) {
  const int32_t local = o - L.oc_base;
  const int8_t* w = L.weights + int64_t(local) * nrows * 3;
  int64_t init = L.bias ? L.bias[local] : 0;
  for (int32_t r = 0; r < nrows; ++r) {
    uint32_t a = 0, s = 0;
    for (int32_t k = 0; k < 3; ++k) {
      const int32_t v = w[3 * r + k];
      a |= uint32_t(v < 0 ? -v : v) << (8 * k);
      s |= uint32_t(v < 0 ? 0xFF : 0) << (8 * k);
      init -= int64_t(L.in_zp[0]) * v + (v < 0 ? v : 0);
    }
    c->wabs[r] = int32_t(a);
    c->sign[r] = int32_t(s);
  }
  c->init = int32_t(uint32_t(init));
  rq8_make(Requant(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max), &c->rq);
}

// 8 output columns of one output row: its input rows, the buffer column
// of its first output's first tap, where its outputs go and how many.
struct Half {
  const uint8_t (*rows)[kBufW];
  int32_t b0;
  int8_t* out;
  int32_t n;  // 0..8
};

// NB output channels x two halves of 8 output columns (stride s).
template <int NB, int S>
inline void cols16(const Half* hf, int32_t nrows, __m256i ctl, const Chan* ch, int64_t cstride) {
  constexpr int32_t s = S;
  __m256i acc[NB][2];
  for (int k = 0; k < NB; ++k) acc[k][0] = acc[k][1] = _mm256_set1_epi32(ch[k].init);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int32_t r = 0; r < nrows; ++r) {
    for (int h = 0; h < 2; ++h) {
      const uint8_t* p = hf[h].rows[r] + hf[h].b0;
      // Stride 1: both halves' bytes lie in the same 16 (one broadcast load,
      // the control picks 4 columns on in the upper half); stride 2: the
      // upper half's 16 bytes start 8 columns on.
      const __m256i raw =
          s == 1 ? _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                 : _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4 * s)), 1);
      const __m256i q = _mm256_shuffle_epi8(raw, ctl);
      for (int k = 0; k < NB; ++k) {
        const __m256i x = _mm256_xor_si256(q, _mm256_set1_epi32(ch[k].sign[r]));
        const __m256i pr = _mm256_maddubs_epi16(_mm256_set1_epi32(ch[k].wabs[r]), x);
        acc[k][h] = _mm256_add_epi32(acc[k][h], _mm256_madd_epi16(pr, ones));
      }
    }
  }
  const bool joined = hf[0].n == 8 && hf[1].out == hf[0].out + 8;
  alignas(32) int32_t sums[NB][16];  // through memory, as in avx2.cpp's pw_pass
  for (int k = 0; k < NB; ++k) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[k]), acc[k][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[k] + 8), acc[k][1]);
  }
  for (int k = 0; k < NB; ++k) {
    const __m128i v = rq8_16<false>(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums[k])),
                                    _mm256_load_si256(reinterpret_cast<const __m256i*>(sums[k] + 8)), ch[k].rq);
    if (joined) {
      store_n(hf[0].out + int64_t(k) * cstride, v, 8 + hf[1].n);
    } else {
      store_n(hf[0].out + int64_t(k) * cstride, v, hf[0].n);
      store_n(hf[1].out + int64_t(k) * cstride, _mm_srli_si128(v, 8), hf[1].n);
    }
  }
}

template <int S>
inline void cols16_nb(int32_t nb, const Half* hf, int32_t nrows, __m256i ctl, const Chan* ch, int64_t cstride) {
  if (nb == 4) cols16<4, S>(hf, nrows, ctl, ch, cstride);
  else if (nb == 1) cols16<1, S>(hf, nrows, ctl, ch, cstride);
  else if (nb == 2) cols16<2, S>(hf, nrows, ctl, ch, cstride);
  else cols16<3, S>(hf, nrows, ctl, ch, cstride);
}

// Input row iy of channel ci into buf, whose bytes outside the image's
// columns already hold the zero point; rows outside the image are all zero
// points.
void fill_row(const LayerDesc& L, const View& v, int32_t ci, int32_t iy, uint8_t* buf) {
  const Dims& X = L.in[0];
  if (iy < 0 || iy >= X.h)
    memset(buf + kPad, uint8_t(int8_t(L.in_zp[0])), size_t(X.w));
  else
    memcpy(buf + kPad, row_ptr(v, X.w, ci, iy), size_t(X.w));
}

// One output row segment [ox0, ox1) of row oy (and, for rows of at most 8
// columns, the next segment in the second half of each vector).
struct Seg {
  int32_t oy, ox0, ox1, pos;
};

// Planes of a convolution with one input channel per group (depthwise),
// output rows up to kNarrowW wide: 8 consecutive output positions per
// vector across row ends, so short rows (14x14, 7x7, 3x3) fill whole
// vectors. Each channel's input plane is copied once into a buffer whose
// borders hold the zero point (plane row iy at buffer row iy + pad_t, column
// ix at ix + pad_l). Lane j's bytes for kernel row ky are the 4 at
// off(j) + ky * dh * pitch (its three taps and a fourth of weight 0). Each
// 128-bit half (4 lanes) loads the 16 bytes from its first lane's offset and
// one vpshufb picks every lane's 4. Where a half's lanes do not fit in 16
// bytes (column stride 2 across a row end), the lanes from the row break on
// come from a second window (its own load and vpshufb; the two controls
// zero each other's lanes, an OR joins them): a plan with any such half is
// `two`, and all its halves take both windows. The plan (per group of 8
// positions: the halves' window offsets and controls) depends only on the
// positions, so it is worked out once per call and shared by every channel.
// Products and the correction as in cols16 above.
constexpr int32_t kNarrowW = 128;
constexpr int32_t kNarrowBuf = 16384;  // bytes of the bordered plane
constexpr int32_t kNarrowGroups = 512;  // groups of 8 positions per chunk of a call

struct NarrowPlan {
  int32_t pitch, rows, n;
  bool two;
  int32_t start[kNarrowGroups][2][2];  // [group][window][half]
  __m256i ctl[kNarrowGroups][2];       // [group][window]
};

// One half's 4 lanes from offset list o (n of them valid): window starts and
// control bytes (0x80: the other window's lane). False if they fit neither.
bool plan_half(const int32_t* o, int32_t n, int32_t* s, uint8_t* ca, uint8_t* cb, bool* two) {
  s[0] = n > 0 ? o[0] : 0;
  s[1] = s[0];
  int w = 0;
  for (int32_t j = 0; j < 4; ++j) {
    int32_t rel = 0;  // lanes past the end: any byte of window 0
    if (j < n) {
      rel = o[j] - s[w];
      if (rel + 3 > 15) {
        if (w == 1) return false;
        w = 1;
        *two = true;
        s[1] = o[j];
        rel = 0;
      }
    }
    for (int32_t b = 0; b < 4; ++b) {
      ca[4 * j + b] = w == 0 ? uint8_t(rel + b) : 0x80;
      cb[4 * j + b] = w == 1 ? uint8_t(rel + b) : 0x80;
    }
  }
  return true;
}

bool narrow_plan(const LayerDesc& L, int32_t p0, int32_t p1, NarrowPlan* np) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, H = L.out.h;
  np->pitch = maxi(L.pad_l + X.w, (W - 1) * L.sw + 4);
  np->rows = maxi(L.pad_t + X.h, (H - 1) * L.sh + (L.kh - 1) * L.dh + 1);
  np->n = p1 - p0;
  np->two = false;
  if (int64_t(np->pitch) * np->rows > kNarrowBuf) return false;
  // Positions visited in order, their row and column counted along (no
  // division per lane).
  int32_t y = p0 / W, x = p0 % W;
  alignas(32) uint8_t ca[32], cb[32];
  for (int32_t g = 0; g < 2 * ((np->n + 15) / 16); ++g) {  // narrow16 takes groups in pairs
    for (int32_t h = 0; h < 2; ++h) {
      int32_t o[4], s[2];
      const int32_t n = mini(4, maxi(0, p1 - (p0 + 8 * g + 4 * h)));
      for (int32_t j = 0; j < n; ++j) {
        o[j] = y * L.sh * np->pitch + x * L.sw;
        if (++x == W) x = 0, ++y;
      }
      if (!plan_half(o, n, s, ca + 16 * h, cb + 16 * h, &np->two)) return false;
      np->start[g][0][h] = s[0];
      np->start[g][1][h] = s[1];
    }
    np->ctl[g][0] = _mm256_load_si256(reinterpret_cast<const __m256i*>(ca));
    np->ctl[g][1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(cb));
  }
  return true;
}

// The 16 bytes at row + st[0] and row + st[1] as the two halves.
inline __m256i load2x16(const uint8_t* row, const int32_t* st) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + st[0]))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + st[1])), 1);
}

// 16 positions from group g: two vectors of 8, requantised, stored.
template <bool TWO>
inline void narrow16(const uint8_t* buf, const NarrowPlan& np, const LayerDesc& L, int32_t g, const Chan& ch,
                     int8_t* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[2] = {_mm256_set1_epi32(ch.init), _mm256_set1_epi32(ch.init)};
  for (int32_t r = 0; r < L.kh; ++r) {
    const __m256i wabs = _mm256_set1_epi32(ch.wabs[r]), sign = _mm256_set1_epi32(ch.sign[r]);
    const uint8_t* row = buf + r * L.dh * np.pitch;
    for (int h = 0; h < 2; ++h) {
      __m256i q = _mm256_shuffle_epi8(load2x16(row, np.start[g + h][0]), np.ctl[g + h][0]);
      if (TWO) q = _mm256_or_si256(q, _mm256_shuffle_epi8(load2x16(row, np.start[g + h][1]), np.ctl[g + h][1]));
      const __m256i x = _mm256_xor_si256(q, sign);
      acc[h] = _mm256_add_epi32(acc[h], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, x), ones));
    }
  }
  store_n(out, rq8_16<false>(acc[0], acc[1], ch.rq), np.n - 8 * g);
}

bool conv_narrow(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                 int64_t cstride) {
  if (L.pad_t < 0) return false;
  // Positions in chunks of at most 8 * kNarrowGroups, each with its plan;
  // every chunk is checked before anything is written.
  constexpr int32_t kChunk = 8 * kNarrowGroups;
  NarrowPlan np;
  for (int32_t a = p0; a < p1; a += kChunk)
    if (!narrow_plan(L, a, mini(p1, a + kChunk), &np)) return false;
  const bool one_chunk = p1 - p0 <= kChunk;  // its plan is np already
  const Dims& X = L.in[0];
  const int32_t W = L.out.w;
  const int32_t cout_g = L.out.c / L.groups;
  alignas(32) uint8_t buf[kNarrowBuf + 16];  // + 16: a half's window may start near the end
  memset(buf, uint8_t(int8_t(L.in_zp[0])), size_t(np.pitch) * np.rows + 16);
  Chan ch;
  for (int32_t a = p0; a < p1; a += kChunk) {
    const int32_t b = mini(p1, a + kChunk);
    if (!one_chunk) narrow_plan(L, a, b, &np);
    // Image rows the chunk's positions need (all inside the view).
    const int32_t iy0 = maxi(0, (a / W) * L.sh - L.pad_t);
    const int32_t iy1 = mini(X.h, ((b - 1) / W) * L.sh - L.pad_t + (L.kh - 1) * L.dh + 1);
    for (int32_t c = c0; c < c1; ++c) {
      const int32_t ci = c / cout_g;  // one input channel per group
      for (int32_t iy = iy0; iy < iy1; ++iy)
        memcpy(buf + (iy + L.pad_t) * np.pitch + L.pad_l, row_ptr(v, X.w, ci, iy), size_t(X.w));
      chan_make(L, c, L.kh, &ch);
      int8_t* o = out + int64_t(c - c0) * cstride + (a - p0);
      if (np.two)
        for (int32_t q = 0; q < np.n; q += 16) narrow16<true>(buf, np, L, q / 8, ch, o + q);
      else
        for (int32_t q = 0; q < np.n; q += 16) narrow16<false>(buf, np, L, q / 8, ch, o + q);
    }
  }
  return true;
}

}  // namespace

bool conv_block_avx2(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                     int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t W = L.out.w, s = L.sw;
  const int32_t cin_g = X.c / L.groups, cout_g = L.out.c / L.groups;
  const int32_t nrows = cin_g * L.kh;
  if (L.kw != 3 || L.dw != 1 || s < 1 || s > 2 || L.kh < 1 || L.sh < 1 || L.dh < 1 || nrows > kMaxRows ||
      X.w > kMaxW || W > kMaxW || L.pad_l > kPad - 1 || L.pad_l < 0)
    return false;
  if (cin_g == 1 && W <= kNarrowW && conv_narrow(L, v, c0, c1, p0, p1, out, cstride)) return true;
  alignas(32) uint8_t ix[32];
  for (int32_t k = 0; k < 8; ++k)
    for (int32_t j = 0; j < 4; ++j) ix[4 * k + j] = uint8_t((s == 1 ? k : k % 4) * s + j);
  const __m256i ctl = _mm256_load_si256(reinterpret_cast<const __m256i*>(ix));
  // Two sets of row buffers (the second for the next output row of narrow
  // planes); bytes outside the image's columns are zero points throughout.
  alignas(32) uint8_t rows[2][kMaxRows][kBufW];
  const bool narrow = W <= 8;
  const size_t used = size_t(kPad + (W + 16) * s + 32);  // bytes cols16 may read
  for (int set = 0; set < (narrow ? 2 : 1); ++set)
    for (int32_t r = 0; r < nrows; ++r) memset(rows[set][r], uint8_t(int8_t(L.in_zp[0])), used);
  Chan ch[kMaxOcG];
  auto fill = [&](int set, int32_t ci0, int32_t oy) {
    for (int32_t r = 0; r < nrows; ++r)
      fill_row(L, v, ci0 + r / L.kh, oy * L.sh - L.pad_t + (r % L.kh) * L.dh, rows[set][r]);
  };
  for (int32_t c = c0; c < c1;) {
    const int32_t ge = mini(c1, mini((c / cout_g + 1) * cout_g, c + kMaxOcG));  // channels of c's group set up at once
    const int32_t ci0 = (c / cout_g) * cin_g;
    for (int32_t o = c; o < ge; ++o) chan_make(L, o, nrows, &ch[o - c]);
    int32_t pos = p0;
    while (pos < p1) {
      Seg a{pos / W, pos % W, 0, pos};
      a.ox1 = mini(W, a.ox0 + (p1 - pos));
      pos += a.ox1 - a.ox0;
      fill(0, ci0, a.oy);
      Seg b{a.oy + 1, 0, 0, pos};
      if (narrow && pos < p1) {
        b.ox1 = mini(W, p1 - pos);
        pos += b.ox1;
        fill(1, ci0, b.oy);
      }
      for (int32_t o = c; o < ge;) {
        const int32_t nb = mini(4, ge - o);
        const Chan* k = ch + (o - c);
        int8_t* base = out + int64_t(o - c0) * cstride - p0;
        for (int32_t x = a.ox0; x < a.ox1; x += 16) {
          Half hf[2];
          const int32_t nl = mini(16, a.ox1 - x);
          hf[0] = Half{rows[0], kPad + x * s - L.pad_l, base + a.pos + (x - a.ox0), mini(8, nl)};
          if (narrow)
            hf[1] = Half{rows[1], kPad - L.pad_l, base + b.pos, b.ox1};
          else
            hf[1] = Half{rows[0], hf[0].b0 + 8 * s, hf[0].out + 8, nl - 8 > 0 ? nl - 8 : 0};
          if (s == 1) cols16_nb<1>(nb, hf, nrows, ctl, k, cstride);
          else cols16_nb<2>(nb, hf, nrows, ctl, k, cstride);
        }
        o += nb;
      }
    }
    c = ge;
  }
  return true;
}

}  // namespace x86
}  // namespace core
}  // namespace ts
