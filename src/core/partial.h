// Input-channel shares of a Conv 1x1 / Gemm with int32 partial sums
// (strategy `reduce`, docs/planner.md): a board multiplies only the input
// channels it holds, for every output channel, and the owners of output
// blocks add the boards' sums and requantise. int32 addition is exact and
// associative (done here in uint32, which wraps like the reference would
// never need to), so the result equals the single-process kernel bit for bit.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#pragma once

#include <stdint.h>

#include "core/layer.h"

namespace ts {
namespace core {

// Whether the layer can be split by input channels: its op has the variant
// (OpDef::partial: a Conv 1x1 of stride 1, no padding, one group, or a Gemm).
bool partial_ok(const LayerDesc& L);
// Output positions per output channel a partial share computes (Conv: the
// plane, Gemm: 1) and input elements per input channel per output (Conv: 1,
// Gemm: the input plane, its fan-in is flattened C-H-W).
int32_t partial_positions(const LayerDesc& L);
int32_t partial_k_per_channel(const LayerDesc& L);

// sums[o * P + p] = sum over input channels [ci0, ci1) of (x - zp) * w, for
// every output channel o of the layer and position p < P (no bias). `x` is
// the window of input channels [ci0, ci1) x all rows; `w` the weights of
// those channels for every output channel: w[o * K + k], K = (ci1 - ci0) *
// partial_k_per_channel. False if the layer is not partial_ok.
bool partial_sums(const LayerDesc& L, const int8_t* x, int32_t ci0, int32_t ci1, const int8_t* w, int32_t* sums);

// Requantises output channels [o0, o0 + n) (all positions): out[j] = the
// layer's requantiser of bias + own[j] + recv[j] (recv may be null), with
// bias / mult / shift indexed from L.oc_base. False on a bad descriptor.
bool partial_finish(const LayerDesc& L, int32_t o0, int32_t n, const int32_t* own, const int32_t* recv, int8_t* out);

}  // namespace core
}  // namespace ts
