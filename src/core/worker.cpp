#include "core/worker.h"

#include "core/crc32.h"
#include "core/digest.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

namespace {

// Copies elements [e0, e0 + n) of a (C,H,W) tensor X into the window `box`
// (rows of box b, full width); the caller has checked they lie inside it.
// Row segments are contiguous in both.
void scatter_into_box(uint8_t* box, const Dims& X, const Box& b, uint32_t e0, const uint8_t* src, uint32_t n) {
  const uint32_t hw = uint32_t(X.h * X.w);
  uint32_t at = e0, i = 0;
  while (i < n) {
    const int32_t c = int32_t(at / hw);
    const int32_t y = int32_t((at % hw) / uint32_t(X.w));
    const int32_t x = int32_t(at % uint32_t(X.w));
    uint32_t seg = uint32_t(X.w - x);
    if (seg > n - i) seg = n - i;
    uint8_t* dst = box + (uint32_t(c - b.c0) * uint32_t(b.h1 - b.h0) + uint32_t(y - b.h0)) * uint32_t(X.w) + uint32_t(x);
    for (uint32_t j = 0; j < seg; ++j) dst[j] = src[i + j];
    i += seg;
    at += seg;
  }
}

}  // namespace

uint64_t share_macs(const FragLayer& e) {
  // The one MAC count (core/op.h), over the share's region segments.
  uint64_t macs = 0;
  for (uint32_t i = 0; i < e.n_regions; ++i)
    e.region(i).segments(e.desc.out, [&](int32_t b, int32_t end) {
      macs += range_macs(e.desc, b, end);
      return true;
    });
  return macs;
}

bool Worker::init(const WorkerConfig& cfg, uint8_t* arena, uint32_t arena_size, FlashStore* flash, Port* port) {
  cfg_ = cfg;
  port_ = port;
  flash_ = flash;
  arena_.init(arena, arena_size);
  tx_ = arena_.alloc(uint32_t(wire::kMaxFrame));
  if (!tx_ || !port_ || !flash_) return false;
  fixed_mark_ = arena_.mark();
  base_ = arena + fixed_mark_;
  space_ = arena_size - fixed_mark_;
  open_fragment();
  return true;
}

bool Worker::open_fragment() {
  uint32_t size = 0;
  const uint8_t* p = flash_->current(&size);
  have_frag_ = p && frag_.open(p, size) == FragStatus::Ok;
  plan_id_ = have_frag_ ? frag_.header().plan_id : 0;
  first_active_ = 0;
  if (have_frag_) {
    const uint32_t n = frag_.layer_count();
    FragLayer e;
    while (first_active_ < n && !(frag_.layer(first_active_, &e) == FragStatus::Ok && e.active())) ++first_active_;
  }
  abort_layer();
  return have_frag_;
}

void Worker::abort_layer() {
  for (Open& o : open_) o = Open();
  sending_ = false;
  done_pending_ = false;
  cursor_ = have_frag_ ? frag_.layer_count() : 0;
  touched_ = 0;
  for (Link& l : links_) l.held = false;
  arena_.release(fixed_mark_);
}

bool Worker::idle() const {
  if (sending_) return false;
  for (const Open& o : open_)
    if (o.used) return false;
  return true;
}

void Worker::reset_link(int link) {
  Link& l = links_[link];
  l.open = true;
  l.held = false;
  l.worker = -1;
  l.reader.reset();
  l.window.reset(cfg_.window, 1);
  l.acks.reset(cfg_.ack_every, 1);
}

bool Worker::on_connect(int link) {
  if (link < 0 || link >= kMaxLinks) return false;
  if (link == coord_link_) {
    coord_link_ = -1;
    abort_layer();
  }
  reset_link(link);
  wire::HelloPayload hello;
  hello.board_id = cfg_.id;
  hello.clock_mhz = cfg_.clock_mhz;
  hello.rx_window = cfg_.window;
  hello.ram_bytes = cfg_.ram_bytes;
  hello.flash_bytes = cfg_.flash_bytes;
  uint8_t buf[wire::HelloPayload::kSize];
  const size_t n = hello.encode(buf, sizeof buf);
  return send_frame(link, MsgType::Hello, 0, 0, buf, uint16_t(n), wire::kFlagLast, true);
}

void Worker::on_disconnect(int link) {
  if (link < 0 || link >= kMaxLinks) return;
  links_[link].open = false;
  links_[link].held = false;
  if (link == coord_link_) {
    coord_link_ = -1;
    abort_layer();
  }
}

