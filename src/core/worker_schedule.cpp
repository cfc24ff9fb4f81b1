#include "core/worker_schedule.h"

#include <string.h>

#include "core/bytes.h"
#include "core/digest.h"
#include "core/partial.h"
#include "core/worker.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

namespace {

// Small copies (a row segment of a few elements is common) without a call:
// four bytes at a time (fixed-size memcpy: one load and one store where the
// core allows unaligned words, as the Cortex-M7 and x86 do), then the rest.
inline void copy_bytes(uint8_t* dst, const uint8_t* src, uint32_t n) {
  if (n > 16) {
    memcpy(dst, src, n);
    return;
  }
  for (; n >= 4; n -= 4, src += 4, dst += 4) {
    uint32_t v;
    memcpy(&v, src, 4);
    memcpy(dst, &v, 4);
  }
  for (uint32_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Where element (c, y, x) of X lies in the window `box` (rows of box b,
// full width).
inline uint8_t* window_at(uint8_t* box, const Dims& X, const Box& b, uint32_t c, uint32_t y, uint32_t x) {
  return box + ((c - uint32_t(b.c0)) * uint32_t(b.h1 - b.h0) + (y - uint32_t(b.h0))) * uint32_t(X.w) + x;
}

// scatter_at's run across channels: one copy per channel touched.
void scatter_channels(uint8_t* box, const Dims& X, const Box& b, uint32_t c, uint32_t y, uint32_t x,
                      const uint8_t* src, uint32_t n) {
  const uint32_t w = uint32_t(X.w), h = uint32_t(X.h);
  uint32_t i = 0;
  while (i < n) {
    uint32_t seg = (h - y) * w - x;  // to the end of channel c
    if (seg > n - i) seg = n - i;
    copy_bytes(window_at(box, X, b, c, y, x), src + i, seg);
    i += seg;
    x = y = 0;
    ++c;
  }
}

// scatter_into_box for a caller that knows the channel, row and column of e0.
// The window's rows are whole rows, so within one channel the elements are
// contiguous in the window as in the tensor: one copy per channel touched
// (they all lie in the window's rows, as the caller checked). Inline for
// the usual run, inside one channel (a board copies tens of thousands of
// them an inference).
inline void scatter_at(uint8_t* box, const Dims& X, const Box& b, uint32_t c, uint32_t y, uint32_t x,
                       const uint8_t* src, uint32_t n) {
  if (n <= (uint32_t(X.h) - y) * uint32_t(X.w) - x) {
    copy_bytes(window_at(box, X, b, c, y, x), src, n);
    return;
  }
  scatter_channels(box, X, b, c, y, x, src, n);
}

// Copies elements [e0, e0 + n) of a (C,H,W) tensor X into the window `box`
// (rows of box b, full width); the caller has checked they lie inside it.
// Row segments are contiguous in both.
void scatter_into_box(uint8_t* box, const Dims& X, const Box& b, uint32_t e0, const uint8_t* src, uint32_t n) {
  // The tensor has at most 2^28 elements (fragment.cpp): 32-bit arithmetic,
  // two divisions for the first element, then row by row.
  const uint32_t w = uint32_t(X.w), hw = uint32_t(X.h) * w;
  const uint32_t c = e0 / hw;
  const uint32_t in_plane = e0 - c * hw;
  const uint32_t y = in_plane / w;
  scatter_at(box, X, b, c, y, in_plane - y * w, src, n);
}

}  // namespace

void LayerScheduler::init(const WorkerConfig* cfg, Port* port, WorkerStats* stats, DeploySession* deploy,
                          LinkSet* links, Sender* sender, Worker* worker, uint8_t* base, uint32_t fixed) {
  cfg_ = cfg;
  port_ = port;
  stats_ = stats;
  deploy_ = deploy;
  links_ = links;
  sender_ = sender;
  worker_ = worker;
  base_ = base;
  fixed_ = fixed;
}

void LayerScheduler::reset() {
  for (Open& o : open_) o = Open();
  cursor_ = deploy_->layer_count();
  resume_at_ = 0;
  n_in_place_ = 0;
  touched_ = 0;
  chain_n_ = 0;
  inner_ = Inner();
}

bool LayerScheduler::idle() const {
  if (sender_->busy()) return false;
  for (const Open& o : open_)
    if (o.used) return false;
  return true;
}

bool LayerScheduler::at_rest() const { return idle() && (!deploy_->have() || cursor_ >= deploy_->layer_count()); }

void LayerScheduler::touch(uint32_t at, uint32_t bytes) {
  if (at + bytes > touched_) touched_ = at + bytes;
}

// An ERROR to the coordinator, if it is connected.
void LayerScheduler::report(ErrorCode code, uint32_t seq, const char* text) {
  if (links_->coord() >= 0) links_->send_error(links_->coord(), code, seq, text);
}

// The entry of `layer` if this board computes part of it; else an ERROR and
// nullptr.
const FragLayer* LayerScheduler::entry(uint16_t layer, uint32_t seq, int link) {
  if (!deploy_->have()) {
    links_->send_error(link, ErrorCode::NotReady, seq, "no fragment");
    return nullptr;
  }
  const FragLayer* e = deploy_->entry(layer);
  if (!e) {
    links_->send_error(link, ErrorCode::UnknownLayer, seq, "unknown layer");
    return nullptr;
  }
  if (!e->active()) {
    links_->send_error(link, ErrorCode::UnknownLayer, seq, "no share of this layer");
    return nullptr;
  }
  if (deploy_->header().arena_bytes > worker_->arena().capacity()) {
    links_->send_error(link, ErrorCode::OutOfMemory, seq, "arena exhausted (inputs)");
    return nullptr;
  }
  return e;
}

LayerScheduler::Open* LayerScheduler::find_open(uint16_t layer) {
  for (Open& o : open_)
    if (o.used && o.layer == layer) return &o;
  return nullptr;
}

LayerScheduler::Open* LayerScheduler::new_slot(uint16_t layer) {
  for (Open& o : open_)
    if (!o.used) {
      o = Open();
      o.used = true;
      o.layer = layer;
      return &o;
    }
  return nullptr;
}

// Whether a frame of layer h.layer may be taken now, and its receive slot.
// The coordinator steers an idle board to any layer (relay mode); otherwise
// layers run in order and a board's inputs for a later layer are taken once
// this board has reached the layer that produces them.
Verdict LayerScheduler::admit(int link, const FrameHeader& h, const FragLayer& e, Open** slot) {
  const bool from_coord = h.src == wire::kCoordinatorId;
  if (h.deployment != deploy_->plan_id() || !deploy_->have()) {
    links_->send_error(link, ErrorCode::WrongDeployment, h.seq, "frame for another deployment");
    return Verdict::Fail;
  }
  const uint32_t n_layers = deploy_->layer_count();
  // Pipelined runs: a frame of another inference than the one this board is
  // on starts that inference once the board is at rest; until then a peer's
  // waits unread on its link (back-pressure through the sender's window:
  // the board's arena never holds two inferences), and the coordinator,
  // which sends an inference's input only after the board's last DONE of
  // the one before, broke the protocol. An inference's frames once the
  // board finished it are refused.
  const bool rest = idle() && cursor_ >= n_layers;
  if (h.inference != links_->inference()) {
    if (!rest) {
      if (!from_coord) return Verdict::Hold;
      links_->send_error(link, ErrorCode::NotReady, h.seq, "input of another inference before this one is done");
      return Verdict::Fail;
    }
    links_->set_inference(h.inference);
  } else if (h.inference != 0 && rest) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "frame of an inference this board has finished");
    return Verdict::Fail;
  }
  // Inputs land in buffers that are the layer's only from avail_from[k] on,
  // partial sums in buffers of the layer itself: a frame that comes earlier
  // waits, also when the layer's slot is open already (an earlier operand,
  // or another board's outputs that the layer reads, opened it). Before, the
  // check below was skipped for an open slot, and partial sums for dense_2
  // that a peer sent while this board still summed dense_1 were added into
  // arena bytes dense_1 was using: an intermittent mismatch at dense_2 with
  // reduce-all on 8 boards.
  const uint32_t operand = h.offset >> wire::kOperandShift;
  const bool data = h.type == MsgType::Input || h.type == MsgType::Inputs;
  auto early = [&]() {
    return data && ((operand < kMaxInputs && cursor_ < e.avail_from[operand]) ||
                    (operand == kPsumOperand && cursor_ < e.node));
  };
  *slot = find_open(h.layer);
  if (*slot) return early() ? Verdict::Hold : Verdict::Ok;
  if (idle()) {
    if (cursor_ >= n_layers) {  // this frame starts an inference here
      ready_us_ = port_->now_us();
      resume_at_ = 0;
      n_in_place_ = 0;
      inner_ = Inner();
    }
    if (from_coord) cursor_ = h.layer;
    else if (cursor_ >= n_layers) cursor_ = deploy_->first_active();
  } else if (from_coord && h.layer != cursor_) {
    links_->send_error(link, ErrorCode::NotReady, h.seq,
                       sender_->busy() ? "frame while sending results" : "new layer before RUN of the last");
    return Verdict::Fail;
  }
  if (h.layer < cursor_) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "frame for a finished layer");
    return Verdict::Fail;
  }
  if (early()) return Verdict::Hold;
  *slot = new_slot(h.layer);
  if (!*slot) return Verdict::Hold;
  for (int k = 0; k < e.desc.n_inputs; ++k) (*slot)->expect[k] = expected(e, k);
  touch(0, windows_top(e, cursor_));
  return Verdict::Ok;
}

