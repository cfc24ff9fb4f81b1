// AVX2 kernel variants (compiled with -mavx2 -mfma; used only after
// select.cpp has checked the CPU, or forced with TS_KERNELS=avx2, which is
// how the path is tested and timed on AVX-512 machines). Bit-identical with
// the portable table: integer sums in another order, and rq_avx2.h's exact
// requantisation. The 3-wide convolutions (depthwise, the first conv) are in
// avx2_conv.cpp.
#include <string.h>

#include <array>
#include <utility>

#include "core/ops/conv_impl.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

void requant_row_avx2(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  int32_t k = 0;
  if (rqf_ok(rq)) {
    RqF f;
    rqf_make(rq, &f);
    for (; k + 16 <= n; k += 16) {
      const __m256i a = rqf_apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + k)), f);
      const __m256i b = rqf_apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + k + 8)), f);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), pack16(a, b));
    }
  } else if (vec_ok(rq)) {
    const RqVec c = rq_vec(rq);
    for (; k + 16 <= n; k += 16) {
      const __m256i a = rq_apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + k)), c);
      const __m256i b = rq_apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + k + 8)), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), pack16(a, b));
    }
  }
  for (; k < n; ++k) out[k] = rq(acc[k]);
}

namespace {

// Pointwise conv as a matrix product on 16-bit pairs (vpmaddwd). A tile of
// 32 positions of the input is packed once as, per pair g of input channels
// (2g, 2g+1; an odd last channel pairs with 0), 16-bit lanes x(2g, p),
// x(2g+1, p) (sign-extended, no zero point), interleaved with
// unpacklo/unpackhi within 128-bit lanes, so each 16-position half is two
// vectors of 8 positions in the order 0-3 8-11 / 4-7 12-15, which pack16_il
// puts back in order. One vpmaddwd with the broadcast weight pair adds both
// products for 8 positions; 6 output channels x 16 positions per pass (12
// accumulators in registers), weights read as prepacked int16 pairs (one
// broadcast load each). The zero point goes into the starting value:
// sum (x - zp) w = sum x w - zp sum w, exact in int32 (core/op.h bounds the
// true sum; wrapping cancels). The accumulators are requantised straight
// from the pass (rq_avx2.h's fast form where it applies).
constexpr int32_t kTile = 32;
constexpr int32_t kMaxCin = 1024;
constexpr int32_t kOcChunk = 256;  // output channels whose set-up is done at once
constexpr int kPwOc = 6;

// sum(w[0..n)), 32 bytes a step: vpmaddubsw against unsigned ones (pairs,
// no saturation), vpmaddwd against ones.
inline int32_t weight_sum(const int8_t* w, int32_t n) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s = _mm256_setzero_si256();
  int32_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(w + i) + kPrefetchAhead, _MM_HINT_T0);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16));
  }
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  int32_t sum = _mm_cvtsi128_si32(h);
  for (; i < n; ++i) sum += w[i];
  return sum;
}

// A pointwise output channel's starting value, bias - zp * sum(w), in int32
// (wrapping cancels).
inline int32_t pw_init(const LayerDesc& L, int32_t local, int32_t cin) {
  const int32_t sw = weight_sum(L.weights + int64_t(local) * cin, cin);
  return int32_t(uint32_t(int64_t(L.bias ? L.bias[local] : 0) - int64_t(L.in_zp[0]) * sw));
}

template <int NO>
inline void pw_pass(const __m256i* xp, int32_t ng, const int32_t* wq, const int32_t* init, const Rq8* rq, int32_t np,
                    int8_t* out, int64_t cstride) {
  __m256i a[NO][2];
  for (int k = 0; k < NO; ++k) a[k][0] = a[k][1] = _mm256_set1_epi32(init[k]);
  for (int32_t g = 0; g < ng; ++g) {
    const __m256i x0 = _mm256_load_si256(xp + 4 * g), x1 = _mm256_load_si256(xp + 4 * g + 1);
    for (int k = 0; k < NO; ++k) {
      const __m256i w = _mm256_set1_epi32(wq[k * ng + g]);
      a[k][0] = _mm256_add_epi32(a[k][0], _mm256_madd_epi16(x0, w));
      a[k][1] = _mm256_add_epi32(a[k][1], _mm256_madd_epi16(x1, w));
    }
  }
  // Through memory: a register array handed to the epilogue makes GCC keep
  // the accumulators in memory inside the loop above (as in vnni.cpp).
  alignas(32) int32_t acc[NO][16];
  for (int k = 0; k < NO; ++k) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc[k]), a[k][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc[k] + 8), a[k][1]);
  }
  for (int k = 0; k < NO; ++k) {
    const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc[k]));
    const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc[k] + 8));
    store_n(out + int64_t(k) * cstride, rq8_16<true>(lo, hi, rq[k]), np);
  }
}

