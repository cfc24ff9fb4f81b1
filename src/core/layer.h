// One quantised layer as a board sees it, and the kernels that compute any
// contiguous run (or box) of its output neurons.
//
// A "neuron" is one element of a layer's output tensor, numbered in C-H-W
// order (the paper's split unit). Every kernel computes outputs [begin, end)
// from input *windows*: a window holds a contiguous range of channels and of
// rows, always at full width. The same code computes a whole layer in the
// single-process reference (full windows, full range) and a board's share in
// a distributed run, which is what makes the two bit-identical by
// construction; the tests check the plumbing around it.
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS, no floating point.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace ts {
namespace core {

constexpr int kMaxInputs = 8;

// Every quantised op: its name and its code (the byte a fragment and a .tsqm
// file store). This list is the one place an op is registered: it makes the
// enum below and the op table (core/op.h, kernels.cpp); each op's knowledge
// lives in its own file, src/core/ops/<op>.cpp, which defines k<Name>Op.
//   Conv           groups (incl. depthwise), stride, dilation, asymmetric zero pad
//   Gemm           fully connected: every output reads the whole input
//   Add            two operands, same shape, rescaled to a common scale
//   Mul            second operand same shape or per-channel (C,1,1)
//   Concat         along channels, each operand requantised to the output
//   AvgPool        window average; divisor from count_include_pad
//   GlobalAvgPool  mean over each plane
//   MaxPool        output shares the input's quantisation
//   Lut            elementwise int8 -> int8 table (activations not fused)
//   Pad            explicit zero padding that could not be folded
//   Slice          strided sub-box of channels, rows and columns (Slice, Split)
//   Shuffle        channel shuffle: a permutation of whole channels (groups)
//   ChannelLut     elementwise int8 -> int8 table per channel (PRelu)
//   Resize         nearest or bilinear upsampling of H and W (ops/resize.h:
//                  the mode in kh, kw, dh)
//   ConvTranspose  transposed convolution: groups, stride, pads, dilation 1
#define TS_QOPS(X) \
  X(Conv, 1)       \
  X(Gemm, 2)       \
  X(Add, 3)        \
  X(Mul, 4)        \
  X(Concat, 5)     \
  X(AvgPool, 6)    \
  X(GlobalAvgPool, 7) \
  X(MaxPool, 8)    \
  X(Lut, 9)        \
  X(Pad, 10)       \
  X(Slice, 11)     \
  X(Shuffle, 12)   \
  X(ChannelLut, 13) \
  X(Resize, 14)    \
  X(ConvTranspose, 15) \
  X(Transpose, 16)

enum class QOp : uint8_t {
#define TS_QOP_ENUM(name, code) name = code,
  TS_QOPS(TS_QOP_ENUM)
#undef TS_QOP_ENUM
};

// Op codes are 1 .. kNumOps (the list above numbers them without gaps).
#define TS_QOP_COUNT(name, code) +1
constexpr int kNumOps = 0 TS_QOPS(TS_QOP_COUNT);
#undef TS_QOP_COUNT

// True for a code of the list above.
inline bool qop_known(uint8_t code) { return code >= 1 && code <= kNumOps; }

// Why a descriptor or a fragment entry is refused: the field (its name in
// LayerDesc or in the fragment layout, core/fragment.h), the value found
// there and, where it helps, a few words of why. field == nullptr: accepted.
struct Why {
  const char* field = nullptr;
  int64_t value = 0;
  const char* what = nullptr;
  bool refused() const { return field != nullptr; }
};

const char* qop_name(QOp op);

struct Dims {
  int32_t c = 0, h = 0, w = 0;
  int32_t size() const { return c * h * w; }
};

// A window of a CHW int8 tensor: channels [c0, c0+nc), rows [h0, h0+nh), all
// columns. Element (c, y, x) lives at data[((c - c0) * nh + (y - h0)) * W + x].
struct View {
  const int8_t* data = nullptr;
  int32_t c0 = 0, nc = 0, h0 = 0, nh = 0;
};

// Half-open box of channels and rows of one input needed by a run of outputs.
struct Box {
  int32_t c0 = 0, c1 = 0, h0 = 0, h1 = 0;  // [c0,c1) x [h0,h1)
  bool empty() const { return c1 <= c0 || h1 <= h0; }
  int64_t elems(int32_t w) const { return empty() ? 0 : int64_t(c1 - c0) * (h1 - h0) * w; }
};

struct LayerDesc {
  QOp op = QOp::Conv;
  uint8_t n_inputs = 1;
  uint8_t count_include_pad = 0;  // AvgPool
  Dims in[kMaxInputs];
  int32_t in_zp[kMaxInputs] = {};
  Dims out;
  int32_t out_zp = 0;
  int32_t act_min = -128, act_max = 127;  // fused activation as an int8 clamp

  // Geometry (Conv, pools, Pad). Slice keeps its starts and steps here
  // (channels pad_b, dh; rows pad_t, sh; columns pad_l, sw: ops/slice.cpp);
  // Shuffle its group count in `groups`; Transpose its permutation in kh,
  // kw, dh (core/op.h, transpose_axis).
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int32_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int32_t groups = 1;

  // Per-output-channel data for Conv and Gemm, indexed by (o - oc_base), so a
  // board stores only the kernels of the channels it computes.
  // Conv weights: [o][cin/groups][kh][kw]; Gemm weights: [o][fan_in].
  // AvgPool uses mult/shift as tables indexed by (window count - 1).
  int32_t oc_base = 0;
  const int8_t* weights = nullptr;
  const int32_t* bias = nullptr;
  const int32_t* mult = nullptr;
  const int32_t* shift = nullptr;

  // Add: per-operand rescale after `left_shift`; Concat: per-operand requant.
  int32_t in_mult[kMaxInputs] = {};
  int32_t in_shift[kMaxInputs] = {};
  int32_t left_shift = 0;
  // Add, Mul, GlobalAvgPool: output requantisation.
  int32_t out_mult = 0, out_shift = 0;

  const int8_t* lut = nullptr;  // Lut: 256 entries indexed by x + 128; ChannelLut:
                                // 256 per channel, indexed from oc_base
};

enum class KernelStatus : int32_t {
  Ok = 0,
  BadRange = 1,     // begin/end outside the output tensor
  ViewTooSmall = 2, // an input window does not cover the needed box
  BadLayer = 3,     // inconsistent descriptor
  MissingData = 4,  // a channel's weights are not in this descriptor
};

// Output box: channels [c0,c1) x rows [y0,y1) x columns [x0,x1), half-open.
struct OutBox {
  int32_t c0 = 0, c1 = 0, y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  bool empty() const { return c1 <= c0 || y1 <= y0 || x1 <= x0; }
  int64_t elems() const { return empty() ? 0 : int64_t(c1 - c0) * (y1 - y0) * (x1 - x0); }
};

// Every op's knowledge (validation, input boxes, MAC count, eval) lives in
// one file per op, src/core/ops/<op>.cpp, reached through the op table of
// core/op.h; the functions below dispatch through it.

// Box of input `i` that outputs [begin, end) read. Empty if they read none
// of it (a Concat operand outside the run's channels).
Box input_box(const LayerDesc& L, int i, int32_t begin, int32_t end);

// Output channels [first, last] touched by outputs [begin, end).
void output_channels(const LayerDesc& L, int32_t begin, int32_t end, int32_t* first, int32_t* last);

// Computes outputs [begin, end) into out[0 .. end-begin). `oc_count` is the
// number of output channels whose per-channel data the descriptor holds
// (starting at oc_base); used to refuse reads past a board's fragment.
KernelStatus compute_range(const LayerDesc& L, const View* in, int32_t begin, int32_t end,
                           int8_t* out, int32_t oc_count);

// Channels and rows of input i (at full width) that the outputs of box b
// read; empty if none (or if b is empty or outside the output).
Box input_box(const LayerDesc& L, int i, const OutBox& b);

// Computes box b into out in box-local C,Y,X order
// (out[((c - c0) * (y1 - y0) + (y - y0)) * (x1 - x0) + (x - x0)]); identical
// values to compute_range over the same elements. Statuses as compute_range
// (BadRange: the box is not inside the output). Full-width boxes take a fast
// path (pointwise: one blocked matrix product over all channels of the box;
// other ops per channel over rows [y0,y1)); narrower boxes go to the op's
// box path where it has one (a kernel table's conv_box), else row by row.
KernelStatus compute_box(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out, int32_t oc_count);

// compute_box for a full-width box (x0 = 0, x1 = out.w) written with channel
// pitch `cpitch` >= (y1 - y0) * out.w: element (c, y, x) goes to
// out[(c - c0) * cpitch + (y - y0) * out.w + x]. This is how a board computes
// a band straight into a later layer's window (rows of every channel, with
// room for halo rows between them). BadRange for a narrower box or a pitch
// too small.
KernelStatus compute_box_pitched(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out, int32_t oc_count,
                                 int64_t cpitch);

// Plane positions [p0, p1) of channels [c0, c1), channel c's outputs at
// out + (c - c0) * cpitch (cpitch >= p1 - p0): the kernels' own unit, for a
// part of a band of positions (core/halo_first.h). BadRange outside the
// output or for a pitch too small.
KernelStatus compute_positions(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1,
                               int8_t* out, int32_t oc_count, int64_t cpitch);

// The one MAC count (defined in core/op.h): multiply-accumulates for outputs
// [begin, end) / for box b. 0 for an empty range or an unusable descriptor.
uint64_t range_macs(const LayerDesc& L, int32_t begin, int32_t end);
uint64_t box_macs(const LayerDesc& L, const OutBox& b);

// Everything eval needs before following a pointer: operand count, shapes
// and geometry (the op's validate, as the fragment reader checks them) and
// its data pointers (weights, multipliers, tables).
bool layer_valid(const LayerDesc& L);

}  // namespace core
}  // namespace ts
