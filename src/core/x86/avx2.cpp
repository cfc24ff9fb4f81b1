// AVX2 kernel variants (compiled with -mavx2 -mfma; used only after
// select.cpp has checked the CPU). Bit-identical with the portable table:
// integer sums in another order, and rq_avx2.h's exact requantisation.
#include <string.h>

#include "core/ops/conv_impl.h"
#include "core/x86/rq_avx2.h"
#include "core/x86/x86_kernels.h"

namespace ts {
namespace core {
namespace x86 {

void requant_row_avx2(const int32_t* acc, int32_t n, const Requant& rq, int8_t* out) {
  int32_t k = 0;
  if (vec_ok(rq)) {
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

// Pointwise conv as a matrix product with 16-bit pairs: a tile of 32
// positions of the input is packed as xp[g][p][2] = (x(2g, p) - zp,
// x(2g+1, p) - zp) (int16; an odd last channel pairs with 0), so that one
// _mm256_madd_epi16 with the broadcast weight pair (w[o][2g], w[o][2g+1])
// adds both products for 8 positions. Two output channels x 32 positions
// per pass (8 accumulators). Exact: each product fits int16 x int16, sums
// are int32 like the portable code's.
constexpr int32_t kTile = 32;
constexpr int32_t kMaxCin = 1024;

inline int32_t wpair(const int8_t* w, int32_t g, int32_t cin) {
  const int32_t a = w[2 * g];
  const int32_t b = 2 * g + 1 < cin ? w[2 * g + 1] : 0;
  return int32_t(uint32_t(uint16_t(int16_t(a))) | (uint32_t(uint16_t(int16_t(b))) << 16));
}

void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  const int32_t W = L.out.w;
  const int32_t cin = L.in[0].c / L.groups;
  if (cin > kMaxCin) return pointwise_block(L, v, o0, no, p0, p1, out, cstride, requant_row_avx2);
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  const int32_t ng = (cin + 1) / 2;
  const int64_t plane = int64_t(v.nh) * W;
  alignas(32) int16_t xp[kMaxCin / 2 * kTile * 2];
  alignas(32) int32_t acc[2][kTile];
  const __m256i vzp = _mm256_set1_epi16(int16_t(zp));
  const int32_t n = p1 - p0;
  for (int32_t t = 0; t < n; t += kTile) {
    const int32_t np = mini(kTile, n - t);
    const int64_t at = p0 + t - int64_t(v.h0) * W;  // offset of position p0+t in a channel of the view
    for (int32_t g = 0; g < ng; ++g) {
      const int8_t* s0 = v.data + int64_t(ci0 + 2 * g - v.c0) * plane + at;
      const int8_t* s1 = 2 * g + 1 < cin ? s0 + plane : nullptr;
      int16_t* d = xp + int64_t(g) * kTile * 2;
      if (np == kTile && s1) {
        for (int32_t h = 0; h < kTile; h += 16) {
          const __m256i a = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + h))), vzp);
          const __m256i b = _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + h))), vzp);
          // Interleave within 128-bit lanes, then put the halves in order.
          const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
          _mm256_store_si256(reinterpret_cast<__m256i*>(d + 2 * h), _mm256_permute2x128_si256(lo, hi, 0x20));
          _mm256_store_si256(reinterpret_cast<__m256i*>(d + 2 * h + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
        }
      } else {
        for (int32_t k = 0; k < kTile; ++k) {
          d[2 * k] = int16_t(k < np ? int32_t(s0[k]) - zp : 0);
          d[2 * k + 1] = int16_t(k < np && s1 ? int32_t(s1[k]) - zp : 0);
        }
      }
    }
    for (int32_t j = 0; j < no; j += 2) {
      const int32_t local0 = o0 + j - L.oc_base;
      const bool two = j + 1 < no;
      const int32_t local1 = two ? local0 + 1 : local0;
      const int8_t* w0 = L.weights + int64_t(local0) * cin;
      const int8_t* w1 = L.weights + int64_t(local1) * cin;
      const __m256i b0 = _mm256_set1_epi32(L.bias ? L.bias[local0] : 0);
      const __m256i b1 = _mm256_set1_epi32(L.bias ? L.bias[local1] : 0);
      __m256i a00 = b0, a01 = b0, a02 = b0, a03 = b0, a10 = b1, a11 = b1, a12 = b1, a13 = b1;
      for (int32_t g = 0; g < ng; ++g) {
        const __m256i* x = reinterpret_cast<const __m256i*>(xp + int64_t(g) * kTile * 2);
        const __m256i x0 = _mm256_load_si256(x), x1 = _mm256_load_si256(x + 1), x2 = _mm256_load_si256(x + 2),
                      x3 = _mm256_load_si256(x + 3);
        const __m256i u = _mm256_set1_epi32(wpair(w0, g, cin)), s = _mm256_set1_epi32(wpair(w1, g, cin));
        a00 = _mm256_add_epi32(a00, _mm256_madd_epi16(x0, u));
        a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(x1, u));
        a02 = _mm256_add_epi32(a02, _mm256_madd_epi16(x2, u));
        a03 = _mm256_add_epi32(a03, _mm256_madd_epi16(x3, u));
        a10 = _mm256_add_epi32(a10, _mm256_madd_epi16(x0, s));
        a11 = _mm256_add_epi32(a11, _mm256_madd_epi16(x1, s));
        a12 = _mm256_add_epi32(a12, _mm256_madd_epi16(x2, s));
        a13 = _mm256_add_epi32(a13, _mm256_madd_epi16(x3, s));
      }
      __m256i* A0 = reinterpret_cast<__m256i*>(acc[0]);
      __m256i* A1 = reinterpret_cast<__m256i*>(acc[1]);
      _mm256_store_si256(A0, a00); _mm256_store_si256(A0 + 1, a01); _mm256_store_si256(A0 + 2, a02); _mm256_store_si256(A0 + 3, a03);
      _mm256_store_si256(A1, a10); _mm256_store_si256(A1 + 1, a11); _mm256_store_si256(A1 + 2, a12); _mm256_store_si256(A1 + 3, a13);
      const Requant r0(L.mult[local0], L.shift[local0], L.out_zp, L.act_min, L.act_max);
      requant_row_avx2(acc[0], np, r0, out + int64_t(j) * cstride + t);
      if (two) {
        const Requant r1(L.mult[local1], L.shift[local1], L.out_zp, L.act_min, L.act_max);
        requant_row_avx2(acc[1], np, r1, out + int64_t(j + 1) * cstride + t);
      }
    }
  }
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

const KernelTable kAvx2Kernels = {"avx2", requant_row_avx2, pointwise, conv_ch, conv_ch_flat, add_row_avx2, gemm, nullptr};

}  // namespace x86
}  // namespace core
}  // namespace ts
