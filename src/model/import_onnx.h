// ONNX importer: reads an ONNX ModelProto (as written by torch.onnx.export and
// similar exporters) into the float IR of graph.h.
//
// What it accepts (batch 1, NCHW, static shapes once the input size is known):
//   Conv (groups, depthwise, strides, dilations, explicit or auto_pad pads),
//   BatchNormalization (kept as a BatchNorm node), Relu, Clip, HardSigmoid,
//   HardSwish, Sigmoid, Add / Mul (same shape; Mul also per channel), Concat on
//   channels, AveragePool, MaxPool (ceil_mode), GlobalAveragePool,
//   GlobalMaxPool, ReduceMean over H and W, Gemm, MatMul with constant weights,
//   Flatten, Reshape / Squeeze / Unsqueeze that only flatten, Identity,
//   Dropout, Pad (constant zero, spatial), Softmax, Resize / Upsample
//   (nearest or linear; asymmetric, half_pixel, align_corners,
//   pytorch_half_pixel; every nearest_mode; by scales giving whole sizes or by
//   sizes, onnx_upsample.cpp), ConvTranspose (groups, strides, pads,
//   output_padding; dilation 1), Transpose of a [1,C,H,W] tensor with the
//   batch axis first (any order of C, H, W) and the channel shuffle (Reshape
//   to [1,g,C/g,H,W], Transpose [0,2,1,3,4], Reshape back), Slice, Split,
//   LeakyRelu, PRelu, Tanh.
//   Add/Sub/Mul/Div of a computed tensor with a scalar or per-channel constant
//   become a BatchNorm node with mean 0, var 1, eps 0 (an affine map); an Add
//   of constants right after a Conv/Gemm whose output has no other user is
//   folded into that node's bias (MatMul + Add -> Gemm with bias). Relu then
//   Clip(max 6) becomes Clip(0, 6); x * HardSigmoid(x) (alpha 1/6, beta 1/2)
//   becomes HardSwish. Nodes that do not lead to the output are dropped.
//   Shape arithmetic on constants (Constant, Shape, Gather, Unsqueeze, Squeeze,
//   Concat, Cast, Reshape, Slice, Transpose, ConstantOfShape, elementwise math)
//   is evaluated at import time.
// Anything else throws ts::Error with one line naming the op and the node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"

namespace ts {

// Imports the model at `path`. input_size > 0 replaces the stored input height
// and width by input_size x input_size (and fails clearly if the graph cannot
// take that size); 0 keeps the stored size. Throws ts::Error on any problem.
Graph import_onnx(const std::string& path, int input_size = 0);

// Same, from bytes already in memory; `name` is used in error messages.
Graph import_onnx_bytes(const std::string& bytes, const std::string& name, int input_size = 0);

// The declared dims of the model's (first non-initializer) input, -1 where a
// dim is not a fixed number; empty if there is no input or no shape. Reads
// the file but imports nothing. Throws ts::Error if it is not ONNX.
std::vector<int64_t> onnx_input_dims(const std::string& path);

}  // namespace ts
