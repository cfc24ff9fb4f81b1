// Implementation of the wire format declared (and documented) in wire.h.
#include "core/wire.h"

#include "core/act_code.h"

#include <cstring>

#include "core/crc32.h"

namespace ts::wire {

// ---------------------------------------------------------------------------
// Names and type rules
// ---------------------------------------------------------------------------

bool is_known_type(uint8_t raw) {
  return raw >= uint8_t(MsgType::Hello) && raw <= uint8_t(kLastMsgType);
}

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "HELLO";
    case MsgType::Store: return "STORE";
    case MsgType::Commit: return "COMMIT";
    case MsgType::Probe: return "PROBE";
    case MsgType::ProbeReply: return "PROBE_REPLY";
    case MsgType::Input: return "INPUT";
    case MsgType::Run: return "RUN";
    case MsgType::Output: return "OUTPUT";
    case MsgType::Ack: return "ACK";
    case MsgType::Done: return "DONE";
    case MsgType::Error: return "ERROR";
    case MsgType::Reset: return "RESET";
    case MsgType::Bye: return "BYE";
    case MsgType::Peers: return "PEERS";
    case MsgType::Auth: return "AUTH";
    case MsgType::Inputs: return "INPUTS";
    case MsgType::Patch: return "PATCH";
    case MsgType::Resume: return "RESUME";
  }
  return "UNKNOWN";
}

bool payload_len_ok(MsgType t, size_t len) {
  switch (t) {
    case MsgType::Hello: return len == HelloPayload::kSize || len == HelloPayload::kAuthSize;
    case MsgType::Auth: return len == AuthPayload::kSize;
    case MsgType::Commit: return len == CommitPayload::kSize;
    case MsgType::Ack: return len == AckPayload::kSize;
    case MsgType::Done: return len == DonePayload::kSize;
    case MsgType::Error: return len >= ErrorPayload::kMinSize && len <= ErrorPayload::kMaxSize;
    case MsgType::Run:
    case MsgType::Resume:
    case MsgType::Reset:
    case MsgType::Bye: return len == 0;
    case MsgType::Peers: return len >= kPeerEntryBytes && len % kPeerEntryBytes == 0;
    case MsgType::Inputs: return len > kInputBlockHeader && len <= kMaxPayload;
    case MsgType::Patch: return len > kPatchBaseBytes + kPatchOpHeader && len <= kMaxPayload;
    case MsgType::Store:
    case MsgType::Probe:
    case MsgType::ProbeReply:
    case MsgType::Input:
    case MsgType::Output: return len <= kMaxPayload;
  }
  return false;
}

const char* wire_error_name(WireError e) {
  switch (e) {
    case WireError::Ok: return "ok";
    case WireError::Truncated: return "truncated frame";
    case WireError::BadMagic: return "bad magic";
    case WireError::BadLength: return "payload length too large";
    case WireError::BadCrc: return "CRC mismatch";
    case WireError::BadVersion: return "unsupported protocol version";
    case WireError::BadHeader: return "reserved header bits set";
    case WireError::UnknownType: return "unknown message type";
    case WireError::BadPayload: return "bad payload for message type";
    case WireError::BadMac: return "authentication failed";
    case WireError::Count: break;
  }
  return "unknown wire error";
}

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::None: return "none";
    case ErrorCode::BadFrame: return "bad frame";
    case ErrorCode::SequenceError: return "sequence error";
    case ErrorCode::OutOfBounds: return "out of bounds";
    case ErrorCode::NoSpace: return "no space";
    case ErrorCode::HashMismatch: return "hash mismatch";
    case ErrorCode::UnknownLayer: return "unknown layer";
    case ErrorCode::WrongDeployment: return "wrong deployment";
    case ErrorCode::NotReady: return "not ready";
    case ErrorCode::OutOfMemory: return "out of memory";
    case ErrorCode::VersionMismatch: return "version mismatch";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::AuthFailed: return "authentication failed";
    case ErrorCode::PeerLost: return "peer link lost";
    case ErrorCode::StoreFailed: return "store failed";
    case ErrorCode::BoardInUse: return "board in use";
  }
  return "unknown error code";
}

