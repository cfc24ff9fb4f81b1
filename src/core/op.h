// The op table: everything the project knows about one quantised op, in one
// place per op (src/core/ops/<op>.cpp), the TensorFlow Lite Micro way.
//
// Every user asks this table instead of switching on QOp itself: the kernels'
// public entry points (layer.h: input_box, compute_range, compute_box,
// range_macs, layer_valid), the fragment reader (desc_bounds, check, layout),
// the quantised model's loader (the same, and model_check), the planner
// (boxes, access patterns, MACs, per-channel data), the fragment writer
// (layout), the board's emulated clock and the simulator (MACs), and the
// float IR's MAC count (model/graph.cpp builds a geometry-only LayerDesc and
// asks range_macs).
//
// MAC count, defined once here and used everywhere: multiply-accumulates per
// output element, the same for every output of a layer:
//   Conv           cin / groups x kh x kw   (padded taps included)
//   Gemm           fan_in = C x H x W of the input
//   AvgPool/MaxPool kh x kw                 (window taps, padded ones included)
//   GlobalAvgPool  H x W of the input
//   Add, Mul, Concat, Lut, Pad, Slice, Shuffle, ChannelLut, Transpose
//                  1                        (one operation per output element)
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

// An int8 value (zero points, clamp bounds), and a shift the fixed-point
// helpers accept (core/qmath.h): the bounds desc_bounds, the fragment
// reader and the quantised model's loader all apply.
inline bool in_i8(int32_t v) { return v >= -128 && v <= 127; }
inline bool shift_ok(int32_t v) { return v >= -31 && v <= 30; }

// Which input elements a run of outputs reads, as a pattern. Each op declares
// the pattern of each operand (OpDef::access); the planner's exact-needs code
// (src/plan/needs.cpp) enumerates the elements of each pattern and never looks
// at the op. A new op with a pattern below touches nothing there.
struct Access {
  enum Kind : uint8_t {
    kWindow,        // a sliding window over each plane (Conv, pools, Pad): output
                    // (oy, ox) reads input (oy*sh - pt + ky*dh, ox*sw - pl + kx*dw)
                    // for taps inside the input; output channel o reads the
                    // cin_g input channels of group o / cout_g
    kAll,           // every output reads the whole operand (Gemm)
    kPlanes,        // output channel c reads the whole input plane c (GlobalAvgPool)
    kSame,          // output element e reads element e (elementwise ops); of an
                    // operand in the output's shape the kernel reads element e
                    // before it writes output e and never after, so the output
                    // may be computed over the operand in place (plan/arena.cpp)
    kPerChannel,    // output channel c reads element c (a (C,1,1) operand)
    kChannelSlice,  // output channels [offset, offset + C) read the operand's C
                    // channels at the same positions (Concat)
    kChannelShuffle,  // output channel o reads the whole-channel source
                      // shuffle_source(o, cout_g, C) at the same positions (Shuffle)
    kSpans,         // upsampling (Resize, ConvTranspose): output (oy, ox) reads
                    // input rows span(0, oy) x columns span(1, ox), each a
                    // half-open range non-decreasing in the output index;
                    // channels grouped as kWindow (cin_g, cout_g)
    kPermute,       // output (o0, o1, o2) (channel, row, column) reads the
                    // input element whose axis perm[a] is o[a] (Transpose)
  };
  Kind kind = kSame;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;  // kWindow
  int32_t cin_g = 1, cout_g = 1;                                          // kWindow
  // kWindow: group grp's input channels start at c_off + grp * c_step
  // (c_step 0: cin_g, the grouped convolution's); a Slice's channel start and step.
  int32_t c_off = 0, c_step = 0;
  int32_t offset = 0;                                                     // kChannelSlice
  // kSpans: the input indices [*lo, *hi) along axis (0 rows, 1 columns) that
  // output index o reads, clipped to the input (empty: *hi <= *lo).
  void (*span)(const LayerDesc& L, int axis, int32_t o, int32_t* lo, int32_t* hi) = nullptr;
  // kPermute: output axis a (0 channels, 1 rows, 2 columns) is input axis perm[a].
  int8_t perm[3] = {0, 1, 2};
};

// The input channel that output channel o of a channel shuffle of C
// channels in g groups reads: o = i*g + j reads j*(C/g) + i.
inline int32_t shuffle_source(int32_t o, int32_t g, int32_t C) { return (o % g) * (C / g) + o / g; }