int Worker::link_to(uint16_t worker) {
  for (int i = 0; i < kMaxLinks; ++i)
    if (links_[i].open && links_[i].worker == int32_t(worker)) return i;
  const int l = port_->open_link(worker);
  if (l < 0 || l >= kMaxLinks) return -1;
  if (!on_connect(l)) return -1;
  links_[l].worker = worker;
  return l;
}

bool Worker::send_frame(int link, MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                        uint16_t flags, bool sequenced) {
  if (link < 0 || link >= kMaxLinks || !links_[link].open) return false;
  Link& l = links_[link];
  FrameHeader h;
  h.type = t;
  h.src = cfg_.id;
  h.dst = link == coord_link_ || l.worker < 0 ? wire::kCoordinatorId : uint16_t(l.worker);
  h.deployment = plan_id_;
  h.layer = layer;
  h.flags = flags;
  h.offset = offset;
  if (sequenced) {
    // Every sequenced frame goes through the link's window. Control replies
    // (HELLO, PROBE_REPLY, DONE of a commit) are only sent when nothing is in
    // flight, so a full window here means the peer stopped acknowledging.
    uint32_t seq = 0;
    if (!l.window.stamp(port_->now_us() / 1000u, &seq, &h.flags)) return false;
    h.seq = seq;
  }
  const size_t n = wire::encode_frame(h, payload, len, tx_, wire::kMaxFrame);
  if (n == 0) return false;
  stats_.frames_out++;
  stats_.bytes_out += uint32_t(n);
  return port_->send(link, tx_, n);
}

bool Worker::send_error(int link, ErrorCode code, uint32_t seq, const char* text) {
  const wire::ErrorPayload e = wire::ErrorPayload::make(code, seq, text);
  uint8_t buf[wire::ErrorPayload::kMaxSize];
  const size_t n = e.encode(buf, sizeof buf);
  stats_.errors_sent++;
  // Errors are not sequenced against the window: they must always get out.
  return send_frame(link, MsgType::Error, 0, 0, buf, uint16_t(n), 0, false);
}

bool Worker::send_ack_if_due(int link) {
  wire::AckTracker& acks = links_[link].acks;
  if (!acks.ack_due()) return true;
  wire::AckPayload a;
  a.ack_seq = acks.ack_seq();
  uint8_t buf[wire::AckPayload::kSize];
  a.encode(buf, sizeof buf);
  acks.ack_sent();
  return send_frame(link, MsgType::Ack, 0, 0, buf, uint16_t(sizeof buf), 0, false);
}

int32_t Worker::on_bytes(int link, const uint8_t* data, size_t len) {
  if (link < 0 || link >= kMaxLinks || !links_[link].open) return -1;
  Link& l = links_[link];
  if (l.held) return 0;
  size_t used = 0;
  while (used < len) {
    const auto r = l.reader.feed(data + used, len - used);
    used += r.consumed;
    if (r.status == wire::FrameReader::Status::Error) {
      send_error(link, ErrorCode::BadFrame, 0, wire::wire_error_name(l.reader.error()));
      on_disconnect(link);
      return -1;
    }
    if (r.status == wire::FrameReader::Status::NeedMore) break;
    stats_.frames_in++;
    stats_.bytes_in += uint32_t(wire::frame_size(l.reader.header()));
    const Verdict v = handle(link);
    if (v == Verdict::Fail) {
      on_disconnect(link);
      return -1;
    }
    if (v == Verdict::Hold) {
      l.held = true;
      return int32_t(used);
    }
  }
  return int32_t(used);
}

bool Worker::resume() {
  bool ok = true;
  for (int i = 0; i < kMaxLinks; ++i) {
    if (!links_[i].open || !links_[i].held) continue;
    const Verdict v = handle(i);
    if (v == Verdict::Ok) links_[i].held = false;
    if (v == Verdict::Fail) {
      on_disconnect(i);
      ok = false;
    }
  }
  return ok;
}

