#include "core/worker.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

bool Worker::init(const WorkerConfig& cfg, uint8_t* arena, uint32_t arena_size, FlashStore* flash, Port* port) {
  cfg_ = cfg;
  port_ = port;
  arena_.init(arena, arena_size);
  uint8_t* tx = arena_.alloc(uint32_t(wire::kMaxFrame));  // one frame
  if (!tx || !port_ || !flash) return false;
  fixed_mark_ = arena_.mark();
  uint8_t* base = arena + fixed_mark_;  // planned buffers start here
  deploy_.init(&cfg_, flash, &stats_, &links_, this);
  links_.init(&cfg_, port_, &stats_, &deploy_, this, tx);
  sched_.init(&cfg_, port_, &stats_, &deploy_, &links_, &sender_, this, base, fixed_mark_);
  sender_.init(&cfg_, port_, &links_, this, base);
  deploy_.open_fragment();
  return true;
}

void Worker::abort_layer() {
  sched_.reset();
  sender_.reset();
  links_.set_inference(0);
  links_.release_held();
  arena_.release(fixed_mark_);
}

bool Worker::on_connect(int link) {
  if (!LinkSet::valid(link)) return false;
  if (link == links_.coord()) {
    links_.set_coord(-1);
    abort_layer();
  }
  return links_.connect(link);
}

void Worker::on_disconnect(int link) {
  if (!LinkSet::valid(link)) return;
  links_.lost(link, sched_.at_rest());
  if (link == links_.coord()) {
    links_.set_coord(-1);
    abort_layer();
  }
}

