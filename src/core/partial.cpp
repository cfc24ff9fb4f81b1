// Partial sums of input-channel shares (core/partial.h). Which ops have the
// variant, and the shape of their sums, is each op's (OpDef::partial); the
// arithmetic, common to all of them, is here.
#include "core/partial.h"

#include "core/op.h"
#include "core/requant.h"

namespace ts {
namespace core {

namespace {
const PartialForm* form_of(const LayerDesc& L) {
  const OpDef* op = op_def(L.op);
  return op ? op->partial : nullptr;
}
}  // namespace

bool partial_ok(const LayerDesc& L) {
  const PartialForm* f = form_of(L);
  return L.n_inputs == 1 && f && f->ok(L);
}

int32_t partial_positions(const LayerDesc& L) {
  const PartialForm* f = form_of(L);
  return f ? f->positions(L) : L.out.h * L.out.w;
}

int32_t partial_k_per_channel(const LayerDesc& L) {
  const PartialForm* f = form_of(L);
  return f ? f->k_per_channel(L) : 1;
}

bool partial_rows(const LayerDesc& L) {
  const PartialForm* f = form_of(L);
  return f && f->rows;
}

int32_t partial_extent(const LayerDesc& L) { return partial_rows(L) ? L.in[0].h : L.in[0].c; }

Box partial_window(const LayerDesc& L, int32_t i0, int32_t i1) {
  if (i1 <= i0) return Box{};
  return partial_rows(L) ? Box{0, L.in[0].c, i0, i1} : Box{i0, i1, 0, L.in[0].h};
}

bool partial_window_ok(const LayerDesc& L, int32_t i0, int32_t i1, const Box& b) {
  if (i1 <= i0) return b.c0 == 0 && b.c1 == 0 && b.h0 == 0 && b.h1 == 0;
  const Box w = partial_window(L, i0, i1);
  if (b.c0 != w.c0 || b.c1 != w.c1) return false;
  return partial_rows(L) ? b.h0 <= w.h0 && b.h1 >= w.h1 : b.h0 == w.h0 && b.h1 == w.h1;
}

int64_t partial_weights(const LayerDesc& L, int32_t i0, int32_t i1) {
  if (partial_rows(L) || i1 <= i0) return 0;
  return int64_t(i1 - i0) * partial_k_per_channel(L) * L.out.c;
}

int64_t partial_macs(const LayerDesc& L, int32_t i0, int32_t i1) {
  if (i1 <= i0) return 0;
  if (partial_rows(L)) return int64_t(L.in[0].c) * (i1 - i0) * L.in[0].w;
  return int64_t(L.out.c) * partial_positions(L) * (i1 - i0) * partial_k_per_channel(L);
}

namespace {
// Row shares: each channel's sum of (x - zp) over rows [r0, r1), the window
// holding every channel x rows [h0, h1) with [r0, r1) among them.
void row_sums(const LayerDesc& L, const int8_t* x, int32_t h0, int32_t h1, int32_t r0, int32_t r1, int32_t* sums) {
  const int64_t n = int64_t(r1 - r0) * L.in[0].w, pitch = int64_t(h1 - h0) * L.in[0].w;
  const int32_t zp = L.in_zp[0];
  x += int64_t(r0 - h0) * L.in[0].w;
  for (int32_t c = 0; c < L.in[0].c; ++c) {
    const int8_t* xc = x + c * pitch;
    uint32_t acc = 0;
    for (int64_t k = 0; k < n; ++k) acc += uint32_t(int32_t(xc[k]));
    reinterpret_cast<uint32_t*>(sums)[c] = acc - uint32_t(zp) * uint32_t(n);
  }
}
}  // namespace

bool partial_sums(const LayerDesc& L, const int8_t* x, const Box& box, int32_t ci0, int32_t ci1, const int8_t* w,
                  int32_t* sums) {
  if (!partial_ok(L) || ci0 < 0 || ci1 < ci0 || ci1 > partial_extent(L) || !partial_window_ok(L, ci0, ci1, box))
    return false;
  if (partial_rows(L)) {
    row_sums(L, x, box.h0, box.h1, ci0, ci1, sums);
    return true;
  }
  const int32_t P = partial_positions(L);
  const int32_t K = (ci1 - ci0) * partial_k_per_channel(L);
  const int32_t zp = L.in_zp[0];
  // Input element k of position p: x[k * P + p] (Conv: channel-major
  // planes; Gemm: P = 1, the flat fan-in).
  if (P == 1) {
    // One sum per output channel (a Gemm): a dot product over the whole
    // share, sum of x * w less zp times the sum of w. Both in uint32, which
    // wraps exactly as the per-term form does, so the sums are equal bit
    // for bit; no branch in the loop, so it vectorises.
    for (int32_t o = 0; o < L.out.c; ++o) {
      const int8_t* wo = w + int64_t(o) * K;
      uint32_t xw = 0, ws = 0;
      for (int32_t k = 0; k < K; ++k) {
        xw += uint32_t(int32_t(x[k]) * int32_t(wo[k]));
        ws += uint32_t(int32_t(wo[k]));
      }
      reinterpret_cast<uint32_t*>(sums)[o] = xw - uint32_t(zp) * ws;
    }
    return true;
  }
  for (int32_t o = 0; o < L.out.c; ++o) {
    uint32_t* acc = reinterpret_cast<uint32_t*>(sums) + int64_t(o) * P;
    for (int32_t p = 0; p < P; ++p) acc[p] = 0;
    const int8_t* wo = w + int64_t(o) * K;
    for (int32_t k = 0; k < K; ++k) {
      const int32_t wv = wo[k];
      if (wv == 0) continue;
      const int8_t* xk = x + int64_t(k) * P;
      for (int32_t p = 0; p < P; ++p) acc[p] += uint32_t((int32_t(xk[p]) - zp) * wv);
    }
  }
  return true;
}

bool partial_finish(const LayerDesc& L, int32_t o0, int32_t n, const int32_t* own, const int32_t* recv, int8_t* out) {
  if (!partial_ok(L) || o0 < 0 || n < 0 || o0 + n > L.out.c) return false;
  if (partial_rows(L)) {
    // One sum per channel, the op's one requantiser.
    const Requant rq(L.out_mult, L.out_shift, L.out_zp, L.act_min, L.act_max);
    for (int32_t j = 0; j < n; ++j) out[j] = rq(int32_t(uint32_t(own[j]) + (recv ? uint32_t(recv[j]) : 0u)));
    return true;
  }
  if (!L.mult || !L.shift || o0 < L.oc_base) return false;
  const int32_t P = partial_positions(L);
  for (int32_t c = 0; c < n; ++c) {
    const int32_t local = o0 + c - L.oc_base;
    const Requant rq(L.mult[local], L.shift[local], L.out_zp, L.act_min, L.act_max);
    const uint32_t b = L.bias ? uint32_t(L.bias[local]) : 0u;
    for (int32_t p = 0; p < P; ++p) {
      const int64_t j = int64_t(c) * P + p;
      uint32_t a = b + uint32_t(own[j]);
      if (recv) a += uint32_t(recv[j]);
      out[j] = rq(int32_t(a));
    }
  }
  return true;
}

}  // namespace core
}  // namespace ts
