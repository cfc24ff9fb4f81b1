// ONNX import, step 2 of 3: constant folding (see import_onnx.h for the whole).
//
// Evaluates at import time the nodes whose inputs are all constants (shape
// arithmetic such as Shape -> Gather -> Unsqueeze -> Concat -> Reshape target,
// Constant, Cast, Slice, Transpose, ConstantOfShape, elementwise math), and
// holds the shape rules that constants and computed tensors share (what
// Flatten, Reshape, Squeeze and Unsqueeze do to dims).
#pragma once

#include <functional>
#include <optional>

#include "model/onnx_decode.h"

namespace ts::onnx_import {

// A node's constant operands: operand(i) is nullptr when input i is absent,
// and throws Fail when input i is present but not a constant.
using ConstInput = std::function<const Const*(int)>;

// Constant input i; throws Fail when it is absent.
const Const& need(const ConstInput& operand, int i);

// Normalises a possibly negative axis; throws Fail when it is out of range.
int64_t norm_axis(int64_t axis, size_t rank, const char* what = "axis");

// Resolves a Reshape target (0 copies the input dim unless allowzero, -1 is inferred).
Dims reshape_target(const Dims& in, const std::vector<int64_t>& shape, bool allowzero);

// Flatten, Reshape, Squeeze and Unsqueeze only change dims.
bool is_reshape_like(const std::string& op);

// The dims that such a node gives its input of dims `in`. `constant` says
// whether that input is a constant: a computed tensor must name its
// Unsqueeze axes, and its Squeeze errors name the axis.
Dims reshaped_dims(const OnnxNode& n, int opset, const Dims& in, const ConstInput& operand, bool constant);

// What a Slice takes from each axis of an input of dims `in`: first
// element, step and count (ONNX clamping of starts and ends; a step may be
// negative). Shared by constants and computed tensors.
struct SliceAxes {
  std::vector<int64_t> start, step;
  Dims out;
};
SliceAxes slice_axes(const OnnxNode& n, int opset, const Dims& in, const ConstInput& operand);

// The lengths of a Split's outputs along `axis` of dims `in` (the 'split'
// attribute or input, 'num_outputs', or equal parts); throws Fail if they do
// not add up.
std::vector<int64_t> split_lengths(const OnnxNode& n, int opset, const Dims& in, int64_t axis,
                                   const ConstInput& operand);

// Shape or Size of a tensor (constant or computed) of dims `d`.
Const shape_of(const OnnxNode& n, const Dims& d);

// Evaluates node n, all of whose inputs are constants. nullopt when the op
// is not one folded here (the lowering then handles or refuses it).
std::optional<Const> fold_constant(const OnnxNode& n, const ConstInput& operand, int opset);

}  // namespace ts::onnx_import