Verdict LayerScheduler::on_input(int link, const FrameHeader& h, const uint8_t* payload) {
  const FragLayer* ep = entry(h.layer, h.seq, link);
  if (!ep) return Verdict::Fail;
  const FragLayer& e = *ep;
  const uint32_t k = h.offset >> wire::kOperandShift;
  const uint32_t e0 = h.offset & wire::kElementMask;
  const bool blocks = h.type == MsgType::Inputs;
  const bool coded = (h.flags & wire::kFlagCoded) != 0;
  if (k == kPsumOperand && e.partial() && blocks && !coded && e0 == 0 && e.ps_expected > 0) {
    Open* slot = nullptr;
    const Verdict v = admit(link, h, e, &slot);
    if (v != Verdict::Ok) return v;
    return on_partial(link, h, payload, e, slot);
  }
  if (k >= e.desc.n_inputs || (e.n_runs[k] == 0 && !cut(e, int(k)) && !in_place_cut(e.node, int(k))) ||
      (blocks && e0 != 0)) {
    links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "input operand not expected");
    return Verdict::Fail;
  }
  Open* slot = nullptr;
  const Verdict v = admit(link, h, e, &slot);
  if (v != Verdict::Ok) return v;
  if (blocks) return on_blocks(link, h, payload, e, slot);
  // One run: it must lie inside one of this board's routing runs.
  const uint32_t n = h.payload_len;
  RunFinder runs(e.runs[k], e.n_runs[k]), local(e.local[k], e.n_local[k]);
  if (!may_receive(e, k, runs, local, e0, n) || slot->received[k] + n > slot->expect[k]) {
    links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
    return Verdict::Fail;
  }
  // The fragment reader checked that every run lies inside the window.
  scatter_into_box(buffer(e.box_at[k]), e.desc.in[k], e.box[k], e0, payload, n);
  slot->received[k] += n;
  return Verdict::Ok;
}

