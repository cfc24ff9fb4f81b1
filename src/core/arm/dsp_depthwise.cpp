// Depthwise 3x3 for the Cortex-M7 DSP table (docs/kernels.md, "Cortex-M7
// kernels"): channel multiplier 1, dilation 1, strides 1-2, any padding.
//
// A call computes channels [c0, c1) over a span of the output plane: a run
// of plane positions (conv_block, conv_channel: whole rows with a partial
// first and last row, or part of one row) or a box narrower than the plane
// (conv_box, which compute_box calls instead of going row by row). The
// input rows and columns the span reads go into a frame whose bytes outside
// the image hold the zero point, so that every output reads 3 full kernel
// rows and a padded tap adds (zp - zp) * w = 0; the zero point comes out
// once (the sums start at bias - zp * (sum of the 9 weights)) and the loop
// multiplies raw inputs. The frame's padding is the same for every channel:
// it is written once per block of rows, and a channel copies only its image
// bytes. So what a channel sets up (weights, requantiser, framed rows) is
// paid once per call, not once per output row: on narrow maps (7x7 and 4x4
// planes, boxes of a few columns, bands of a few positions) that set-up is
// most of the work.
//
// Outputs go in pairs: per kernel row, one word load, two SXTB16, and for
// each output one SMLAD (taps 0 and 2) plus one SMLAxy (tap 1); stride 2
// loads the fifth byte separately. Weights are doubled and the sums
// requantised doubled (Rq2) where that applies.

// Short fill and copy loops stay loops: GCC would turn them into memset /
// memcpy calls, which newlib-nano does byte by byte after a call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "core/arm/dsp_internal.h"

