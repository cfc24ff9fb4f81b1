#include "core/worker.h"

#include "core/crc32.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

bool Worker::init(const WorkerConfig& cfg, uint8_t* arena, uint32_t arena_size, FlashStore* flash, Port* port) {
  cfg_ = cfg;
  port_ = port;
  flash_ = flash;
  arena_.init(arena, arena_size);
  tx_ = arena_.alloc(uint32_t(wire::kMaxFrame));
  if (!tx_ || !port_ || !flash_) return false;
  fixed_mark_ = arena_.mark();
  open_fragment();
  return true;
}

bool Worker::open_fragment() {
  uint32_t size = 0;
  const uint8_t* p = flash_->current(&size);
  have_frag_ = p && frag_.open(p, size) == FragStatus::Ok;
  plan_id_ = have_frag_ ? frag_.header().plan_id : 0;
  return have_frag_;
}

void Worker::abort_layer() {
  active_ = false;
  sending_ = false;
  done_pending_ = false;
  arena_.release(fixed_mark_);
}

bool Worker::on_connect() {
  reader_.reset();
  window_.reset(cfg_.window, 1);
  acks_.reset(cfg_.ack_every, 1);
  abort_layer();
  wire::HelloPayload hello;
  hello.board_id = cfg_.id;
  hello.clock_mhz = cfg_.clock_mhz;
  hello.rx_window = cfg_.window;
  hello.ram_bytes = cfg_.ram_bytes;
  hello.flash_bytes = cfg_.flash_bytes;
  uint8_t buf[wire::HelloPayload::kSize];
  const size_t n = hello.encode(buf, sizeof buf);
  return send_frame(MsgType::Hello, 0, 0, buf, uint16_t(n), wire::kFlagLast, true);
}

bool Worker::send_frame(MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                        uint16_t flags, bool sequenced) {
  FrameHeader h;
  h.type = t;
  h.src = cfg_.id;
  h.dst = wire::kCoordinatorId;
  h.deployment = plan_id_;
  h.layer = layer;
  h.flags = flags;
  h.offset = offset;
  if (sequenced) {
    // Every sequenced frame goes through the window. Control replies (HELLO,
    // PROBE_REPLY, DONE of a commit) are only sent when nothing is in flight,
    // so a full window here means the coordinator stopped acknowledging.
    uint32_t seq = 0;
    if (!window_.stamp(port_->now_us() / 1000u, &seq, &h.flags)) return false;
    h.seq = seq;
  }
  const size_t n = wire::encode_frame(h, payload, len, tx_, wire::kMaxFrame);
  if (n == 0) return false;
  stats_.frames_out++;
  stats_.bytes_out += uint32_t(n);
  return port_->send(tx_, n);
}

bool Worker::send_error(ErrorCode code, uint32_t seq, const char* text) {
  const wire::ErrorPayload e = wire::ErrorPayload::make(code, seq, text);
  uint8_t buf[wire::ErrorPayload::kMaxSize];
  const size_t n = e.encode(buf, sizeof buf);
  stats_.errors_sent++;
  // Errors are not sequenced against the window: they must always get out.
  return send_frame(MsgType::Error, 0, 0, buf, uint16_t(n), 0, false);
}

bool Worker::send_ack_if_due() {
  if (!acks_.ack_due()) return true;
  wire::AckPayload a;
  a.ack_seq = acks_.ack_seq();
  uint8_t buf[wire::AckPayload::kSize];
  a.encode(buf, sizeof buf);
  acks_.ack_sent();
  return send_frame(MsgType::Ack, 0, 0, buf, uint16_t(sizeof buf), 0, false);
}

bool Worker::on_bytes(const uint8_t* data, size_t len) {
  while (len > 0) {
    const auto r = reader_.feed(data, len);
    data += r.consumed;
    len -= r.consumed;
    if (r.status == wire::FrameReader::Status::Error) {
      send_error(ErrorCode::BadFrame, 0, wire::wire_error_name(reader_.error()));
      return false;
    }
    if (r.status == wire::FrameReader::Status::NeedMore) break;
    stats_.frames_in++;
    stats_.bytes_in += uint32_t(wire::frame_size(reader_.header()));
    if (!handle(reader_.header(), reader_.payload())) return false;
  }
  return true;
}

bool Worker::handle(const FrameHeader& h, const uint8_t* payload) {
  if (h.type == MsgType::Ack) {
    wire::AckPayload a;
    if (!a.decode(payload, h.payload_len)) return false;
    const auto res = window_.on_ack(a.ack_seq);
    if (res == wire::AckResult::BeyondSent || res == wire::AckResult::Stale) {
      send_error(ErrorCode::SequenceError, 0, "bad ack");
      return false;
    }
    return pump();
  }
  if (h.type == MsgType::Error) return false;  // the coordinator gave up on us
  if (h.type == MsgType::Bye) return false;
  const auto sc = acks_.on_frame(h.seq, h.flags);
  if (sc != wire::SeqCheck::InOrder) {
    send_error(ErrorCode::SequenceError, h.seq, sc == wire::SeqCheck::Gap ? "sequence gap" : "duplicate frame");
    return false;
  }
  bool ok = true;
  switch (h.type) {
    case MsgType::Store: ok = on_store(h, payload); break;
    case MsgType::Commit: ok = on_commit(h, payload); break;
    case MsgType::Probe: {
      if (!send_ack_if_due()) return false;
      return send_frame(MsgType::ProbeReply, h.layer, h.offset, payload, h.payload_len, wire::kFlagLast, true);
    }
    case MsgType::Input: ok = on_input(h, payload); break;
    case MsgType::Run:
      if (!send_ack_if_due()) return false;
      return on_run(h);
    case MsgType::Reset:
      abort_layer();
      break;
    default:
      send_error(ErrorCode::BadFrame, h.seq, "unexpected message type");
      return false;
  }
  if (!ok) return false;
  return send_ack_if_due();
}

