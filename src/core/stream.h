// Streamed chains (docs/execution.md, "Streamed chains"): where RAM is the
// binding limit, a board computes a chain of layers row by row instead of
// layer by layer. Each layer of the chain but the last is read only by the
// next one; its outputs live in a *line buffer* of a few rows, which holds
// what the next layer still reads; the last layer's outputs go to their
// buffer as usual. Every row of every layer is computed exactly once, so
// the values, MACs and digests do not depend on the buffers' sizes.
//
// The order: the last layer's rows [y0, y1) are made `step` rows at a time;
// making rows of a layer first makes the rows of the layer before it that
// they read, and drops from that layer's buffer the rows no later output
// reads. The same walk without computing (dry run) gives the rows each line
// buffer must hold: the planner sizes the buffers with it and the board
// checks its buffers against it before it computes.
//
// A streamed layer's digest takes its rows in row order: for each row, the
// row of every channel (core/digest.h; coord/verify.cpp gives the
// reference the same order).
//
// Portable C++17 shared with the boards: no heap, no exceptions.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/layer.h"

namespace ts {
namespace core {

// The most layers in one chain.
constexpr int kMaxChain = 8;

// One layer of a chain: its share is channels [c0, c1) x rows [y0, y1) at
// full width. buf: its outputs, channel c's row y at
// buf + (c - c0) * cpitch + (y - first held row) * out.w; a line buffer
// holds `cap` rows (cpitch = cap * out.w); the last layer's buffer holds
// every row of the share (cap = y1 - y0, cpitch >= cap * out.w).
struct ChainLayer {
  LayerDesc desc;
  int32_t c0 = 0, c1 = 0, y0 = 0, y1 = 0;
  int32_t cap = 0;
  int64_t cpitch = 0;
  int8_t* buf = nullptr;
  int32_t oc_count = 0;
  uint32_t node = 0;
};

// The rows each layer's buffer must hold (rows[i]; the last layer: its
// share's rows) when the last layer is made `step` rows at a time. False if
// the chain cannot stream (a layer reads another operand, a share that is
// not rows of the reader's input, step < 1, more than kMaxChain layers).
bool chain_rows(const ChainLayer* L, int n, int32_t step, int32_t* rows);

// What the board sees of the walk: now(ctx), a clock in microseconds for
// the per-layer compute time; shown(ctx, i, rows), layer i's first rows
// computed, before its reader or its digest reads them (a board's port may
// look at them: Port::results). Either may be null.
struct ChainHooks {
  uint32_t (*now)(void* ctx) = nullptr;
  void (*shown)(void* ctx, int i, int8_t* rows) = nullptr;
  void* ctx = nullptr;
};

// Computes the chain: the first layer reads `in` (its input windows, one
// per operand).
// digests[i] (i < n - 1) takes layer i's rows in row order; us[i] adds the
// time of layer i's kernel calls. BadLayer if chain_rows refuses the chain,
// ViewTooSmall if a line buffer holds fewer rows than it needs; otherwise
// the kernels' status.
KernelStatus run_chain(ChainLayer* L, int n, const View* in, int32_t step, Digest64* digests, uint32_t* us,
                       const ChainHooks& hooks);

}  // namespace core
}  // namespace ts