inline void pw_pass_no(int no, const __m256i* xp, int32_t ng, const int32_t* wq, const int32_t* init, const Rq8* rq,
                       int32_t np, int8_t* out, int64_t cstride) {
  switch (no) {
    case 6: return pw_pass<6>(xp, ng, wq, init, rq, np, out, cstride);
    case 5: return pw_pass<5>(xp, ng, wq, init, rq, np, out, cstride);
    case 4: return pw_pass<4>(xp, ng, wq, init, rq, np, out, cstride);
    case 3: return pw_pass<3>(xp, ng, wq, init, rq, np, out, cstride);
    case 2: return pw_pass<2>(xp, ng, wq, init, rq, np, out, cstride);
    default: return pw_pass<1>(xp, ng, wq, init, rq, np, out, cstride);
  }
}

// Packs positions [at, at + np) (np <= 32) of input channels ci, ci + 1 (s1
// null: an odd last channel) into the four vectors of pair g.
inline void pw_pack(const int8_t* s0, const int8_t* s1, int32_t np, __m256i* d) {
  for (int32_t h = 0; h < 2; ++h) {
    __m256i a, b;
    if (np >= 16 * (h + 1)) {
      a = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + 16 * h)));
      b = s1 ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + 16 * h))) : _mm256_setzero_si256();
    } else {
      alignas(16) int8_t t0[16] = {}, t1[16] = {};
      for (int32_t k = 16 * h; k < np; ++k) {
        t0[k - 16 * h] = s0[k];
        if (s1) t1[k - 16 * h] = s1[k];
      }
      a = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(t0)));
      b = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(t1)));
    }
    _mm256_store_si256(d + 2 * h, _mm256_unpacklo_epi16(a, b));
    _mm256_store_si256(d + 2 * h + 1, _mm256_unpackhi_epi16(a, b));
  }
}

// Pointwise on few positions (n <= kFewPos: the 3x3 planes of the last
// stage at input 112), where 16-position passes would leave most lanes
// idle: output channels go in the lanes instead. For 8 output channels at a
// time, the weights of input-channel pair g are one vector (lane k: the
// int16 pair w(o+k, 2g), w(o+k, 2g+1), transposed 8 x 8 pairs at a time),
// and each position's pair of inputs is broadcast, so one vpmaddwd adds both
// products for 8 channels; one accumulator per position, started at
// bias - zp * sum(w) as above. They are requantised with per-lane constants
// (RqLanes: rq_avx2.h's fast form with every constant a vector), then
// transposed to the channels' rows.
constexpr int32_t kFewPos = 12;

struct RqLanes {
  __m256i m, m_odd, addz_e, addz_o, sh;  // sh: total - 32 per lane
  __m256i lo, hi;
  bool clamp;
};

// False if a lane's requantiser is not of the fast form (then lane by lane).
bool rq_lanes_make(const Rq8* rq, int nb, RqLanes* c) {
  alignas(32) int32_t m[8], sh[8];
  alignas(32) int64_t addz[2][4];  // [0]: even lanes, [1]: odd lanes
  for (int k = 0; k < 8; ++k) {
    const Rq8& q = rq[k < nb ? k : 0];  // lanes past nb: any valid channel
    if (q.mode != 2) return false;
    m[k] = q.f.m;
    sh[k] = q.f.sh;
    addz[k % 2][k / 2] = q.f.addz;
  }
  c->m = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  c->m_odd = _mm256_srli_epi64(c->m, 32);
  c->sh = _mm256_load_si256(reinterpret_cast<const __m256i*>(sh));
  c->addz_e = _mm256_load_si256(reinterpret_cast<const __m256i*>(addz[0]));
  c->addz_o = _mm256_load_si256(reinterpret_cast<const __m256i*>(addz[1]));
  c->clamp = rq[0].f.clamp;  // lo, hi and zp are the layer's
  c->lo = _mm256_set1_epi32(rq[0].f.lo);
  c->hi = _mm256_set1_epi32(rq[0].f.hi);
  return true;
}