// A coded block that does not decode to its values: the frame fails (what
// it wrote went to places its headers were allowed to write; the layer
// never runs on them, as the inference fails).
Verdict LayerScheduler::malformed_code(int link, const FrameHeader& h) {
  links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "malformed coded input");
  return Verdict::Fail;
}

// Blocks of segments of operand k (the frame reader checked their
// structure): every segment inside a routing run, checked before anything
// is written.
Verdict LayerScheduler::on_blocks(int link, const FrameHeader& h, const uint8_t* payload, const FragLayer& e,
                                  Open* slot) {
  const uint32_t k = h.offset >> wire::kOperandShift;
  size_t pos = 0;
  wire::InputBlock b;
  uint32_t total = 0;
  RunFinder runs(e.runs[k], e.n_runs[k]), local(e.local[k], e.n_local[k]);
  const bool coded = (h.flags & wire::kFlagCoded) != 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b, coded))
    for (uint32_t j = 0; j < b.count; ++j) {
      if (!may_receive(e, k, runs, local, b.first + j * b.stride, b.len)) {
        links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
        return Verdict::Fail;
      }
      total += b.len;
    }
  if (slot->received[k] + total > slot->expect[k]) {
    links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "more input than the routing slice");
    return Verdict::Fail;
  }
  uint8_t* box = buffer(e.box_at[k]);
  pos = 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b, coded)) {
    if (!coded) {
      for (uint32_t j = 0; j < b.count; ++j)
        scatter_into_box(box, e.desc.in[k], e.box[k], b.first + j * b.stride, b.data + j * b.len, b.len);
      continue;
    }
    // Decoded once, in pieces, into place; the positions were checked above.
    CodeReader r(b.data, b.coded, wire::code_params(b));
    uint8_t piece[128];
    for (uint32_t j = 0; j < b.count; ++j)
      for (uint32_t at = 0; at < b.len;) {
        const uint32_t n = b.len - at < sizeof piece ? b.len - at : uint32_t(sizeof piece);
        if (!r.get(piece, n)) return malformed_code(link, h);
        scatter_into_box(box, e.desc.in[k], e.box[k], b.first + j * b.stride + at, piece, n);
        at += n;
      }
    if (!r.finish()) return malformed_code(link, h);
  }
  slot->received[k] += total;
  return Verdict::Ok;
}

// Partial sums for this board's output block: every segment whole int32
// values inside the accumulator, checked before anything is added.
Verdict LayerScheduler::on_partial(int link, const FrameHeader& h, const uint8_t* payload, const FragLayer& e,
                                   Open* slot) {
  const uint32_t acc_bytes = e.out_elems * 4u;
  size_t pos = 0;
  wire::InputBlock b;
  uint32_t total = 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b))
    for (uint32_t j = 0; j < b.count; ++j) {
      const uint64_t first = uint64_t(b.first) + uint64_t(j) * b.stride;
      if ((first | b.len) % 4 || first + b.len > acc_bytes) {
        links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "partial sums outside the accumulator");
        return Verdict::Fail;
      }
      total += b.len;
    }
  if (slot->ps_received + total > e.ps_expected) {
    links_->send_error(link, ErrorCode::OutOfBounds, h.seq, "more partial sums than planned");
    return Verdict::Fail;
  }
  uint8_t* acc = buffer(e.ps_acc_at);
  touch(e.ps_acc_at, arena_block(acc_bytes));
  if (!slot->acc_ready) {
    memset(acc, 0, acc_bytes);
    slot->acc_ready = true;
  }
  pos = 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b))
    for (uint32_t j = 0; j < b.count; ++j) {
      uint8_t* dst = acc + b.first + j * b.stride;
      const uint8_t* src = b.data + j * b.len;
      for (uint32_t i = 0; i < b.len; i += 4) {
        uint32_t a, v;
        memcpy(&a, dst + i, 4);
        v = uint32_t(src[i]) | uint32_t(src[i + 1]) << 8 | uint32_t(src[i + 2]) << 16 | uint32_t(src[i + 3]) << 24;
        a += v;
        memcpy(dst + i, &a, 4);
      }
    }
  slot->ps_received += total;
  return Verdict::Ok;
}

