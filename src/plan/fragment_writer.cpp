#include "plan/fragment_writer.h"

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <limits>

#include "core/bytes.h"
#include "core/crc32.h"
#include "core/op.h"
#include "core/partial.h"
#include "util/atomic_file.h"

namespace ts::plan {

namespace {

static_assert(core::frag::kEntryBytes % 8 == 0 && core::frag::kHeaderBytes % 8 == 0, "8-byte multiples keep sections aligned");

uint64_t align4(uint64_t n) { return (n + 3u) & ~uint64_t(3); }

// What one worker stores of one node: slices of the QGraph's vectors.
struct Slice {
  const int8_t* w = nullptr;
  uint64_t wn = 0;
  const int32_t* b = nullptr;
  uint64_t bn = 0;
  const int32_t* m = nullptr;
  uint64_t mn = 0;
  const int32_t* s = nullptr;
  uint64_t sn = 0;
  const int8_t* lut = nullptr;
  uint64_t ln = 0;
};

// The weights a partial share stores: input channels [ci0, ci1) of every
// output channel, [o][k] with k over the share's (ci1 - ci0) x kper inputs.
std::vector<int8_t> partial_weights(const QNode& node, const LayerShare& ls) {
  const core::LayerDesc& d = node.geo;
  if (core::partial_weights(d, ls.psum.ci0, ls.psum.ci1) == 0) return {};  // row shares (or none) hold no weights
  const int64_t kper = core::partial_k_per_channel(d);
  const int64_t fan = int64_t(d.in[0].c) * kper;  // weights per output channel
  const int64_t k0 = ls.psum.ci0 * kper, k1 = ls.psum.ci1 * kper;
  std::vector<int8_t> w;
  w.reserve(size_t(d.out.c * (k1 - k0)));
  for (int64_t o = 0; o < d.out.c; ++o)
    w.insert(w.end(), node.weights.begin() + o * fan + k0, node.weights.begin() + o * fan + k1);
  return w;
}

// The slices of the node's arrays the share stores, as the op lays them out
// (core/op.h): a per-channel op's arrays from channel oc_base on, oc_count
// channels' worth (the bias only if the model has one); other ops' arrays
// whole. A partial share stores other weights (partial_weights).
Slice slice_of(const QNode& node, const LayerShare& ls) {
  Slice sl;
  if (!ls.active()) return sl;
  const core::OpDef* op = core::op_def(node.op);
  const core::LayerDesc& g = node.geo;
  uint64_t first[core::kNumArrays] = {}, count[core::kNumArrays] = {};
  if (op->per_channel_data) {
    const core::DataLayout one = op->layout(g, 1), held = op->layout(g, ls.oc_count);
    for (int a = 0; a < core::kNumArrays; ++a) {
      first[a] = uint64_t(one.n[a]) * uint64_t(ls.oc_base);
      count[a] = uint64_t(held.n[a]);
    }
  } else {
    const core::DataLayout all = op->layout(g, 0);
    for (int a = 0; a < core::kNumArrays; ++a) count[a] = uint64_t(all.n[a]);
  }
  if (node.bias.empty()) count[core::kBias] = 0;
  auto at = [&](const auto& v, int a) { return count[a] ? v.data() + first[a] : nullptr; };
  sl.w = at(node.weights, core::kWeights);
  sl.wn = count[core::kWeights];
  if (ls.psum.on)  // the caller writes partial_weights() instead
    sl.wn = uint64_t(core::partial_weights(g, ls.psum.ci0, ls.psum.ci1));
  sl.b = at(node.bias, core::kBias);
  sl.bn = count[core::kBias];
  sl.m = at(node.mult, core::kMult);
  sl.mn = count[core::kMult];
  sl.s = at(node.shift, core::kShift);
  sl.sn = count[core::kShift];
  sl.lut = at(node.lut, core::kLut);
  sl.ln = count[core::kLut];
  return sl;
}

uint64_t layer_data_bytes(const Slice& sl, const LayerShare& ls) {
  namespace f = core::frag;
  uint64_t n = align4(sl.wn) + 4 * (sl.bn + sl.mn + sl.sn) + align4(sl.ln);
  n += f::kRegionBytes * uint64_t(ls.regions.size()) + f::kSendBytes * uint64_t(ls.sends.size());
  if (ls.psum.on && ls.active()) n += f::kPsBytes + f::kSendBytes * uint64_t(ls.psum.sends.size());
  for (const auto& in : ls.inputs) n += f::kRunBytes * uint64_t(in.recv.size() + in.local.size());
  return n;
}

class Buf {
 public:
  explicit Buf(size_t n) : b(n, 0) {}
  void u8(size_t at, uint8_t v) { b[at] = v; }
  void u16(size_t at, uint16_t v) { le::put_u16(&b[at], v); }
  void u32(size_t at, uint32_t v) { le::put_u32(&b[at], v); }
  void i32(size_t at, int32_t v) { u32(at, uint32_t(v)); }
  std::vector<uint8_t> b;
};

uint32_t checked_u32(uint64_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max()) throw Error(std::string("fragment: ") + what + " does not fit 32 bits");
  return uint32_t(v);
}

}  // namespace

