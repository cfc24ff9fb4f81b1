#include "core/worker_links.h"

#include "core/worker.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

void LinkSet::init(const WorkerConfig* cfg, Port* port, WorkerStats* stats, const DeploySession* deploy,
                   Worker* worker, uint8_t* tx) {
  cfg_ = cfg;
  port_ = port;
  stats_ = stats;
  deploy_ = deploy;
  worker_ = worker;
  tx_ = tx;
}

void LinkSet::release_held() {
  for (Link& l : links_) l.held = false;
}

void LinkSet::reset(int link) {
  Link& l = links_[link];
  l.open = true;
  l.held = false;
  l.worker = -1;
  l.reader.reset();
  l.window.reset(cfg_->window, 1);
  l.acks.reset(cfg_->ack_every, 1);
  l.rx.stop();
  l.tx.stop();
  l.hello_len = 0;
  l.dialled = false;
  l.claimed = -1;
  l.claimed_deployment = 0;
  l.opened_us = port_->now_us();
  l.frame_us = 0;
  l.framing = false;
}

bool LinkSet::connect(int link) {
  reset(link);
  links_[link].worker = connecting_peer_;
  wire::HelloPayload hello;
  hello.board_id = cfg_->id;
  hello.clock_mhz = cfg_->clock_mhz;
  hello.rx_window = cfg_->window;
  hello.ram_bytes = cfg_->ram_bytes;
  hello.flash_bytes = cfg_->flash_bytes;
  hello.links = uint8_t(kMaxLinks < 255 ? kMaxLinks : 255);
  hello.idle_ms = cfg_->idle_ms;
  if (cfg_->has_key) {
    // A nonce never used before under this key: the port's entropy, the
    // clock, and a count of connections.
    uint8_t ent[40] = {};
    size_t ne = port_->entropy(ent, 32);
    const uint32_t t = port_->now_us();
    for (int i = 0; i < 4; ++i) ent[ne++] = uint8_t(t >> (8 * i));
    auth::make_nonce(cfg_->key, ent, ne, ++nonces_, hello.nonce);
    hello.auth = true;
  }
  Link& l = links_[link];
  const size_t n = hello.encode(l.hello, sizeof l.hello);
  l.hello_len = uint8_t(n);
  return send_frame(link, MsgType::Hello, 0, 0, l.hello, uint16_t(n), wire::kFlagLast, true);
}

void LinkSet::lost(int link, bool at_rest) {
  // A link to a board of the current deployment closed during an inference:
  // that board may be gone, and what it owed us (or we owed it) will not
  // arrive. Say so to the coordinator at once, so it decides
  // (docs/reliability.md) instead of waiting for its deadline. Between
  // inferences nothing is owed: the link closes quietly (an idle limit
  // closed it, or the peer went), and the next inference opens it again or
  // fails to, and says so then.
  const Link& was = links_[link];
  if (was.open && !at_rest && link != coord_ && was.worker >= 0 && deploy_->have() &&
      was.deployment == deploy_->plan_id() && coord_ >= 0 && links_[coord_].open) {
    stats_->peers_lost++;
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
    send_error(coord_, ErrorCode::PeerLost, uint32_t(was.worker), text);
  }
  links_[link].open = false;
  links_[link].held = false;
}

int LinkSet::link_to(uint16_t worker) {
  for (int i = 0; i < kMaxLinks; ++i)
    if (links_[i].open && links_[i].worker == int32_t(worker)) return i;
  const int l = port_->open_link(worker);
  if (l < 0 || l >= kMaxLinks) return -1;
  connecting_peer_ = int32_t(worker);  // so our HELLO names us by plan index
  const bool ok = worker_->on_connect(l);
  connecting_peer_ = -1;
  if (!ok) return -1;
  links_[l].worker = worker;
  links_[l].deployment = deploy_->plan_id();
  links_[l].dialled = true;
  return l;
}

void LinkSet::flush_before_compute() {
  for (int i = 0; i < kMaxLinks; ++i)
    if (links_[i].open && i != coord_) port_->flush(i);
  if (coord_held_ && coord_ >= 0) {
    port_->flush(coord_);
    coord_held_ = false;
  }
}

bool LinkSet::send_frame(int link, MsgType t, uint16_t layer, uint32_t offset, const uint8_t* payload, uint16_t len,
                         uint16_t flags, bool sequenced) {
  if (!open(link)) return false;
  Link& l = links_[link];
  FrameHeader h;
  h.type = t;
  // To the coordinator a board is its board id (HELLO, the coordinator's
  // checks); to a peer board it is its index in the deployed plan, the
  // numbering PEERS and the routing use (after a failover re-plan they differ).
  h.src = link != coord_ && l.worker >= 0 && deploy_->have() ? deploy_->header().worker : cfg_->id;
  h.dst = link == coord_ || l.worker < 0 ? wire::kCoordinatorId : uint16_t(l.worker);
  h.deployment = deploy_->plan_id();
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
    if (t == MsgType::Done && link == coord_ && l.window.window() >= 4 &&
        l.window.in_flight() == l.window.window() / 2u)
      h.flags = uint16_t(h.flags | wire::kFlagAckReq);
    h.seq = seq;
  }
  if (l.tx.active()) h.flags = uint16_t(h.flags | wire::kFlagMac);
  const size_t n = wire::encode_frame_body(h, payload, len, tx_, wire::kMaxFrame);
  if (n == 0) return false;
  stats_->frames_out++;
  if (link == coord_) coord_held_ = true;
  if (!l.tx.active()) {
    stats_->bytes_out += uint32_t(n);
    return port_->send(link, tx_, n);
  }
  // The tag goes right after the frame, from a buffer of its own.
  uint8_t tag[wire::kTagSize];
  l.tx.seal(tx_, n, tag);
  stats_->bytes_out += uint32_t(n + sizeof tag);
  return port_->send(link, tx_, n) && port_->send(link, tag, sizeof tag);
}

bool LinkSet::send_error(int link, ErrorCode code, uint32_t seq, const char* text) {
  const wire::ErrorPayload e = wire::ErrorPayload::make(code, seq, text);
  uint8_t buf[wire::ErrorPayload::kMaxSize];
  const size_t n = e.encode(buf, sizeof buf);
  stats_->errors_sent++;
  // Errors are not sequenced against the window: they must always get out.
  return send_frame(link, MsgType::Error, 0, 0, buf, uint16_t(n), 0, false);
}

bool LinkSet::send_ack_if_due(int link) {
  wire::AckTracker& acks = links_[link].acks;
  if (!acks.ack_due()) return true;
  wire::AckPayload a;
  a.ack_seq = acks.ack_seq();
  uint8_t buf[wire::AckPayload::kSize];
  a.encode(buf, sizeof buf);
  acks.ack_sent();
  return send_frame(link, MsgType::Ack, 0, 0, buf, uint16_t(sizeof buf), 0, false);
}

bool LinkSet::on_ack(int link, const uint8_t* payload, uint16_t len) {
  wire::AckPayload a;
  if (!a.decode(payload, len)) return false;
  const auto res = links_[link].window.on_ack(a.ack_seq);
  if (res == wire::AckResult::BeyondSent || res == wire::AckResult::Stale) {
    send_error(link, ErrorCode::SequenceError, 0, "bad ack");
    return false;
  }
  return true;
}

}  // namespace core
}  // namespace ts
