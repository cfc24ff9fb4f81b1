// ONNX import: the upsampling ops (Resize, Upsample, ConvTranspose) as IR
// nodes, for onnx_lower.cpp. Each returns the node's op-specific fields and
// the output's ONNX dims; the caller names, wires and emits it. Throws Fail
// (the caller adds file, node and op) on what is not supported.
#pragma once

#include "model/graph.h"
#include "model/onnx_const_fold.h"
#include "model/onnx_decode.h"

namespace ts::onnx_import {

// Resize (opset 10+) and Upsample (opset 7-9) of a computed [1,C,H,W] x;
// `operand` gives constant inputs (roi, scales, sizes).
Node lower_resize(const OnnxNode& n, int opset, const Dims& x, const ConstInput& operand, Dims* out);

// ConvTranspose of x with constant weights w [Cin][Cout/group][kh][kw] and
// bias b (nullptr: none); weights come back in Conv's [o][cin/group][kh][kw].
Node lower_conv_transpose(const OnnxNode& n, const Dims& x, const Const& w, const Const* b, Dims* out);

}  // namespace ts::onnx_import