int64_t fragment_bytes(const QGraph& q, const Plan& p, int worker) {
  if (worker < 0 || worker >= p.n_workers()) throw Error("fragment: worker index out of range");
  const WorkerPlan& wp = p.workers[size_t(worker)];
  uint64_t n = core::frag::kHeaderBytes + uint64_t(q.nodes.size()) * core::frag::kEntryBytes + 4;
  for (size_t i = 0; i < q.nodes.size(); ++i) n += layer_data_bytes(slice_of(q.nodes[i], wp.layers[i]), wp.layers[i]);
  return int64_t(n);
}

namespace {

namespace f = core::frag;

// Writes one fragment: entries in place, arrays and records appended to the
// data section at `data`, in the order fragment_bytes() counts them.
struct FragWriter {
  Buf out;
  size_t data;

  // Data arrays, each 4-byte aligned (zero padding from the buffer).
  void put_i8(size_t field, const int8_t* src, uint64_t n) {
    out.u32(field, n ? uint32_t(data) : 0);
    out.u32(field + 4, uint32_t(n));
    for (uint64_t k = 0; k < n; ++k) out.b[data + k] = uint8_t(src[k]);
    data += size_t(align4(n));
  }
  void put_i32(size_t field, const int32_t* src, uint64_t n) {
    out.u32(field, n ? uint32_t(data) : 0);
    out.u32(field + 4, uint32_t(n));
    for (uint64_t k = 0; k < n; ++k) out.i32(data + 4 * k, src[k]);
    data += size_t(4 * n);
  }
  void put_runs(size_t field, const std::vector<core::InputRun>& runs) {
    out.u32(field, runs.empty() ? 0 : uint32_t(data));
    out.u32(field + 4, checked_u32(runs.size(), "run count"));
    for (const core::InputRun& r : runs) {
      out.u32(data, r.offset);
      out.u32(data + 4, r.count);
      data += f::kRunBytes;
    }
  }
  // One send record (core/fragment.h): the same for a layer's outputs and
  // for its partial sums.
  void put_send(const core::Send& s) {
    out.u16(data + f::kSendPeer, s.peer);
    out.u16(data + f::kSendLayer, s.layer);
    out.u8(data + f::kSendOperand, s.operand);
    out.u32(data + f::kSendOffset, s.offset);
    out.u32(data + f::kSendCount, s.count);
    out.u32(data + f::kSendPos, s.pos);
    data += f::kSendBytes;
  }

