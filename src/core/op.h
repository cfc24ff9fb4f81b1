// The op table: everything the project knows about one quantised op, in one
// place per op (src/core/ops/<op>.cpp), the TensorFlow Lite Micro way.
//
// Every user asks this table instead of switching on QOp itself: the kernels'
// public entry points (layer.h: input_box, compute_range, compute_box,
// range_macs, layer_valid), the fragment reader (validate), the planner
// (boxes, MACs), the board's emulated clock and the simulator (MACs), and the
// float IR's MAC count (model/graph.cpp builds a geometry-only LayerDesc and
// asks range_macs).
//
// MAC count, defined once here and used everywhere: multiply-accumulates per
// output element, the same for every output of a layer:
//   Conv           cin / groups x kh x kw   (padded taps included)
//   Gemm           fan_in = C x H x W of the input
//   AvgPool/MaxPool kh x kw                 (window taps, padded ones included)
//   GlobalAvgPool  H x W of the input
//   Add, Mul, Concat, Lut, Pad   1          (one operation per output element)
// so the MACs of any set of outputs is (number of outputs) x macs_per_output,
// and the shares of a layer add up to the layer's count exactly.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS.
#pragma once

#include "core/layer.h"

namespace ts {
namespace core {

// A Conv/Gemm accumulator is bias + fan_in products of |x - zp| <= 255 and
// |w| <= 128: with fan_in <= 2^15 and |bias| <= 2^30 it cannot overflow int32.
constexpr int64_t kMaxFanIn = 1 << 15;

struct OpDef {
  QOp op;
  const char* name;
  // Operand count, operand and output shapes, and the geometry the kernel
  // and the box arithmetic rely on. Follows no pointer: also used on
  // descriptors that carry no data (fragment reader, planner).
  bool (*validate)(const LayerDesc& L);
  // The data pointers eval follows (weights, tables). Called after validate.
  bool (*data_ok)(const LayerDesc& L);
  // True if the op reads per-output-channel data indexed from oc_base
  // (weights, bias, multipliers): eval needs the box's channels held.
  bool per_channel_data;
  // Channels and rows (full width) of input i that the outputs of box b
  // read; empty if none. b is non-empty, 0 <= i < n_inputs, the output dims
  // are positive; must return an empty box on geometry it cannot divide by.
  Box (*input_box)(const LayerDesc& L, int i, const OutBox& b);
  // Multiply-accumulates per output element (see above); 0 on geometry
  // validate refuses.
  uint64_t (*macs_per_output)(const LayerDesc& L);
  // Computes channels [c0, c1) x plane positions [p0, p1) (position =
  // y * out.w + x) into out[(c - c0) * cstride + (p - p0)]. Called only on a
  // valid layer (validate, data_ok), with views covering input_box and the
  // per-channel data present.
  KernelStatus (*eval)(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1,
                       int8_t* out, int64_t cstride);
};

// The definition of op, or nullptr for a value outside QOp.
const OpDef* op_def(QOp op);

// One per op file.
extern const OpDef kConvOp;
extern const OpDef kGemmOp;
extern const OpDef kAddOp;
extern const OpDef kMulOp;
extern const OpDef kConcatOp;
extern const OpDef kAvgPoolOp;
extern const OpDef kGlobalAvgPoolOp;
extern const OpDef kMaxPoolOp;
extern const OpDef kLutOp;
extern const OpDef kPadOp;

}  // namespace core
}  // namespace ts