const char* ack_result_name(AckResult r) {
  switch (r) {
    case AckResult::Advanced: return "advanced";
    case AckResult::Duplicate: return "duplicate ack";
    case AckResult::BeyondSent: return "ack beyond last sent frame";
    case AckResult::Stale: return "ack older than a previous ack";
  }
  return "?";
}

const char* seq_check_name(SeqCheck s) {
  switch (s) {
    case SeqCheck::InOrder: return "in order";
    case SeqCheck::Duplicate: return "duplicate sequence number";
    case SeqCheck::Gap: return "sequence gap";
  }
  return "?";
}

const char* place_result_name(PlaceResult r) {
  switch (r) {
    case PlaceResult::Ok: return "ok";
    case PlaceResult::OutOfBounds: return "out of bounds";
    case PlaceResult::NotContiguous: return "not contiguous";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Header encode / decode
// ---------------------------------------------------------------------------

namespace {

// Raw field extraction; buf holds at least kHeaderSize bytes. No checks.
void parse_header(const uint8_t* buf, FrameHeader* h) {
  h->version = buf[kOffVersion];
  h->type = MsgType(buf[kOffType]);
  h->src = get_u16(buf + kOffSrc);
  h->dst = get_u16(buf + kOffDst);
  h->deployment = get_u32(buf + kOffDeployment);
  h->seq = get_u32(buf + kOffSeq);
  h->layer = get_u16(buf + kOffLayer);
  h->flags = get_u16(buf + kOffFlags);
  h->offset = get_u32(buf + kOffOffset);
  h->payload_len = get_u16(buf + kOffPayloadLen);
  h->inference = get_u16(buf + kOffInference);
  h->crc = get_u32(buf + kOffCrc);
}

// CRC over the header with its crc field taken as zero, then the payload.
// Computed in three pieces so the received buffer need not be modified.
uint32_t frame_crc(const uint8_t* header, const uint8_t* payload, size_t payload_len) {
  static const uint8_t kZeroCrc[4] = {0, 0, 0, 0};
  uint32_t c = crc32_update(0, header, kOffCrc);
  c = crc32_update(c, kZeroCrc, sizeof kZeroCrc);
  c = crc32_update(c, header + kOffCrc + 4, kHeaderSize - kOffCrc - 4);
  return crc32_update(c, payload, payload_len);
}

// Checks that need only the first bytes of a frame and decide framing itself:
// without a valid magic and a bounded length we cannot even tell where the
// frame ends.
WireError check_framing(const uint8_t* buf) {
  if (get_u16(buf + kOffMagic) != kMagic) return WireError::BadMagic;
  if (get_u16(buf + kOffPayloadLen) > kMaxPayload) return WireError::BadLength;
  return WireError::Ok;
}

// Checks of an intact header's meaning (run after the CRC in decode_frame).
WireError check_semantics(const uint8_t* buf) {
  if (buf[kOffVersion] != kProtocolVersion) return WireError::BadVersion;
  const uint16_t flags = get_u16(buf + kOffFlags);
  if ((flags & ~kKnownFlags) != 0) return WireError::BadHeader;
  if (!is_known_type(buf[kOffType])) return WireError::UnknownType;
  if ((flags & kFlagCoded) && MsgType(buf[kOffType]) != MsgType::Inputs) return WireError::BadHeader;
  // An inference tag only where the type carries one (was: reserved, 0).
  if (get_u16(buf + kOffInference) != 0 && !carries_inference(MsgType(buf[kOffType]))) return WireError::BadHeader;
  return WireError::Ok;
}

}  // namespace

size_t encode_frame(const FrameHeader& h, const uint8_t* payload, size_t payload_len, uint8_t* out,
                    size_t out_cap) {
  const size_t tag = (h.flags & kFlagMac) ? kTagSize : 0;
  if (out_cap < tag) return 0;
  const size_t n = encode_frame_body(h, payload, payload_len, out, out_cap - tag);
  if (n == 0) return 0;
  for (size_t i = 0; i < tag; ++i) out[n + i] = 0;
  return n + tag;
}

size_t encode_frame_body(const FrameHeader& h, const uint8_t* payload, size_t payload_len, uint8_t* out,
                         size_t out_cap) {
  if (payload_len > kMaxPayload) return 0;
  if (out_cap < kHeaderSize + payload_len) return 0;
  if (!is_known_type(uint8_t(h.type))) return 0;
  if ((h.flags & ~kKnownFlags) != 0) return 0;
  if ((h.flags & kFlagCoded) && h.type != MsgType::Inputs) return 0;
  if (h.inference != 0 && !carries_inference(h.type)) return 0;
  if (!payload_len_ok(h.type, payload_len)) return 0;
  if (payload_len > 0 && payload == nullptr) return 0;
  if (h.type == MsgType::Inputs && !input_blocks_ok(payload, payload_len, (h.flags & kFlagCoded) != 0)) return 0;
  if (h.type == MsgType::Patch && !patch_ops_ok(payload, payload_len)) return 0;

  put_u16(out + kOffMagic, kMagic);
  out[kOffVersion] = kProtocolVersion;
  out[kOffType] = uint8_t(h.type);
  put_u16(out + kOffSrc, h.src);
  put_u16(out + kOffDst, h.dst);
  put_u32(out + kOffDeployment, h.deployment);
  put_u32(out + kOffSeq, h.seq);
  put_u16(out + kOffLayer, h.layer);
  put_u16(out + kOffFlags, h.flags);
  put_u32(out + kOffOffset, h.offset);
  put_u16(out + kOffPayloadLen, uint16_t(payload_len));
  put_u16(out + kOffInference, h.inference);
  put_u32(out + kOffCrc, 0);
  // memmove: the caller may build the payload in place at out + kHeaderSize.
  if (payload_len > 0 && payload != out + kHeaderSize) std::memmove(out + kHeaderSize, payload, payload_len);
  put_u32(out + kOffCrc, crc32(out, kHeaderSize + payload_len));
  return kHeaderSize + payload_len;
}

WireError decode_header(const uint8_t* buf, size_t len, FrameHeader* out) {
  if (len < kHeaderSize) return WireError::Truncated;
  WireError e = check_framing(buf);
  if (e == WireError::Ok) e = check_semantics(buf);
  if (e == WireError::Ok) parse_header(buf, out);
  return e;
}

WireError decode_frame(const uint8_t* buf, size_t len, FrameHeader* out, const uint8_t** payload) {
  if (len < kHeaderSize) return WireError::Truncated;
  WireError e = check_framing(buf);
  if (e != WireError::Ok) return e;
  FrameHeader h;
  parse_header(buf, &h);
  if (len < frame_size(h)) return WireError::Truncated;
  if (frame_crc(buf, buf + kHeaderSize, h.payload_len) != h.crc) return WireError::BadCrc;
  e = check_semantics(buf);
  if (e != WireError::Ok) return e;
  if (!payload_len_ok(h.type, h.payload_len)) return WireError::BadPayload;
  if (h.type == MsgType::Inputs && !input_blocks_ok(buf + kHeaderSize, h.payload_len, (h.flags & kFlagCoded) != 0))
    return WireError::BadPayload;
  if (h.type == MsgType::Patch && !patch_ops_ok(buf + kHeaderSize, h.payload_len)) return WireError::BadPayload;
  *out = h;
  if (payload) *payload = buf + kHeaderSize;
  return WireError::Ok;
}

// ---------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------

size_t HelloPayload::encode(uint8_t* out, size_t cap) const {
  if (cap < (auth ? kAuthSize : kSize)) return 0;
  put_u16(out + 0, board_id);
  out[2] = protocol_version;
  out[3] = links;
  put_u16(out + 4, clock_mhz);
  put_u16(out + 6, rx_window);
  put_u32(out + 8, ram_bytes);
  put_u32(out + 12, flash_bytes);
  put_u32(out + 16, idle_ms);
  if (!auth) return kSize;
  std::memcpy(out + kSize, nonce, kNonceSize);
  return kAuthSize;
}

bool HelloPayload::decode(const uint8_t* in, size_t len) {
  // A board holds at least the coordinator's connection.
  if ((len != kSize && len != kAuthSize) || in[3] == 0) return false;
  uint16_t window = get_u16(in + 6);
  // A window outside 1..kMaxWindow cannot be honoured by SendWindow.
  if (window == 0 || window > kMaxWindow) return false;
  board_id = get_u16(in + 0);
  protocol_version = in[2];
  links = in[3];
  clock_mhz = get_u16(in + 4);
  rx_window = window;
  ram_bytes = get_u32(in + 8);
  flash_bytes = get_u32(in + 12);
  idle_ms = get_u32(in + 16);
  auth = len == kAuthSize;
  if (auth) std::memcpy(nonce, in + kSize, kNonceSize);
  else std::memset(nonce, 0, kNonceSize);
  return true;
}

size_t AuthPayload::encode(uint8_t* out, size_t cap) const {
  if (cap < kSize) return 0;
  std::memcpy(out, nonce, kSize);
  return kSize;
}

bool AuthPayload::decode(const uint8_t* in, size_t len) {
  if (len != kSize) return false;
  std::memcpy(nonce, in, kSize);
  return true;
}

size_t CommitPayload::encode(uint8_t* out, size_t cap) const {
  if (cap < kSize) return 0;
  put_u32(out + 0, fragment_size);
  put_u32(out + 4, fragment_crc);
  std::memcpy(out + 8, digest, sizeof digest);
  return kSize;
}

bool CommitPayload::decode(const uint8_t* in, size_t len) {
  if (len != kSize) return false;
  fragment_size = get_u32(in + 0);
  fragment_crc = get_u32(in + 4);
  std::memcpy(digest, in + 8, sizeof digest);
  return true;
}

size_t AckPayload::encode(uint8_t* out, size_t cap) const {
  if (cap < kSize) return 0;
  put_u32(out, ack_seq);
  return kSize;
}

bool AckPayload::decode(const uint8_t* in, size_t len) {
  if (len != kSize) return false;
  ack_seq = get_u32(in);
  return true;
}

size_t DonePayload::encode(uint8_t* out, size_t cap) const {
  if (cap < kSize) return 0;
  put_u32(out + 0, request_seq);
  put_u32(out + 4, elapsed_us);
  put_u32(out + 8, peak_ram_bytes);
  put_u32(out + 12, frames_sent);
  put_u32(out + 16, outputs);
  put_u32(out + 20, uint32_t(output_digest));
  put_u32(out + 24, uint32_t(output_digest >> 32));
  put_u32(out + 28, compute_instructions);
  put_u32(out + 32, wait_us);
  put_u32(out + 36, span_us);
  put_u32(out + 40, bytes_sent);
  return kSize;
}

bool DonePayload::decode(const uint8_t* in, size_t len) {
  if (len != kSize) return false;
  request_seq = get_u32(in + 0);
  elapsed_us = get_u32(in + 4);
  peak_ram_bytes = get_u32(in + 8);
  frames_sent = get_u32(in + 12);
  outputs = get_u32(in + 16);
  output_digest = uint64_t(get_u32(in + 20)) | (uint64_t(get_u32(in + 24)) << 32);
  compute_instructions = get_u32(in + 28);
  wait_us = get_u32(in + 32);
  span_us = get_u32(in + 36);
  bytes_sent = get_u32(in + 40);
  return true;
}

ErrorPayload ErrorPayload::make(ErrorCode code, uint32_t request_seq, const char* msg) {
  ErrorPayload p;
  p.code = code;
  p.request_seq = request_seq;
  size_t n = 0;
  if (msg) {
    while (n < kMaxErrorText && msg[n] != '\0') {
      p.text[n] = msg[n];
      ++n;
    }
  }
  p.text[n] = '\0';
  return p;
}

size_t ErrorPayload::text_len() const {
  size_t n = 0;
  while (n < kMaxErrorText && text[n] != '\0') ++n;
  return n;
}

size_t ErrorPayload::encode(uint8_t* out, size_t cap) const {
  size_t n = text_len();
  if (cap < kMinSize + n) return 0;
  put_u16(out + 0, uint16_t(code));
  put_u16(out + 2, 0);
  put_u32(out + 4, request_seq);
  std::memcpy(out + kMinSize, text, n);
  return kMinSize + n;
}

bool ErrorPayload::decode(const uint8_t* in, size_t len) {
  if (len < kMinSize || len > kMaxSize || get_u16(in + 2) != 0) return false;
  size_t n = len - kMinSize;
  for (size_t i = 0; i < n; ++i) {
    if (in[kMinSize + i] == 0) return false;  // NUL would silently cut the text
  }
  code = ErrorCode(get_u16(in + 0));
  request_seq = get_u32(in + 4);
  std::memcpy(text, in + kMinSize, n);
  text[n] = '\0';
  return true;
}

// ---------------------------------------------------------------------------
// FrameReader
// ---------------------------------------------------------------------------

void FrameReader::reset() {
  have_ = 0;
  need_ = 0;
  frame_ready_ = false;
  failed_ = false;
  error_ = WireError::Ok;
}

void FrameReader::clear_counters() {
  frames_ok_ = 0;
  for (uint32_t& c : error_counts_) c = 0;
}

uint32_t FrameReader::error_count(WireError e) const {
  size_t i = size_t(e);
  return i < kNumWireErrors ? error_counts_[i] : 0;
}

uint32_t FrameReader::total_errors() const {
  uint32_t sum = 0;
  for (size_t i = 1; i < kNumWireErrors; ++i) sum += error_counts_[i];
  return sum;
}

FrameReader::Result FrameReader::fail(WireError e, size_t consumed) {
  failed_ = true;
  error_ = e;
  ++error_counts_[size_t(e)];
  return {Status::Error, consumed};
}

FrameReader::Result FrameReader::feed(const uint8_t* data, size_t len) {
  if (failed_) return {Status::Error, 0};
  if (frame_ready_) {  // the caller is done with the previous frame
    frame_ready_ = false;
    have_ = 0;
    need_ = 0;
  }
  size_t used = 0;
  while (used < len) {
    // Until the header is in we want kHeaderSize bytes, then the whole frame.
    size_t target = need_ == 0 ? kHeaderSize : need_;
    size_t take = target - have_;
    if (take > len - used) take = len - used;
    std::memcpy(buf_ + have_, data + used, take);
    have_ += take;
    used += take;
    if (have_ < target) break;  // input exhausted mid-piece

    if (need_ == 0) {  // header just completed: learn where the frame ends
      WireError e = check_framing(buf_);
      if (e != WireError::Ok) return fail(e, used);
      need_ = kHeaderSize + get_u16(buf_ + kOffPayloadLen) + ((get_u16(buf_ + kOffFlags) & kFlagMac) ? kTagSize : 0);
      if (have_ < need_) continue;  // payload still to come
    }

    // Whole frame buffered.
    const uint8_t* payload = nullptr;
    WireError e = decode_frame(buf_, have_, &header_, &payload);
    if (e != WireError::Ok) return fail(e, used);
    frame_ready_ = true;
    ++frames_ok_;
    return {Status::Frame, used};
  }
  return {Status::NeedMore, used};
}

// ---------------------------------------------------------------------------
// SendWindow
// ---------------------------------------------------------------------------

void SendWindow::reset(uint16_t window, uint32_t first_seq) {
  if (window < 1) window = 1;
  if (window > kMaxWindow) window = kMaxWindow;
  window_ = window;
  base_ = first_seq;
  next_ = first_seq;
  dup_acks_ = 0;
  bad_acks_ = 0;
}

bool SendWindow::take(uint32_t now_ms, uint32_t* seq) {
  if (!can_send()) return false;
  // kMaxWindow divides 2^32, so seq % kMaxWindow stays consistent across the
  // uint32 wrap and at most `window_` live slots never collide.
  sent_at_[next_ % kMaxWindow] = now_ms;
  *seq = next_++;
  return true;
}

AckResult SendWindow::on_ack(uint32_t ack_seq) {
  // How many frames this ACK covers beyond what was already acknowledged
  // (base_ - 1). Modular, so correct across the wrap.
  uint32_t advance = ack_seq - (base_ - 1);
  if (advance == 0) {
    ++dup_acks_;
    return AckResult::Duplicate;
  }
  if (advance <= in_flight()) {
    base_ += advance;
    return AckResult::Advanced;
  }
  ++bad_acks_;
  // Behind the previous ACK (negative distance) or ahead of anything sent.
  return int32_t(advance) < 0 ? AckResult::Stale : AckResult::BeyondSent;
}

uint32_t SendWindow::oldest_age(uint32_t now_ms) const {
  if (idle()) return 0;
  return now_ms - sent_at_[base_ % kMaxWindow];
}

bool SendWindow::timed_out(uint32_t now_ms, uint32_t timeout_ms) const {
  return !idle() && oldest_age(now_ms) >= timeout_ms;
}

static_assert((uint64_t(1) << 32) % kMaxWindow == 0, "kMaxWindow must divide 2^32");

// ---------------------------------------------------------------------------
// AckTracker
// ---------------------------------------------------------------------------

void AckTracker::reset(uint16_t ack_every, uint32_t first_seq) {
  ack_every_ = ack_every == 0 ? 1 : ack_every;
  expected_ = first_seq;
  pending_ = 0;
  forced_ = false;
  duplicates_ = 0;
  gaps_ = 0;
}

SeqCheck AckTracker::on_frame(uint32_t seq, uint16_t flags) {
  int32_t distance = int32_t(seq - expected_);
  if (distance < 0) {
    ++duplicates_;
    return SeqCheck::Duplicate;
  }
  if (distance > 0) {
    ++gaps_;
    return SeqCheck::Gap;
  }
  ++expected_;
  ++pending_;
  if (flags & (kFlagLast | kFlagAckReq)) forced_ = true;
  return SeqCheck::InOrder;
}

void AckTracker::ack_sent() {
  pending_ = 0;
  forced_ = false;
}

// ---------------------------------------------------------------------------
// Packetiser and Assembler
// ---------------------------------------------------------------------------

size_t frames_needed(size_t len, size_t max_payload) {
  if (max_payload == 0) return 0;
  if (len == 0) return 1;
  return (len + max_payload - 1) / max_payload;
}

Packetiser::Packetiser(const FrameHeader& tmpl, const uint8_t* data, size_t len, uint32_t base_offset,
                       size_t max_payload)
    : tmpl_(tmpl), data_(data), len_(len), base_offset_(base_offset), max_payload_(max_payload) {
  if (max_payload_ < 1) max_payload_ = 1;
  if (max_payload_ > kMaxPayload) max_payload_ = kMaxPayload;
  // Every frame's offset must fit the 32-bit field.
  valid_ = uint64_t(base_offset) + uint64_t(len) <= uint64_t(0xFFFFFFFFu) + 1 &&
           (len == 0 || data != nullptr);
}

bool Packetiser::next(FrameHeader* h, const uint8_t** payload) {
  if (done()) return false;
  const size_t n = frame_payload(len_, pos_, max_payload_);
  *h = tmpl_;
  h->offset = uint32_t(base_offset_ + pos_);
  h->payload_len = uint16_t(n);
  h->flags = uint16_t(tmpl_.flags & ~kFlagLast);
  *payload = data_ ? data_ + pos_ : nullptr;
  pos_ += n;
  ++emitted_;
  if (done()) h->flags |= kFlagLast;
  return true;
}

Assembler::Assembler(uint8_t* dst, size_t capacity, uint32_t base_offset)
    : dst_(dst), capacity_(capacity), base_(base_offset) {}

PlaceResult Assembler::place(uint32_t offset, const uint8_t* payload, size_t len, bool last) {
  // 64-bit arithmetic so offset + len cannot wrap.
  uint64_t begin = offset;
  uint64_t end = begin + len;
  if (begin < base_ || end > uint64_t(base_) + capacity_) return PlaceResult::OutOfBounds;
  if (len > 0 && payload == nullptr) return PlaceResult::OutOfBounds;
  if (in_message_ && begin != next_offset_) return PlaceResult::NotContiguous;
  if (len > 0) std::memcpy(dst_ + (begin - base_), payload, len);
  placed_ += len;
  next_offset_ = end;
  in_message_ = !last;
  if (last) ++messages_;
  return PlaceResult::Ok;
}

size_t encode_peers(const PeerEntry* entries, size_t n, uint8_t* out, size_t cap) {
  if (n == 0 || n > kMaxPeerEntries || cap < n * kPeerEntryBytes) return 0;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = out + i * kPeerEntryBytes;
    put_u16(p, entries[i].worker);
    put_u16(p + 2, entries[i].port);
    put_u32(p + 4, entries[i].ipv4);
  }
  return n * kPeerEntryBytes;
}

bool decode_peer(const uint8_t* payload, size_t len, size_t i, PeerEntry* out) {
  if (len % kPeerEntryBytes || (i + 1) * kPeerEntryBytes > len) return false;
  const uint8_t* p = payload + i * kPeerEntryBytes;
  out->worker = get_u16(p);
  out->port = get_u16(p + 2);
  out->ipv4 = get_u32(p + 4);
  return true;
}

namespace {

// The rules of an INPUTS block header (wire.h).
bool block_ok(const InputBlock& b) {
  if (b.len == 0 || b.count == 0) return false;
  if (b.count == 1 ? b.stride != 0 : b.stride < b.len) return false;
  const uint64_t last = uint64_t(b.first) + uint64_t(b.count - 1) * b.stride + b.len;
  return last <= (uint64_t(1) << kOperandShift);
}

}  // namespace

core::CodeParams code_params(const InputBlock& b) {
  core::CodeParams p;
  core::CodeParams::from_mode(b.mode, b.fill, &p);
  return p;
}

size_t encode_input_block_header(const InputBlock& b, uint8_t* out, size_t cap) {
  const size_t n = b.coded ? kCodedBlockHeader : kInputBlockHeader;
  core::CodeParams p;
  if (cap < n || !block_ok(b) || (b.coded && !core::CodeParams::from_mode(b.mode, b.fill, &p))) return 0;
  put_u32(out + 0, b.first);
  put_u16(out + 4, b.len);
  put_u16(out + 6, b.count);
  put_u32(out + 8, b.stride);
  if (b.coded) {
    put_u16(out + 12, b.coded);
    out[14] = b.mode;
    out[15] = b.fill;
  }
  return n;
}

bool next_input_block(const uint8_t* payload, size_t len, size_t* pos, InputBlock* out, bool coded) {
  const size_t head = coded ? kCodedBlockHeader : kInputBlockHeader;
  if (*pos >= len || len - *pos < head) return false;
  const uint8_t* p = payload + *pos;
  InputBlock b;
  b.first = get_u32(p + 0);
  b.len = get_u16(p + 4);
  b.count = get_u16(p + 6);
  b.stride = get_u32(p + 8);
  core::CodeParams params;
  if (coded) {
    b.coded = get_u16(p + 12);
    b.mode = p[14];
    b.fill = p[15];
    if (b.coded == 0 || !core::CodeParams::from_mode(b.mode, b.fill, &params)) return false;
  }
  if (!block_ok(b) || len - *pos - head < b.bytes_on_wire()) return false;
  b.data = p + head;
  *pos += head + b.bytes_on_wire();
  *out = b;
  return true;
}

bool input_blocks_ok(const uint8_t* payload, size_t len, bool coded) {
  size_t pos = 0;
  InputBlock b;
  size_t n = 0;
  while (next_input_block(payload, len, &pos, &b, coded)) ++n;
  return n > 0 && pos == len;
}

// ---------------------------------------------------------------------------
// PATCH ops
// ---------------------------------------------------------------------------

namespace {
bool patch_op_ok(const PatchOp& op) {
  return op.len >= 1 && op.len < kPatchCopy && (op.copy || op.from == 0);
}
}  // namespace

size_t encode_patch_op(const PatchOp& op, uint8_t* out, size_t cap) {
  if (cap < kPatchOpHeader || !patch_op_ok(op)) return 0;
  put_u32(out + 0, op.len | (op.copy ? kPatchCopy : 0u));
  put_u32(out + 4, op.from);
  return kPatchOpHeader;
}

bool next_patch_op(const uint8_t* payload, size_t len, size_t* pos, PatchOp* out) {
  if (*pos < kPatchBaseBytes || *pos >= len || len - *pos < kPatchOpHeader) return false;
  const uint8_t* p = payload + *pos;
  const uint32_t code = get_u32(p + 0);
  PatchOp op;
  op.copy = (code & kPatchCopy) != 0;
  op.len = code & ~kPatchCopy;
  op.from = get_u32(p + 4);
  if (!patch_op_ok(op)) return false;
  size_t used = kPatchOpHeader;
  if (!op.copy) {
    if (len - *pos - kPatchOpHeader < op.len) return false;
    op.data = p + kPatchOpHeader;
    used += op.len;
  }
  *pos += used;
  *out = op;
  return true;
}

bool patch_ops_ok(const uint8_t* payload, size_t len) {
  size_t pos = kPatchBaseBytes;
  PatchOp op;
  size_t n = 0;
  while (next_patch_op(payload, len, &pos, &op)) ++n;
  return n > 0 && pos == len;
}

}  // namespace ts::wire