Worker::Verdict Worker::handle(int link) {
  Link& l = links_[link];
  const FrameHeader& h = l.reader.header();
  const uint8_t* payload = l.reader.payload();
  const bool from_coord = h.src == wire::kCoordinatorId;
  if (h.type == MsgType::Ack) {
    wire::AckPayload a;
    if (!a.decode(payload, h.payload_len)) return Verdict::Fail;
    const auto res = l.window.on_ack(a.ack_seq);
    if (res == wire::AckResult::BeyondSent || res == wire::AckResult::Stale) {
      send_error(link, ErrorCode::SequenceError, 0, "bad ack");
      return Verdict::Fail;
    }
    return drive() ? Verdict::Ok : Verdict::Fail;
  }
  if (h.type == MsgType::Error) return Verdict::Fail;  // the peer gave up on us
  if (h.type == MsgType::Bye) return Verdict::Fail;
  if (from_coord && link != coord_link_) {
    // A coordinator on a new link: a new session.
    abort_layer();
    coord_link_ = link;
  }
  if (h.seq != l.acks.expected_seq()) {
    const auto sc = l.acks.on_frame(h.seq, h.flags);  // counts it
    send_error(link, ErrorCode::SequenceError, h.seq, sc == wire::SeqCheck::Gap ? "sequence gap" : "duplicate frame");
    return Verdict::Fail;
  }
  const bool boards_may_send = h.type == MsgType::Input || h.type == MsgType::Hello;
  if (!from_coord && !boards_may_send) {
    send_error(link, ErrorCode::BadFrame, h.seq, "only the coordinator sends this");
    return Verdict::Fail;
  }
  if (h.type == MsgType::Input) {
    const Verdict v = on_input(link, h, payload);
    if (v != Verdict::Ok) return v;
    // Between boards a layer's activations are many small messages (a halo
    // row per channel): acknowledge every ack_every frames or when the
    // sender's window is full (ACK_REQ), not at every message's end, so the
    // sender streams instead of waiting a round trip per window.
    l.acks.on_frame(h.seq, from_coord ? h.flags : uint16_t(h.flags & ~wire::kFlagLast));
    if (!send_ack_if_due(link)) return Verdict::Fail;
    return drive() ? Verdict::Ok : Verdict::Fail;
  }
  l.acks.on_frame(h.seq, h.flags);
  bool ok = true;
  switch (h.type) {
    case MsgType::Hello:
      if (from_coord) {
        send_error(link, ErrorCode::BadFrame, h.seq, "unexpected message type");
        return Verdict::Fail;
      }
      break;
    case MsgType::Store: ok = on_store(link, h, payload); break;
    case MsgType::Commit: ok = on_commit(link, h, payload); break;
    case MsgType::Probe:
      if (!send_ack_if_due(link)) return Verdict::Fail;
      return send_frame(link, MsgType::ProbeReply, h.layer, h.offset, payload, h.payload_len, wire::kFlagLast, true)
                 ? Verdict::Ok
                 : Verdict::Fail;
    case MsgType::Run: {
      if (!send_ack_if_due(link)) return Verdict::Fail;
      const Verdict v = on_run(link, h);
      if (v != Verdict::Ok) return v;
      return drive() ? Verdict::Ok : Verdict::Fail;
    }
    case MsgType::Reset:
      abort_layer();
      break;
    case MsgType::Peers: {
      wire::PeerEntry e;
      for (size_t i = 0; wire::decode_peer(payload, h.payload_len, i, &e); ++i) {
        if (have_frag_ && e.worker >= frag_.header().n_workers) {
          send_error(link, ErrorCode::OutOfBounds, h.seq, "peer outside the plan");
          return Verdict::Fail;
        }
        port_->peer_address(e);
      }
      break;
    }
    default:
      send_error(link, ErrorCode::BadFrame, h.seq, "unexpected message type");
      return Verdict::Fail;
  }
  if (!ok) return Verdict::Fail;
  return send_ack_if_due(link) ? Verdict::Ok : Verdict::Fail;
}

bool Worker::on_store(int link, const FrameHeader& h, const uint8_t* payload) {
  if (!idle()) {
    send_error(link, ErrorCode::NotReady, h.seq, "store during a layer");
    return false;
  }
  if (uint64_t(h.offset) + h.payload_len > flash_->capacity() || !flash_->stage(h.offset, payload, h.payload_len)) {
    send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
    return false;
  }
  return true;
}

