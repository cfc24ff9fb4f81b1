// Streamed chains: the row walk shared by the dry run and the compute
// (stream.h).
#include "core/stream.h"

#include <string.h>

namespace ts {
namespace core {

namespace {

bool same_dims(const Dims& a, const Dims& b) { return a.c == b.c && a.h == b.h && a.w == b.w; }

// The shape checks of a chain: every layer after the first reads one
// operand, the output of the layer before it; every share is rows of its
// output.
bool chain_ok(const ChainLayer* L, int n) {
  if (n < 2 || n > kMaxChain) return false;
  for (int i = 0; i < n; ++i) {
    const Dims& o = L[i].desc.out;
    if (L[i].c0 < 0 || L[i].c1 <= L[i].c0 || L[i].c1 > o.c || L[i].y0 < 0 || L[i].y1 <= L[i].y0 || L[i].y1 > o.h)
      return false;
    if (i > 0 && (L[i].desc.n_inputs != 1 || !same_dims(L[i].desc.in[0], L[i - 1].desc.out))) return false;
  }
  return true;
}

// The walk. Without an input view it only counts rows (the dry run).
class Walk {
 public:
  Walk(const ChainLayer* L, int n, const View* in, Digest64* dg, uint32_t* us, const ChainHooks* hooks)
      : L_(L), n_(n), in_(in), dg_(dg), us_(us), hooks_(hooks) {
    for (int i = 0; i < n; ++i) lo_[i] = hi_[i] = L[i].y0, held_[i] = 0;
  }

  KernelStatus run(int32_t step) {
    const ChainLayer& last = L_[n_ - 1];
    for (int32_t y = last.y0; y < last.y1;) {
      const int32_t next = last.y1 - y > step ? y + step : last.y1;
      const KernelStatus st = make(n_ - 1, 0, next);
      if (st != KernelStatus::Ok) return st;
      y = next;
    }
    // Rows of a share that no later row read (none in the plans we make;
    // the digest covers every row of the share, so they are computed).
    for (int i = n_ - 2; i >= 0; --i)
      if (hi_[i] < L_[i].y1) {
        const KernelStatus st = make(i, hi_[i], L_[i].y1);
        if (st != KernelStatus::Ok) return st;
      }
    return KernelStatus::Ok;
  }

  int32_t held(int i) const { return held_[i]; }

 private:
  bool dry() const { return in_ == nullptr; }

  // Makes rows [hi, v) of layer i after the rows of the layer before that
  // they read; `keep`: the first row of layer i its reader still reads.
  KernelStatus make(int i, int32_t keep, int32_t v) {
    const ChainLayer& c = L_[i];
    if (v > c.y1) return KernelStatus::BadLayer;
    if (v <= hi_[i]) return KernelStatus::Ok;
    if (i > 0) {
      OutBox b;
      b.c0 = c.c0; b.c1 = c.c1; b.y0 = hi_[i]; b.y1 = v; b.x0 = 0; b.x1 = c.desc.out.w;
      const Box need = input_box(c.desc, 0, b);
      const ChainLayer& p = L_[i - 1];
      if (need.empty() || need.c0 < p.c0 || need.c1 > p.c1 || need.h0 < p.y0 || need.h1 > p.y1)
        return KernelStatus::BadLayer;
      const KernelStatus st = make(i - 1, need.h0, need.h1);
      if (st != KernelStatus::Ok) return st;
    }
    if (i < n_ - 1) drop(i, keep);
    const int32_t rows = v - lo_[i];
    if (rows > held_[i]) held_[i] = rows;
    if (!dry()) {
      if (rows > c.cap) return KernelStatus::ViewTooSmall;
      const KernelStatus st = compute(i, hi_[i], v);
      if (st != KernelStatus::Ok) return st;
    }
    hi_[i] = v;
    return KernelStatus::Ok;
  }

  // Rows before `keep` leave layer i's line buffer.
  void drop(int i, int32_t keep) {
    const int32_t from = keep < hi_[i] ? keep : hi_[i];
    if (from <= lo_[i]) return;
    const ChainLayer& c = L_[i];
    const int32_t w = c.desc.out.w;
    if (!dry() && hi_[i] > from)
      for (int32_t ch = 0; ch < c.c1 - c.c0; ++ch) {
        int8_t* plane = c.buf + ch * c.cpitch;
        memmove(plane, plane + int64_t(from - lo_[i]) * w, size_t(hi_[i] - from) * size_t(w));
      }
    lo_[i] = from;
  }

  KernelStatus compute(int i, int32_t u, int32_t v) {
    const ChainLayer& c = L_[i];
    const int32_t w = c.desc.out.w;
    View line;
    if (i > 0) {
      const ChainLayer& p = L_[i - 1];
      line = View{p.buf, p.c0, p.c1 - p.c0, lo_[i - 1], p.cap};
    }
    OutBox b;
    b.c0 = c.c0; b.c1 = c.c1; b.y0 = u; b.y1 = v; b.x0 = 0; b.x1 = w;
    int8_t* out = c.buf + int64_t(u - lo_[i]) * w;
    const uint32_t t0 = hooks_->now ? hooks_->now(hooks_->ctx) : 0;
    const KernelStatus st = compute_box_pitched(c.desc, i > 0 ? &line : in_, b, out, c.oc_count, c.cpitch);
    if (hooks_->now) us_[i] += hooks_->now(hooks_->ctx) - t0;
    if (st != KernelStatus::Ok) return st;
    if (u == c.y0 && hooks_->shown) hooks_->shown(hooks_->ctx, i, out);
    if (i == n_ - 1) return st;
    for (int32_t y = u; y < v; ++y)
      for (int32_t ch = 0; ch < c.c1 - c.c0; ++ch) dg_[i].update(c.buf + ch * c.cpitch + int64_t(y - lo_[i]) * w, size_t(w));
    return st;
  }

  const ChainLayer* L_;
  int n_;
  const View* in_;
  Digest64* dg_;
  uint32_t* us_;
  const ChainHooks* hooks_;
  int32_t lo_[kMaxChain], hi_[kMaxChain], held_[kMaxChain];
};

}  // namespace

bool chain_rows(const ChainLayer* L, int n, int32_t step, int32_t* rows) {
  if (step < 1 || !chain_ok(L, n)) return false;
  const ChainHooks none;
  Walk walk(L, n, nullptr, nullptr, nullptr, &none);
  if (walk.run(step) != KernelStatus::Ok) return false;
  for (int i = 0; i < n; ++i) rows[i] = walk.held(i);
  return true;
}

KernelStatus run_chain(ChainLayer* L, int n, const View* in, int32_t step, Digest64* digests, uint32_t* us,
                       const ChainHooks& hooks) {
  if (step < 1 || !chain_ok(L, n)) return KernelStatus::BadLayer;
  for (int i = 0; i < n; ++i) {
    const int64_t w = L[i].desc.out.w;
    if (!L[i].buf) return KernelStatus::BadLayer;
    const bool last = i == n - 1;
    if (last ? (L[i].cap != L[i].y1 - L[i].y0 || L[i].cpitch < L[i].cap * w) : (L[i].cap < 1 || L[i].cpitch != L[i].cap * w))
      return KernelStatus::BadLayer;
  }
  Walk walk(L, n, in, digests, us, &hooks);
  return walk.run(step);
}

}  // namespace core
}  // namespace ts
