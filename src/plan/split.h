// Proportional contiguous split of a layer's outputs (paper alg. 1 and 2).
//
// A layer's outputs are numbered 0..total-1: for a convolution its output
// positions in C-H-W order (alg. 1), for a linear layer its output neurons
// (alg. 2; the paper's "columns" of W, which are the rows of our [out][in]
// Gemm weights). Worker r gets one contiguous run, runs follow worker order,
// and the run lengths follow the workers' weights (ratings).
//
// Rounding is defined by the largest-remainder (Hamilton) method: every
// worker first gets floor(total * w_r / sum w), and the units still missing
// go one each to the largest fractional remainders, ties to the lower index.
// So the counts sum exactly to total and each is within 1 of its exact quota.
//
// How this differs from the paper: alg. 1/2 loop "while i - start < quota"
// with an unrounded quota, i.e. each worker takes ceil(quota) units, which
// can overrun the layer for the last workers; the released code instead uses
// integer portions and a per-unit size rounded up, ceil(count / sum portions),
// so the last worker gets what is left (possibly nothing). Neither is exactly
// proportional; Hamilton rounding is, up to one unit per worker.
//
// When a worker's count is 0 (e.g. more workers than outputs, or a zero
// weight) its run is empty, [b, b): that worker simply does nothing for that
// layer. This is defined behaviour, not an error.
#pragma once

#include <cstdint>
#include <vector>

#include "model/graph.h"  // ts::Error, ts::Shape

namespace ts::plan {

struct Run {
  int64_t begin = 0;  // first output index
  int64_t end = 0;    // one past the last
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Run&) const = default;
};

// Largest-remainder apportionment of `total` units by `weights`.
// total >= 0; weights non-empty, each finite and >= 0, positive sum.
// Throws ts::Error (one line) otherwise. Zero-weight workers get 0.
std::vector<int64_t> proportional_counts(int64_t total, const std::vector<double>& weights);

// Contiguous runs in worker order covering [0, total) exactly, with the
// lengths of proportional_counts.
std::vector<Run> split_runs(int64_t total, const std::vector<double>& weights);

// Output channels a run over a (C,H,W) tensor in CHW order touches, with the
// number of positions in each: alg. 1's "reference count". A worker stores a
// channel's kernel (and bias) once however many positions of it it computes.
struct ChannelUse {
  int first = 0;   // first channel touched
  int last = -1;   // last channel touched (last < first when the run is empty)
  std::vector<int64_t> positions;  // positions[k]: positions of channel first+k
  int count() const { return last - first + 1; }
  bool empty() const { return last < first; }
};

// Throws ts::Error if the shape is not positive or the run is not inside
// [0, C*H*W].
ChannelUse channels_touched(const Run& run, int64_t c, int64_t h, int64_t w);
ChannelUse channels_touched(const Run& run, const Shape& shape);

}  // namespace ts::plan
