// Export of a quantised model (QGraph) as an ONNX model in QDQ form, so that a
// reference runtime (ONNX Runtime) can run the very same int8 model.
//
// QDQ form: every quantised op becomes DequantizeLinear on its int8 inputs, the
// float op (Conv, Gemm, Add, ...), then QuantizeLinear to the output's int8
// scale and zero point. ONNX Runtime's graph optimiser (level "all") fuses each
// such group into its integer kernels (QLinearConv, QGemm, QLinearAdd,
// QLinearGlobalAveragePool, ...), so the model runs in int8 there, not in float.
//
// What is carried over exactly:
//  - weights: our int8 values, per output channel, DequantizeLinear axis=0,
//    zero point 0; the per-channel weight scale is recovered from the stored
//    Q31 multiplier (s_w = M * s_out / s_in, within 2^-31 relative);
//  - biases: our int32 values, scale s_in * s_w, zero point 0;
//  - activations: each tensor's scale and zero point (QTensor).
// Ops with no float counterpart are written in the integer domain with the
// same semantics: Lut as Gather over its 256-entry table, Pad as a constant
// Pad with the zero point, a fused clamp that is not a no-op as a Clip on the
// quantised values (after QuantizeLinear, as our kernels clamp).
//
// Requantisation differs by design: ONNX Runtime multiplies by float scales
// and rounds half to even, we use Q31 fixed point rounding half away from
// zero, so a few activations may differ by one step (see docs/benchmarks.md).
#pragma once

#include <string>

#include "model/qgraph.h"

namespace ts {

struct OnnxExportOptions {
  // Activation element type. Int8 keeps our zero points as they are. Uint8
  // stores every activation as q + 128 with zero point zp + 128: the same real
  // values bit for bit, in the "U8S8" layout that ONNX Runtime's x86 kernels
  // fuse by default (with Int8 activations, ONNX Runtime fuses QDQ Conv on x86
  // only when the session option session.qdqisint8allowed is "1").
  enum class Activations { Int8, Uint8 };
  Activations activations = Activations::Int8;
  // Graph input as float [1,C,H,W] followed by QuantizeLinear (ONNX rounds
  // half to even, quantize_input() half away from zero). Default: the
  // quantised input tensor itself, so both runtimes start from the same bytes.
  bool float_input = false;
  int opset = 13;
};

// Serialised ONNX ModelProto. Throws Error on an op it cannot express.
std::string qdq_onnx_bytes(const QGraph& q, const OnnxExportOptions& opt = {});

// Writes qdq_onnx_bytes(q, opt) to `path`; throws Error naming the file on
// failure.
void export_qdq_onnx(const QGraph& q, const std::string& path);
void export_qdq_onnx(const QGraph& q, const std::string& path, const OnnxExportOptions& opt);

// Names used in the exported graph, for callers that feed or read it.
inline constexpr const char* kOnnxInputName = "input";
inline constexpr const char* kOnnxOutputName = "output";

}  // namespace ts