bool Worker::on_commit(int link, const FrameHeader& h, const uint8_t* payload) {
  wire::CommitPayload c;
  if (!c.decode(payload, h.payload_len)) {
    send_error(link, ErrorCode::BadFrame, h.seq, "bad commit payload");
    return false;
  }
  if (!send_ack_if_due(link)) return false;
  uint32_t size = 0;
  const uint8_t* cur = flash_->current(&size);
  const bool cached = cur && size == c.fragment_size && crc32(cur, size) == c.fragment_crc;
  if (!cached) {
    if (c.fragment_size > flash_->capacity()) {
      send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
      return true;  // recoverable: the coordinator reports it
    }
    if (!flash_->commit(c.fragment_size, c.fragment_crc)) {
      send_error(link, ErrorCode::HashMismatch, h.seq, "not stored");
      return true;  // expected on a first deploy: the coordinator then stores it
    }
  }
  if (!open_fragment()) {
    send_error(link, ErrorCode::HashMismatch, h.seq, "fragment invalid");
    return true;
  }
  wire::DonePayload d;
  d.request_seq = h.seq;
  d.elapsed_us = 0;
  d.peak_ram_bytes = arena_.high_water();
  uint8_t buf[wire::DonePayload::kSize];
  d.encode(buf, sizeof buf);
  return send_frame(link, MsgType::Done, 0, 0, buf, uint16_t(sizeof buf), wire::kFlagLast, true);
}

// The entry of `layer` if this board computes part of it; else an ERROR.
bool Worker::entry(uint16_t layer, uint32_t seq, int link, FragLayer* e) {
  if (!have_frag_) {
    send_error(link, ErrorCode::NotReady, seq, "no fragment");
    return false;
  }
  if (frag_.layer(layer, e) != FragStatus::Ok) {
    send_error(link, ErrorCode::UnknownLayer, seq, "unknown layer");
    return false;
  }
  if (!e->active()) {
    send_error(link, ErrorCode::UnknownLayer, seq, "no share of this layer");
    return false;
  }
  if (frag_.header().arena_bytes > arena_.capacity()) {
    send_error(link, ErrorCode::OutOfMemory, seq, "arena exhausted (inputs)");
    return false;
  }
  return true;
}

Worker::Open* Worker::find_open(uint16_t layer) {
  for (Open& o : open_)
    if (o.used && o.layer == layer) return &o;
  return nullptr;
}

// Whether a frame of layer h.layer may be taken now, and its receive slot.
// The coordinator steers an idle board to any layer (relay mode); otherwise
// layers run in order and a board's inputs for a later layer are taken once
// this board has reached the layer that produces them.
Worker::Verdict Worker::admit(int link, const FrameHeader& h, const FragLayer& e, Open** slot) {
  const bool from_coord = h.src == wire::kCoordinatorId;
  if (h.deployment != plan_id_ || !have_frag_) {
    send_error(link, ErrorCode::WrongDeployment, h.seq, "frame for another deployment");
    return Verdict::Fail;
  }
  *slot = find_open(h.layer);
  if (*slot) return Verdict::Ok;
  const uint32_t n_layers = frag_.layer_count();
  if (idle()) {
    if (from_coord) cursor_ = h.layer;
    else if (cursor_ >= n_layers) cursor_ = first_active_;
  } else if (from_coord && h.layer != cursor_) {
    send_error(link, ErrorCode::NotReady, h.seq,
               sending_ ? "frame while sending results" : "new layer before RUN of the last");
    return Verdict::Fail;
  }
  if (h.layer < cursor_) {
    send_error(link, ErrorCode::NotReady, h.seq, "frame for a finished layer");
    return Verdict::Fail;
  }
  if (h.type == MsgType::Input) {
    const uint32_t k = h.offset >> wire::kOperandShift;
    if (k < kMaxInputs && cursor_ < e.avail_from[k]) return Verdict::Hold;
  }
  for (Open& o : open_)
    if (!o.used) {
      o = Open();
      o.used = true;
      o.layer = h.layer;
      *slot = &o;
      for (int k = 0; k < e.desc.n_inputs; ++k) {
        const uint32_t n = uint32_t(e.box[k].elems(e.desc.in[k].w));
        if (n) touch(e.box_at[k], arena_block(n));
      }
      return Verdict::Ok;
    }
  return Verdict::Hold;
}

void Worker::touch(uint32_t at, uint32_t bytes) {
  if (at + bytes > touched_) touched_ = at + bytes;
}