int32_t Worker::on_bytes(int link, const uint8_t* data, size_t len) {
  if (!links_.open(link)) return -1;
  Link& l = links_[link];
  if (l.held) return 0;
  size_t used = 0;
  while (used < len) {
    const auto r = l.reader.feed(data + used, len - used);
    used += r.consumed;
    if (r.status == wire::FrameReader::Status::Error) {
      links_.send_error(link, ErrorCode::BadFrame, 0, wire::wire_error_name(l.reader.error()));
      on_disconnect(link);
      return -1;
    }
    if (r.status == wire::FrameReader::Status::NeedMore) break;
    l.framing = false;
    stats_.frames_in++;
    stats_.bytes_in += uint32_t(wire::frame_size(l.reader.header()));
    if (deploy_.authenticate(link) == Verdict::Fail) {
      on_disconnect(link);
      return -1;
    }
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
  if (l.reader.buffered() > 0 && !l.framing) {  // a frame began: its deadline starts
    l.framing = true;
    l.frame_us = port_->now_us();
  }
  return int32_t(used);
}

bool Worker::link_established(int link) const {
  if (!links_.open(link)) return false;
  const Link& l = links_[link];
  return link == links_.coord() || l.dialled || l.worker >= 0;
}

namespace {

// `ms` past `since` on a microsecond clock that wraps (deadlines of minutes).
bool past(uint32_t now_us, uint32_t since_us, uint32_t ms) {
  const uint32_t limit = ms > 4000000u ? 4000000000u : ms * 1000u;
  return ms != 0 && now_us - since_us > limit;
}

}  // namespace

const char* Worker::link_overdue(int link) const {
  if (!links_.open(link)) return nullptr;
  const Link& l = links_[link];
  const uint32_t now = port_->now_us();
  if (l.framing && past(now, l.frame_us, cfg_.frame_ms)) return "a frame did not arrive whole in time";
  if (!link_established(link) && past(now, l.opened_us, cfg_.handshake_ms)) return "no handshake in time";
  return nullptr;
}

int Worker::link_to_evict(int free_slots) const {
  const uint32_t now = port_->now_us();
  int unproven = 0, oldest = -1;
  uint32_t oldest_age = 0;
  for (int i = 0; i < kMaxLinks; ++i) {
    if (!links_.open(i) || link_established(i)) continue;
    ++unproven;
    const uint32_t age = now - links_[i].opened_us;
    if (oldest < 0 || age > oldest_age) {
      oldest = i;
      oldest_age = age;
    }
  }
  if (oldest >= 0 && (free_slots <= 0 || unproven > int(cfg_.unproven_links))) return oldest;
  return -1;
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
  // Results that waited for room in the port's send queue (Port::room) go
  // on now that it moved.
  if (links_.take_port_full() && !sched_.drive()) ok = false;
  return ok;
}

Verdict Worker::claim_session(int link, uint32_t seq) {
  const int owner = links_.coord();
  if (owner >= 0 && links_.open(owner) && port_->link_alive(owner)) {
    char text[wire::kMaxErrorText + 1] = "in use by another session (coordinator ";
    size_t n = 0;
    while (text[n]) ++n;
    const size_t at = n;
    n += port_->describe_link(owner, text + n, sizeof text - n - 1);
    if (n == at) {  // the port cannot name it: the link number
      const char* s = "on link ";
      while (*s && n < sizeof text - 4) text[n++] = *s++;
      if (owner >= 10) text[n++] = char('0' + owner / 10 % 10);
      text[n++] = char('0' + owner % 10);
    }
    text[n++] = ')';
    text[n] = 0;
    links_.send_error(link, ErrorCode::BoardInUse, seq, text);
    return Verdict::Fail;
  }
  if (owner >= 0) on_disconnect(owner);  // gone: the transport closes it (link_open is false)
  // Board-to-board links belong to the session that had them opened (with
  // no owner now, closing them reports no PeerLost).
  for (int i = 0; i < kMaxLinks; ++i) {
    const Link& p = links_[i];
    if (i != link && p.open && (p.dialled || p.worker >= 0 || p.claimed >= 0)) on_disconnect(i);
  }
  abort_layer();
  links_.set_coord(link);
  return Verdict::Ok;
}

// The frame the reader of `link` holds (authenticated): ACKs move the
// window, inputs go to the scheduler, the rest to on_control.
Verdict Worker::handle(int link) {
  Link& l = links_[link];
  const FrameHeader& h = l.reader.header();
  const uint8_t* payload = l.reader.payload();
  const bool from_coord = h.src == wire::kCoordinatorId;
  if (h.type == MsgType::Ack) {
    if (!links_.on_ack(link, payload, h.payload_len)) return Verdict::Fail;
    return sched_.drive() ? Verdict::Ok : Verdict::Fail;
  }
  if (h.type == MsgType::Error) return Verdict::Fail;  // the peer gave up on us
  if (h.type == MsgType::Bye) return Verdict::Fail;
  if (from_coord && link != links_.coord() && claim_session(link, h.seq) == Verdict::Fail) return Verdict::Fail;
  if (h.seq != l.acks.expected_seq()) {
    const auto sc = l.acks.on_frame(h.seq, h.flags);  // counts it
    links_.send_error(link, ErrorCode::SequenceError, h.seq,
                      sc == wire::SeqCheck::Gap ? "sequence gap" : "duplicate frame");
    return Verdict::Fail;
  }
  const bool is_input = h.type == MsgType::Input || h.type == MsgType::Inputs;
  const bool boards_may_send = is_input || h.type == MsgType::Hello;
  if (!from_coord && !boards_may_send) {
    links_.send_error(link, ErrorCode::BadFrame, h.seq, "only the coordinator sends this");
    return Verdict::Fail;
  }
  if (is_input) {
    const Verdict v = sched_.on_input(link, h, payload);
    if (v != Verdict::Ok) return v;
    // Between boards a layer's activations are many small messages (a halo
    // row per channel): acknowledge every ack_every frames or when the
    // sender's window is full (ACK_REQ), not at every message's end, so the
    // sender streams instead of waiting a round trip per window.
    l.acks.on_frame(h.seq, from_coord ? h.flags : uint16_t(h.flags & ~wire::kFlagLast));
    if (!links_.send_ack_if_due(link)) return Verdict::Fail;
    return sched_.drive() ? Verdict::Ok : Verdict::Fail;
  }
  l.acks.on_frame(h.seq, h.flags);
  return on_control(link, h, payload);
}

// A sequenced frame other than inputs, counted by the link's ACK tracker.
Verdict Worker::on_control(int link, const FrameHeader& h, const uint8_t* payload) {
  bool ok = true;
  switch (h.type) {
    case MsgType::Hello: return on_hello(link, h);
    case MsgType::Store: ok = deploy_.on_store(link, h, payload, sched_.idle()); break;
    case MsgType::Patch: ok = deploy_.on_patch(link, h, payload, sched_.idle()); break;
    case MsgType::Commit: ok = deploy_.on_commit(link, h, payload); break;
    case MsgType::Probe:
      if (!links_.send_ack_if_due(link)) return Verdict::Fail;
      return links_.send_frame(link, MsgType::ProbeReply, h.layer, h.offset, payload, h.payload_len, wire::kFlagLast,
                               true)
                 ? Verdict::Ok
                 : Verdict::Fail;
    case MsgType::Run: {
      if (!links_.send_ack_if_due(link)) return Verdict::Fail;
      const Verdict v = sched_.on_run(link, h);
      if (v != Verdict::Ok) return v;
      return sched_.drive() ? Verdict::Ok : Verdict::Fail;
    }
    case MsgType::Resume: {
      if (!links_.send_ack_if_due(link)) return Verdict::Fail;
      const Verdict v = sched_.on_resume(link, h);
      if (v != Verdict::Ok) return v;
      return sched_.drive() ? Verdict::Ok : Verdict::Fail;
    }
    case MsgType::Reset:
      abort_layer();
      break;
    case MsgType::Auth:  // checked in DeploySession::authenticate()
      break;
    case MsgType::Peers: {
      const Verdict v = on_peers(link, h, payload);
      if (v != Verdict::Ok) return v;
      break;
    }
    default:
      links_.send_error(link, ErrorCode::BadFrame, h.seq, "unexpected message type");
      return Verdict::Fail;
  }
  if (!ok) return Verdict::Fail;
  return links_.send_ack_if_due(link) ? Verdict::Ok : Verdict::Fail;
}

Verdict Worker::on_hello(int link, const FrameHeader& h) {
  Link& l = links_[link];
  if (h.src == wire::kCoordinatorId) {
    links_.send_error(link, ErrorCode::BadFrame, h.seq, "unexpected message type");
    return Verdict::Fail;
  }
  if (l.dialled) {
    // The greeting of the board we connected to (it names its board id,
    // not knowing yet who called): our sends may go now.
    if (!links_.send_ack_if_due(link)) return Verdict::Fail;
    return sched_.drive() ? Verdict::Ok : Verdict::Fail;
  }
  if (!deploy_.have() || h.src == deploy_.header().worker || h.src >= deploy_.header().n_workers) {
    links_.send_error(link, ErrorCode::OutOfBounds, h.seq, "hello from a board outside the plan");
    return Verdict::Fail;
  }
  // A board that connected to us: our sends to it use this link too
  // (each direction has its own sequence numbers and window), so a pair
  // of boards needs one link, not one each way. With a key, only once
  // it proved it holds the key (DeploySession::authenticate()).
  if (l.worker < 0 && l.claimed < 0) {
    if (cfg_.has_key) {
      l.claimed = int32_t(h.src);
      l.claimed_deployment = h.deployment;
    } else {
      l.worker = int32_t(h.src);
      l.deployment = h.deployment;
    }
  }
  return links_.send_ack_if_due(link) ? Verdict::Ok : Verdict::Fail;
}

Verdict Worker::on_peers(int link, const FrameHeader& h, const uint8_t* payload) {
  // A new peer table (a new deployment, e.g. after a failover re-plan):
  // peer links learnt under another deployment may lead to the wrong
  // board under the new numbering. Close them; they reopen on demand. A
  // peer of the new deployment may already have connected (its HELLO
  // names this deployment): that link stays.
  for (int i = 0; i < kMaxLinks; ++i)
    if (i != link && links_[i].open && links_[i].worker >= 0 && links_[i].deployment != h.deployment)
      on_disconnect(i);
  wire::PeerEntry e;
  for (size_t i = 0; wire::decode_peer(payload, h.payload_len, i, &e); ++i) {
    if (deploy_.have() && e.worker >= deploy_.header().n_workers) {
      links_.send_error(link, ErrorCode::OutOfBounds, h.seq, "peer outside the plan");
      return Verdict::Fail;
    }
    port_->peer_address(e);
  }
  return Verdict::Ok;
}

}  // namespace core
}  // namespace ts