Verdict LayerScheduler::on_run(int link, const FrameHeader& h) {
  const FragLayer* ep = entry(h.layer, h.seq, link);
  if (!ep) return Verdict::Fail;
  const FragLayer& e = *ep;
  if (!(e.flags & kEntryRunTrigger)) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "layer starts without RUN");
    return Verdict::Fail;
  }
  Open* slot = nullptr;
  const Verdict v = admit(link, h, e, &slot);
  if (v == Verdict::Hold) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "too many layers open");
    return Verdict::Fail;
  }
  if (v != Verdict::Ok) return v;
  for (int k = 0; k < e.desc.n_inputs; ++k)
    if (slot->received[k] != slot->expect[k]) {
      links_->send_error(link, ErrorCode::NotReady, h.seq, "run before all inputs arrived");
      return Verdict::Fail;
    }
  slot->run = true;
  slot->run_seq = h.seq;
  return Verdict::Ok;
}

Verdict LayerScheduler::on_resume(int link, const FrameHeader& h) {
  if (!deploy_->have() || h.deployment != deploy_->plan_id()) {
    links_->send_error(link, ErrorCode::WrongDeployment, h.seq, "resume for another deployment");
    return Verdict::Fail;
  }
  const uint32_t n_layers = deploy_->layer_count();
  const char* refused = nullptr;
  if (!(idle() && cursor_ >= n_layers)) refused = "resume during an inference";
  else if (h.layer == 0 || h.layer >= n_layers) refused = "resume at no layer after the first";
  else if (!find_in_place_cuts(h.layer)) refused = "resume across more in-place outputs than a board tracks";
  if (refused) {
    n_in_place_ = 0;
    links_->send_error(link, ErrorCode::NotReady, h.seq, refused);
    return Verdict::Fail;
  }
  ready_us_ = port_->now_us();
  resume_at_ = h.layer;
  cursor_ = h.layer;
  inner_ = Inner();
  while (cursor_ < n_layers && !deploy_->active(cursor_)) ++cursor_;
  return Verdict::Ok;
}

bool LayerScheduler::find_in_place_cuts(uint32_t layer) {
  n_in_place_ = 0;
  const FragmentReader& f = deploy_->fragment();
  FragLayer p, home;
  for (uint32_t i = 0; i < layer; ++i) {
    if (f.layer(i, &p) != FragStatus::Ok) return false;
    if (!p.active() || !p.out_pitch || p.out_until < layer || p.out_until >= f.layer_count()) continue;
    InPlaceCut c;
    if (!p.whole_rows(&c.c0, &c.c1, &c.y0, &c.y1) || f.layer(p.out_until, &home) != FragStatus::Ok) return false;
    // The home operand: the window the outputs were computed into.
    c.k = -1;
    for (int k = 0; k < home.desc.n_inputs; ++k) {
      const uint32_t bytes = uint32_t(home.box[k].elems(home.desc.in[k].w));
      if (bytes && p.out_at >= home.box_at[k] && p.out_at < home.box_at[k] + bytes) c.k = k;
    }
    if (c.k < 0 || n_in_place_ == kMaxInPlaceCuts) return false;
    c.home = p.out_until;
    c.elems = p.out_elems;
    in_place_[n_in_place_++] = c;
  }
  return true;
}

const LayerScheduler::InPlaceCut* LayerScheduler::in_place_cut(uint32_t node, int k) const {
  if (resume_at_ == 0) return nullptr;
  for (int i = 0; i < n_in_place_; ++i)
    if (in_place_[i].home == node && in_place_[i].k == k) return &in_place_[i];
  return nullptr;
}

uint32_t LayerScheduler::expected(const FragLayer& e, int k) const {
  uint32_t n = e.expected[k];
  if (cut(e, k))
    for (uint32_t j = 0; j < e.n_local[k]; ++j) n += le::get_u32(e.local[k] + j * frag::kRunBytes + 4);
  if (const InPlaceCut* c = in_place_cut(e.node, k)) n += c->elems;
  return n;
}

bool LayerScheduler::may_receive(const FragLayer& e, uint32_t k, RunFinder& runs, RunFinder& local, uint32_t e0,
                                 uint32_t n) const {
  if (runs.covers(e0, n) || (cut(e, int(k)) && local.covers(e0, n))) return true;
  const InPlaceCut* c = in_place_cut(e.node, int(k));
  if (!c || n == 0) return false;
  // Inside the rows computed in place: both ends in them, and in one
  // channel unless the rows are whole channels.
  const Dims& X = e.desc.in[k];
  const uint32_t w = uint32_t(X.w), hw = uint32_t(X.h) * w;
  const uint32_t last = e0 + n - 1;
  const int32_t ca = int32_t(e0 / hw), ya = int32_t(e0 % hw / w), cb = int32_t(last / hw), yb = int32_t(last % hw / w);
  auto inside = [&](int32_t ch, int32_t y) { return ch >= c->c0 && ch < c->c1 && y >= c->y0 && y < c->y1; };
  return inside(ca, ya) && inside(cb, yb) && (ca == cb || (c->y0 == 0 && c->y1 == X.h));
}