  void header(const Plan& p, int worker, size_t layers, uint32_t total);
  void entry_scalars(size_t e, size_t i, const QNode& node, const LayerShare& ls, uint8_t coding);
  void entry_records(size_t e, const QNode& node, const LayerShare& ls);
  void entry_slots(size_t e, const QNode& node, const LayerShare& ls);
};

void FragWriter::header(const Plan& p, int worker, size_t layers, uint32_t total) {
  const WorkerPlan& wp = p.workers[size_t(worker)];
  out.u32(f::kMagic, core::kFragMagic);
  out.u16(f::kVersion, core::kFragVersion);
  out.u16(f::kWorker, uint16_t(worker));
  out.u16(f::kNWorkers, uint16_t(p.n_workers()));
  out.u16(f::kReserved, 0);
  out.u32(f::kPlanId, p.plan_id);
  out.u32(f::kNLayers, uint32_t(layers));
  out.u32(f::kTotalBytes, total);
  out.u32(f::kArenaBytes, checked_u32(uint64_t(wp.peak_ram_bytes), "arena bytes"));
  out.u32(f::kEntrySize, f::kEntryBytes);
}

// The entry's fixed fields: op, flags, bounds, geometry, buffers.
// `coding`: the kEntryCoded / kEntryMasked flag of the layer's codec (plan/coding.h), or 0.
void FragWriter::entry_scalars(size_t e, size_t i, const QNode& node, const LayerShare& ls, uint8_t coding) {
  const core::LayerDesc& g = node.geo;
  out.u8(e + f::kOp, uint8_t(node.op));
  out.u8(e + f::kNInputs, g.n_inputs);
  out.u8(e + f::kIncludePad, g.count_include_pad);
  const bool partial = ls.active() && ls.psum.on;
  bool to_boards = false;
  for (const core::Send& s : ls.sends) to_boards = to_boards || s.peer != core::kPeerCoordinator;
  const uint8_t coded = ls.active() && to_boards ? coding : 0;
  const bool streamed = ls.active() && ls.stream_step > 0;
  out.u8(e + f::kFlags, uint8_t((ls.active() && ls.run_trigger ? core::kEntryRunTrigger : 0) |
                                (partial ? core::kEntryPartial : 0) | coded | (streamed ? core::kEntryStreamed : 0)));
  out.u32(e + f::kNode, uint32_t(i));
  // Bounds of the regions' flat indices.
  int64_t lo = 0, hi = 0;
  for (const core::Region& r : ls.regions)
    r.segments(g.out, [&](int32_t b, int32_t en) {
      if (lo == hi) {
        lo = b;
        hi = en;
      }
      lo = std::min<int64_t>(lo, b);
      hi = std::max<int64_t>(hi, en);
      return true;
    });
  out.i32(e + f::kOutBegin, int32_t(lo));
  out.i32(e + f::kOutEnd, int32_t(hi));
  out.i32(e + f::kOcBase, ls.oc_base);
  out.i32(e + f::kOcCount, ls.oc_count);
  const int32_t scalars[] = {g.out.c, g.out.h, g.out.w, g.out_zp, g.act_min, g.act_max, g.kh, g.kw,
                             g.sh,    g.sw,    g.dh,    g.dw,     g.pad_t,   g.pad_l,   g.pad_b, g.pad_r,
                             g.groups, g.left_shift, g.out_mult, g.out_shift};
  static_assert(sizeof(scalars) == f::kOutElems - f::kScalars, "20 scalars");
  for (size_t k = 0; k < 20; ++k) out.i32(e + f::kScalars + 4 * k, scalars[k]);
  out.u32(e + f::kOutElems, checked_u32(uint64_t(ls.out_elems), "outputs"));
  out.u32(e + f::kOutAt, ls.active() ? ls.out_at : 0);
  out.u32(e + f::kOutUntil, ls.active() ? uint32_t(ls.out_until) : 0);
  out.u32(e + f::kOutPitch, ls.active() ? ls.out_pitch : 0);
  // The partial-sum record's offset is set by entry_records for a partial share.
  out.u32(e + f::kPartial, streamed ? uint32_t(ls.stream_step) : 0);
  out.u32(e + f::kRamBytes, checked_u32(uint64_t(ls.ram_bytes), "layer RAM"));
}

// The entry's data arrays, regions, sends and partial-sum record.
void FragWriter::entry_records(size_t e, const QNode& node, const LayerShare& ls) {
  const Slice sl = slice_of(node, ls);
  const bool partial = ls.active() && ls.psum.on;
  std::vector<int8_t> pw;
  if (partial) pw = partial_weights(node, ls);
  put_i8(e + f::kArrays, partial ? pw.data() : sl.w, sl.wn);
  put_i32(e + f::kArrays + 8, sl.b, sl.bn);
  put_i32(e + f::kArrays + 16, sl.m, sl.mn);
  put_i32(e + f::kArrays + 24, sl.s, sl.sn);
  put_i8(e + f::kArrays + 32, sl.lut, sl.ln);

  out.u32(e + f::kRegions, ls.regions.empty() ? 0 : uint32_t(data));
  out.u32(e + f::kRegions + 4, checked_u32(ls.regions.size(), "region count"));
  for (const core::Region& r : ls.regions) {
    out.u32(data, uint32_t(r.kind));
    for (size_t k = 0; k < 6; ++k) out.i32(data + 4 + 4 * k, r.v[k]);
    data += f::kRegionBytes;
  }
  out.u32(e + f::kSends, ls.sends.empty() ? 0 : uint32_t(data));
  out.u32(e + f::kSends + 4, checked_u32(ls.sends.size(), "send count"));
  for (const core::Send& s : ls.sends) put_send(s);
  if (!partial) return;
  const PartialShare& ps = ls.psum;
  out.u32(e + f::kPartial, uint32_t(data));
  const size_t rec = data;
  data += f::kPsBytes;
  out.i32(rec + f::kPsCi0, ps.ci0);
  out.i32(rec + f::kPsCi1, ps.ci1);
  out.u32(rec + f::kPsAt, ps.at);
  out.u32(rec + f::kPsAccAt, ps.acc_at);
  out.u32(rec + f::kPsExpected, checked_u32(uint64_t(ps.recv_bytes), "partial sum bytes"));
  out.u32(rec + f::kPsSends, ps.sends.empty() ? 0 : uint32_t(data));
  out.u32(rec + f::kPsSends + 4, checked_u32(ps.sends.size(), "partial send count"));
  for (const core::Send& s : ps.sends) put_send(s);
}

// The entry's input slots: operand shapes, windows and runs.
void FragWriter::entry_slots(size_t e, const QNode& node, const LayerShare& ls) {
  const core::LayerDesc& g = node.geo;
  for (int k = 0; k < int(g.n_inputs) && k < core::kMaxInputs; ++k) {
    const size_t s = e + f::kSlots + size_t(k) * f::kSlotBytes;
    const int32_t v[] = {g.in[k].c, g.in[k].h, g.in[k].w};
    for (size_t j = 0; j < 3; ++j) out.i32(s + f::kInDims + 4 * j, v[j]);
    out.i32(s + f::kInZp, g.in_zp[k]);
    out.i32(s + f::kInMult, g.in_mult[k]);
    out.i32(s + f::kInShift, g.in_shift[k]);
    out.u32(s + f::kLocalLayer, f::kNoLayer);
    if (!ls.active() || size_t(k) >= ls.inputs.size()) continue;  // idle worker: no window, no runs
    const InputNeed& in = ls.inputs[size_t(k)];
    out.i32(s + f::kBox, in.box.c0);
    out.i32(s + f::kBox + 4, in.box.c1);
    out.i32(s + f::kBox + 8, in.box.h0);
    out.i32(s + f::kBox + 12, in.box.h1);
    put_runs(s + f::kRuns, in.recv);
    out.u32(s + f::kExpected, checked_u32(uint64_t(in.recv_elems), "expected count"));
    put_runs(s + f::kLocal, in.local);
    out.u32(s + f::kLocalLayer, in.view_of >= 0    ? uint32_t(in.view_of)
                                : in.local.empty() ? f::kNoLayer
                                                   : uint32_t(in.local_layer));
    out.u32(s + f::kBoxAt, in.box.empty() ? 0 : in.box_at);
    out.u32(s + f::kAvailFrom, uint32_t(in.avail_from));
  }
}

}  // namespace

