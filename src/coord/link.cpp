#include "coord/link.h"

#include <thread>

#include <algorithm>

namespace ts::coord {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

BoardLink::BoardLink(std::unique_ptr<net::Transport> t, int index, uint16_t window, std::chrono::milliseconds timeout)
    : t_(std::move(t)), index_(index), timeout_ms_(timeout.count()), window_(window, 1), acks_(wire::kCoordAckEvery, 1), rx_(64 * 1024),
      tx_(wire::kMaxFrameBuf), t0_(Clock::now()) {
  peer_ = t_ ? t_->peer() : "?";
}

BoardLink::~BoardLink() {
  close();
  for (uint8_t& b : key_) b = 0;
}

void BoardLink::set_auth(const uint8_t key[auth::kKeyBytes], const uint8_t session_nonce[auth::kNonceBytes]) {
  use_auth_ = true;
  std::copy(key, key + auth::kKeyBytes, key_);
  std::copy(session_nonce, session_nonce + auth::kNonceBytes, nonce_);
}

size_t BoardLink::encode(wire::FrameHeader& h, const uint8_t* payload, size_t len) {
  if (tx_mac_.active()) h.flags = uint16_t(h.flags | wire::kFlagMac);
  const size_t n = wire::encode_frame(h, payload, len, tx_.data(), tx_.size());
  if (n != 0 && tx_mac_.active())
    tx_mac_.seal(tx_.data(), n - wire::kTagSize, tx_.data() + n - wire::kTagSize);
  return n;
}

void BoardLink::close() {
  if (t_) {
    try {
      flush();
    } catch (const BoardError&) {
    }
    t_->close();
  }
}

// Frames are collected and written with one system call: before any wait
// for the board (read_frame), and whenever enough has gathered. On loopback
// and on real links alike this turns a window of frames into one write.
void BoardLink::queue(const uint8_t* data, size_t n) {
  out_.insert(out_.end(), data, data + n);
  if (out_.size() >= kFlushBytes) flush();
}

void BoardLink::flush() {
  if (out_.empty()) return;
  try {
    t_->send(out_.data(), out_.size());
  } catch (const std::exception& e) {
    out_.clear();
    fail(std::string("connection failed: ") + e.what());
  }
  out_.clear();
}

std::string BoardLink::who() const { return "board " + std::to_string(index_) + " (" + peer_ + ")"; }

void BoardLink::fail(const std::string& why) const { throw BoardError(who() + ": " + why, index_); }

uint32_t BoardLink::now_ms() const {
  return uint32_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count());
}

void BoardLink::set_timeout(std::chrono::milliseconds t) {
  timeout_ms_.store(t.count());
  const long long at = std::chrono::duration_cast<std::chrono::nanoseconds>((Clock::now() + t).time_since_epoch()).count();
  if (at < cut_at_ns_.load()) cut_at_ns_.store(at);
}

bool BoardLink::read_frame(Frame* out, Clock::time_point deadline) {
  for (;;) {
    while (rx_pos_ < rx_have_) {
      const auto r = reader_.feed(rx_.data() + rx_pos_, rx_have_ - rx_pos_);
      rx_pos_ += r.consumed;
      if (r.status == wire::FrameReader::Status::Error) {
        ++stats_.bad_frames;
        fail(std::string("sent a malformed frame (") + wire::wire_error_name(reader_.error()) + ")");
      }
      if (r.status == wire::FrameReader::Status::Frame) {
        out->h = reader_.header();
        out->payload.assign(reader_.payload(), reader_.payload() + out->h.payload_len);
        const bool tagged = (out->h.flags & wire::kFlagMac) != 0;
        if (rx_mac_.active()) {
          if (!tagged) {
            ++stats_.auth_failures;
            wire::ErrorPayload e;
            // A board whose key differs cannot tag its refusal: report it
            // as the board's word, not as an attack.
            if (out->h.type == MsgType::Error && e.decode(out->payload.data(), out->payload.size()) &&
                e.code == wire::ErrorCode::AuthFailed)
              fail(std::string("refused our key: ") + e.text);
            fail(std::string("sent an unauthenticated ") + wire::msg_type_name(out->h.type) +
                 " frame in an authenticated session (refused)");
          }
          if (!rx_mac_.check(reader_.frame(), reader_.frame_len())) {
            ++stats_.auth_failures;
            fail(std::string("sent a ") + wire::msg_type_name(out->h.type) +
                 " frame that failed authentication (forged or replayed; refused)");
          }
        } else if (tagged) {
          ++stats_.auth_failures;
          fail("sent an authenticated frame, but this link has no key");
        }
        stats_.frames_in++;
        stats_.wire_in += wire::frame_size(out->h);
        return true;
      }
    }
    rx_pos_ = rx_have_ = 0;
    flush();  // never wait for the board while frames it needs sit in our buffer
    if (pause_.count() > 0) std::this_thread::sleep_for(pause_);  // reports gather meanwhile
    const auto now = Clock::now();
    // A deadline cut short from another thread (set_timeout) also ends a
    // wait under way: waits go in slices of at most 100 ms to notice it.
    const auto cut = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(cut_at_ns_.load())));
    if (cut < deadline) deadline = cut;
    if (now >= deadline) return false;
    const auto left = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + std::chrono::milliseconds(1),
                               std::chrono::milliseconds(100));
    net::RecvResult r;
    try {
      r = t_->recv(rx_.data(), rx_.size(), left);
    } catch (const std::exception& e) {
      fail(std::string("connection failed: ") + e.what());
    }
    if (r.status == net::RecvStatus::Closed) fail("closed the connection");
    if (r.status == net::RecvStatus::Timeout) continue;
    rx_have_ = r.bytes;
  }
}