// Local runs: this board's own outputs of an earlier layer, copied into the
// windows of layer e.
bool LayerScheduler::copy_local_inputs(const FragLayer& e) {
  for (int k = 0; k < e.desc.n_inputs; ++k) {
    if (e.n_local[k] == 0 || cut(e, k)) continue;
    // Aside from the entry cache, which may hold e where src would go.
    const FragLayer* sp = deploy_->entry_aside(e.local_layer[k]);
    if (!sp) return false;
    const FragLayer& src = *sp;
    const uint8_t* from = buffer(src.out_at);
    touch(src.out_at, src.out_pitch ? src.out_span_bytes() : arena_block(src.out_elems));
    touch(e.box_at[k], arena_block(uint32_t(e.box[k].elems(e.desc.in[k].w))));
    // The runs are in flat order: each is found from where the last one was.
    // The source's output and this window's tensor have one shape (open()
    // checked it): each run's channel, row and column serve both.
    SpanFinder spans(src);
    const Dims& X = e.desc.in[k];
    const uint32_t w = uint32_t(X.w), hw = uint32_t(X.h) * w;
    uint8_t* box = buffer(e.box_at[k]);
    const uint8_t* rec = e.local[k];
    // Mostly one or two runs per channel, in channel order: such a run is
    // found from the one a channel before (SpanFinder::follow).
    for (uint32_t j = 0; j < e.n_local[k]; ++j, rec += frag::kRunBytes) {
      const uint32_t off = le::get_u32(rec), count = le::get_u32(rec + 4);
      uint32_t at = 0;
      int32_t c = 0, y = 0, x = 0;
      if (!spans.follow(off, count, &at, &c, &y, &x)) {
        c = int32_t(off / hw);
        const uint32_t in_plane = off - uint32_t(c) * hw;
        y = int32_t(in_plane / w);
        x = int32_t(in_plane - uint32_t(y) * w);
        if (!spans.find_at(off, count, c, y, x, &at)) return false;  // open() checked each
      }
      scatter_at(box, X, e.box[k], uint32_t(c), uint32_t(y), uint32_t(x), from + at, count);
    }
  }
  return true;
}

// Phase 1 of a reduced layer: the sums of this board's input channels for
// every output channel (or of its input rows, core/partial.h); then the
// other owners' blocks go out and the layer stays open for theirs.
bool LayerScheduler::sums_phase(const FragLayer& e, Open* slot, uint32_t t0) {
  int32_t* own = reinterpret_cast<int32_t*>(buffer(e.ps_at));
  touch(e.ps_at, arena_block(e.ps_bytes()));
  if (!partial_sums(e.desc, reinterpret_cast<const int8_t*>(buffer(e.box_at[0])), e.box[0], e.ps_ci0, e.ps_ci1, e.desc.weights,
                    own)) {
    report(ErrorCode::Internal, slot->run_seq, "kernel failed");
    return false;
  }
  const uint64_t macs = uint64_t(partial_macs(e.desc, e.ps_ci0, e.ps_ci1));
  const uint32_t us = port_->after_compute(e.node, macs, port_->now_us() - t0);
  if (e.n_ps_sends)
    port_->results(e.node, ResultKind::PartialSums, reinterpret_cast<uint8_t*>(own + e.ps_send(0).pos / 4));
  slot->ps_done = true;
  sender_->send_sums(e, us);
  return true;
}

// This board's outputs of layer e (phase 2 of a reduced layer: its own sums
// of its block and the sums received, requantised).
KernelStatus LayerScheduler::compute(const FragLayer& e, Open* slot, const View* views, int8_t* out) {
  int32_t c0, c1, y0, y1;
  if (e.partial()) {
    const int32_t* own = reinterpret_cast<const int32_t*>(buffer(e.ps_at));
    touch(e.ps_at, arena_block(e.ps_bytes()));
    const Region g = e.region(0);
    const int32_t P = partial_positions(e.desc);
    const uint8_t* acc = buffer(e.ps_acc_at);
    touch(e.ps_acc_at, arena_block(e.out_elems * 4u));
    if (!partial_finish(e.desc, g.v[0] / P, (g.v[1] - g.v[0]) / P, own + g.v[0],
                        slot->acc_ready ? reinterpret_cast<const int32_t*>(acc) : nullptr, out))
      return KernelStatus::BadLayer;
    return KernelStatus::Ok;
  }
  if (e.out_pitch) {
    if (!e.whole_rows(&c0, &c1, &y0, &y1)) return KernelStatus::Ok;
    // In place: straight into the window of the layer that reads it last.
    OutBox b;
    b.c0 = c0; b.c1 = c1; b.y0 = y0; b.y1 = y1; b.x0 = 0; b.x1 = e.desc.out.w;
    return compute_box_pitched(e.desc, views, b, out, e.oc_count, int64_t(e.out_pitch));
  }
  KernelStatus st = KernelStatus::Ok;
  uint32_t pos = 0;
  for (uint32_t i = 0; i < e.n_regions && st == KernelStatus::Ok; ++i) {
    const Region g = e.region(i);
    if (g.kind == RegionKind::Box) {
      // One call for the whole box (its elements in flat order, as the
      // segments would give them): the kernels block over its channels.
      OutBox b;
      b.c0 = g.v[0]; b.c1 = g.v[1]; b.y0 = g.v[2]; b.y1 = g.v[3]; b.x0 = g.v[4]; b.x1 = g.v[5];
      st = compute_box(e.desc, views, b, out + pos, e.oc_count);
    } else {
      st = compute_range(e.desc, views, g.v[0], g.v[1], out + pos, e.oc_count);
    }
    pos += uint32_t(g.elems());
  }
  return st;
}