namespace ts {
namespace core {
namespace arm {
namespace dspk {

namespace {

constexpr int32_t kFrame = 6144;  // bytes of framed input rows (stack)
constexpr int32_t kAcc = 1024;    // sums of a block of outputs (stack)

// Bytes per frame row for spans bw outputs wide: the columns the outputs
// read, (bw - 1) * sw + 3, and what the pair loop reads past a last odd
// output (2 bytes), to a word.
int32_t frame_width(int32_t bw, int32_t sw) { return ((bw - 1) * sw + 5 + 3) & ~3; }

// n bytes (any alignment): words, the last one overlapping the one before
// when n is not a multiple of 4 (no byte loop), bytes when n < 4.
TS_DSP_INLINE void copy_bytes(int8_t* d, const int8_t* s, int32_t n) {
  if (n < 4) {
    for (int32_t k = 0; k < n; ++k) d[k] = s[k];
    return;
  }
  for (int32_t k = 0; k + 4 < n; k += 4) st32(d + k, ld32(s + k));
  st32(d + n - 4, ld32(s + n - 4));
}

// n bytes of word (n a multiple of 4).
TS_DSP_INLINE void fill_words(int8_t* d, uint32_t word, int32_t n) {
  for (int32_t k = 0; k < n; k += 4) st32(d + k, word);
}

// Pairs of outputs over padded rows r, r + Wp, r + 2 Wp: acc[2j], acc[2j+1]
// for the pair starting at column 2j (input column 2j * SW of r). The middle
// weights of rows 0 and 1 share a register (b01), row 2's is in b2.
template <int SW>
TS_DSP_INLINE void dw_pairs3(const int8_t* r, int32_t Wp, int32_t npairs, const uint32_t* w02, uint32_t b01, uint32_t b2,
               int32_t base, int32_t* acc) {
  const uint32_t a0 = w02[0], a1 = w02[1], a2 = w02[2];
  const int8_t* r1 = r + Wp;
  const int8_t* r2 = r + 2 * Wp;
  for (int32_t* const end = acc + 2 * npairs; acc != end; r += 2 * SW, r1 += 2 * SW, r2 += 2 * SW, acc += 2) {
    const uint32_t q0 = ld32(r), q1 = ld32(r1), q2 = ld32(r2);
    const uint32_t e0 = sxtb16(q0), d0 = sxtb16_ror8(q0);  // (x0, x2), (x1, x3) of row 0
    const uint32_t e1 = sxtb16(q1), d1 = sxtb16_ror8(q1);
    const uint32_t e2 = sxtb16(q2), d2 = sxtb16_ror8(q2);
    int32_t s0 = smlad(e0, a0, base);
    s0 = smlabb(d0, b01, s0);
    s0 = smlad(e1, a1, s0);
    s0 = smlabt(d1, b01, s0);
    s0 = smlad(e2, a2, s0);
    s0 = smlabb(d2, b2, s0);
    int32_t s1;
    if (SW == 1) {
      s1 = smlad(d0, a0, base);  // x1*w0 + x3*w2
      s1 = smlatb(e0, b01, s1);  // x2*w1
      s1 = smlad(d1, a1, s1);
      s1 = smlatt(e1, b01, s1);
      s1 = smlad(d2, a2, s1);
      s1 = smlatb(e2, b2, s1);
    } else {
      s1 = smlatb(e0, a0, base);                     // x2*w0
      s1 = smlatb(d0, b01, s1);                      // x3*w1
      s1 = smlabt(uint32_t(int32_t(r[4])), a0, s1);  // x4*w2
      s1 = smlatb(e1, a1, s1);
      s1 = smlatt(d1, b01, s1);
      s1 = smlabt(uint32_t(int32_t(r1[4])), a1, s1);
      s1 = smlatb(e2, a2, s1);
      s1 = smlatb(d2, b2, s1);
      s1 = smlabt(uint32_t(int32_t(r2[4])), a2, s1);
    }
    acc[0] = s0;
    acc[1] = s1;
  }
}

// Depthwise weights of channel o as dw_pairs3 takes them, doubled when the
// requantiser of doubled sums rq applies (*dbl: rq.ok and |bias| <= 2^29,
// which keeps |sum| <= |bias| + 9 * 255 * 128 under 2^30); returns the
// sums' start, bias - zp * (sum of the 9 weights), doubled likewise.
TS_DSP_INLINE int32_t dw_weights(const LayerDesc& L, int32_t o, const Rq2& rq, uint32_t* w02, uint32_t* b01,
                                 uint32_t* b2, bool* dbl) {
  const int32_t local = o - L.oc_base;
  const int8_t* w = L.weights + int64_t(local) * 9;
  const int32_t bias = L.bias ? L.bias[local] : 0;
  *dbl = rq.ok && bias >= -(int32_t(1) << 29) && bias <= (int32_t(1) << 29);
  const uint32_t q0 = ld32(w), q1 = ld32(w + 4);  // w0..w3, w4..w7
  const uint32_t e0 = sxtb16(q0), d0 = sxtb16_ror8(q0), e1 = sxtb16(q1), d1 = sxtb16_ror8(q1);
  const int32_t w8 = w[8];
  // (w0, w2), (w3, w5), (w6, w8); (w1, w4); (w7, 0); halfword-wise doubled.
  const uint32_t p[5] = {e0, pack16(hi16(d0), lo16(d1)), pack16(hi16(e1), w8), pack16(lo16(d0), lo16(e1)),
                         pack16(hi16(d1), 0)};
  w02[0] = *dbl ? sadd16(p[0], p[0]) : p[0];
  w02[1] = *dbl ? sadd16(p[1], p[1]) : p[1];
  w02[2] = *dbl ? sadd16(p[2], p[2]) : p[2];
  *b01 = *dbl ? sadd16(p[3], p[3]) : p[3];
  *b2 = *dbl ? sadd16(p[4], p[4]) : p[4];
  const uint32_t ones = 0x00010001u;  // the sum of the 9 weights: 4 SMLAD of halfword pairs and w8
  const int32_t wsum = smlad(e0, ones, smlad(d0, ones, smlad(e1, ones, smlad(d1, ones, w8))));
  const uint32_t b = uint32_t(bias) - uint32_t(L.in_zp[0] * wsum);
  return int32_t(*dbl ? 2 * b : b);
}

// The requantiser of doubled sums of channel o.
TS_DSP_INLINE Rq2 dw_rq2(const LayerDesc& L, int32_t o) {
  const int32_t local = o - L.oc_base;
  return Rq2(L.mult[local], L.shift[local], L.out_zp);
}

// The outputs of one call over rows [y0, y1) of the output plane: row y0
// from column xs, row y1 - 1 up to column xe (exclusive), every row between
// (and those two, on their other side) over columns [x0, x1); in that
// order, contiguous per channel. A run of plane positions is such a span
// (x0 = 0, x1 = the plane's width, or the run itself when it lies in one
// row); so is a box (xs = x0, xe = x1).
struct DwSpan {
  int32_t y0 = 0, y1 = 0, x0 = 0, x1 = 0, xs = 0, xe = 0;
};


// Output rows [by, ey) of a span, whose inputs start at input row iy0
// (frame row 0); the image's bytes are frame rows [i0, i1) x columns
// [lo, hi), at input column ix0 + lo. Fw: bytes per frame row.
struct Block {
  int32_t by, ey, iy0, i0, i1, ix0, lo, hi, Fw;
};

// Outputs of span s in block k.
int32_t block_outputs(const DwSpan& s, const Block& k) {
  const int32_t cut_left = k.by == s.y0 ? s.xs - s.x0 : 0, cut_right = k.ey == s.y1 ? s.x1 - s.xe : 0;
  return (k.ey - k.by) * (s.x1 - s.x0) - cut_left - cut_right;
}

// Channels [c0, c1) over block k of span s, the frame's padding in place.
// Per channel: its image bytes into the frame, weights and requantiser,
// the pairs of the block's first row (from xa0), middle rows and last row
// (to xb1), one requantisation of the block's sums.
template <int SW>
void span_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, const DwSpan& s, const Block& k,
                int8_t* fr, int32_t* acc, int8_t* out, int64_t cstride) {
  const int32_t Win = L.in[0].w, Fw = k.Fw, m = k.hi - k.lo, bw = s.x1 - s.x0;
  const int32_t xa0 = k.by == s.y0 ? s.xs : s.x0;
  const int32_t xb1 = k.ey == s.y1 ? s.xe : s.x1;
  const int32_t n = block_outputs(s, k);
  const int32_t nrows = k.ey - k.by, step = L.sh * Fw;
  const int32_t n_first = nrows == 1 ? n : s.x1 - xa0, n_last = xb1 - s.x0;
  const int8_t* const r_first = fr + (xa0 - s.x0) * SW;
  const int32_t rows = k.i1 - k.i0;
  const bool image = m > 0 && rows > 0;  // some of the frame is in the image
  const int32_t plane = image ? v.nh * Win : 0;  // a channel's rows in the window
  const int8_t* src0 = image ? row_ptr(v, Win, c0, k.iy0 + k.i0) + k.ix0 + k.lo : v.data;
  int8_t* const dst0 = fr + k.i0 * Fw + k.lo;
  for (int32_t c = c0; c < c1; ++c, src0 += plane, out += cstride) {
    if (image) {
      const int8_t* src = src0;
      int8_t* dst = dst0;
      for (int32_t i = 0; i < rows; ++i, src += Win, dst += Fw) copy_bytes(dst, src, m);
    }
    const Rq2 rq = dw_rq2(L, c);
    uint32_t w02[3], b01, b2;
    bool dbl;
    const int32_t base = dw_weights(L, c, rq, w02, &b01, &b2, &dbl);
    // A row's last pair may write one sum past the row: the next row's
    // first, computed after it, or acc's spare slots.
    dw_pairs3<SW>(r_first, Fw, (n_first + 1) / 2, w02, b01, b2, base, acc);
    int32_t* a = acc + n_first;
    const int8_t* r = fr + step;
    for (int32_t j = 1; j < nrows; ++j, r += step, a += bw)
      dw_pairs3<SW>(r, Fw, ((j + 1 < nrows ? bw : n_last) + 1) / 2, w02, b01, b2, base, a);
    if (dbl)
      requant2_n(acc, n, rq, L.act_min, L.act_max, out);
    else
      requant_n(acc, n, channel_rq(L, c), out);
  }
}

// Channels [c0, c1) over span s: blocks of rows as many as the frame and
// the sums hold.
void dw3x3_span(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, const DwSpan& s, int8_t* out,
                int64_t cstride) {
  const Dims& X = L.in[0];
  const int32_t sw = L.sw, sh = L.sh, bw = s.x1 - s.x0;
  int8_t fr[kFrame];
  int32_t acc[kAcc + 2];
  Block k;
  k.Fw = frame_width(bw, sw);
  const int32_t rows_max = mini((kFrame / k.Fw - 3) / sh + 1, kAcc / bw);
  k.ix0 = s.x0 * sw - L.pad_l;
  k.lo = maxi(0, -k.ix0);
  k.hi = mini((bw - 1) * sw + 3, X.w - k.ix0);
  const uint32_t zz = splat8(L.in_zp[0]);
  int32_t done = 0;  // outputs of the span before the block
  for (k.by = s.y0; k.by < s.y1; k.by = k.ey) {
    k.ey = mini(s.y1, k.by + rows_max);
    k.iy0 = k.by * sh - L.pad_t;
    const int32_t nrows = (k.ey - 1 - k.by) * sh + 3;
    k.i0 = maxi(0, -k.iy0);
    k.i1 = mini(nrows, X.h - k.iy0);
    fill_words(fr, zz, nrows * k.Fw);
    if (sw == 1)
      span_block<1>(L, v, c0, c1, s, k, fr, acc, out + done, cstride);
    else
      span_block<2>(L, v, c0, c1, s, k, fr, acc, out + done, cstride);
    done += block_outputs(s, k);
  }
}

}  // namespace

bool dw3x3_ok(const LayerDesc& L) {
  return L.groups == L.in[0].c && L.out.c == L.in[0].c && L.kh == 3 && L.kw == 3 && L.dh == 1 && L.dw == 1 &&
         (L.sw == 1 || L.sw == 2) && L.sh >= 1 && L.sh <= 2 && L.pad_l >= 0 && L.pad_t >= 0 &&
         frame_width(L.out.w, L.sw) * 4 <= kFrame && L.out.w <= kAcc;
}

void dw3x3_block(const LayerDesc& L, const View& v, int32_t c0, int32_t c1, int32_t p0, int32_t p1, int8_t* out,
                 int64_t cstride) {
  const int32_t W = L.out.w;
  DwSpan s;
  s.y0 = p0 / W;
  s.y1 = (p1 - 1) / W + 1;
  s.xs = p0 % W;
  s.xe = (p1 - 1) % W + 1;
  s.x0 = s.y1 - s.y0 == 1 ? s.xs : 0;  // a run within one row frames only its columns
  s.x1 = s.y1 - s.y0 == 1 ? s.xe : W;
  ++dw_calls.runs;
  dw3x3_span(L, v, c0, c1, s, out, cstride);
}

bool conv_box(const LayerDesc& L, const View& v, const OutBox& b, int8_t* out) {
  if (!dw3x3_ok(L)) return false;
  DwSpan s;
  s.y0 = b.y0;
  s.y1 = b.y1;
  s.x0 = s.xs = b.x0;
  s.x1 = s.xe = b.x1;
  ++dw_calls.boxes;
  dw3x3_span(L, v, b.c0, b.c1, s, out, int64_t(b.y1 - b.y0) * (b.x1 - b.x0));
  return true;
}

}  // namespace dspk

DwCalls dw_calls;

}  // namespace arm
}  // namespace core
}  // namespace ts
