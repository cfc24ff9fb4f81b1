// Graph simplification before quantisation.
#pragma once

#include "model/graph.h"

namespace ts {

struct FoldStats {
  int batchnorm_folded = 0;    // into a preceding Conv/Gemm
  int batchnorm_as_conv = 0;   // standalone, turned into a depthwise 1x1 Conv
  int affines_composed = 0;    // a BatchNorm into the BatchNorm before it
  int affines_into_activation = 0;  // into the activation before it (post-affine)
  int hardswish_found = 0;     // x * Clip(x + 3, 0, 6) as one HardSwish
  int residual_gates = 0;      // x + x * g as x * (g + 1)
  int upsamples_into_add = 0;  // x + Resize(y), nearest by whole factors: y read upsampled
  int activations_fused = 0;   // Relu/Clip merged into their producer
  int pads_merged = 0;         // zero Pad merged into the next Conv
  int removed = 0;             // Flatten/Identity dropped
  int reordered = 0;           // nodes that run at another place in the order
};

// Returns an equivalent graph where:
//  - x * Clip(x + 3, 0, 6) (a BatchNorm adding 3 before the Clip) is one
//    HardSwish whose result is scaled by 6 (its post-affine);
//  - BatchNorm (y = x*s + t, s = g/sqrt(v+eps), t = beta - mean*s, with the
//    model's eps) is folded, as long as one applies, into the preceding
//    Conv/Gemm (w' = w*s, b' = b*s + t), into a preceding BatchNorm (their
//    composition) or into a preceding activation's post-affine, when that
//    producer's output feeds nothing else; a BatchNorm left over becomes a
//    depthwise 1x1 Conv;
//  - x + x * g, where the per-channel gate g (C x 1 x 1) comes from an
//    activation read only by that Mul, is x * (g + 1): the activation's
//    post-affine adds 1 and the Add goes;
//  - x + Resize(y), the Resize nearest by whole factors (output o reads
//    o / f on each axis) and read only by that Add, is an Add that reads y
//    upsampled (Node sh x sw): the upsampled map is never made;
//  - Relu / Clip following a Conv, Gemm or Add that has no other consumer is
//    fused into it (Node::act);
//  - a zero Pad feeding only Convs is merged into their padding;
//  - Flatten and Identity disappear (a Gemm reads its input in C-H-W order);
//  - the nodes run in an order that holds fewer activation bytes, where
//    there is one: a node that frees more than it makes (the last reader of
//    inputs larger than its output) runs as soon as it can.
// The float executor computes the same function on either graph (tested).
Graph fold(const Graph& g, FoldStats* stats = nullptr);

}  // namespace ts
