// The kernels' public entry points (layer.h), dispatching through the op
// table (op.h). What is common to every op lives here: range and box
// arithmetic, the checks before eval (range, descriptor, windows, held
// channels) and the walk of a run or box into the blocks an op's eval takes.
// Everything specific to one op is in src/core/ops/<op>.cpp.
#include "core/layer.h"

#include "core/op.h"
#include "core/ops/common.h"

namespace ts {
namespace core {

namespace {

using namespace opk;

// What every op's box and MAC arithmetic needs: a known op, an operand count
// the descriptor can hold, a non-empty output. Pointers are not looked at:
// boxes are also computed from descriptors that carry no data (planner,
// fragment checks).
const OpDef* base_def(const LayerDesc& L) {
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return nullptr;
  if (L.out.c <= 0 || L.out.h <= 0 || L.out.w <= 0) return nullptr;
  return op_def(L.op);
}

inline bool covers(const View& v, const Box& b) {
  if (b.empty()) return true;
  return v.data != nullptr && v.c0 <= b.c0 && v.c0 + v.nc >= b.c1 && v.h0 <= b.h0 && v.h0 + v.nh >= b.h1;
}

// The smallest box holding outputs [begin, end) (end > begin): its channels;
// its rows exactly within one channel, every row across channels.
OutBox run_box(const LayerDesc& L, int32_t begin, int32_t end) {
  const int32_t hw = L.out.h * L.out.w;
  OutBox b;
  b.c0 = begin / hw;
  b.c1 = (end - 1) / hw + 1;
  b.y0 = 0;
  b.y1 = L.out.h;
  if (b.c1 == b.c0 + 1) {
    b.y0 = (begin % hw) / L.out.w;
    b.y1 = ((end - 1) % hw) / L.out.w + 1;
  }
  b.x0 = 0;
  b.x1 = L.out.w;
  return b;
}

// The checks common to compute_range and compute_box, on a non-empty box
// inside the output: descriptor, windows covering what the box reads (bb:
// the box whose inputs are read), per-channel data held.
KernelStatus check(const OpDef* op, const LayerDesc& L, const View* in, const OutBox& bb, int32_t oc_count) {
  if (!op || op->check(L).refused() || !op->data_ok(L)) return KernelStatus::BadLayer;
  for (int i = 0; i < L.n_inputs; ++i)
    if (!covers(in[i], op->input_box(L, i, bb))) return KernelStatus::ViewTooSmall;
  if (op->per_channel_data && (bb.c0 < L.oc_base || int64_t(bb.c1) > int64_t(L.oc_base) + oc_count))
    return KernelStatus::MissingData;
  return KernelStatus::Ok;
}

}  // namespace

// The op table, indexed by op code (the list is TS_QOPS, core/layer.h).
#define TS_QOP_ENTRY(name, code) &k##name##Op,
const OpDef* const kOps[kNumOps] = {TS_QOPS(TS_QOP_ENTRY)};
#undef TS_QOP_ENTRY

// TS_QOPS numbers the ops 1 .. kNumOps in order: the table is indexed by code - 1.
#define TS_QOP_CODE(name, code) code,
constexpr uint8_t kCodes[kNumOps] = {TS_QOPS(TS_QOP_CODE)};
#undef TS_QOP_CODE
constexpr bool codes_in_order() {
  for (int i = 0; i < kNumOps; ++i)
    if (kCodes[i] != i + 1) return false;
  return true;
}
static_assert(codes_in_order(), "TS_QOPS must number the ops 1, 2, 3, ... in order");

const OpDef* op_def(QOp op) {
  const uint8_t code = uint8_t(op);
  if (!qop_known(code)) return nullptr;
  return kOps[code - 1];
}

// The bounds shared by every op (core/op.h): what keeps box and kernel
// arithmetic inside int32 whatever the op.
Why desc_bounds(const LayerDesc& L) {
  constexpr int64_t kMaxElems = int64_t(1) << 28;  // elements of one tensor
  constexpr int32_t kMaxGeom = 1 << 10;            // kernel, stride, dilation, padding
  auto dims_ok = [](const Dims& d) {
    return d.c >= 1 && d.h >= 1 && d.w >= 1 && int64_t(d.c) * d.h * d.w <= kMaxElems;
  };
  if (L.n_inputs < 1 || L.n_inputs > kMaxInputs) return Why{"n_inputs", L.n_inputs, "bad input count"};
  if (L.count_include_pad > 1) return Why{"count_include_pad", L.count_include_pad, "bad count_include_pad"};
  if (!dims_ok(L.out)) return Why{"out.c", L.out.c, "bad output shape"};
  static const char* const kIn[kMaxInputs] = {"in[0]", "in[1]", "in[2]", "in[3]", "in[4]", "in[5]", "in[6]", "in[7]"};
  static const char* const kZp[kMaxInputs] = {"in_zp[0]", "in_zp[1]", "in_zp[2]", "in_zp[3]",
                                              "in_zp[4]", "in_zp[5]", "in_zp[6]", "in_zp[7]"};
  static const char* const kSh[kMaxInputs] = {"in_shift[0]", "in_shift[1]", "in_shift[2]", "in_shift[3]",
                                              "in_shift[4]", "in_shift[5]", "in_shift[6]", "in_shift[7]"};
  for (int k = 0; k < L.n_inputs; ++k) {
    if (!dims_ok(L.in[k])) return Why{kIn[k], L.in[k].c, "bad input shape"};
    if (!in_i8(L.in_zp[k])) return Why{kZp[k], L.in_zp[k], "bad input zero point"};
    if (!shift_ok(L.in_shift[k])) return Why{kSh[k], L.in_shift[k], "input shift out of range"};
  }
  if (!in_i8(L.out_zp)) return Why{"out_zp", L.out_zp, "bad output zero point"};
  if (!in_i8(L.act_min) || L.act_min > L.act_max) return Why{"act_min", L.act_min, "bad activation clamp"};
  if (!in_i8(L.act_max)) return Why{"act_max", L.act_max, "bad activation clamp"};
  const struct { const char* name; int32_t v, lo; } geom[] = {
      {"kh", L.kh, 1},       {"kw", L.kw, 1},       {"sh", L.sh, 1},       {"sw", L.sw, 1},
      {"dh", L.dh, 1},       {"dw", L.dw, 1},       {"pad_t", L.pad_t, 0}, {"pad_l", L.pad_l, 0},
      {"pad_b", L.pad_b, 0}, {"pad_r", L.pad_r, 0}};
  for (const auto& g : geom)
    if (g.v < g.lo || g.v > kMaxGeom)
      return Why{g.name, g.v, g.lo ? "kernel, stride or dilation out of range" : "padding out of range"};
  if (L.groups < 1 || L.groups > L.in[0].c) return Why{"groups", L.groups, "bad group count"};
  if (L.left_shift < 0 || L.left_shift > 22) return Why{"left_shift", L.left_shift, "output shift out of range"};
  if (!shift_ok(L.out_shift)) return Why{"out_shift", L.out_shift, "output shift out of range"};
  return Why{};
}

Why check_desc(const LayerDesc& L) {
  const OpDef* op = op_def(L.op);
  if (!op) return Why{"op", int64_t(uint8_t(L.op)), "unknown op"};
  const Why b = desc_bounds(L);
  return b.refused() ? b : op->check(L);
}

const char* qop_name(QOp op) {
  const OpDef* d = op_def(op);
  return d ? d->name : "?";
}

bool layer_valid(const LayerDesc& L) {
  const OpDef* op = base_def(L);
  return op && !op->check(L).refused() && op->data_ok(L);
}

void output_channels(const LayerDesc& L, int32_t begin, int32_t end, int32_t* first, int32_t* last) {
  const int32_t hw = L.out.h * L.out.w;
  *first = begin / hw;
  *last = (end - 1) / hw;
}

Box input_box(const LayerDesc& L, int i, int32_t begin, int32_t end) {
  const OpDef* op = base_def(L);
  if (end <= begin || i < 0 || !op || i >= L.n_inputs) return Box{};
  return op->input_box(L, i, run_box(L, begin, end));
}

Box input_box(const LayerDesc& L, int i, const OutBox& b) {
  const OpDef* op = base_def(L);
  if (b.empty() || i < 0 || !op || i >= L.n_inputs) return Box{};
  if (b.c0 < 0 || b.c1 > L.out.c || b.y0 < 0 || b.y1 > L.out.h || b.x0 < 0 || b.x1 > L.out.w) return Box{};
  return op->input_box(L, i, b);
}

uint64_t range_macs(const LayerDesc& L, int32_t begin, int32_t end) {
  const OpDef* op = base_def(L);
  if (!op || end <= begin) return 0;
  return uint64_t(int64_t(end) - begin) * op->macs_per_output(L);
}

uint64_t box_macs(const LayerDesc& L, const OutBox& b) {
  const OpDef* op = base_def(L);
  if (!op || b.empty()) return 0;
  return uint64_t(b.elems()) * op->macs_per_output(L);
}

KernelStatus compute_range(const LayerDesc& L, const View* in, int32_t begin, int32_t end, int8_t* out,
                           int32_t oc_count) {
  const int64_t total = int64_t(L.out.c) * L.out.h * L.out.w;
  if (begin < 0 || end > total || begin > end) return KernelStatus::BadRange;
  if (begin == end) return KernelStatus::Ok;
  const OpDef* op = base_def(L);
  if (!op) return KernelStatus::BadLayer;
  const KernelStatus st = check(op, L, in, run_box(L, begin, end), oc_count);
  if (st != KernelStatus::Ok) return st;
  // A partial first channel, whole channels as one block, a partial last.
  const int32_t hw = L.out.h * L.out.w;
  int32_t pos = begin;
  while (pos < end) {
    const int32_t c = pos / hw, p = pos % hw;
    KernelStatus s;
    if (p == 0 && end - pos >= hw) {
      const int32_t whole = (end - pos) / hw;
      s = op->eval(L, in, c, c + whole, 0, hw, out + (pos - begin), hw);
      pos += whole * hw;
    } else {
      const int32_t p1 = mini(hw, p + (end - pos));
      s = op->eval(L, in, c, c + 1, p, p1, out + (pos - begin), p1 - p);
      pos += p1 - p;
    }
    if (s != KernelStatus::Ok) return s;
  }
  return KernelStatus::Ok;
}

KernelStatus compute_box(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out, int32_t oc_count) {
  if (b.empty()) return KernelStatus::Ok;
  if (b.c0 < 0 || b.c1 > L.out.c || b.y0 < 0 || b.y1 > L.out.h || b.x0 < 0 || b.x1 > L.out.w)
    return KernelStatus::BadRange;
  const OpDef* op = base_def(L);
  if (!op) return KernelStatus::BadLayer;
  const KernelStatus st = check(op, L, in, b, oc_count);
  if (st != KernelStatus::Ok) return st;
  const int32_t W = L.out.w, bh = b.y1 - b.y0, bw = b.x1 - b.x0;
  if (b.x0 == 0 && b.x1 == W) return op->eval(L, in, b.c0, b.c1, b.y0 * W, b.y1 * W, out, int64_t(bh) * W);
  // Narrower than the plane: the op's box path if it takes the box, else one
  // block of all the box's channels per row.
  if (op->eval_box && op->eval_box(L, in, b, out)) return KernelStatus::Ok;
  for (int32_t y = b.y0; y < b.y1; ++y) {
    const KernelStatus s =
        op->eval(L, in, b.c0, b.c1, y * W + b.x0, y * W + b.x1, out + int64_t(y - b.y0) * bw, int64_t(bh) * bw);
    if (s != KernelStatus::Ok) return s;
  }
  return KernelStatus::Ok;
}

KernelStatus compute_positions(const LayerDesc& L, const View* in, int32_t c0, int32_t c1, int32_t p0, int32_t p1,
                               int8_t* out, int32_t oc_count, int64_t cpitch) {
  if (p1 <= p0 || c1 <= c0) return KernelStatus::Ok;
  const int32_t W = L.out.w, hw = L.out.h * W;
  if (c0 < 0 || c1 > L.out.c || p0 < 0 || p1 > hw || cpitch < int64_t(p1 - p0)) return KernelStatus::BadRange;
  const OpDef* op = base_def(L);
  if (!op) return KernelStatus::BadLayer;
  // Checked as the rows the positions lie in (what the views must hold).
  OutBox b;
  b.c0 = c0; b.c1 = c1; b.y0 = p0 / W; b.y1 = (p1 - 1) / W + 1;
  b.x0 = b.y1 - b.y0 == 1 ? p0 % W : 0;
  b.x1 = b.y1 - b.y0 == 1 ? (p1 - 1) % W + 1 : W;
  const KernelStatus st = check(op, L, in, b, oc_count);
  if (st != KernelStatus::Ok) return st;
  return op->eval(L, in, c0, c1, p0, p1, out, cpitch);
}

KernelStatus compute_box_pitched(const LayerDesc& L, const View* in, const OutBox& b, int8_t* out, int32_t oc_count,
                                 int64_t cpitch) {
  if (b.empty()) return KernelStatus::Ok;
  if (b.x0 != 0 || b.x1 != L.out.w) return KernelStatus::BadRange;
  return compute_positions(L, in, b.c0, b.c1, b.y0 * L.out.w, b.y1 * L.out.w, out, oc_count, cpitch);
}

}  // namespace core
}  // namespace ts
