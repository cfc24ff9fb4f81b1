// Graph simplification before quantisation.
#pragma once

#include "model/graph.h"

namespace ts {

struct FoldStats {
  int batchnorm_folded = 0;    // into a preceding Conv/Gemm
  int batchnorm_as_conv = 0;   // standalone, turned into a depthwise 1x1 Conv
  int activations_fused = 0;   // Relu/Clip merged into their producer
  int pads_merged = 0;         // zero Pad merged into the next Conv
  int removed = 0;             // Flatten/Identity dropped
};

// Returns an equivalent graph where:
//  - BatchNorm is folded into the preceding Conv/Gemm (w' = w*g/sqrt(v+eps),
//    b' = (b-mean)*g/sqrt(v+eps) + beta, with the model's eps); a BatchNorm
//    that follows anything else becomes a depthwise 1x1 Conv;
//  - Relu / Clip following a Conv, Gemm or Add that has no other consumer is
//    fused into it (Node::act);
//  - a zero Pad feeding only Convs is merged into their padding;
//  - Flatten and Identity disappear (a Gemm reads its input in C-H-W order).
// The float executor computes the same function on either graph (tested).
Graph fold(const Graph& g, FoldStats* stats = nullptr);

}  // namespace ts