void BoardLink::handle_ack(const Frame& f) {
  wire::AckPayload a;
  if (!a.decode(f.payload.data(), f.payload.size())) fail("sent a malformed ACK");
  const auto r = window_.on_ack(a.ack_seq);
  if (r == wire::AckResult::BeyondSent || r == wire::AckResult::Stale) fail("acknowledged frames never sent");
}

void BoardLink::send_ack_if_due() {
  if (!acks_.ack_due()) return;
  wire::AckPayload a;
  a.ack_seq = acks_.ack_seq();
  uint8_t buf[wire::AckPayload::kSize];
  a.encode(buf, sizeof buf);
  wire::FrameHeader h;
  h.type = MsgType::Ack;
  h.src = wire::kCoordinatorId;
  h.dst = uint16_t(index_);
  const size_t n = encode(h, buf, sizeof buf);
  queue(tx_.data(), n);
  acks_.ack_sent();
  stats_.frames_out++;
  stats_.wire_out += n;
}

// An ERROR frame from the board ends the link with its code and text.
void BoardLink::fail_with(const Frame& f) const {
  wire::ErrorPayload e;
  if (!e.decode(f.payload.data(), f.payload.size())) fail("sent a malformed ERROR");
  if (e.code == wire::ErrorCode::BoardInUse) throw BoardError(who() + ": " + e.text, index_);  // names the owner
  if (e.code == wire::ErrorCode::PeerLost) {
    BoardError b(who() + ": " + e.text, index_);
    b.lost_peer = int(e.request_seq);
    throw b;
  }
  fail(std::string("reported error ") + wire::error_code_name(e.code) + ": " + e.text);
}

Frame BoardLink::recv() {
  Frame f = recv_or_error();
  if (f.h.type == MsgType::Error) fail_with(f);
  return f;
}

Frame BoardLink::recv_or_error() {
  const auto deadline = Clock::now() + timeout();
  Frame f;
  for (;;) {
    if (!read_frame(&f, deadline))
      fail("no answer within " + std::to_string(timeout().count()) + " ms");
    if (f.h.type == MsgType::Ack) {
      handle_ack(f);
      continue;
    }
    if (f.h.type == MsgType::Error) return f;  // unsequenced
    // A DONE without ACK_REQ (direct route: telemetry per layer) is
    // acknowledged with the next batch, not at once: one ACK per 32 frames
    // or when the board's window fills (it then sets ACK_REQ).
    const bool lazy = f.h.type == MsgType::Done && !(f.h.flags & wire::kFlagAckReq);
    const auto sc = acks_.on_frame(f.h.seq, lazy ? uint16_t(f.h.flags & ~wire::kFlagLast) : f.h.flags);
    if (sc != wire::SeqCheck::InOrder) fail(sc == wire::SeqCheck::Gap ? "skipped sequence numbers" : "repeated a frame");
    send_ack_if_due();
    return f;
  }
}

