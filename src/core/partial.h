// Input shares with int32 partial sums (strategy `reduce`, docs/planner.md):
// of a Conv 1x1 / Gemm, a board multiplies only the input channels it holds,
// for every output channel; of a GlobalAvgPool, it sums only the input rows
// it holds, of every channel. The owners of output blocks add the boards'
// sums and requantise. int32 addition is exact and associative (done here in
// uint32, which wraps like the reference would never need to), so the
// result equals the single-process kernel bit for bit. The split axis and
// its unit are the op's (OpDef::partial): a share is [i0, i1) of it.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#pragma once

#include <stdint.h>

#include "core/layer.h"

namespace ts {
namespace core {

// Whether the layer can be split so: its op has the variant (OpDef::partial:
// a Conv 1x1 of stride 1, no padding, one group, a Gemm, a GlobalAvgPool).
bool partial_ok(const LayerDesc& L);
// True if its shares are of input rows (all channels), else of input channels.
bool partial_rows(const LayerDesc& L);
// The split axis' length: input rows or input channels.
int32_t partial_extent(const LayerDesc& L);
// The window share [i0, i1) reads: input channels [i0, i1) x all rows, or
// all channels x rows [i0, i1) (empty for an empty share).
Box partial_window(const LayerDesc& L, int32_t i0, int32_t i1);
// Whether window `b` serves share [i0, i1): an empty share holds none (the
// empty box at 0); a channel share exactly partial_window; a row share every
// channel and rows that hold its own (a view in a wider window, plan/arena.cpp).
bool partial_window_ok(const LayerDesc& L, int32_t i0, int32_t i1, const Box& b);
// Its weights (every output channel's, for its inputs) and its MACs.
int64_t partial_weights(const LayerDesc& L, int32_t i0, int32_t i1);
int64_t partial_macs(const LayerDesc& L, int32_t i0, int32_t i1);
// Output positions per output channel a partial share computes (Conv: the
// plane, Gemm: 1) and input elements per input channel per output (Conv: 1,
// Gemm: the input plane, its fan-in is flattened C-H-W).
int32_t partial_positions(const LayerDesc& L);
int32_t partial_k_per_channel(const LayerDesc& L);

// Channel shares: sums[o * P + p] = sum over input channels [ci0, ci1) of
// (x - zp) * w, for every output channel o of the layer and position p < P
// (no bias); `x` is the window of input channels [ci0, ci1) x all rows, `w`
// the weights of those channels for every output channel: w[o * K + k],
// K = (ci1 - ci0) * partial_k_per_channel. Row shares: sums[c] = sum over
// rows [ci0, ci1) of channel c of (x - zp), `x` a window of every channel x
// rows `box` that hold them, `w` unused. False if the layer is not
// partial_ok or `box` does not serve the share (partial_window_ok).
bool partial_sums(const LayerDesc& L, const int8_t* x, const Box& box, int32_t ci0, int32_t ci1, const int8_t* w,
                  int32_t* sums);

// Requantises output channels [o0, o0 + n) (all positions): out[j] = the
// layer's requantiser of bias + own[j] + recv[j] (recv may be null), with
// bias / mult / shift indexed from L.oc_base (row shares: the op's scalar
// out_mult / out_shift, no bias). False on a bad descriptor.
bool partial_finish(const LayerDesc& L, int32_t o0, int32_t n, const int32_t* own, const int32_t* recv, int8_t* out);

}  // namespace core
}  // namespace ts