inline __m256i rq_lanes_half(__m256i p, __m256i addz) {
  const __m256i negative = _mm256_cmpgt_epi64(_mm256_set1_epi64x(-(int64_t(1) << 30)), p);
  return _mm256_add_epi64(_mm256_add_epi64(p, addz), _mm256_and_si256(negative, _mm256_set1_epi64x(-(int64_t(1) << 31))));
}

// rqf_apply with lane k's constants from channel k: 8 bytes (lane order).
inline int64_t rq_lanes_apply(__m256i x, const RqLanes& c) {
  const __m256i pe = rq_lanes_half(_mm256_mul_epi32(x, c.m), c.addz_e);
  const __m256i po = rq_lanes_half(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), c.m_odd), c.addz_o);
  __m256i r = _mm256_srav_epi32(_mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA), c.sh);
  if (c.clamp) r = _mm256_min_epi32(_mm256_max_epi32(r, c.lo), c.hi);
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(r, r), r);  // bytes 0-3 of each 128-bit half
  return int64_t(uint32_t(_mm256_cvtsi256_si32(b))) | int64_t(uint64_t(uint32_t(_mm256_extract_epi32(b, 4))) << 32);
}

// Lane k of wt[g] = pair g of weight row w[k] (k < nb; 0 beyond), g < ng.
void few_weights(const int8_t* const* w, int nb, int32_t cin, int32_t ng, __m256i* wt) {
  const int8_t zero16[16] = {};
  int32_t g = 0;
  for (; 2 * g + 16 <= cin; g += 8) {  // 8 pairs of 8 rows: an 8 x 8 transpose of int32
    __m256i r[8];
    for (int k = 0; k < 8; ++k)
      r[k] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k < nb ? w[k] + 2 * g : zero16)));
    __m256i a[8], b[8];
    for (int k = 0; k < 8; k += 2) {
      a[k] = _mm256_unpacklo_epi32(r[k], r[k + 1]);
      a[k + 1] = _mm256_unpackhi_epi32(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4)
      for (int j = 0; j < 2; ++j) {
        b[k + j] = _mm256_unpacklo_epi64(a[k + j], a[k + j + 2]);
        b[k + j + 2] = _mm256_unpackhi_epi64(a[k + j], a[k + j + 2]);
      }
    // b[0..3]: rows 0-3 of pairs {0,4}, {2,6}, {1,5}, {3,7} (128-bit
    // halves); b[4..7]: rows 4-7, the same.
    static constexpr int kPair[4] = {0, 2, 1, 3};
    for (int j = 0; j < 4; ++j) {
      wt[g + kPair[j]] = _mm256_permute2x128_si256(b[j], b[j + 4], 0x20);
      wt[g + kPair[j] + 4] = _mm256_permute2x128_si256(b[j], b[j + 4], 0x31);
    }
  }
  for (; g < ng; ++g) {
    alignas(32) int32_t lane[8];
    for (int k = 0; k < 8; ++k) {
      const int32_t lo = k < nb ? w[k][2 * g] : 0, hi = k < nb && 2 * g + 1 < cin ? w[k][2 * g + 1] : 0;
      lane[k] = int32_t(uint32_t(uint16_t(int16_t(lo))) | uint32_t(uint16_t(int16_t(hi))) << 16);
    }
    wt[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane));
  }
}

template <int P>
void few_pass(const int32_t* xs, int32_t ng, const int32_t* wt, const int32_t* init, const RqLanes* rl, const Rq8* rq,
              int nb, int8_t* out, int64_t cstride) {
  __m256i acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm256_load_si256(reinterpret_cast<const __m256i*>(init));
  for (int32_t g = 0; g < ng; ++g) {
    const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(wt + 8 * g));
    for (int p = 0; p < P; ++p) acc[p] = _mm256_add_epi32(acc[p], _mm256_madd_epi16(_mm256_set1_epi32(xs[g * kFewPos + p]), w));
  }
  alignas(32) int8_t b[P][8];
  if (rl) {
    for (int p = 0; p < P; ++p) {
      const int64_t v = rq_lanes_apply(acc[p], *rl);
      memcpy(b[p], &v, 8);
    }
  } else {
    alignas(32) int32_t a[P][8];
    for (int p = 0; p < P; ++p) _mm256_store_si256(reinterpret_cast<__m256i*>(a[p]), acc[p]);
    for (int p = 0; p < P; ++p)
      for (int k = 0; k < nb; ++k) b[p][k] = rq[k].rq(a[p][k]);
  }
  for (int k = 0; k < nb; ++k)
    for (int p = 0; p < P; ++p) out[int64_t(k) * cstride + p] = b[p][k];
}

