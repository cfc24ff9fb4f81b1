// Cortex-M7 pointwise kernels with the DSP extension (docs/kernels.md,
// "Cortex-M7 kernels"): 1x1 convolutions as register-blocked matrix
// products, with the weights widened on the fly (pointwise_chunks) or
// widened once into a buffer and doubled (pointwise_pre), and the tile loop
// the first convolution shares (pw_pre_channel). Bit-exact with the
// portable table, as everything in src/core/arm/dsp.cpp.

// Short fill and copy loops stay loops (see dsp.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "core/arm/dsp_internal.h"

namespace ts {
namespace core {
namespace arm {
namespace dspk {

namespace {

// ------------------------------------------------------------------ pointwise
//
// Output channels [o0, o0+no) of one group, positions [p0, p1): for blocks
// of kOcBlock channels (requantisers built once per block), for tiles of 4
// positions, the tile's activations are widened into xt once (4 words of
// input per 4 channels, SXTB16 + PKHBT/PKHTB + SSUB16) and every channel of
// the block runs dotn over them. Inputs deeper than kCinChunk channels are
// taken in chunks, the partial sums kept in acc.
constexpr int32_t kCinChunk = 1024;  // xt: 8 KiB of stack

// Channels [c, c + nc) (nc a multiple of 4) at positions [p, p + np) of a
// full-width view into xt; positions np..3 are zero.
// Sub = false: raw inputs (the zero point goes into the sums' start).
template <bool Sub = true>
void pw_widen(const View& v, int32_t W, int32_t c, int32_t nc, int32_t p, int32_t np, int32_t zp, uint32_t* xt) {
  if (!Sub) zp = 0;
  const int64_t plane = int64_t(v.nh) * W;
  const int64_t at = int64_t(c - v.c0) * plane + (p - int64_t(v.h0) * W);
  const int8_t* s = v.data + at;
  // A partial tile may load 4 bytes anyway when they stay inside the view
  // (the extra positions' lanes are never read: dotn<np>).
  if (np == kTile || at + int64_t(nc - 1) * plane + 4 <= int64_t(v.nc) * plane) {
    const uint32_t zz = pack16(zp, zp);
    for (int32_t g = 0; g < nc / 4; ++g, s += 4 * plane, xt += 8) {
      const uint32_t A = ld32(s), B = ld32(s + plane), C = ld32(s + 2 * plane), D = ld32(s + 3 * plane);
      const uint32_t ae = sxtb16(A), ao = sxtb16_ror8(A), ce = sxtb16(C), co = sxtb16_ror8(C);
      const uint32_t be = sxtb16(B), bo = sxtb16_ror8(B), de = sxtb16(D), dof = sxtb16_ror8(D);
      if (Sub) {
        xt[0] = ssub16(pkhbt(ae, ce), zz);
        xt[1] = ssub16(pkhbt(be, de), zz);
        xt[2] = ssub16(pkhbt(ao, co), zz);
        xt[3] = ssub16(pkhbt(bo, dof), zz);
        xt[4] = ssub16(pkhtb(ae, ce), zz);
        xt[5] = ssub16(pkhtb(be, de), zz);
        xt[6] = ssub16(pkhtb(ao, co), zz);
        xt[7] = ssub16(pkhtb(bo, dof), zz);
      } else {
        xt[0] = pkhbt(ae, ce);
        xt[1] = pkhbt(be, de);
        xt[2] = pkhbt(ao, co);
        xt[3] = pkhbt(bo, dof);
        xt[4] = pkhtb(ae, ce);
        xt[5] = pkhtb(be, de);
        xt[6] = pkhtb(ao, co);
        xt[7] = pkhtb(bo, dof);
      }
    }
    return;
  }
  for (int32_t g = 0; g < nc / 4; ++g, s += 4 * plane, xt += 8) {
    for (int32_t k = 0; k < kTile; ++k) {
      int32_t x[4] = {0, 0, 0, 0};
      if (k < np)
        for (int32_t r = 0; r < 4; ++r) x[r] = int32_t(s[r * plane + k]) - zp;
      xt[2 * k] = pack16(x[0], x[2]);
      xt[2 * k + 1] = pack16(x[1], x[3]);
    }
  }
}

// nt whole tiles (positions [p, p + 4 nt)) at once: the address worked out
// once, 4 channels x 4 positions per step (4 loads, 8 SXTB16, 8 PKHBT/PKHTB,
// 8 stores; Sub: 8 SSUB16 more).
template <bool Sub>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pw_widen_tiles(const View& v, int32_t W, int32_t c, int32_t nc, int32_t p, int32_t nt, int32_t zp,
                    uint32_t* xt) {
  const int32_t plane = v.nh * W;
  const int8_t* s0 = v.data + int64_t(c - v.c0) * plane + (p - v.h0 * W);
  const uint32_t zz = pack16(zp, zp);
  const int32_t ng = nc / 4;
  for (int32_t k = 0; k < nt; ++k, s0 += kTile) {
    const int8_t* s = s0;
    uint32_t* x = xt + k * 2 * nc;
    for (int32_t g = 0; g < ng; ++g, s += 4 * plane, x += 8) {
      const uint32_t A = ld32(s), B = ld32(s + plane), C = ld32(s + 2 * plane), D = ld32(s + 3 * plane);
      const uint32_t ae = sxtb16(A), ao = sxtb16_ror8(A), ce = sxtb16(C), co = sxtb16_ror8(C);
      const uint32_t be = sxtb16(B), bo = sxtb16_ror8(B), de = sxtb16(D), dof = sxtb16_ror8(D);
      x[0] = Sub ? ssub16(pkhbt(ae, ce), zz) : pkhbt(ae, ce);
      x[1] = Sub ? ssub16(pkhbt(be, de), zz) : pkhbt(be, de);
      x[2] = Sub ? ssub16(pkhbt(ao, co), zz) : pkhbt(ao, co);
      x[3] = Sub ? ssub16(pkhbt(bo, dof), zz) : pkhbt(bo, dof);
      x[4] = Sub ? ssub16(pkhtb(ae, ce), zz) : pkhtb(ae, ce);
      x[5] = Sub ? ssub16(pkhtb(be, de), zz) : pkhtb(be, de);
      x[6] = Sub ? ssub16(pkhtb(ao, co), zz) : pkhtb(ao, co);
      x[7] = Sub ? ssub16(pkhtb(bo, dof), zz) : pkhtb(bo, dof);
    }
  }
}

// One output channel over `nt` whole tiles of widened positions (tile k at
// xt + k * tw): bias, dot product and requantisation per tile with the
// channel's requantiser, weights pointer and bias held across the tiles.
template <bool Z>
void pw_channel_tiles(const uint32_t* xt, int32_t tw, int32_t nt, const int8_t* w, int32_t ng, int32_t bias,
                      const FastRq& rq, int8_t* out) {
  for (int32_t k = 0; k < nt; ++k, xt += tw, out += kTile) {
    int32_t a[kTile] = {bias, bias, bias, bias};
    dotn<4>(xt, w, ng, a);
    requant4<Z>(a, kTile, rq, out);
  }
}

// The same with the requantiser of doubled sums on 2 * acc (|acc| < 2^30:
// |bias| <= 2^29 and at most 1,024 input channels), then the rest positions.
template <bool Full>
void pw_channel_tiles2(const uint32_t* xt, int32_t tw, int32_t nt, int32_t rest, const int8_t* w, int32_t ng,
                       int32_t bias, const Rq2& rq, int32_t lo, int32_t hi, int8_t* out) {
  const uint32_t lo4 = splat8(lo), hi4 = splat8(hi);
  for (int32_t k = 0; k < nt; ++k, xt += tw, out += kTile) {
    int32_t a[kTile] = {bias, bias, bias, bias};
    dotn<4>(xt, w, ng, a);
    const uint32_t word = pack4(rq(2 * a[0]), rq(2 * a[1]), rq(2 * a[2]), rq(2 * a[3]));
    st32(out, Full ? word : min8(max8(word, lo4), hi4));
  }
  if (rest) {
    int32_t a[kTile] = {bias, bias, bias, bias};
    dot_np(rest, xt, w, ng, a);
    for (int32_t k = 0; k < rest; ++k) {
      const int32_t q = rq(2 * a[k]);
      out[k] = int8_t(q < lo ? lo : (q > hi ? hi : q));
    }
  }
}

// Inputs of at most kXtWords / 2 channels: positions are taken in chunks of
// as many tiles as xt holds (256 positions at 16 channels, 4 at 1024), the
// chunk widened once, then every output channel runs over all its tiles.
// Per channel and chunk the requantiser is built once; per tile what is
// left besides the dot product is the requantisation of 4 values into one
// word (about 7 instructions per output).
constexpr int32_t kXtWords = 2 * kCinChunk;

#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pointwise_chunks(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1,
                      int8_t* out, int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  const int32_t n = p1 - p0;
  const int32_t tw = 2 * cin;  // words of xt per tile
  const int32_t chunk = (kXtWords / tw) * kTile;
  uint32_t xt[kXtWords];
  for (int32_t c0 = 0; c0 < n; c0 += chunk) {
    const int32_t nc = mini(chunk, n - c0);
    const int32_t nt = nc / kTile, rest = nc % kTile;
    pw_widen_tiles<true>(v, W, ci0, cin, p0 + c0, nt, zp, xt);
    if (rest) pw_widen(v, W, ci0, cin, p0 + c0 + nt * kTile, rest, zp, xt + nt * tw);
    const int8_t* wj = L.weights + int64_t(o0 - L.oc_base) * cin;
    int8_t* oj = out + c0;
    for (int32_t j = 0; j < no; ++j, wj += cin, oj += cstride) {
      const int32_t local = o0 + j - L.oc_base;
      const int32_t bias = L.bias ? L.bias[local] : 0;
      const Rq2 r2(L.mult[local], L.shift[local], L.out_zp);
      if (r2.ok && bias >= -(int32_t(1) << 29) && bias <= (int32_t(1) << 29)) {
        if (L.act_min <= -128 && L.act_max >= 127)
          pw_channel_tiles2<true>(xt, tw, nt, rest, wj, cin / 4, bias, r2, L.act_min, L.act_max, oj);
        else
          pw_channel_tiles2<false>(xt, tw, nt, rest, wj, cin / 4, bias, r2, L.act_min, L.act_max, oj);
        continue;
      }
      const FastRq rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
      if (rq.zfold) {
        pw_channel_tiles<true>(xt, tw, nt, wj, cin / 4, bias, rq, oj);
      } else if (rq.ok) {
        pw_channel_tiles<false>(xt, tw, nt, wj, cin / 4, bias, rq, oj);
      } else {
        for (int32_t k = 0; k < nt; ++k) {
          int32_t a[kTile] = {bias, bias, bias, bias};
          dotn<4>(xt + k * tw, wj, cin / 4, a);
          requant_n(a, kTile, rq, oj + k * kTile);
        }
      }
      if (rest) {
        int32_t a[kTile] = {bias, bias, bias, bias};
        dot_np(rest, xt + nt * tw, wj, cin / 4, a);
        requant_n(a, rest, rq, oj + nt * kTile);
      }
    }
  }
}

// The weights of one output channel (4 * ng bytes) into d: d[2g] = (w(4g),
// w(4g+2)), d[2g+1] = (w(4g+1), w(4g+3)), doubled when dbl. Returns
// zp * sum(w).
int32_t pw_widen_weights(const int8_t* w, int32_t ng, uint32_t zz, bool dbl, uint32_t* d) {
  int32_t s = 0;
  for (int32_t g = 0; g < ng; ++g, w += 4, d += 2) {
    const uint32_t q = ld32(w);
    uint32_t e = sxtb16(q), o = sxtb16_ror8(q);
    s = smlad(e, zz, s);
    s = smlad(o, zz, s);
    if (dbl) e = sadd16(e, e), o = sadd16(o, o);
    d[0] = e;
    d[1] = o;
  }
  return s;
}

// One group of 4 channels: activations at word offset G of x, widened
// weights at word offset WO of wv; positions k < N.
#define TS_DOTW_GROUP(G, WO) \
  do {                       \
    uint32_t we, wo;         \
    ld2<WO>(wv, &we, &wo);   \
    TS_DOT_POSITIONS(G);     \
  } while (0)

// acc[k] += the dot product of position k of xt with the widened weights
// wv (ng groups), k < N.
template <int N>
TS_DSP_INLINE void dotw(const uint32_t* xt, const uint32_t* wv, int32_t ng, int32_t* acc) {
  int32_t a0 = acc[0], a1 = N > 1 ? acc[1] : 0, a2 = N > 2 ? acc[2] : 0, a3 = N > 3 ? acc[3] : 0;
  const uint32_t* x = xt;
  const uint32_t* const end2 = xt + 8 * (ng & ~1);
  for (; x != end2; x += 16, wv += 4) {
    TS_DOTW_GROUP(0, 0);
    TS_DOTW_GROUP(8, 2);
  }
  if (ng & 1) TS_DOTW_GROUP(0, 0);
  acc[0] = a0;
  if (N > 1) acc[1] = a1;
  if (N > 2) acc[2] = a2;
  if (N > 3) acc[3] = a3;
}
#undef TS_DOTW_GROUP

TS_DSP_INLINE void dotw_np(int32_t np, const uint32_t* xt, const uint32_t* wv, int32_t ng, int32_t* acc) {
  switch (np) {
    case 4: return dotw<4>(xt, wv, ng, acc);
    case 3: return dotw<3>(xt, wv, ng, acc);
    case 2: return dotw<2>(xt, wv, ng, acc);
    default: return dotw<1>(xt, wv, ng, acc);
  }
}

// Groups G..NG-1 of a tile of 4 positions, unrolled (offsets are
// immediates: no loop, no pointer updates).
template <int G, int NG>
struct DotTile {
  static TS_DSP_INLINE void run(const uint32_t* x, const uint32_t* wv, int32_t& a0, int32_t& a1, int32_t& a2,
                                int32_t& a3) {
    uint32_t we, wo, e, o;
    ld2<2 * G>(wv, &we, &wo);
    ld2<8 * G>(x, &e, &o);
    a0 = smlad(o, wo, smlad(e, we, a0));
    ld2<8 * G + 2>(x, &e, &o);
    a1 = smlad(o, wo, smlad(e, we, a1));
    ld2<8 * G + 4>(x, &e, &o);
    a2 = smlad(o, wo, smlad(e, we, a2));
    ld2<8 * G + 6>(x, &e, &o);
    a3 = smlad(o, wo, smlad(e, we, a3));
    DotTile<G + 1, NG>::run(x, wv, a0, a1, a2, a3);
  }
};
template <int NG>
struct DotTile<NG, NG> {
  static TS_DSP_INLINE void run(const uint32_t*, const uint32_t*, int32_t&, int32_t&, int32_t&, int32_t&) {}
};

// One output channel with doubled weights over nt whole tiles of xt (tile k
// at xt + k * tw), 4 outputs per word; Full: no clamp besides SSAT. NG > 0:
// ng = NG, the tile's groups unrolled.
template <bool Full, int NG>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pw_pre_tiles(const uint32_t* xt, int32_t tw, int32_t nt, const uint32_t* wv, int32_t ng, int32_t base,
                  const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  const uint32_t* const end = xt + nt * tw;
  for (; xt != end; xt += (NG ? 8 * NG : tw), out += kTile) {
    int32_t a0 = base, a1 = base, a2 = base, a3 = base;
    if (NG) {
      DotTile<0, NG>::run(xt, wv, a0, a1, a2, a3);
    } else {  // 4 groups per pass, then one at a time
      const uint32_t* x = xt;
      const uint32_t* w = wv;
      const uint32_t* const end4 = xt + 8 * (ng & ~3);
      for (; x != end4; x += 32, w += 8) DotTile<0, 4>::run(x, w, a0, a1, a2, a3);
      for (; x != xt + 8 * ng; x += 8, w += 2) DotTile<0, 1>::run(x, w, a0, a1, a2, a3);
    }
    const uint32_t word = pack4(rq(a0), rq(a1), rq(a2), rq(a3));
    st32(out, Full ? word : min8(max8(word, lo4), hi4));
  }
}

template <bool Full>
void pw_pre_tiles_any(const uint32_t* xt, int32_t tw, int32_t nt, const uint32_t* wv, int32_t ng, int32_t base,
                      const Rq2& rq, uint32_t lo4, uint32_t hi4, int8_t* out) {
  switch (ng) {
    case 4: return pw_pre_tiles<Full, 4>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 6: return pw_pre_tiles<Full, 6>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 8: return pw_pre_tiles<Full, 8>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
    case 9: return pw_pre_tiles<Full, 9>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);  // 3x3 over 3 channels
    default: return pw_pre_tiles<Full, 0>(xt, tw, nt, wv, ng, base, rq, lo4, hi4, out);
  }
}

// The weights of output channels [o, o + nb) widened into wb, with their
// sums' start and whether they are doubled.
void pw_pre_weights(const LayerDesc& L, int32_t o, int32_t nb, int32_t cin, uint32_t* wb, int32_t* base, bool* dbl) {
  const int32_t ng = cin / 4;
  const int32_t zp = L.in_zp[0];
  for (int32_t j = 0; j < nb; ++j) {
    const int32_t local = o + j - L.oc_base;
    const int32_t bias = L.bias ? L.bias[local] : 0;
    dbl[j] = Rq2(L.mult[local], L.shift[local], L.out_zp).ok && bias >= -(int32_t(1) << 29) &&
             bias <= (int32_t(1) << 29);
    const int32_t s = pw_widen_weights(L.weights + int64_t(local) * cin, ng, pack16(zp, zp), dbl[j], wb + j * 2 * ng);
    const uint32_t b = uint32_t(bias) - uint32_t(s);  // bias - zp * sum(w), modulo 2^32
    base[j] = int32_t(dbl[j] ? 2 * b : b);
  }
}

// Positions [p, p + np) of a full-width view, raw, into xt (tiles of 4).
void pw_pre_acts(const View& v, int32_t W, int32_t ci0, int32_t cin, int32_t p, int32_t np, uint32_t* xt) {
  const int32_t nt = np / kTile, rest = np % kTile;
  pw_widen_tiles<false>(v, W, ci0, cin, p, nt, 0, xt);
  if (rest) pw_widen<false>(v, W, ci0, cin, p + nt * kTile, rest, 0, xt + nt * 2 * cin);
}

// Whether widening the weights pays for a call of no output channels at n
// positions: estimates (instructions, from the inner loops' counts) of this
// path and of pointwise_chunks (weights widened on the fly, about 2 more per
// 4 input channels and 4 positions, and a longer requantisation). Calls of
// a few positions (a row of a 7x7 plane) do not repay the widening.
bool pre_pays(int32_t cin, int32_t no, int32_t n) {
  const int64_t ng = cin / 4, nt = (n + kTile - 1) / kTile;
  const PreSizes z(2 * cin, cin / 4, no);
  const int64_t chunk = z.chunk, blk = z.blk;
  const int64_t nchunks = (n + chunk - 1) / chunk, nblocks = (no + blk - 1) / blk;
  const int64_t weights = int64_t(no) * cin * 3, acts = int64_t(n) * cin * 8 / 5;
  const int64_t rewiden = nblocks == 1 ? 0 : (nchunks - 1) * weights < (nblocks - 1) * acts ? (nchunks - 1) * weights
                                                                                           : (nblocks - 1) * acts;
  const int64_t pre = no * nt * (ng * 13 + 20) + acts + weights + rewiden + nchunks * no * 40;
  const int64_t old = no * nt * (ng * 15 + 32) + int64_t(n) * cin * 2 + nchunks * no * 30;
  return pre < old;
}

// Positions are taken in chunks (as many tiles as xt holds), output channels
// in blocks (as many as wb holds); when the call's channels are more than one
// block, either the weights are widened again per chunk or the activations
// per block, whichever is fewer instructions (about 3 per weight, 1.6 per
// activation).
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void pointwise_pre(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
                   int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  const int32_t ng = cin / 4;
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t n = p1 - p0;
  const int32_t tw = 2 * cin;  // words of xt per tile
  const PreSizes z(tw, ng, no);
  const int32_t chunk = z.chunk, blk = z.blk;
  const int32_t nchunks = (n + chunk - 1) / chunk, nblocks = (no + blk - 1) / blk;
  // Blocks outside when widening the activations nblocks times costs less
  // than widening the weights nchunks times.
  const bool blocks_out = nblocks == 1 || int64_t(nblocks) * n * 8 < int64_t(nchunks) * no * 15;
  uint32_t buf[kPreWords];
  uint32_t* const wb = buf;
  uint32_t* const xt = buf + z.wb_words;
  int32_t base[kPreBlock];
  bool dbl[kPreBlock];
  const int32_t n_out = blocks_out ? nblocks : nchunks, n_in = blocks_out ? nchunks : nblocks;
  for (int32_t i = 0; i < n_out; ++i) {
    for (int32_t k = 0; k < n_in; ++k) {
      const int32_t b0 = (blocks_out ? i : k) * blk, c0 = (blocks_out ? k : i) * chunk;
      const int32_t nb = mini(blk, no - b0), nc = mini(chunk, n - c0);
      if (k == 0 || !blocks_out) pw_pre_weights(L, o0 + b0, nb, cin, wb, base, dbl);
      if (k == 0 || blocks_out) pw_pre_acts(v, W, ci0, cin, p0 + c0, nc, xt);
      for (int32_t j = 0; j < nb; ++j)
        pw_pre_channel(L, o0 + b0 + j, xt, tw, nc / kTile, nc % kTile, wb + j * 2 * ng, ng, base[j], dbl[j],
                       out + int64_t(b0 + j) * cstride + c0);
    }
  }
}

}  // namespace

// Channel j of a block: np positions of xt from tile t on, into out.
void pw_pre_channel(const LayerDesc& L, int32_t o, const uint32_t* xt, int32_t tw, int32_t nt, int32_t rest,
                    const uint32_t* wv, int32_t ng, int32_t base, bool dbl, int8_t* out) {
  const int32_t local = o - L.oc_base;
  const int32_t lo = L.act_min, hi = L.act_max;
  if (dbl) {
    const Rq2 rq(L.mult[local], L.shift[local], L.out_zp);
    if (lo <= -128 && hi >= 127)
      pw_pre_tiles_any<true>(xt, tw, nt, wv, ng, base, rq, 0, 0, out);
    else
      pw_pre_tiles_any<false>(xt, tw, nt, wv, ng, base, rq, splat8(lo), splat8(hi), out);
    if (rest) {
      int32_t a[kTile] = {base, base, base, base};
      dotw_np(rest, xt + nt * tw, wv, ng, a);
      for (int32_t k = 0; k < rest; ++k) {
        const int32_t q = rq(a[k]);
        out[nt * kTile + k] = int8_t(q < lo ? lo : (q > hi ? hi : q));
      }
    }
    return;
  }
  const Requant rq(L.mult[local], L.shift[local], L.out_zp, lo, hi);
  for (int32_t k = 0; k < nt; ++k) {
    int32_t a[kTile] = {base, base, base, base};
    dotw<4>(xt + k * tw, wv, ng, a);
    for (int32_t i = 0; i < kTile; ++i) out[k * kTile + i] = rq(a[i]);
  }
  if (rest) {
    int32_t a[kTile] = {base, base, base, base};
    dotw_np(rest, xt + nt * tw, wv, ng, a);
    for (int32_t k = 0; k < rest; ++k) out[nt * kTile + k] = rq(a[k]);
  }
}

void pointwise(const LayerDesc& L, const View& v, int32_t o0, int32_t no, int32_t p0, int32_t p1, int8_t* out,
               int64_t cstride) {
  const int32_t cin = L.in[0].c / L.groups;
  if (cin % 4 != 0) return portable_kernels().pointwise(L, v, o0, no, p0, p1, out, cstride);
  if (cin <= kPreMaxCin && pre_pays(cin, no, p1 - p0)) return pointwise_pre(L, v, o0, no, p0, p1, out, cstride);
  if (cin <= kXtWords / 2) return pointwise_chunks(L, v, o0, no, p0, p1, out, cstride);
  const int32_t W = L.out.w;
  const int32_t ci0 = (o0 / (L.out.c / L.groups)) * cin;
  const int32_t zp = L.in_zp[0];
  const int32_t n = p1 - p0;
  uint32_t xt[kCinChunk * 2];
  FastRq rq[kOcBlock];
  int32_t bias[kOcBlock];
  int32_t acc[kOcBlock][kTile];
  for (int32_t ob = 0; ob < no; ob += kOcBlock) {
    const int32_t nb = mini(kOcBlock, no - ob);
    for (int32_t j = 0; j < nb; ++j) rq[j] = channel_rq(L, o0 + ob + j);
    const int8_t* wb = L.weights + int64_t(o0 + ob - L.oc_base) * cin;
    for (int32_t j = 0; j < nb; ++j) bias[j] = L.bias ? L.bias[o0 + ob + j - L.oc_base] : 0;
    for (int32_t t = 0; t < n; t += kTile) {
      const int32_t np = mini(kTile, n - t);
      for (int32_t j = 0; j < nb; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = bias[j];
      for (int32_t cc = 0; cc < cin; cc += kCinChunk) {
        const int32_t nc = mini(kCinChunk, cin - cc);
        pw_widen(v, W, ci0 + cc, nc, p0 + t, np, zp, xt);
        for (int32_t j = 0; j < nb; ++j) dot_np(np, xt, wb + int64_t(j) * cin + cc, nc / 4, acc[j]);
      }
      for (int32_t j = 0; j < nb; ++j) requant_n(acc[j], np, rq[j], out + int64_t(ob + j) * cstride + t);
    }
  }
}

}  // namespace dspk
}  // namespace arm
}  // namespace core
}  // namespace ts
