// tinysplit float IR: a directed graph of ops over NCHW tensors (batch 1).
//
// Every tensor has exactly one producer (a node, or the graph input) and any
// number of consumers: a tensor consumed twice (a residual edge) is one tensor
// with two users. Nodes are stored in topological order.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/error.h"

namespace ts {

enum class Op : uint8_t {
  Conv,           // groups, stride, asymmetric pad, dilation; weights OIHW
  BatchNorm,      // per channel: gamma, beta, mean, var, eps
  Relu,           // max(x, 0)
  Clip,           // min(max(x, lo), hi)  (ReLU6 is Clip(0, 6))
  HardSigmoid,    // max(0, min(1, alpha*x + beta))
  HardSwish,      // x * HardSigmoid(x) with alpha 1/6, beta 0.5
  Sigmoid,        // 1 / (1 + exp(-x))
  Add,            // elementwise, same shape
  Mul,            // elementwise; second operand may be per-channel (C,1,1)
  Concat,         // along channels
  AvgPool,        // kernel, stride, pad (count_include_pad attribute)
  GlobalAvgPool,  // mean over H and W
  MaxPool,        // kernel, stride, pad (padding never wins)
  Gemm,           // y = W x + b, W is [out][in]; input is flattened C*H*W
  Flatten,        // (C,H,W) -> (C*H*W,1,1) in CHW order
  Pad,            // constant zero padding of H and W
  Softmax,        // over channels of a (C,1,1) tensor
  LeakyRelu,      // x >= 0 ? x : alpha * x
  Tanh,           // tanh(x)
  PRelu,          // x >= 0 ? x : slope[c] * x (slopes in weights, one per channel)
  Slice,          // strided sub-box: channels from pad_b step dh, rows from pad_t
                  // step sh, columns from pad_l step sw; extents slice_c/h/w
  Shuffle,        // channel shuffle in `groups` groups (o = i*g + j reads j*(C/g) + i)
  Resize,         // nearest or bilinear to out_h x out_w (interp, coord, rounding)
  ConvTranspose,  // groups, stride, pads, dilation 1; weights stored as Conv's OIHW
  Transpose,      // permutes C, H, W: output axis a (0 C, 1 H, 2 W) is input axis perm[a]
  Identity,
};

const char* op_name(Op op);

// Fused activation of a producer (after folding). Clamp bounds are in the
// real domain; None means no clamp.
enum class Act : uint8_t { None, Relu, Relu6, Clip };

struct Shape {
  int c = 0, h = 0, w = 0;
  int64_t size() const { return int64_t(c) * h * w; }
  bool operator==(const Shape& o) const { return c == o.c && h == o.h && w == o.w; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
};

std::string to_string(const Shape& s);

struct Tensor {
  std::string name;
  Shape shape;
  int producer = -1;           // node index; -1 for the graph input
  std::vector<int> consumers;  // node indices
};

struct Node {
  std::string name;
  Op op = Op::Identity;
  std::vector<int> inputs;  // tensor indices
  int output = -1;          // tensor index

  // Conv / pools
  int kh = 1, kw = 1;
  int sh = 1, sw = 1;
  int pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int dh = 1, dw = 1;
  int groups = 1;
  bool count_include_pad = false;  // AvgPool

  // Resize: the output size and the mode, as core/ops/resize.h codes.
  int out_h = 0, out_w = 0;
  int interp = 1, coord = 1, rounding = 1;

  // Conv: OIHW [out][in/groups][kh][kw]; Gemm: [out][in]. bias may be empty.
  std::vector<float> weights;
  std::vector<float> bias;

  // BatchNorm
  std::vector<float> gamma, beta, mean, var;
  float eps = 1e-5f;

  // Slice: output extents (the starts and steps are in the geometry above)
  int slice_c = 0, slice_h = 0, slice_w = 0;

  // Transpose: output axis a (0 channels, 1 rows, 2 columns) is input axis perm[a]
  int perm[3] = {0, 1, 2};

  // Clip bounds; HardSigmoid alpha/beta; LeakyRelu alpha
  float lo = 0.f, hi = 6.f;
  float alpha = 0.2f, beta_hs = 0.5f;

  // Activation fused into this node by folding (Conv, Gemm, Add).
  Act act = Act::None;
  float act_lo = 0.f, act_hi = 0.f;  // for Act::Clip / Relu6 (0,6)

  // Elementwise activations (is_activation): a per-channel affine applied
  // after the function, y = f(x) * post_s[c] + post_t[c], folded in from the
  // BatchNorms that followed it (model/fold.h). Empty: none.
  std::vector<float> post_s, post_t;
};

// Relu, Clip, HardSigmoid, HardSwish, Sigmoid, LeakyRelu, Tanh, PRelu: one
// value from one value, which quantisation makes a table.
bool is_activation(Op op);
// Whether activation n's table depends on the channel (PRelu's slopes, a
// post-affine that differs between channels): ChannelLut, else Lut.
bool per_channel_table(const Node& n);

// How a photo becomes a model's input: input channel c is
// (pixel[p]/255 - mean[c]) / std[c], with p = c for RGB models and p = 2 - c
// for BGR ones (the model's channel 0 is the photo's blue).
struct ImageNorm {
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};
  bool bgr = false;
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;  // topological order
  int input = -1;           // tensor index
  int output = -1;          // tensor index
  std::vector<std::string> labels;  // class names, may be empty
  std::string source;               // "tfjs:..." or "onnx:..." for reports

  ImageNorm in_norm;  // how a photo becomes the input tensor

  const Shape& shape(int tensor) const { return tensors.at(tensor).shape; }
  int add_tensor(const std::string& name, Shape s);
  // Appends a node, wires producer/consumers. Returns node index.
  int add_node(Node n);
  // Rebuilds consumer lists and checks topological order, shapes and edges.
  // Throws Error on any inconsistency.
  void validate();
  // Removes nodes marked Identity (rewiring their consumers) and unused
  // tensors; keeps indices dense.
  void compact();
};

// Shape inference for one node from its input shapes (throws Error).
Shape infer_shape(const Graph& g, const Node& n);

int64_t node_macs(const Graph& g, const Node& n);
int64_t node_params(const Node& n);

}  // namespace ts
