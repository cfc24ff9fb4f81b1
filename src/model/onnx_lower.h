// ONNX import, step 3 of 3: lowering (see import_onnx.h for the whole).
//
// Walks the decoded nodes in their (topological) order and keeps, for every
// ONNX value name, either a constant (initialisers, Constant nodes and
// everything computed only from them or from known shapes, folded by
// onnx_const_fold.h) or a computed tensor with its ONNX dims. Each ONNX op
// family that computes on the image has one function that turns it into IR
// nodes (graph.h). At the end an Add-of-constant right after a Conv/Gemm is
// folded into the bias, Relu + Clip becomes one Clip, x * HardSigmoid(x)
// becomes HardSwish, nodes that do not lead to the output are dropped, and
// the rest is written into a Graph and validated.
#pragma once

#include <string>

#include "model/graph.h"
#include "model/onnx_decode.h"

namespace ts::onnx_import {

// Throws ts::Error "name: node 'n' (Op): ..." on anything unsupported.
Graph lower(const Model& m, const std::string& name);

}  // namespace ts::onnx_import