using FewPass = void (*)(const int32_t*, int32_t, const int32_t*, const int32_t*, const RqLanes*, const Rq8*, int,
                         int8_t*, int64_t);
template <int... P>
constexpr std::array<FewPass, sizeof...(P)> few_passes(std::integer_sequence<int, P...>) {
  return {few_pass<P + 1>...};
}

// Pointwise for n = p1 - p0 <= kFewPos positions (cin <= kMaxCin).
__attribute__((noinline)) void pointwise_few(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                   int64_t cstride) {
  static constexpr auto kPass = few_passes(std::make_integer_sequence<int, kFewPos>());
  const int32_t W = L.out.w, n = p1 - p0;
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t ng = (cin + 1) / 2;
  const int64_t plane = int64_t(v.nh) * W;
  const int64_t at = p0 - int64_t(v.h0) * W;
  alignas(32) int32_t xs[kMaxCin / 2 * kFewPos];
  for (int32_t g = 0; g < ng; ++g) {
    const int8_t* s0 = v.data + int64_t(ci0 + 2 * g - v.c0) * plane + at;
    for (int32_t p = 0; p < n; ++p) {
      const int32_t hi = 2 * g + 1 < cin ? s0[plane + p] : 0;
      xs[g * kFewPos + p] = int32_t(uint32_t(uint16_t(int16_t(s0[p]))) | uint32_t(uint16_t(int16_t(hi))) << 16);
    }
  }
  alignas(32) __m256i wt[kMaxCin / 2];
  for (int32_t j = 0; j < no; j += 8) {
    const int nb = mini(8, no - j);
    const int8_t* w[8];
    alignas(32) int32_t init[8] = {};
    Rq8 rq[8];
    for (int k = 0; k < nb; ++k) {
      const int32_t local = o0 + j + k - L.oc_base;
      w[k] = L.weights + int64_t(local) * cin;
      init[k] = pw_init(L, local, cin);
      rq8_make(Requant(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max), &rq[k]);
    }
    few_weights(w, nb, cin, ng, wt);
    RqLanes rl;
    const bool lanes = rq_lanes_make(rq, nb, &rl);
    kPass[n - 1](xs, ng, reinterpret_cast<const int32_t*>(wt), init, lanes ? &rl : nullptr, rq, nb, out + int64_t(j) * cstride, cstride);
  }
}

__attribute__((noinline)) void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0,
                                         int32_t p1, int8_t* out, int64_t cstride) {
  const int32_t W = L.out.w;
  const int32_t cin = L.in[0].c / L.groups;
  if (cin > kMaxCin) return pointwise_block(L, v, o0, no, p0, p1, out, cstride, requant_row_avx2);
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t ng = (cin + 1) / 2;
  const int64_t plane = int64_t(v.nh) * W;
  alignas(32) __m256i xp[kMaxCin / 2 * 4];
  alignas(32) int32_t wq[kPwOc * kMaxCin / 2];
  int32_t init[kOcChunk];
  Uninit<Rq8, kOcChunk> rq_store;  // rq[j] made before use
  Rq8* const rq = rq_store.v;
  const int32_t n = p1 - p0;
  for (int32_t c = 0; c < no; c += kOcChunk) {
    const int32_t nc = mini(kOcChunk, no - c);
    for (int32_t j = 0; j < nc; ++j) {
      const int32_t local = o0 + c + j - L.oc_base;
      init[j] = pw_init(L, local, cin);
      rq8_make(Requant(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max), &rq[j]);
    }
    for (int32_t t = 0; t < n; t += kTile) {
      const int32_t np = mini(kTile, n - t);
      const int64_t at = p0 + t - int64_t(v.h0) * W;  // offset of position p0+t in a channel of the view
      for (int32_t g = 0; g < ng; ++g) {
        const int8_t* s0 = v.data + int64_t(ci0 + 2 * g - v.c0) * plane + at;
        pw_pack(s0, 2 * g + 1 < cin ? s0 + plane : nullptr, np, xp + 4 * g);
      }
      for (int32_t j = 0; j < nc; j += kPwOc) {
        const int nb = mini(kPwOc, nc - j);
        for (int k = 0; k < nb; ++k) {
          const int8_t* w = L.weights + int64_t(o0 + c + j + k - L.oc_base) * cin;
          int16_t* d = reinterpret_cast<int16_t*>(wq + k * ng);
          int32_t i = 0;
          for (; i + 16 <= cin; i += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))));
          for (; i < 2 * ng; ++i) d[i] = int16_t(i < cin ? w[i] : 0);
        }
        for (int32_t h = 0; h < np; h += 16)
          pw_pass_no(nb, xp + 2 * (h / 16), ng, wq, init + j, rq + j, np - h,
                     out + int64_t(c + j) * cstride + t + h, cstride);
      }
    }
  }
}