// Transpose keeps its permutation in kh, kw, dh as 1 + an axis: output axis a
// (0 channels, 1 rows, 2 columns) is input axis transpose_axis(L, a). The
// encoding is shared by the quantiser, the float IR's MAC count and the ONNX
// exporter (set_transpose_perm).
inline int32_t transpose_axis(const LayerDesc& L, int a) { return (a == 0 ? L.kh : a == 1 ? L.kw : L.dh) - 1; }
inline void set_transpose_perm(LayerDesc& L, const int* perm) {
  L.kh = perm[0] + 1;
  L.kw = perm[1] + 1;
  L.dh = perm[2] + 1;
}

// The data arrays of a layer share (the five of a fragment entry and of a
// quantised node), as element counts.
enum DataArray { kWeights = 0, kBias = 1, kMult = 2, kShift = 3, kLut = 4, kNumArrays = 5 };
struct DataLayout {
  int64_t n[kNumArrays] = {};
};

// A variant of an op: shares of its input with int32 partial sums (strategy
// `reduce`, core/partial.h). A share of input channels [i0, i1) multiplies
// them for every output channel; the sums of one output channel sit at
// `positions` places, and each input channel contributes `k_per_channel`
// elements to each (its weights per output channel). A share of input rows
// (`rows`) sums rows [i0, i1) of every channel: one sum per output channel,
// no weights, the op's scalar requantiser at the end (GlobalAvgPool).
struct PartialForm {
  bool (*ok)(const LayerDesc& L);  // this layer (one operand, checked) can be split so
  int32_t (*positions)(const LayerDesc& L);
  int32_t (*k_per_channel)(const LayerDesc& L);
  bool rows = false;
};

struct OpDef {
  QOp op;
  const char* name;
  // Operand count, operand and output shapes, and the geometry the kernel
  // and the box arithmetic rely on; the field at fault if not. Follows no
  // pointer: also used on descriptors that carry no data (fragment reader,
  // planner). Called on descriptors within the common bounds (desc_bounds).
  Why (*check)(const LayerDesc& L);
  // What the quantiser guarantees besides (geometry that agrees with the
  // shapes, e.g. a window's output size); checked on a quantised model, not
  // needed by the kernels. nullptr: nothing more.
  Why (*model_check)(const LayerDesc& L);
  // The data pointers eval follows (weights, tables). Called after check.
  bool (*data_ok)(const LayerDesc& L);
  // True if the op reads per-output-channel data indexed from oc_base
  // (weights, bias, multipliers): eval needs the box's channels held, and
  // every array of its layout is `channels` times that of one channel.
  // Otherwise its arrays are shared: every share holds them whole.
  bool per_channel_data;
  // Element counts of the data arrays a share holding `channels` output
  // channels stores (per-channel ops; other ops ignore `channels`). A bias
  // array may be left out (the kernels read a missing bias as 0).
  DataLayout (*layout)(const LayerDesc& L, int32_t channels);
  // Channels and rows (full width) of input i that the outputs of box b
  // read; empty if none. b is non-empty, 0 <= i < n_inputs, the output dims
  // are positive; must return an empty box on geometry it cannot divide by.
  Box (*input_box)(const LayerDesc& L, int i, const OutBox& b);
  // The elements of input i any output reads, as a pattern (see Access);
  // called on a descriptor that passes check.
  Access (*access)(const LayerDesc& L, int i);
  // Multiply-accumulates per output element (see above); 0 on geometry
  // check refuses.
  uint64_t (*macs_per_output)(const LayerDesc& L);
  // Computes channels [c0, c1) x plane positions [p0, p1) (position =
  // y * out.w + x) into out[(c - c0) * cstride + (p - p0)]. Called only on a
  // valid layer (check, data_ok), with views covering input_box and the
  // per-channel data present.
  KernelStatus (*eval)(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1,
                       int8_t* out, int64_t cstride);
  // Its partial-sum variant, nullptr if it has none.
  const PartialForm* partial;
  // Optional: box b (non-empty, narrower than the plane, inside the output;
  // checked as for eval) at once, out in box-local C,Y,X order; false,
  // having written nothing, when it does not take the box (compute_box then
  // calls eval row by row). nullptr: none.
  bool (*eval_box)(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out) = nullptr;
};

// The definition of op, or nullptr for a value outside QOp.
const OpDef* op_def(QOp op);

// The bounds every descriptor meets whatever its op, before its op's check:
// shapes, zero points, clamp, geometry ranges, shifts. The fragment reader
// and the quantised model's loader both start with it.
Why desc_bounds(const LayerDesc& L);

// desc_bounds, then the op's check (an unknown op is refused on `op`).
Why check_desc(const LayerDesc& L);

// One definition per op file (the list is TS_QOPS, core/layer.h).
#define TS_QOP_DECLARE(name, code) extern const OpDef k##name##Op;
TS_QOPS(TS_QOP_DECLARE)
#undef TS_QOP_DECLARE

}  // namespace core
}  // namespace ts
