// The quantised model (QGraph): int8 activations with per-tensor scale and
// zero point, int8 per-channel weights, int32 biases and Q31 multipliers.
// Produced by quantize(), saved as a versioned, checksummed .tsqm file, and
// executed by the single-process int8 reference, which is the bit-exact
// truth every distributed run is compared with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/layer.h"
#include "model/graph.h"

namespace ts {

struct QTensor {
  std::string name;
  Shape shape;
  float scale = 1.f;  // real = scale * (q - zp); host metadata only
  int32_t zp = 0;
  int producer = -1;
  std::vector<int> consumers;
};

struct QNode {
  std::string name;
  core::QOp op = core::QOp::Conv;
  std::vector<int> inputs;  // tensor indices
  int output = -1;
  // Scalars and geometry; pointer fields are left null here and filled by
  // desc() from the vectors below.
  core::LayerDesc geo;
  std::vector<int8_t> weights;
  std::vector<int32_t> bias, mult, shift;
  std::vector<int8_t> lut;
  int64_t macs = 0;

  // Number of output channels that carry per-channel data (Conv/Gemm).
  int32_t channels_with_data() const;
  // Bytes of per-output-channel data (weights + bias + mult + shift) of one
  // output channel; what a board stores per kernel it computes.
  int64_t bytes_per_channel() const;
  // Bytes of data shared by every board computing this layer (LUT, pool
  // tables).
  int64_t shared_bytes() const;
};

struct QGraph {
  std::vector<QTensor> tensors;
  std::vector<QNode> nodes;  // topological order
  int input = -1, output = -1;
  bool softmax_output = false;  // the float model ends in Softmax over `output`
  std::vector<std::string> labels;
  std::string source;
  std::string calibration;  // description of how it was calibrated
  ImageNorm in_norm;  // as the float graph's (model/graph.h)

  const Shape& shape(int t) const { return tensors.at(t).shape; }
  // Descriptor of node i with pointers into this graph's vectors.
  core::LayerDesc desc(int i) const;
  void link();  // rebuilds producer/consumer lists; throws on inconsistency
  int64_t total_macs() const;
  int64_t weight_bytes() const;  // all per-channel + shared data
};

// Versioned binary format ("TSQM", version, payload, CRC32 of everything
// before it). load throws Error naming the file on any defect.
void save_qgraph(const QGraph& q, const std::string& path);
QGraph load_qgraph(const std::string& path);
std::vector<uint8_t> serialize_qgraph(const QGraph& q);
QGraph deserialize_qgraph(const std::vector<uint8_t>& bytes, const std::string& what);

// Quantises a preprocessed float input (C-H-W) with the input's parameters.
// This is host-side preprocessing; the int8 path starts from its result.
std::vector<int8_t> quantize_input(const QGraph& q, const std::vector<float>& x);

// Single-process int8 reference. Returns every tensor (index = tensor id).
std::vector<std::vector<int8_t>> run_int8_all(const QGraph& q, const std::vector<int8_t>& input);
std::vector<int8_t> run_int8(const QGraph& q, const std::vector<int8_t>& input);

// Real values of the output and, if the model ends in Softmax, the class
// probabilities (computed on the host for reporting).
std::vector<float> dequantize_output(const QGraph& q, const std::vector<int8_t>& out);
std::vector<float> output_probs(const QGraph& q, const std::vector<int8_t>& out);

// Real multiplier -> (Q31 mantissa, shift); multipliers below 2^-32 become 0.
void quantize_multiplier(double m, int32_t* mult, int32_t* shift);

}  // namespace ts