Worker::Verdict Worker::on_input(int link, const FrameHeader& h, const uint8_t* payload) {
  FragLayer e;
  if (!entry(h.layer, h.seq, link, &e)) return Verdict::Fail;
  const uint32_t k = h.offset >> wire::kOperandShift;
  const uint32_t e0 = h.offset & wire::kElementMask;
  const uint32_t n = h.payload_len;
  if (k >= e.desc.n_inputs || e.n_runs[k] == 0) {
    send_error(link, ErrorCode::OutOfBounds, h.seq, "input operand not expected");
    return Verdict::Fail;
  }
  Open* slot = nullptr;
  const Verdict v = admit(link, h, e, &slot);
  if (v != Verdict::Ok) return v;
  // The frame must lie inside one of this board's routing runs.
  uint32_t lo = 0, hi = e.n_runs[k];
  while (lo < hi) {  // first run with offset + count > e0
    const uint32_t mid = (lo + hi) / 2;
    const InputRun r = e.run(int(k), mid);
    if (r.offset + r.count <= e0) lo = mid + 1;
    else hi = mid;
  }
  const InputRun r = e.run(int(k), lo);
  if (lo >= e.n_runs[k] || e0 < r.offset || uint64_t(e0) + n > uint64_t(r.offset) + r.count ||
      slot->received[k] + n > e.expected[k]) {
    send_error(link, ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
    return Verdict::Fail;
  }
  // The fragment reader checked that every run lies inside the window.
  scatter_into_box(buffer(e.box_at[k]), e.desc.in[k], e.box[k], e0, payload, n);
  slot->received[k] += n;
  return Verdict::Ok;
}

Worker::Verdict Worker::on_run(int link, const FrameHeader& h) {
  FragLayer e;
  if (!entry(h.layer, h.seq, link, &e)) return Verdict::Fail;
  if (!(e.flags & kEntryRunTrigger)) {
    send_error(link, ErrorCode::NotReady, h.seq, "layer starts without RUN");
    return Verdict::Fail;
  }
  Open* slot = nullptr;
  const Verdict v = admit(link, h, e, &slot);
  if (v == Verdict::Hold) {
    send_error(link, ErrorCode::NotReady, h.seq, "too many layers open");
    return Verdict::Fail;
  }
  if (v != Verdict::Ok) return v;
  for (int k = 0; k < e.desc.n_inputs; ++k)
    if (slot->received[k] != e.expected[k]) {
      send_error(link, ErrorCode::NotReady, h.seq, "run before all inputs arrived");
      return Verdict::Fail;
    }
  slot->run = true;
  slot->run_seq = h.seq;
  return Verdict::Ok;
}

// Computes layer `e` if its inputs are complete (and its RUN came, when it
// needs one); sets *started.
bool Worker::start(const FragLayer& e, Open* slot, bool* started) {
  *started = false;
  for (int k = 0; k < e.desc.n_inputs; ++k)
    if ((slot ? slot->received[k] : 0u) != e.expected[k]) return true;
  if ((e.flags & kEntryRunTrigger) && !(slot && slot->run)) return true;
  const int report = coord_link_;
  if (frag_.header().arena_bytes > arena_.capacity()) {
    if (report >= 0) send_error(report, ErrorCode::OutOfMemory, 0, "arena exhausted (inputs)");
    return false;
  }
  // Local runs: this board's own outputs of an earlier layer.
  for (int k = 0; k < e.desc.n_inputs; ++k) {
    if (e.n_local[k] == 0) continue;
    FragLayer src;
    if (frag_.layer(e.local_layer[k], &src) != FragStatus::Ok) return false;
    const uint8_t* from = buffer(src.out_at);
    touch(src.out_at, arena_block(src.out_elems));
    touch(e.box_at[k], arena_block(uint32_t(e.box[k].elems(e.desc.in[k].w))));
    for (uint32_t j = 0; j < e.n_local[k]; ++j) {
      const InputRun r = e.local_run(k, j);
      scatter_into_box(buffer(e.box_at[k]), e.desc.in[k], e.box[k], r.offset, from + src.position(int32_t(r.offset)),
                       r.count);
    }
  }
  View views[kMaxInputs];
  for (int k = 0; k < e.desc.n_inputs; ++k)
    views[k] = View{reinterpret_cast<const int8_t*>(buffer(e.box_at[k])), e.box[k].c0, e.box[k].c1 - e.box[k].c0,
                    e.box[k].h0, e.box[k].h1 - e.box[k].h0};
  int8_t* out = reinterpret_cast<int8_t*>(buffer(e.out_at));
  touch(e.out_at, arena_block(e.out_elems));
  const uint32_t t0 = port_->now_us();
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
      pos += uint32_t(g.elems());
      continue;
    }
    st = compute_range(e.desc, views, g.v[0], g.v[1], out + pos, e.oc_count);
    pos += uint32_t(g.elems());
  }
  uint32_t us = port_->now_us() - t0;
  if (st != KernelStatus::Ok) {
    if (report >= 0) send_error(report, ErrorCode::Internal, slot ? slot->run_seq : 0, "kernel failed");
    return false;
  }
  us = port_->after_compute(e.node, share_macs(e), us);
  if (cfg_.flip_layer >= 0 && uint32_t(cfg_.flip_layer) == e.node) out[0] = int8_t(out[0] ^ 1);  // test hook
  run_digest_ = digest64(out, e.out_elems);  // what this board hands on, checked by the coordinator
  stats_.layers_run++;
  run_peak_ = fixed_mark_ + touched_;
  if (run_peak_ > stats_.peak_arena) stats_.peak_arena = run_peak_;
  run_seq_ = slot ? slot->run_seq : 0;
  run_us_ = us;
  if (slot) *slot = Open();
  fl_ = e;
  layer_ = uint16_t(e.node);
  send_i_ = 0;
  send_off_ = 0;
  sending_ = true;
  done_pending_ = true;
  *started = true;
  return true;
}