// Layer e computed in `us`: its results to the port, their digest, the
// layer's report, and its results to the sender.
void LayerScheduler::finish(const FragLayer& e, Open* slot, int8_t* out, uint32_t us, bool shown,
                            const uint64_t* digest) {
  if (e.partial()) us += sender_->sums_us();  // phase 1's compute
  else us = port_->after_compute(e.node, deploy_->macs(e), us);
  if (!shown) port_->results(e.node, ResultKind::Outputs, reinterpret_cast<uint8_t*>(out));
  LayerReport r;
  // What this board hands on, in flat C-H-W order, checked by the coordinator.
  int32_t c0, c1, y0, y1;
  if (digest) {
    r.digest = *digest;
  } else if (e.out_pitch && e.whole_rows(&c0, &c1, &y0, &y1) &&
             e.out_pitch != uint32_t(y1 - y0) * uint32_t(e.desc.out.w)) {  // in place: planes out_pitch apart
    Digest64 dg;
    for (int32_t c = c0; c < c1; ++c)
      dg.update(out + size_t(c - c0) * e.out_pitch, size_t(y1 - y0) * size_t(e.desc.out.w));
    r.digest = dg.finish();
  } else {  // dense (in place into a window of just these rows too)
    r.digest = digest64(out, e.out_elems);
  }
  stats_->layers_run++;
  r.peak = fixed_ + touched_;
  if (r.peak > stats_->peak_arena) stats_->peak_arena = r.peak;
  r.seq = slot ? slot->run_seq : 0;
  r.us = us;
  r.instructions = port_->compute_instructions();
  r.ready_at_us = ready_us_;
  r.wait_us = wait_us_;
  if (slot) *slot = Open();
  sender_->send_results(e, r);
}

bool LayerScheduler::start(const FragLayer& e, Open* slot, bool* started) {
  *started = false;
  for (int k = 0; k < e.desc.n_inputs; ++k)
    if ((slot ? slot->received[k] : 0u) != (slot ? slot->expect[k] : expected(e, k))) return inner_first(e);
  if ((e.flags & kEntryRunTrigger) && !(slot && slot->run)) return true;
  if (e.partial() && !slot) {
    slot = new_slot(uint16_t(e.node));
    if (!slot) return true;  // a slot frees when an earlier layer finishes
  }
  if (e.partial() && slot->ps_done && slot->ps_received != e.ps_expected) return true;  // sums still coming
  if (!arena_fits()) return false;
  if (chained(e.node)) {  // computed with the chain before it
    const int i = int(e.node - chain_first_);
    touch(0, chain_top_);  // the chain's buffers, in use since its first layer
    port_->now_us(), port_->now_us();  // an empty compute bracket: the chain's first layer counted it all
    finish(e, slot, reinterpret_cast<int8_t*>(buffer(e.out_at)), chain_us_[i], true,
           e.streamed() ? &chain_digest_[i] : nullptr);
    if (i == chain_n_ - 1) chain_n_ = 0;
    *started = true;
    return true;
  }
  const bool inner = inner_.done && inner_.node == e.node;  // its local inputs are in place
  if (!(e.partial() && slot->ps_done) && !inner && !copy_local_inputs(e)) return false;
  View views[kMaxInputs];
  set_views(e, views);
  int8_t* out = reinterpret_cast<int8_t*>(buffer(e.out_at));
  touch(e.out_at, e.out_pitch ? e.out_span_bytes() : arena_block(e.out_elems));
  // What the others wait for goes out before we are busy (our last layer's
  // sends, our ACKs), and so do the DONE reports of the layers finished
  // since the last compute (a board that dies in this compute has reported
  // every layer before it: worker_links.h).
  links_->flush_before_compute();
  // Halos first (core/halo_first.h), worked out before the compute's clock,
  // where it may apply: not with inner rows first (which excludes it), not
  // on a reduced layer, nor a streamed one (no sends).
  const HaloSplit hs = (inner || e.partial() || e.streamed()) ? HaloSplit() : halos_of(e);
  const uint32_t t0 = port_->now_us();
  if (!(e.partial() && slot->ps_done) && !inner) wait_us_ = t0 - ready_us_;  // phase 2 of a reduced layer waited in phase 1
  if (inner) {  // the positions that waited for other boards' inputs
    const KernelStatus st = band_ends(e, inner_.split, views, out);
    const uint32_t us = port_->now_us() - t0;
    if (st != KernelStatus::Ok) {
      report(ErrorCode::Internal, slot ? slot->run_seq : 0, "kernel failed");
      return false;
    }
    finish(e, slot, out, inner_.us + us);
    *started = true;
    return true;
  }
  if (e.partial() && !slot->ps_done) {
    if (!sums_phase(e, slot, t0)) return false;
    *started = true;
    return true;
  }
  if (e.streamed()) {
    if (!run_chain(e, views, slot ? slot->run_seq : 0)) return false;
    finish(e, slot, out, chain_us_[0], true, &chain_digest_[0]);
    *started = true;
    return true;
  }
  if (hs.on()) {
    uint32_t us = 0;
    if (!halos_first(e, hs, views, out, t0, slot ? slot->run_seq : 0, &us)) return false;
    finish(e, slot, out, us, true);
    *started = true;
    return true;
  }
  const KernelStatus st = compute(e, slot, views, out);
  const uint32_t us = port_->now_us() - t0;
  if (st != KernelStatus::Ok) {
    report(ErrorCode::Internal, slot ? slot->run_seq : 0, "kernel failed");
    return false;
  }
  finish(e, slot, out, us);
  *started = true;
  return true;
}

