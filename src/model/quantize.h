// Post-training int8 quantisation of a folded float graph.
#pragma once

#include <string>
#include <vector>

#include "model/graph.h"
#include "model/qgraph.h"

namespace ts {

enum class CalibMethod { MinMax, Percentile };
CalibMethod parse_calib_method(const std::string& s);

struct CalibOptions {
  CalibMethod method = CalibMethod::MinMax;
  // Percentile: per image, the range keeps this fraction of values (the
  // extremes beyond it are clipped); ranges are averaged over images.
  double percentile = 99.99;
};

// Per-tensor real ranges [lo, hi] of the folded graph.
struct Calibration {
  std::vector<float> lo, hi;
  int images = 0;
  std::string method;
};

// Runs the float graph over preprocessed inputs (C-H-W) and records ranges.
Calibration calibrate(const Graph& folded, const std::vector<std::vector<float>>& inputs, const CalibOptions& opt);

// Quantises: weights int8 symmetric per output channel, activations int8
// asymmetric per tensor, int32 bias, Q31 multipliers. The graph must be
// folded (no BatchNorm/Flatten/Identity). A Softmax at the output is dropped
// (QGraph::softmax_output); anywhere else it is an error.
QGraph quantize(const Graph& folded, const Calibration& cal);

}  // namespace ts
