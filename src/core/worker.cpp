#include "core/worker.h"

#include <string.h>

#include "core/bytes.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "core/digest.h"
#include "core/partial.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

namespace {

// Small copies (a row segment of a few elements is common) without a call.
inline void copy_bytes(uint8_t* dst, const uint8_t* src, uint32_t n) {
  if (n > 16) {
    memcpy(dst, src, n);
    return;
  }
  for (uint32_t i = 0; i < n; ++i) dst[i] = src[i];
}

// scatter_into_box for a caller that knows the channel, row and column of e0.
void scatter_at(uint8_t* box, const Dims& X, const Box& b, uint32_t c, uint32_t y, uint32_t x, const uint8_t* src,
                uint32_t n) {
  const uint32_t w = uint32_t(X.w), rows = uint32_t(b.h1 - b.h0);
  uint32_t i = 0;
  while (i < n) {
    uint32_t seg = w - x;
    if (seg > n - i) seg = n - i;
    copy_bytes(box + ((c - uint32_t(b.c0)) * rows + (y - uint32_t(b.h0))) * w + x, src + i, seg);
    i += seg;
    x = 0;
    if (++y == uint32_t(X.h)) {
      y = 0;
      ++c;
    }
  }
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

uint32_t windows_top(const FragLayer& e) {
  uint32_t top = 0;
  for (int k = 0; k < e.desc.n_inputs; ++k) {
    const uint32_t n = uint32_t(e.box[k].elems(e.desc.in[k].w));
    if (n && e.box_at[k] + arena_block(n) > top) top = e.box_at[k] + arena_block(n);
  }
  return top;
}

void LayerIndex::build(const FragmentReader& f) {
  n_ = 0;
  const uint32_t n = f.layer_count() < kMaxIndexedLayers ? f.layer_count() : kMaxIndexedLayers;
  FragLayer e;
  for (uint32_t i = 0; i < n; ++i) {
    if (f.layer(i, &e) != FragStatus::Ok) return;
    Facts& x = f_[i];
    x.active = e.active();
    x.macs = x.active ? share_macs(e) : 0;
    x.windows_top = core::windows_top(e);
    n_ = i + 1;
  }
}

const FragLayer* Worker::layer_entry(uint32_t i) {
  if (!have_frag_ || i >= frag_.layer_count()) return nullptr;
  const uint32_t c = i % kEntryCache;
  if (cache_layer_[c] != i) {
    cache_layer_[c] = ~0u;
    if (frag_.layer(i, &cache_[c]) != FragStatus::Ok) return nullptr;
    cache_layer_[c] = i;
  }
  return &cache_[c];
}

bool Worker::layer_active(uint32_t i) {
  if (index_.indexed(i)) return index_.active(i);
  const FragLayer* e = layer_entry(i);
  return e && e->active();
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
  // The deploy cache's identity of what this board holds (on_commit).
  if (have_frag_) sha256(p, size, frag_digest_);
  else
    for (uint8_t& b : frag_digest_) b = 0;
  for (uint32_t& c : cache_layer_) c = ~0u;
  index_.clear();
  first_active_ = 0;
  if (have_frag_) {
    index_.build(frag_);
    const uint32_t n = frag_.layer_count();
    while (first_active_ < n && !layer_active(first_active_)) ++first_active_;
  }
  abort_layer();
  return have_frag_;
}

void Worker::abort_layer() {
  for (Open& o : open_) o = Open();
  sending_ = false;
  ps_phase_ = false;
  done_pending_ = false;
  cursor_ = have_frag_ ? frag_.layer_count() : 0;
  touched_ = 0;
  infer_ = 0;
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
  l.rx.stop();
  l.tx.stop();
  l.hello_len = 0;
  l.dialled = false;
  l.claimed = -1;
  l.claimed_deployment = 0;
}

bool Worker::on_connect(int link) {
  if (link < 0 || link >= kMaxLinks) return false;
  if (link == coord_link_) {
    coord_link_ = -1;
    abort_layer();
  }
  reset_link(link);
  links_[link].worker = connecting_peer_;
  wire::HelloPayload hello;
  hello.board_id = cfg_.id;
  hello.clock_mhz = cfg_.clock_mhz;
  hello.rx_window = cfg_.window;
  hello.ram_bytes = cfg_.ram_bytes;
  hello.flash_bytes = cfg_.flash_bytes;
  if (cfg_.has_key) {
    // A nonce never used before under this key: the port's entropy, the
    // clock, and a count of connections.
    uint8_t ent[40] = {};
    size_t ne = port_->entropy(ent, 32);
    const uint32_t t = port_->now_us();
    for (int i = 0; i < 4; ++i) ent[ne++] = uint8_t(t >> (8 * i));
    auth::make_nonce(cfg_.key, ent, ne, ++nonces_, hello.nonce);
    hello.auth = true;
  }
  Link& l = links_[link];
  const size_t n = hello.encode(l.hello, sizeof l.hello);
  l.hello_len = uint8_t(n);
  return send_frame(link, MsgType::Hello, 0, 0, l.hello, uint16_t(n), wire::kFlagLast, true);
}

void Worker::on_disconnect(int link) {
  if (link < 0 || link >= kMaxLinks) return;
  // A link to a board of the current deployment closed: that board may be
  // gone, and what it owed us (or we owed it) will not arrive. Say so to the
  // coordinator at once, so it decides (docs/reliability.md) instead of
  // waiting for its deadline.
  const Link& was = links_[link];
  if (was.open && link != coord_link_ && was.worker >= 0 && have_frag_ && was.deployment == plan_id_ &&
      coord_link_ >= 0 && links_[coord_link_].open) {
    stats_.peers_lost++;
    char text[48] = "lost the link to peer board ";
    size_t n = 0;
    while (text[n]) ++n;
    char digits[8];
    int nd = 0;
    uint32_t v = uint32_t(was.worker);
    do {
      digits[nd++] = char('0' + v % 10);
      v /= 10;
    } while (v && nd < 7);
    while (nd > 0) text[n++] = digits[--nd];
    text[n] = 0;
    links_[link].open = false;
    send_error(coord_link_, ErrorCode::PeerLost, uint32_t(was.worker), text);
  }
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
  connecting_peer_ = int32_t(worker);  // so our HELLO names us by plan index
  const bool ok = on_connect(l);
  connecting_peer_ = -1;
  if (!ok) return -1;
  links_[l].worker = worker;
  links_[l].deployment = plan_id_;
  links_[l].dialled = true;
  return l;
}

bool Worker::send_frame(int link, MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                        uint16_t flags, bool sequenced) {
  if (link < 0 || link >= kMaxLinks || !links_[link].open) return false;
  Link& l = links_[link];
  FrameHeader h;
  h.type = t;
  // To the coordinator a board is its board id (HELLO, the coordinator's
  // checks); to a peer board it is its index in the deployed plan, the
  // numbering PEERS and the routing use (after a failover re-plan they differ).
  h.src = link != coord_link_ && l.worker >= 0 && have_frag_ ? frag_.header().worker : cfg_.id;
  h.dst = link == coord_link_ || l.worker < 0 ? wire::kCoordinatorId : uint16_t(l.worker);
  h.deployment = plan_id_;
  h.layer = layer;
  h.flags = flags;
  h.offset = offset;
  // Data and reports of the inference this board is on carry its tag.
  if (wire::carries_inference(t)) h.inference = infer_;
  if (sequenced) {
    // Every sequenced frame goes through the link's window. Control replies
    // (HELLO, PROBE_REPLY, DONE of a commit) are only sent when nothing is in
    // flight, so a full window here means the peer stopped acknowledging.
    uint32_t seq = 0;
    if (!l.window.stamp(port_->now_us() / 1000u, &seq, &h.flags)) return false;
    // A DONE to the coordinator also asks at half the window: the ACK then
    // comes back while the board computes on, and a long run of layers
    // (a board computing many layers, each with its DONE) does not stop at
    // a full window to wait for a round trip. (Only DONEs: the other frames'
    // ACKs stay as the simulator counts them.)
    if (t == MsgType::Done && link == coord_link_ && l.window.window() >= 4 &&
        l.window.in_flight() == l.window.window() / 2u)
      h.flags = uint16_t(h.flags | wire::kFlagAckReq);
    h.seq = seq;
  }
  if (l.tx.active()) h.flags = uint16_t(h.flags | wire::kFlagMac);
  const size_t n = wire::encode_frame_body(h, payload, len, tx_, wire::kMaxFrame);
  if (n == 0) return false;
  stats_.frames_out++;
  if (!l.tx.active()) {
    stats_.bytes_out += uint32_t(n);
    return port_->send(link, tx_, n);
  }
  // The tag goes right after the frame, from a buffer of its own.
  uint8_t tag[wire::kTagSize];
  l.tx.seal(tx_, n, tag);
  stats_.bytes_out += uint32_t(n + sizeof tag);
  return port_->send(link, tx_, n) && port_->send(link, tag, sizeof tag);
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
    if (authenticate(link) == Verdict::Fail) {
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

// Every frame passes here once, before handle(): with a session its tag must
// verify; a board with a key takes nothing but AUTH before a session; a board
// without a key refuses AUTH and tagged frames. Refusals are one ERROR
// (AuthFailed) and the link closes.
Worker::Verdict Worker::authenticate(int link) {
  Link& l = links_[link];
  const FrameHeader& h = l.reader.header();
  const bool tagged = (h.flags & wire::kFlagMac) != 0;
  auto refuse = [&](const char* why) {
    stats_.auth_failures++;
    if (link != coord_link_ && (l.dialled || l.worker >= 0 || l.claimed >= 0 || h.src != wire::kCoordinatorId))
      stats_.peer_auth_failures++;
    l.reader.refuse(wire::WireError::BadMac);
    send_error(link, ErrorCode::AuthFailed, h.seq, why);
    return Verdict::Fail;
  };
  if (l.rx.active()) {
    if (!tagged) return refuse("unauthenticated frame in an authenticated session");
    if (!l.rx.check(l.reader.frame(), l.reader.frame_len())) return refuse("frame failed authentication");
    if (l.worker < 0 && l.claimed >= 0) {
      // The board that connected to us proved it holds the key (its first
      // tagged frame, the ACK of our HELLO): the link is now its.
      l.worker = l.claimed;
      l.deployment = l.claimed_deployment;
    }
    return Verdict::Ok;
  }
  if (!cfg_.has_key) {
    if (tagged || h.type == MsgType::Auth) return refuse("this board has no key");
    return Verdict::Ok;
  }
  if (l.dialled || h.src != wire::kCoordinatorId) return peer_session(link);
  // The coordinator acknowledges HELLO before it can key anything; an ACK
  // only moves this link's window, so it is the one frame taken untagged.
  if (h.type == MsgType::Ack && !tagged) return Verdict::Ok;
  if (h.type != MsgType::Auth || !tagged) return refuse("this board requires a key (AUTH first)");
  wire::AuthPayload a;
  if (!a.decode(l.reader.payload(), h.payload_len) || l.hello_len == 0) return refuse("bad AUTH");
  auth::SessionKeys k;
  auth::derive_session(cfg_.key, a.nonce, l.hello, l.hello_len, &k);
  l.rx.start(k.c2b);
  const bool ok = l.rx.check(l.reader.frame(), l.reader.frame_len());
  if (ok) l.tx.start(k.b2c);
  for (uint8_t& b : k.c2b) b = 0;
  for (uint8_t& b : k.b2c) b = 0;
  if (!ok) {
    l.rx.stop();
    return refuse("authentication failed: the coordinator's key differs");
  }
  return Verdict::Ok;
}

// A keyed board-to-board link: each board's first frame is its HELLO
// (untagged, 32 bytes, a fresh nonce); once a board has both HELLOs it
// derives the link's keys (auth::derive_peer) and every later frame in both
// directions is tagged. Called for the peer's first frame only.
Worker::Verdict Worker::peer_session(int link) {
  Link& l = links_[link];
  const FrameHeader& h = l.reader.header();
  auto refuse = [&](const char* why) {
    stats_.auth_failures++;
    stats_.peer_auth_failures++;
    l.reader.refuse(wire::WireError::BadMac);
    send_error(link, ErrorCode::AuthFailed, h.seq, why);
    return Verdict::Fail;
  };
  if (h.type != MsgType::Hello || (h.flags & wire::kFlagMac))
    return refuse("board-to-board link: HELLO first (frame refused)");
  wire::HelloPayload p;
  if (!p.decode(l.reader.payload(), h.payload_len) || !p.auth) return refuse("peer board has no key");
  if (!have_frag_ || l.hello_len == 0) return refuse("no deployment for a board-to-board link");
  const uint16_t me = frag_.header().worker;
  uint16_t opener = me, acceptor = me;
  const uint8_t *ho = l.hello, *ha = l.hello;
  size_t no = l.hello_len, na = l.hello_len;
  if (l.dialled) {
    acceptor = uint16_t(l.worker);
    ha = l.reader.payload();
    na = h.payload_len;
  } else {
    if (h.src == me || h.src >= frag_.header().n_workers) return refuse("hello from a board outside the plan");
    opener = h.src;
    ho = l.reader.payload();
    no = h.payload_len;
  }
  auth::PeerKeys k;
  auth::derive_peer(cfg_.key, plan_id_, opener, acceptor, ho, no, ha, na, &k);
  l.tx.start(l.dialled ? k.o2a : k.a2o);
  l.rx.start(l.dialled ? k.a2o : k.o2a);
  for (uint8_t& b : k.o2a) b = 0;
  for (uint8_t& b : k.a2o) b = 0;
  return Verdict::Ok;
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
  const bool is_input = h.type == MsgType::Input || h.type == MsgType::Inputs;
  const bool boards_may_send = is_input || h.type == MsgType::Hello;
  if (!from_coord && !boards_may_send) {
    send_error(link, ErrorCode::BadFrame, h.seq, "only the coordinator sends this");
    return Verdict::Fail;
  }
  if (is_input) {
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
      if (l.dialled) {
        // The greeting of the board we connected to (it names its board id,
        // not knowing yet who called): our sends may go now.
        if (!send_ack_if_due(link)) return Verdict::Fail;
        return drive() ? Verdict::Ok : Verdict::Fail;
      }
      if (!have_frag_ || h.src == frag_.header().worker || h.src >= frag_.header().n_workers) {
        send_error(link, ErrorCode::OutOfBounds, h.seq, "hello from a board outside the plan");
        return Verdict::Fail;
      }
      // A board that connected to us: our sends to it use this link too
      // (each direction has its own sequence numbers and window), so a pair
      // of boards needs one link, not one each way. With a key, only once
      // it proved it holds the key (authenticate()).
      if (l.worker < 0 && l.claimed < 0) {
        if (cfg_.has_key) {
          l.claimed = int32_t(h.src);
          l.claimed_deployment = h.deployment;
        } else {
          l.worker = int32_t(h.src);
          l.deployment = h.deployment;
        }
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
    case MsgType::Auth:  // checked in authenticate()
      break;
    case MsgType::Peers: {
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
  // Hash the staged bytes as they come (a deploy sends them in order from
  // offset 0), so COMMIT can check them against its SHA-256 without reading
  // the staging area back.
  if (h.offset == 0) {
    stage_sha_.reset();
    stage_hashed_ = 0;
    stage_in_order_ = true;
  }
  if (stage_in_order_ && h.offset == stage_hashed_) {
    stage_sha_.update(payload, h.payload_len);
    stage_hashed_ += h.payload_len;
  } else {
    stage_in_order_ = false;
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
  // Cached: the committed fragment is valid and is exactly the one asked
  // for (SHA-256 and size), of the deployment the COMMIT names. A fragment
  // of another plan or another board, or a damaged one, is never taken for it.
  uint32_t size = 0;
  flash_->current(&size);
  const bool cached = have_frag_ && size == c.fragment_size && plan_id_ == h.deployment &&
                      equal_ct(frag_digest_, c.digest, kSha256Bytes);
  if (!cached) {
    if (c.fragment_size > flash_->capacity()) {
      send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
      return true;  // recoverable: the coordinator reports it
    }
    // Commit what was staged only if all of it arrived in order and has the
    // digest asked for.
    uint8_t staged[kSha256Bytes];
    Sha256 s = stage_sha_;
    s.finish(staged);
    const bool complete = stage_in_order_ && stage_hashed_ == c.fragment_size;
    const bool match = complete && equal_ct(staged, c.digest, kSha256Bytes);
    stage_hashed_ = 0;
    stage_in_order_ = false;
    if (!match) {
      send_error(link, ErrorCode::HashMismatch, h.seq, complete ? "staged fragment has another digest" : "not stored");
      return true;  // "not stored" is expected on a first deploy: the coordinator then stores it
    }
    // Bytes with the right digest that are no fragment of this deployment
    // are refused before the commit: committing them would replace the
    // fragment held now (A/B keeps only the newest valid slot), leaving
    // the board with none.
    const uint8_t* staged_bytes = flash_->staged(c.fragment_size);
    FragmentReader check;
    const FragStatus st = staged_bytes ? check.open(staged_bytes, c.fragment_size) : FragStatus::TooShort;
    if (st != FragStatus::Ok || check.header().plan_id != h.deployment) {
      char text[wire::kMaxErrorText + 1];  // names the refused entry's layer and field
      fragment_invalid_text(st, check.refusal(), text, sizeof text);
      send_error(link, ErrorCode::HashMismatch, h.seq, text);
      return true;
    }
    if (!flash_->commit(c.fragment_size, c.fragment_crc)) {
      send_error(link, ErrorCode::HashMismatch, h.seq, "not stored");
      return true;
    }
    if (!open_fragment() || plan_id_ != h.deployment) {
      send_error(link, ErrorCode::HashMismatch, h.seq, "fragment invalid");
      return true;
    }
  } else {
    abort_layer();
  }
  wire::DonePayload d;
  d.request_seq = h.seq;
  d.elapsed_us = 0;
  d.peak_ram_bytes = arena_.high_water();
  uint8_t buf[wire::DonePayload::kSize];
  d.encode(buf, sizeof buf);
  return send_frame(link, MsgType::Done, 0, 0, buf, uint16_t(sizeof buf), wire::kFlagLast, true);
}

// The entry of `layer` if this board computes part of it; else an ERROR and
// nullptr.
const FragLayer* Worker::entry(uint16_t layer, uint32_t seq, int link) {
  if (!have_frag_) {
    send_error(link, ErrorCode::NotReady, seq, "no fragment");
    return nullptr;
  }
  const FragLayer* e = layer_entry(layer);
  if (!e) {
    send_error(link, ErrorCode::UnknownLayer, seq, "unknown layer");
    return nullptr;
  }
  if (!e->active()) {
    send_error(link, ErrorCode::UnknownLayer, seq, "no share of this layer");
    return nullptr;
  }
  if (frag_.header().arena_bytes > arena_.capacity()) {
    send_error(link, ErrorCode::OutOfMemory, seq, "arena exhausted (inputs)");
    return nullptr;
  }
  return e;
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
  const uint32_t n_layers = frag_.layer_count();
  // Pipelined runs: a frame of another inference than the one this board is
  // on starts that inference once the board is at rest; until then a peer's
  // waits unread on its link (back-pressure through the sender's window:
  // the board's arena never holds two inferences), and the coordinator,
  // which sends an inference's input only after the board's last DONE of
  // the one before, broke the protocol. An inference's frames once the
  // board finished it are refused.
  const bool rest = idle() && cursor_ >= n_layers;
  if (h.inference != infer_) {
    if (!rest) {
      if (!from_coord) return Verdict::Hold;
      send_error(link, ErrorCode::NotReady, h.seq, "input of another inference before this one is done");
      return Verdict::Fail;
    }
    infer_ = h.inference;
  } else if (h.inference != 0 && rest) {
    send_error(link, ErrorCode::NotReady, h.seq, "frame of an inference this board has finished");
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
  if (early()) return Verdict::Hold;
  for (Open& o : open_)
    if (!o.used) {
      o = Open();
      o.used = true;
      o.layer = h.layer;
      *slot = &o;
      touch(0, index_.indexed(e.node) ? index_.windows_top(e.node) : windows_top(e));
      return Verdict::Ok;
    }
  return Verdict::Hold;
}

void Worker::touch(uint32_t at, uint32_t bytes) {
  if (at + bytes > touched_) touched_ = at + bytes;
}

Worker::Verdict Worker::on_input(int link, const FrameHeader& h, const uint8_t* payload) {
  const FragLayer* ep = entry(h.layer, h.seq, link);
  if (!ep) return Verdict::Fail;
  const FragLayer& e = *ep;
  const uint32_t k = h.offset >> wire::kOperandShift;
  const uint32_t e0 = h.offset & wire::kElementMask;
  const bool blocks = h.type == MsgType::Inputs;
  if (k == kPsumOperand && e.partial() && blocks && e0 == 0 && e.ps_expected > 0) {
    Open* slot = nullptr;
    const Verdict v = admit(link, h, e, &slot);
    if (v != Verdict::Ok) return v;
    return on_partial(link, h, payload, e, slot);
  }
  if (k >= e.desc.n_inputs || e.n_runs[k] == 0 || (blocks && e0 != 0)) {
    send_error(link, ErrorCode::OutOfBounds, h.seq, "input operand not expected");
    return Verdict::Fail;
  }
  Open* slot = nullptr;
  const Verdict v = admit(link, h, e, &slot);
  if (v != Verdict::Ok) return v;
  uint8_t* box = buffer(e.box_at[k]);
  if (!blocks) {
    // One run: it must lie inside one of this board's routing runs.
    const uint32_t n = h.payload_len;
    RunFinder runs(e.runs[k], e.n_runs[k]);
    if (!runs.covers(e0, n) || slot->received[k] + n > e.expected[k]) {
      send_error(link, ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
      return Verdict::Fail;
    }
    // The fragment reader checked that every run lies inside the window.
    scatter_into_box(box, e.desc.in[k], e.box[k], e0, payload, n);
    slot->received[k] += n;
    return Verdict::Ok;
  }
  // Blocks of segments (the frame reader checked their structure): every
  // segment inside a routing run, checked before anything is written.
  size_t pos = 0;
  wire::InputBlock b;
  uint32_t total = 0;
  RunFinder runs(e.runs[k], e.n_runs[k]);
  while (wire::next_input_block(payload, h.payload_len, &pos, &b))
    for (uint32_t j = 0; j < b.count; ++j) {
      if (!runs.covers(b.first + j * b.stride, b.len)) {
        send_error(link, ErrorCode::OutOfBounds, h.seq, "input outside routing slice");
        return Verdict::Fail;
      }
      total += b.len;
    }
  if (slot->received[k] + total > e.expected[k]) {
    send_error(link, ErrorCode::OutOfBounds, h.seq, "more input than the routing slice");
    return Verdict::Fail;
  }
  pos = 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b))
    for (uint32_t j = 0; j < b.count; ++j)
      scatter_into_box(box, e.desc.in[k], e.box[k], b.first + j * b.stride, b.data + j * b.len, b.len);
  slot->received[k] += total;
  return Verdict::Ok;
}

// Partial sums for this board's output block: every segment whole int32
// values inside the accumulator, checked before anything is added.
Worker::Verdict Worker::on_partial(int link, const FrameHeader& h, const uint8_t* payload, const FragLayer& e,
                                   Open* slot) {
  const uint32_t acc_bytes = e.out_elems * 4u;
  size_t pos = 0;
  wire::InputBlock b;
  uint32_t total = 0;
  while (wire::next_input_block(payload, h.payload_len, &pos, &b))
    for (uint32_t j = 0; j < b.count; ++j) {
      const uint64_t first = uint64_t(b.first) + uint64_t(j) * b.stride;
      if ((first | b.len) % 4 || first + b.len > acc_bytes) {
        send_error(link, ErrorCode::OutOfBounds, h.seq, "partial sums outside the accumulator");
        return Verdict::Fail;
      }
      total += b.len;
    }
  if (slot->ps_received + total > e.ps_expected) {
    send_error(link, ErrorCode::OutOfBounds, h.seq, "more partial sums than planned");
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

Worker::Open* Worker::new_slot(uint16_t layer) {
  for (Open& o : open_)
    if (!o.used) {
      o = Open();
      o.used = true;
      o.layer = layer;
      return &o;
    }
  return nullptr;
}

Worker::Verdict Worker::on_run(int link, const FrameHeader& h) {
  const FragLayer* ep = entry(h.layer, h.seq, link);
  if (!ep) return Verdict::Fail;
  const FragLayer& e = *ep;
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
  if (e.partial() && !slot) {
    slot = new_slot(uint16_t(e.node));
    if (!slot) return true;  // a slot frees when an earlier layer finishes
  }
  if (e.partial() && slot->ps_done && slot->ps_received != e.ps_expected) return true;  // sums still coming
  if (frag_.header().arena_bytes > arena_.capacity()) {
    if (report >= 0) send_error(report, ErrorCode::OutOfMemory, 0, "arena exhausted (inputs)");
    return false;
  }
  // Local runs: this board's own outputs of an earlier layer.
  for (int k = 0; k < e.desc.n_inputs && !(e.partial() && slot->ps_done); ++k) {
    if (e.n_local[k] == 0) continue;
    // (Decoded here, not through the entry cache, which may hold e.)
    FragLayer src;
    if (frag_.layer(e.local_layer[k], &src) != FragStatus::Ok) return false;
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
    for (uint32_t j = 0; j < e.n_local[k]; ++j, rec += frag::kRunBytes) {
      const uint32_t off = le::get_u32(rec), count = le::get_u32(rec + 4);
      const uint32_t c = off / hw, in_plane = off - c * hw, y = in_plane / w, x = in_plane - y * w;
      uint32_t at = 0;
      if (!spans.find_at(off, count, int32_t(c), int32_t(y), int32_t(x), &at)) return false;  // open() checked each
      scatter_at(box, X, e.box[k], c, y, x, from + at, count);
    }
  }
  View views[kMaxInputs];
  for (int k = 0; k < e.desc.n_inputs; ++k)
    views[k] = View{reinterpret_cast<const int8_t*>(buffer(e.box_at[k])), e.box[k].c0, e.box[k].c1 - e.box[k].c0,
                    e.box[k].h0, e.box[k].h1 - e.box[k].h0};
  int8_t* out = reinterpret_cast<int8_t*>(buffer(e.out_at));
  touch(e.out_at, e.out_pitch ? e.out_span_bytes() : arena_block(e.out_elems));
  // What the boards we exchange with wait for (our last layer's sends, our
  // ACKs) goes out before we are busy.
  for (int i = 0; i < kMaxLinks; ++i)
    if (links_[i].open && i != coord_link_) port_->flush(i);
  const uint32_t t0 = port_->now_us();
  KernelStatus st = KernelStatus::Ok;
  int32_t c0, c1, y0, y1;
  if (e.partial()) {
    int32_t* own = reinterpret_cast<int32_t*>(buffer(e.ps_at));
    touch(e.ps_at, arena_block(e.ps_bytes()));
    if (!slot->ps_done) {
      // Phase 1: the sums of this board's input channels for every output
      // channel, then the other owners' blocks go out; the layer stays open.
      if (!partial_sums(e.desc, reinterpret_cast<const int8_t*>(buffer(e.box_at[0])), e.ps_ci0, e.ps_ci1,
                        e.desc.weights, own)) {
        if (report >= 0) send_error(report, ErrorCode::Internal, slot->run_seq, "kernel failed");
        return false;
      }
      run_us_ = port_->after_compute(e.node, uint64_t(e.desc.out.c) * uint64_t(partial_positions(e.desc)) *
                                                 uint64_t(e.ps_ci1 - e.ps_ci0) * uint64_t(partial_k_per_channel(e.desc)),
                                     port_->now_us() - t0);
      // Test hook: a faulty board's sums (one value of the first block it
      // sends): the owner of that block reports outputs that differ.
      if (cfg_.flip_layer >= 0 && uint32_t(cfg_.flip_layer) == e.node && e.n_ps_sends)
        own[e.ps_send(0).pos / 4] ^= 1 << 16;  // large enough to survive requantisation
      slot->ps_done = true;
      fl_ = e;
      fl_.sends = e.ps_sends;
      fl_.n_sends = e.n_ps_sends;
      fl_.out_at = e.ps_at;
      layer_ = uint16_t(e.node);
      send_i_ = 0;
      send_off_ = 0;
      run_frames_ = 0;
      ps_phase_ = true;
      sending_ = true;
      done_pending_ = false;
      *started = true;
      return true;
    }
    // Phase 2: own sums of the own block + sums received, requantised.
    const Region g = e.region(0);
    const int32_t P = partial_positions(e.desc);
    const uint8_t* acc = buffer(e.ps_acc_at);
    touch(e.ps_acc_at, arena_block(e.out_elems * 4u));
    if (!partial_finish(e.desc, g.v[0] / P, (g.v[1] - g.v[0]) / P, own + g.v[0],
                        slot->acc_ready ? reinterpret_cast<const int32_t*>(acc) : nullptr,
                        reinterpret_cast<int8_t*>(buffer(e.out_at))))
      st = KernelStatus::BadLayer;
  } else if (e.out_pitch && e.whole_rows(&c0, &c1, &y0, &y1)) {
    // In place: straight into the window of the layer that reads it last.
    OutBox b;
    b.c0 = c0; b.c1 = c1; b.y0 = y0; b.y1 = y1; b.x0 = 0; b.x1 = e.desc.out.w;
    st = compute_box_pitched(e.desc, views, b, out, e.oc_count, int64_t(e.out_pitch));
  }
  uint32_t pos = 0;
  for (uint32_t i = 0; i < e.n_regions && st == KernelStatus::Ok && !e.out_pitch && !e.partial(); ++i) {
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
  if (e.partial()) us += run_us_;  // phase 1's compute
  else us = port_->after_compute(e.node, index_.indexed(e.node) ? index_.macs(e.node) : share_macs(e), us);
  // Test hook (a reduced layer's fault was put in the sums it sent, phase 1).
  if (cfg_.flip_layer >= 0 && uint32_t(cfg_.flip_layer) == e.node && !(e.partial() && e.n_ps_sends))
    out[0] = int8_t(out[0] ^ 1);
  // What this board hands on, in flat C-H-W order, checked by the coordinator.
  if (e.out_pitch && e.whole_rows(&c0, &c1, &y0, &y1)) {  // in place: channel planes out_pitch apart
    Digest64 dg;
    for (int32_t c = c0; c < c1; ++c)
      dg.update(out + size_t(c - c0) * e.out_pitch, size_t(y1 - y0) * size_t(e.desc.out.w));
    run_digest_ = dg.finish();
  } else {
    run_digest_ = digest64(out, e.out_elems);
  }
  stats_.layers_run++;
  run_peak_ = fixed_mark_ + touched_;
  if (run_peak_ > stats_.peak_arena) stats_.peak_arena = run_peak_;
  run_seq_ = slot ? slot->run_seq : 0;
  run_us_ = us;
  run_instr_ = port_->compute_instructions();
  if (slot) *slot = Open();
  fl_ = e;
  layer_ = uint16_t(e.node);
  send_i_ = 0;
  send_off_ = 0;
  if (!e.partial()) run_frames_ = 0;  // a reduced layer counts its sums' frames too
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
      if (ps_phase_) {
        // Partial sums sent: the layer finishes when the others' arrive.
        ps_phase_ = false;
        cursor_ = uint32_t(layer_);
        continue;
      }
      cursor_ = uint32_t(layer_) + 1;
      // Buffers in use now: the open layers' windows and outputs still held.
      touched_ = 0;
      for (const Open& o : open_) {
        if (!o.used) continue;
        if (index_.indexed(o.layer)) {
          touch(0, index_.windows_top(o.layer));
        } else if (const FragLayer* e = layer_entry(o.layer)) {
          touch(0, windows_top(*e));
        }
      }
    }
    while (cursor_ < n_layers && !layer_active(cursor_)) ++cursor_;
    if (cursor_ >= n_layers) return true;
    const FragLayer* e = layer_entry(cursor_);
    if (!e) return false;
    bool started = false;
    if (!start(*e, find_open(uint16_t(cursor_)), &started)) {
      abort_layer();
      return false;
    }
    if (!started) return true;
  }
}

// Fills one INPUTS frame (payload built in place in the transmit buffer)
// from the sends starting at send_i_ / send_off_ that go to the same peer,
// layer and operand; consecutive sends of equal length at a constant
// distance become one strided block. Advances send_i_ / send_off_; *last is
// true when the group is complete.
uint16_t Worker::gather(bool* last) {
  uint8_t* pay = tx_ + wire::kHeaderSize;
  const uint8_t* out = buffer(fl_.out_at);
  const Send first = fl_.send(send_i_);
  const auto same_group = [&](const Send& t) {
    return t.peer == first.peer && t.layer == first.layer && t.operand == first.operand;
  };
  // Every send record is decoded once here: s is always send(send_i_).
  Send s = first;
  size_t used = 0;
  for (;;) {
    if (send_i_ >= fl_.n_sends || !same_group(s)) break;
    const size_t room = wire::kMaxPayload - used;
    if (room < wire::kInputBlockHeader + 1) break;
    const size_t space = room - wire::kInputBlockHeader;
    wire::InputBlock b;
    b.first = s.offset + send_off_;
    uint32_t rest = s.count - send_off_;
    if (send_off_ > 0 || rest >= space || rest > 0xFFFF) {
      // A piece of one long send.
      if (rest > space) rest = uint32_t(space);
      if (rest > 0xFFFF) rest = 0xFFFF;
      if (ps_phase_) rest &= ~3u;  // partial sums: whole int32 values per piece
      b.len = uint16_t(rest);
      b.count = 1;
      wire::encode_input_block_header(b, pay + used, room);
      const uint8_t* src = out + s.pos + send_off_;
      memcpy(pay + used + wire::kInputBlockHeader, src, rest);
      used += wire::kInputBlockHeader + rest;
      send_off_ += rest;
      if (send_off_ == s.count) {
        ++send_i_;
        send_off_ = 0;
        s = fl_.send(send_i_);
      }
      continue;
    }
    // Whole sends: extend a strided block over the following ones, copying
    // each behind the block's header as it joins.
    uint8_t* data = pay + used + wire::kInputBlockHeader;
    memcpy(data, out + s.pos, rest);
    b.len = uint16_t(rest);
    uint32_t n = 1;
    Send p = s, t;
    bool t_read = false;  // t is send(send_i_ + n), read and not taken
    while (send_i_ + n < fl_.n_sends && n < 0xFFFF && (n + 1) * size_t(rest) <= space) {
      t = fl_.send(send_i_ + n);
      t_read = true;
      if (!same_group(t) || t.count != s.count) break;
      if (t.offset <= p.offset) break;
      const uint32_t d = t.offset - p.offset;
      if (n == 1 ? d < s.count : d != b.stride) break;
      b.stride = d;
      memcpy(data + size_t(n) * rest, out + t.pos, rest);
      t_read = false;
      p = t;
      ++n;
    }
    b.count = uint16_t(n);
    if (n == 1) b.stride = 0;
    wire::encode_input_block_header(b, pay + used, room);
    used += wire::kInputBlockHeader + size_t(n) * rest;
    send_i_ += n;
    s = t_read ? t : fl_.send(send_i_);
  }
  *last = send_i_ >= fl_.n_sends || !same_group(s);
  return uint16_t(used);
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
      // A keyed peer link sends once both HELLOs are in (its keys derived).
      if (cfg_.has_key && !links_[link].tx.active()) return true;
      if (!to_coord) {
        // To a board: as few INPUTS frames as the group's bytes need.
        bool last = false;
        const uint16_t len = gather(&last);
        if (!send_frame(link, MsgType::Inputs, s.layer, wire::input_offset(s.operand, 0), tx_ + wire::kHeaderSize,
                        len, last ? wire::kFlagLast : 0, true)) {
          if (coord_link_ >= 0) send_error(coord_link_, ErrorCode::Internal, run_seq_, "link to a peer board failed");
          abort_layer();
          return false;
        }
        ++run_frames_;
        continue;
      }
      uint32_t n = s.count - send_off_;
      if (n > wire::kMaxPayload) n = uint32_t(wire::kMaxPayload);
      const bool last = send_off_ + n == s.count;
      const uint32_t element = s.offset + send_off_;
      if (!send_frame(link, MsgType::Output, layer_, element, out + s.pos + send_off_, uint16_t(n),
                      last ? wire::kFlagLast : 0, true)) {
        abort_layer();
        return false;
      }
      ++run_frames_;
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
        d.compute_instructions = run_instr_;
        d.peak_ram_bytes = run_peak_;
        d.frames_sent = run_frames_;
        d.outputs = fl_.out_elems;
        d.output_digest = run_digest_;
        uint8_t buf[wire::DonePayload::kSize];
        d.encode(buf, sizeof buf);
        if (!send_frame(coord_link_, MsgType::Done, layer_, 0, buf, uint16_t(sizeof buf),
                        // Relay: the coordinator answers DONE with the next
                        // RUN, ACK it now. Direct: DONE is telemetry; the
                        // coordinator ACKs a batch of them (every 32, or when
                        // our window fills), not each one.
                        wire::kFlagLast | (fl_.flags & kEntryRunTrigger ? wire::kFlagAckReq : 0), true))
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