bool Worker::drive() {
  if (!have_frag_) return true;
  const uint32_t n_layers = frag_.layer_count();
  for (;;) {
    if (sending_) {
      if (!pump()) return false;
      if (sending_) return true;  // waiting for an ACK
      cursor_ = uint32_t(layer_) + 1;
      // Buffers in use now: the open layers' windows and outputs still held.
      touched_ = 0;
      for (const Open& o : open_) {
        FragLayer e;
        if (!o.used || frag_.layer(o.layer, &e) != FragStatus::Ok) continue;
        for (int k = 0; k < e.desc.n_inputs; ++k) {
          const uint32_t n = uint32_t(e.box[k].elems(e.desc.in[k].w));
          if (n) touch(e.box_at[k], arena_block(n));
        }
      }
    }
    while (cursor_ < n_layers) {
      FragLayer e;
      if (frag_.layer(cursor_, &e) != FragStatus::Ok) return false;
      if (e.active()) break;
      ++cursor_;
    }
    if (cursor_ >= n_layers) return true;
    FragLayer e;
    frag_.layer(cursor_, &e);
    bool started = false;
    if (!start(e, find_open(uint16_t(cursor_)), &started)) {
      abort_layer();
      return false;
    }
    if (!started) return true;
  }
}

bool Worker::pump() {
  const uint8_t* out = buffer(fl_.out_at);
  while (sending_) {
    if (send_i_ < fl_.n_sends) {
      const Send s = fl_.send(send_i_);
      const bool to_coord = s.peer == kPeerCoordinator;
      const int link = to_coord ? coord_link_ : link_to(s.peer);
      if (link < 0) {
        if (coord_link_ >= 0) send_error(coord_link_, ErrorCode::Internal, run_seq_, "cannot reach a peer board");
        abort_layer();
        return false;
      }
      if (!links_[link].window.can_send()) return true;
      uint32_t n = s.count - send_off_;
      if (n > wire::kMaxPayload) n = uint32_t(wire::kMaxPayload);
      const bool last = send_off_ + n == s.count;
      const uint32_t element = s.offset + send_off_;
      const bool ok = to_coord ? send_frame(link, MsgType::Output, layer_, element, out + s.pos + send_off_,
                                            uint16_t(n), last ? wire::kFlagLast : 0, true)
                               : send_frame(link, MsgType::Input, s.layer, wire::input_offset(s.operand, element),
                                            out + s.pos + send_off_, uint16_t(n), last ? wire::kFlagLast : 0, true);
      if (!ok) {
        if (!to_coord && coord_link_ >= 0)
          send_error(coord_link_, ErrorCode::Internal, run_seq_, "link to a peer board failed");
        abort_layer();
        return false;
      }
      send_off_ += n;
      if (last) {
        ++send_i_;
        send_off_ = 0;
      }
      continue;
    }
    if (done_pending_) {
      if (coord_link_ >= 0) {
        if (!links_[coord_link_].window.can_send()) return true;
        wire::DonePayload d;
        d.request_seq = run_seq_;
        d.elapsed_us = run_us_;
        d.peak_ram_bytes = run_peak_;
        d.outputs = fl_.out_elems;
        d.output_digest = run_digest_;
        uint8_t buf[wire::DonePayload::kSize];
        d.encode(buf, sizeof buf);
        if (!send_frame(coord_link_, MsgType::Done, layer_, 0, buf, uint16_t(sizeof buf),
                        wire::kFlagLast | wire::kFlagAckReq, true))
          return false;
      }
      done_pending_ = false;
    }
    sending_ = false;
  }
  return true;
}

}  // namespace core
}  // namespace ts