bool Worker::on_store(const FrameHeader& h, const uint8_t* payload) {
  if (active_ || sending_) {
    send_error(ErrorCode::NotReady, h.seq, "store during a layer");
    return false;
  }
  if (uint64_t(h.offset) + h.payload_len > flash_->capacity() || !flash_->stage(h.offset, payload, h.payload_len)) {
    send_error(ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
    return false;
  }
  return true;
}

bool Worker::on_commit(const FrameHeader& h, const uint8_t* payload) {
  wire::CommitPayload c;
  if (!c.decode(payload, h.payload_len)) {
    send_error(ErrorCode::BadFrame, h.seq, "bad commit payload");
    return false;
  }
  if (!send_ack_if_due()) return false;
  uint32_t size = 0;
  const uint8_t* cur = flash_->current(&size);
  const bool cached = cur && size == c.fragment_size && crc32(cur, size) == c.fragment_crc;
  if (!cached) {
    if (c.fragment_size > flash_->capacity()) {
      send_error(ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
      return true;  // recoverable: the coordinator reports it
    }
    if (!flash_->commit(c.fragment_size, c.fragment_crc)) {
      send_error(ErrorCode::HashMismatch, h.seq, "not stored");
      return true;  // expected on a first deploy: the coordinator then stores it
    }
  }
  if (!open_fragment()) {
    send_error(ErrorCode::HashMismatch, h.seq, "fragment invalid");
    return true;
  }
  wire::DonePayload d;
  d.request_seq = h.seq;
  d.elapsed_us = 0;
  d.peak_ram_bytes = arena_.high_water();
  uint8_t buf[wire::DonePayload::kSize];
  d.encode(buf, sizeof buf);
  return send_frame(MsgType::Done, 0, 0, buf, uint16_t(sizeof buf), wire::kFlagLast, true);
}

bool Worker::begin_layer(uint16_t layer, uint32_t seq) {
  if (!have_frag_) {
    send_error(ErrorCode::NotReady, seq, "no fragment");
    return false;
  }
  if (frag_.layer(layer, &fl_) != FragStatus::Ok) {
    send_error(ErrorCode::UnknownLayer, seq, "unknown layer");
    return false;
  }
  if (fl_.run_end <= fl_.run_begin) {
    send_error(ErrorCode::UnknownLayer, seq, "no share of this layer");
    return false;
  }
  arena_.release(fixed_mark_);
  arena_.reset_high_water();
  for (int k = 0; k < kMaxInputs; ++k) {
    box_[k] = nullptr;
    received_[k] = 0;
  }
  for (int k = 0; k < fl_.desc.n_inputs; ++k) {
    const uint32_t n = uint32_t(fl_.box[k].elems(fl_.desc.in[k].w));
    if (n == 0) continue;
    box_[k] = arena_.alloc(n);
    if (!box_[k]) {
      send_error(ErrorCode::OutOfMemory, seq, "arena exhausted (inputs)");
      arena_.release(fixed_mark_);
      return false;
    }
  }
  out_ = arena_.alloc(uint32_t(fl_.run_end - fl_.run_begin));
  if (!out_) {
    send_error(ErrorCode::OutOfMemory, seq, "arena exhausted (outputs)");
    arena_.release(fixed_mark_);
    return false;
  }
  active_ = true;
  layer_ = layer;
  return true;
}

// Common checks of INPUT and RUN: the frame belongs to the committed
// deployment, no results are still going out, and it continues the layer in
// progress or starts a new one (allocating its buffers).
bool Worker::enter_layer(const FrameHeader& h) {
  if (h.deployment != plan_id_ || !have_frag_) {
    send_error(ErrorCode::WrongDeployment, h.seq, "frame for another deployment");
    return false;
  }
  if (sending_) {
    send_error(ErrorCode::NotReady, h.seq, "frame while sending results");
    return false;
  }
  if (active_ && layer_ == h.layer) return true;
  if (active_) {
    send_error(ErrorCode::NotReady, h.seq, "new layer before RUN of the last");
    return false;
  }
  return begin_layer(h.layer, h.seq);
}

bool Worker::on_input(const FrameHeader& h, const uint8_t* payload) {
  if (!enter_layer(h)) return false;
  const uint32_t k = h.offset >> kOperandShift;
  const uint32_t e0 = h.offset & kElementMask;
  const uint32_t n = h.payload_len;
  if (k >= fl_.desc.n_inputs || !box_[k]) {
    send_error(ErrorCode::OutOfBounds, h.seq, "input operand not expected");
    return false;
  }
  // The frame must lie inside one of this board's routing runs.
  uint32_t lo = 0, hi = fl_.n_runs[k];
  while (lo < hi) {  // first run with offset + count > e0
    const uint32_t mid = (lo + hi) / 2;
    const InputRun r = fl_.run(int(k), mid);
    if (r.offset + r.count <= e0) lo = mid + 1;
    else hi = mid;
  }
  if (lo >= fl_.n_runs[k]) {
    send_error(ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
    return false;
  }
  const InputRun r = fl_.run(int(k), lo);
  if (e0 < r.offset || uint64_t(e0) + n > uint64_t(r.offset) + r.count || received_[k] + n > fl_.expected[k]) {
    send_error(ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
    return false;
  }
  // Scatter into the box: row segments are contiguous.
  const Dims& X = fl_.desc.in[k];
  const Box& b = fl_.box[k];
  const uint32_t hw = uint32_t(X.h * X.w);
  uint32_t e = e0, i = 0;
  while (i < n) {
    const int32_t c = int32_t(e / hw);
    const int32_t y = int32_t((e % hw) / uint32_t(X.w));
    const int32_t x = int32_t(e % uint32_t(X.w));
    if (c < b.c0 || c >= b.c1 || y < b.h0 || y >= b.h1) {
      send_error(ErrorCode::OutOfBounds, h.seq, "input outside window");
      return false;
    }
    uint32_t seg = uint32_t(X.w - x);
    if (seg > n - i) seg = n - i;
    uint8_t* dst = box_[k] + (uint32_t(c - b.c0) * uint32_t(b.h1 - b.h0) + uint32_t(y - b.h0)) * uint32_t(X.w) + uint32_t(x);
    for (uint32_t j = 0; j < seg; ++j) dst[j] = payload[i + j];
    i += seg;
    e += seg;
  }
  received_[k] += n;
  return true;
}

bool Worker::on_run(const FrameHeader& h) {
  if (!enter_layer(h)) return false;
  for (int k = 0; k < fl_.desc.n_inputs; ++k)
    if (received_[k] != fl_.expected[k]) {
      send_error(ErrorCode::NotReady, h.seq, "run before all inputs arrived");
      return false;
    }
  View views[kMaxInputs];
  for (int k = 0; k < fl_.desc.n_inputs; ++k)
    views[k] = View{reinterpret_cast<const int8_t*>(box_[k]), fl_.box[k].c0, fl_.box[k].c1 - fl_.box[k].c0,
                    fl_.box[k].h0, fl_.box[k].h1 - fl_.box[k].h0};
  const uint32_t t0 = port_->now_us();
  const KernelStatus st =
      compute_range(fl_.desc, views, fl_.run_begin, fl_.run_end, reinterpret_cast<int8_t*>(out_), fl_.oc_count);
  uint32_t us = port_->now_us() - t0;
  if (st != KernelStatus::Ok) {
    send_error(ErrorCode::Internal, h.seq, "kernel failed");
    abort_layer();
    return false;
  }
  // MACs of this share, for an emulated clock: the one count (core/op.h).
  const uint64_t macs = range_macs(fl_.desc, fl_.run_begin, fl_.run_end);
  us = port_->after_compute(h.layer, macs, us);
  stats_.layers_run++;
  run_peak_ = arena_.high_water();
  if (run_peak_ > stats_.peak_arena) stats_.peak_arena = run_peak_;
  run_seq_ = h.seq;
  run_us_ = us;
  out_len_ = uint32_t(fl_.run_end - fl_.run_begin);
  out_sent_ = 0;
  sending_ = true;
  done_pending_ = true;
  active_ = false;
  return pump();
}

bool Worker::pump() {
  while (sending_ && window_.can_send()) {
    if (out_sent_ < out_len_) {
      uint32_t n = out_len_ - out_sent_;
      if (n > wire::kMaxPayload) n = uint32_t(wire::kMaxPayload);
      const bool last = out_sent_ + n == out_len_;
      if (!send_frame(MsgType::Output, layer_, uint32_t(fl_.run_begin) + out_sent_, out_ + out_sent_, uint16_t(n),
                      last ? wire::kFlagLast : 0, true))
        return false;
      out_sent_ += n;
      continue;
    }
    if (done_pending_) {
      wire::DonePayload d;
      d.request_seq = run_seq_;
      d.elapsed_us = run_us_;
      d.peak_ram_bytes = run_peak_;
      uint8_t buf[wire::DonePayload::kSize];
      d.encode(buf, sizeof buf);
      if (!send_frame(MsgType::Done, layer_, 0, buf, uint16_t(sizeof buf), wire::kFlagLast | wire::kFlagAckReq, true))
        return false;
      done_pending_ = false;
    }
    sending_ = false;
    arena_.release(fixed_mark_);
  }
  return true;
}

}  // namespace core
}  // namespace ts