std::vector<uint8_t> write_fragment(const QGraph& q, const Plan& p, int worker) {
  if (worker < 0 || worker >= p.n_workers()) throw Error("fragment: worker index out of range");
  if (p.n_workers() > 65535) throw Error("fragment: more than 65535 workers");
  const WorkerPlan& wp = p.workers[size_t(worker)];
  if (wp.layers.size() != q.nodes.size()) throw Error("fragment: the plan does not match the model");
  const uint32_t total = checked_u32(uint64_t(fragment_bytes(q, p, worker)), "fragment size");
  const size_t L = q.nodes.size();
  FragWriter w{Buf(total), f::kHeaderBytes + L * f::kEntryBytes};
  w.header(p, worker, L, total);
  for (size_t i = 0; i < L; ++i) {
    const size_t e = f::kHeaderBytes + i * f::kEntryBytes;
    const Codec c = p.coding.at(i);
    w.entry_scalars(e, i, q.nodes[i], wp.layers[i],
                    c == Codec::Rice ? core::kEntryCoded : c == Codec::Mask ? core::kEntryMasked : 0);
    w.entry_records(e, q.nodes[i], wp.layers[i]);
    w.entry_slots(e, q.nodes[i], wp.layers[i]);
  }
  if (w.data + 4 != total) throw Error("fragment: internal size mismatch");
  w.out.u32(w.data, crc32(w.out.b.data(), w.data));
  return std::move(w.out.b);
}

std::vector<std::string> write_fragments(const QGraph& q, const Plan& p, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create folder '" + dir + "': " + ec.message());
  std::vector<std::string> paths;
  for (int w = 0; w < p.n_workers(); ++w) {
    const std::vector<uint8_t> bytes = write_fragment(q, p, w);
    const std::string path = (fs::path(dir) / ("worker-" + std::to_string(p.workers[size_t(w)].board) + ".tsfg")).string();
    write_file_atomic(path, bytes);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace ts::plan