void BoardLink::send(MsgType type, uint16_t layer, uint32_t offset, const uint8_t* payload, size_t len,
                     uint16_t flags, uint32_t deployment) {
  // While the window is full only ACKs may arrive: the board answers a
  // request only after the whole request is in.
  const auto deadline = Clock::now() + timeout();
  Frame f;
  while (!window_.can_send()) {
    if (!read_frame(&f, deadline)) fail("did not acknowledge within " + std::to_string(timeout().count()) + " ms");
    if (f.h.type == MsgType::Error) fail_with(f);
    if (f.h.type != MsgType::Ack) fail(std::string("sent ") + wire::msg_type_name(f.h.type) + " while receiving");
    handle_ack(f);
  }
  wire::FrameHeader h;
  h.type = type;
  h.src = wire::kCoordinatorId;
  h.dst = uint16_t(index_);
  h.deployment = deployment;
  h.layer = layer;
  h.offset = offset;
  h.flags = flags;
  if (wire::carries_inference(type)) h.inference = inference_;
  window_.stamp(now_ms(), &h.seq, &h.flags);
  const size_t n = encode(h, payload, len);
  if (n == 0) fail("internal: frame could not be encoded");
  queue(tx_.data(), n);
  stats_.frames_out++;
  stats_.wire_out += n;
}

void BoardLink::send_message(MsgType type, uint16_t layer, uint32_t base_offset, const uint8_t* data, size_t len,
                             uint32_t deployment) {
  size_t pos = 0;
  do {
    const size_t n = wire::frame_payload(len, pos);
    const bool last = pos + n == len;
    send(type, layer, base_offset + uint32_t(pos), data + pos, n, last ? wire::kFlagLast : 0, deployment);
    pos += n;
  } while (pos < len);
}

wire::HelloPayload BoardLink::handshake() {
  Frame f = recv();
  if (f.h.type != MsgType::Hello) fail(std::string("sent ") + wire::msg_type_name(f.h.type) + " instead of HELLO");
  wire::HelloPayload hello;
  if (!hello.decode(f.payload.data(), f.payload.size())) fail("sent a malformed HELLO");
  if (hello.protocol_version != wire::kProtocolVersion)
    fail("speaks protocol version " + std::to_string(hello.protocol_version));
  if (hello.board_id != f.h.src)
    fail("sent a HELLO naming board " + std::to_string(hello.board_id) + " in frames from board " +
         std::to_string(f.h.src));
  if (hello.auth && !use_auth_)
    fail("requires authentication (it was started with a key): run with --key-file and the same key");
  if (!hello.auth && use_auth_)
    fail("has no key (started without --key-file), and this run only uses authenticated boards");
  if (use_auth_) {
    auth::SessionKeys k;
    auth::derive_session(key_, nonce_, f.payload.data(), f.payload.size(), &k);
    tx_mac_.start(k.c2b);
    rx_mac_.start(k.b2c);
    std::fill(std::begin(k.c2b), std::end(k.c2b), 0);
    std::fill(std::begin(k.b2c), std::end(k.b2c), 0);
    wire::AuthPayload a;
    std::copy(nonce_, nonce_ + auth::kNonceBytes, a.nonce);
    uint8_t buf[wire::AuthPayload::kSize];
    a.encode(buf, sizeof buf);
    send(MsgType::Auth, 0, 0, buf, sizeof buf, wire::kFlagLast, 0);
    // The board's tagged ACK of AUTH proves it holds the same key, and
    // that this session owns the board.
    await_acks("AUTH");
  } else {
    // The first coordinator frame claims the board for this session.
    send(MsgType::Reset, 0, 0, nullptr, 0, wire::kFlagLast, 0);
    await_acks("RESET");
  }
  return hello;
}

void BoardLink::await_acks(const char* what) {
  const auto deadline = Clock::now() + timeout();
  Frame g;
  while (!window_.idle()) {
    if (!read_frame(&g, deadline))
      fail(std::string("did not acknowledge ") + what + " within " + std::to_string(timeout().count()) + " ms");
    if (g.h.type == MsgType::Error) fail_with(g);
    if (g.h.type != MsgType::Ack)
      fail(std::string("sent ") + wire::msg_type_name(g.h.type) + " instead of acknowledging " + what);
    handle_ack(g);
  }
}

}  // namespace ts::coord