void LayerScheduler::set_views(const FragLayer& e, View* views) {
  for (int k = 0; k < e.desc.n_inputs; ++k)
    views[k] = View{reinterpret_cast<const int8_t*>(buffer(e.box_at[k])), e.box[k].c0, e.box[k].c1 - e.box[k].c0,
                    e.box[k].h0, e.box[k].h1 - e.box[k].h0};
}

KernelStatus LayerScheduler::band_part(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out,
                                       int32_t u, int32_t v) {
  KernelStatus st = KernelStatus::Ok;
  if (e.out_pitch) {
    if (u < v)
      st = compute_positions(e.desc, views, s.band.c0, s.band.c1, u, v, out + (u - s.band.p0), e.oc_count,
                             int64_t(e.out_pitch));
    return st;
  }
  for_each_band_part(e.desc.out, e.n_regions, [&](uint32_t i) { return e.region(i); }, u, v,
                     [&](int32_t lo, int32_t hi, int64_t at, int64_t cs) {
                       if (st == KernelStatus::Ok)
                         st = compute_positions(e.desc, views, s.band.c0, s.band.c1, lo, hi, out + at, e.oc_count, cs);
                     });
  return st;
}

KernelStatus LayerScheduler::band_ends(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out) {
  const KernelStatus st = band_part(e, s, views, out, s.band.p0, s.q0);
  return st == KernelStatus::Ok ? band_part(e, s, views, out, s.q1, s.band.p1) : st;
}

bool LayerScheduler::arena_fits() {
  if (deploy_->header().arena_bytes <= worker_->arena().capacity()) return true;
  report(ErrorCode::OutOfMemory, 0, "arena exhausted (inputs)");
  return false;
}

bool LayerScheduler::inner_first(const FragLayer& e) {
  if (inner_.checked && inner_.node == e.node) return true;  // done, or nothing to do before the rest
  inner_ = Inner();
  inner_.checked = true;
  inner_.node = e.node;
  // As plan::inner_split_of: not a reduced layer, a chain's, one waiting for
  // the coordinator's RUN, or one that sends halos first; and not in a
  // resumed inference (its local inputs may come from the coordinator).
  if ((e.flags & (kEntryRunTrigger | kEntryPartial | kEntryStreamed)) || chained(e.node) || resume_at_ > 0)
    return true;
  const auto region = [&](uint32_t i) { return e.region(i); };
  inner_.halo = halos_of(e);
  inner_.halo_known = true;
  if (inner_.halo.on()) return true;
  inner_.split = inner_split(e.desc, e.n_regions, region, e.n_runs, [&](int k, uint32_t i) { return e.run(k, i); });
  const HaloSplit& is = inner_.split;
  if (!is.on()) return true;
  if (!arena_fits() || !copy_local_inputs(e)) return false;
  View views[kMaxInputs];
  set_views(e, views);
  int8_t* out = reinterpret_cast<int8_t*>(buffer(e.out_at));
  touch(e.out_at, e.out_pitch ? e.out_span_bytes() : arena_block(e.out_elems));
  links_->flush_before_compute();
  const uint32_t t0 = port_->now_us();
  wait_us_ = t0 - ready_us_;
  const KernelStatus st = band_part(e, is, views, out, is.q0, is.q1);
  const uint32_t us = port_->now_us() - t0;  // the bracket ends here (the firmware counts its instructions)
  const uint64_t whole = deploy_->macs(e), outer = halo_macs(e.desc, is);
  inner_.us = port_->compute_part(e.node, whole > outer ? whole - outer : 0, us);
  if (st != KernelStatus::Ok) {
    report(ErrorCode::Internal, 0, "kernel failed");
    return false;
  }
  inner_.done = true;
  return true;
}

HaloSplit LayerScheduler::halos_of(const FragLayer& e) const {
  if (inner_.halo_known && inner_.node == e.node) return inner_.halo;
  return halo_split(e.desc.out, e.n_regions, [&](uint32_t i) { return e.region(i); }, e.n_sends,
                    [&](uint32_t i) { return send_record(e.sends, i); });
}

bool LayerScheduler::halos_first(const FragLayer& e, const HaloSplit& s, const View* views, int8_t* out, uint32_t t0,
                                 uint32_t seq, uint32_t* us) {
  const auto region = [&](uint32_t i) { return e.region(i); };
  KernelStatus st = band_ends(e, s, views, out);
  const uint32_t first_us = port_->now_us() - t0;  // the bracket ends here (the firmware counts its instructions)
  const uint32_t first = port_->compute_part(e.node, halo_macs(e.desc, s), first_us);
  if (st != KernelStatus::Ok) {
    report(ErrorCode::Internal, seq, "kernel failed");
    return false;
  }
  // The port sees the results before any leaves: the first position computed.
  const int32_t shown = s.q0 > s.band.p0 ? s.band.p0 : s.q1;
  int64_t at = shown - s.band.p0;
  if (!e.out_pitch)
    for_each_band_part(e.desc.out, e.n_regions, region, shown, shown + 1,
                       [&](int32_t, int32_t, int64_t a, int64_t) { at = a; });
  port_->results(e.node, ResultKind::Outputs, reinterpret_cast<uint8_t*>(out + at));
  sender_->send_halos(e);
  if (!sender_->pump()) return false;
  links_->flush_before_compute();
  const uint32_t t1 = port_->now_us();
  st = band_part(e, s, views, out, s.q0, s.q1);
  const uint32_t second = port_->now_us() - t1;
  if (st != KernelStatus::Ok) {
    report(ErrorCode::Internal, seq, "kernel failed");
    return false;
  }
  *us = first + second;
  return true;
}