// The table's entry: few positions go to pointwise_few, and so do the last
// n % 16 (if at most kFewPos) of more, which would leave most lanes of the
// blocked product's last vector idle (49 = 3 * 16 + 1 on 7x7 planes).
void pointwise_any(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                   int64_t cstride) {
  const int32_t n = p1 - p0, tail = n % 16;
  if (L.in[0].c / L.groups > kMaxCin || (n > kFewPos && (tail == 0 || tail > kFewPos)))
    return pointwise(L, v, o0, no, p0, p1, out, cstride);
  const int32_t main = n > kFewPos ? n - tail : 0;
  if (main) pointwise(L, v, o0, no, p0, p0 + main, out, cstride);
  pointwise_few(L, v, o0, no, p0 + main, p1, out + main, cstride);
}

void conv_ch(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  conv_channel(L, v, o, p0, p1, out, requant_row_avx2);
}

void conv_ch_flat(const LayerDesc& L, const View& v, int32_t o, int32_t p0, int32_t p1, int8_t* out) {
  conv_channel_flat(L, v, o, p0, p1, out, requant_row_avx2);
}

}  // namespace

// Add without a division or a 64-bit scalar multiply per element: 16 lanes
// per step through rq_avx2.h (the operands' rescale, then the output's).
void add_row_avx2(const int8_t* a, const int8_t* b, int32_t n, const AddParams& p, int8_t* out) {
  int32_t k = 0;
  if (vec_ok(p.ra) && vec_ok(p.rb) && vec_ok(p.rout) && p.left >= 0 && p.left <= 22 && p.za >= -256 && p.za <= 256 &&
      p.zb >= -256 && p.zb <= 256) {
    const RqVec ca = rq_vec(p.ra), cb = rq_vec(p.rb), co = rq_vec(p.rout);
    const __m256i za = _mm256_set1_epi32(p.za), zb = _mm256_set1_epi32(p.zb);
    const __m128i sh = _mm_cvtsi32_si128(p.left);
    auto eight = [&](int32_t at) {
      const __m256i x = _mm256_sll_epi32(
          _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + at))), za), sh);
      const __m256i y = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + at))), zb);
      return rq_apply(_mm256_add_epi32(rq_scale(x, ca), rq_scale(_mm256_sll_epi32(y, sh), cb)), co);
    };
    for (; k + 16 <= n; k += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), pack16(eight(k), eight(k + 8)));
  }
  for (; k < n; ++k) {
    const int32_t x = (int32_t(a[k]) - p.za) * (int32_t(1) << p.left);
    const int32_t y = (int32_t(b[k]) - p.zb) * (int32_t(1) << p.left);
    out[k] = p.rout(wrap_add(p.ra.scale(x), p.rb.scale(y)));
  }
}

namespace {

// Gemm: 32 products per step with 16-bit widening multiply-adds.
void gemm(const LayerDesc& L, const int8_t* x, int32_t o0, int32_t o1, int8_t* out, int64_t ostride) {
  const int32_t fan_in = L.in[0].size();
  const int32_t zp = L.in_zp[0];
  const __m256i vzp = _mm256_set1_epi16(int16_t(zp));
  for (int32_t o = o0; o < o1; ++o) {
    const int32_t local = o - L.oc_base;
    const int8_t* w = L.weights + int64_t(local) * fan_in;
    __m256i s = _mm256_setzero_si256();
    int32_t i = 0;
    for (; i + 16 <= fan_in; i += 16) {
      const __m256i xv = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))), vzp);
      const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(xv, wv));
    }
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    int32_t acc = (L.bias ? L.bias[local] : 0) + _mm_cvtsi128_si32(h);
    for (; i < fan_in; ++i) acc += (int32_t(x[i]) - zp) * w[i];
    out[int64_t(o - o0) * ostride] = requant(acc, L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
  }
}

}  // namespace

const KernelTable kAvx2Kernels = {"avx2", requant_row_avx2, pointwise_any, conv_ch, conv_ch_flat, add_row_avx2, gemm,
                                  conv_block_avx2};

}  // namespace x86
}  // namespace core
}  // namespace ts