namespace {

struct ChainCtx {
  Port* port;
  const uint32_t* nodes;
  bool after = false;  // the next reading ends a kernel call
};

// Every kernel call of the walk is a compute part (Port::compute_part, no
// MACs of its own): a port that counts instructions adds them all to the
// chain's first layer's report; the time goes to each layer's.
uint32_t chain_now(void* ctx) {
  ChainCtx* c = static_cast<ChainCtx*>(ctx);
  const uint32_t t = c->port->now_us();
  if (c->after) c->port->compute_part(c->nodes[0], 0, 0);
  c->after = !c->after;
  return t;
}

void chain_shown(void* ctx, int i, int8_t* rows) {
  ChainCtx* c = static_cast<ChainCtx*>(ctx);
  c->port->results(c->nodes[i], ResultKind::Outputs, reinterpret_cast<uint8_t*>(rows));
}

}  // namespace

// Entry e (streamed), the streamed entries after it and the one after them,
// computed row by row (core/stream.h) from e's windows.
bool LayerScheduler::run_chain(const FragLayer& e, const View* views, uint32_t seq) {
  // (Entries read aside from the entry cache, which holds e.)
  ChainLayer L[kMaxChain];
  uint32_t nodes[kMaxChain];
  int n = 0;
  for (bool more = true; more; ++n) {
    const uint32_t node = e.node + uint32_t(n);
    const FragLayer* fp = n == kMaxChain ? nullptr : deploy_->entry_aside(node);
    if (!fp || !fp->active()) {
      report(ErrorCode::Internal, seq, "streamed chain too long or broken");
      return false;
    }
    const FragLayer& f = *fp;
    ChainLayer& c = L[n];
    const int32_t w = f.desc.out.w;
    if (!f.whole_rows(&c.c0, &c.c1, &c.y0, &c.y1) || w <= 0) {
      report(ErrorCode::Internal, seq, "streamed chain of a share not of whole rows");
      return false;
    }
    c.desc = f.desc;
    c.oc_count = f.oc_count;
    c.node = nodes[n] = node;
    c.buf = reinterpret_cast<int8_t*>(buffer(f.out_at));
    more = f.streamed();
    c.cap = more ? int32_t(f.out_pitch / uint32_t(w)) : c.y1 - c.y0;
    c.cpitch = f.out_pitch ? int64_t(f.out_pitch) : int64_t(c.cap) * w;
    // A line buffer is the next entry's whole window (open() checked it).
    touch(f.out_at, more ? arena_block(uint32_t(c.c1 - c.c0) * f.out_pitch)
                         : f.out_pitch ? f.out_span_bytes() : arena_block(f.out_elems));
  }
  Digest64 dg[kMaxChain];
  for (int i = 0; i < n; ++i) chain_us_[i] = 0;
  ChainCtx ctx{port_, nodes};
  ChainHooks hooks;
  hooks.now = chain_now;
  hooks.shown = chain_shown;
  hooks.ctx = &ctx;
  const KernelStatus st = core::run_chain(L, n, views, int32_t(e.stream_step), dg, chain_us_, hooks);
  port_->now_us(), port_->now_us();  // an empty bracket after the walk (the walk read the clock per call)
  if (st != KernelStatus::Ok) {
    report(ErrorCode::Internal, seq, st == KernelStatus::ViewTooSmall ? "line buffer too small" : "kernel failed");
    return false;
  }
  for (int i = 0; i < n; ++i) chain_digest_[i] = dg[i].finish();
  chain_top_ = touched_;
  chain_first_ = e.node;
  chain_n_ = n;
  return true;
}

void LayerScheduler::sent() {
  const uint16_t layer = sender_->layer();
  if (sender_->sums()) {
    // Partial sums sent: the layer finishes when the others' arrive.
    sender_->sums_sent();
    cursor_ = uint32_t(layer);
    return;
  }
  cursor_ = uint32_t(layer) + 1;
  ready_us_ = port_->now_us();
  inner_ = Inner();
  // Buffers in use now: the open layers' windows and outputs still held.
  touched_ = 0;
  for (const Open& o : open_)
    if (o.used)
      if (const FragLayer* e = deploy_->entry_aside(uint32_t(o.layer))) touch(0, windows_top(*e, cursor_));
}

bool LayerScheduler::drive() {
  if (!deploy_->have()) return true;
  const uint32_t n_layers = deploy_->layer_count();
  for (;;) {
    if (sender_->busy()) {
      if (!sender_->pump()) return false;
      if (sender_->busy()) return true;  // waiting for an ACK
      sent();
    }
    while (cursor_ < n_layers && !deploy_->active(cursor_)) ++cursor_;
    if (cursor_ >= n_layers) return true;
    const FragLayer* e = deploy_->entry(cursor_);
    if (!e) return false;
    bool started = false;
    if (!start(*e, find_open(uint16_t(cursor_)), &started)) {
      worker_->abort_layer();
      return false;
    }
    if (!started) return true;
  }
}

}  // namespace core
}  // namespace ts
