// tinysplit wire format: the one place that defines what crosses a board link.
//
// The coordinator and every board exchange *frames* over a byte stream (TCP).
// A frame is a fixed 32-byte header followed by 0..1368 payload bytes, so no
// frame is larger than 1400 bytes (the paper's packet size, which fits one
// Ethernet MTU with room for IP and TCP headers). All integers are
// little-endian and written byte by byte: a struct is never copied onto the
// wire, so padding, alignment and host byte order cannot leak into the format.
//
// Header (protocol version 1), byte by byte:
//
//   off size field        meaning
//   --- ---- ------------ -----------------------------------------------------
//     0   2  magic        0x5354, i.e. the bytes 'T' 'S'
//     2   1  version      kProtocolVersion (1)
//     3   1  type         MsgType
//     4   2  src          sender id (board id, or kCoordinatorId)
//     6   2  dst          receiver id
//     8   4  deployment   id of the deployment (plan) this frame belongs to
//    12   4  seq          sender's sequence number (0 and ignored for ACK)
//    16   2  layer        layer index (INPUT/RUN/OUTPUT), fragment index
//                         (STORE/COMMIT), otherwise 0
//    18   2  flags        kFlagLast | kFlagAckReq; other bits must be 0
//    20   4  offset       element offset in a tensor (INPUT/OUTPUT) or byte
//                         offset in a fragment (STORE); else 0
//    24   2  payload_len  payload bytes that follow, 0..kMaxPayload
//    26   2  inference    which inference (image) the frame belongs to, for
//                         the types that carry an inference's data (INPUT,
//                         INPUTS, RUN, OUTPUT, DONE, ERROR): 0 = untagged (one
//                         inference at a time, as before), 1..0xFFFF = the
//                         tag of a pipelined run (docs/protocol.md,
//                         "Pipelined inferences"); must be 0 on every other
//                         type (this was the reserved field, always 0)
//    28   4  crc          CRC-32 of the header (with this field zeroed) then
//                         the payload
//    32      payload
//
// The header is 32 bytes, so a payload that starts in a 4-byte aligned receive
// buffer is itself aligned. Receivers reject unknown flags and a non-zero
// inference tag on a type that carries none: a peer that predates the tag
// rejects a tagged frame (BadHeader) instead of misreading it.
//
// Reliability: TCP already delivers bytes reliably and in order. On top of it
// each direction numbers its frames (seq 1, 2, 3, ... per connection) and the
// receiver returns cumulative ACKs. The ACK does not retransmit anything; it
// tells the sender the peer has *consumed* the frame (stored it, placed it),
// which bounds how far the coordinator runs ahead of a board with little RAM
// (SendWindow, window W; W = 1 is the paper's stop-and-wait).
//
// Errors: any malformed frame on a stream is fatal for that connection (see
// FrameReader). docs/protocol.md explains the whole protocol and its reasons.
//
// Portable C++17 subset (shared with the firmware): no heap, no exceptions, no
// RTTI, no OS calls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/act_code.h"
#include "core/bytes.h"

namespace ts::wire {

// ---------------------------------------------------------------------------
// Sizes and constants
// ---------------------------------------------------------------------------

constexpr uint16_t kMagic = 0x5354;  // 'T','S' on the wire (little-endian)
constexpr uint8_t kProtocolVersion = 1;
constexpr size_t kHeaderSize = 32;
constexpr size_t kMaxFrame = 1400;  // header included
constexpr size_t kMaxPayload = kMaxFrame - kHeaderSize;  // 1368
static_assert(kMaxPayload <= 0xFFFF, "payload_len is 16 bits");

// The coordinator's id in src/dst. Boards use ids 0..0xFFFE (their index in
// the testbed).
constexpr uint16_t kCoordinatorId = 0xFFFF;

// Byte offsets of the header fields (see the table above).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 2;
constexpr size_t kOffType = 3;
constexpr size_t kOffSrc = 4;
constexpr size_t kOffDst = 6;
constexpr size_t kOffDeployment = 8;
constexpr size_t kOffSeq = 12;
constexpr size_t kOffLayer = 16;
constexpr size_t kOffFlags = 18;
constexpr size_t kOffOffset = 20;
constexpr size_t kOffPayloadLen = 24;
constexpr size_t kOffInference = 26;
constexpr size_t kOffReserved = kOffInference;  // the field's name before it carried the tag
constexpr size_t kOffCrc = 28;

// Header flags.
constexpr uint16_t kFlagLast = 0x0001;    // last frame of a message
constexpr uint16_t kFlagAckReq = 0x0002;  // receiver must ACK immediately
// A kTagSize-byte message authentication tag follows the payload (core/auth.h;
// docs/protocol.md, "Authentication"). The CRC covers header and payload, not
// the tag; the tag covers header, payload and the direction's frame counter.
constexpr uint16_t kFlagMac = 0x0004;
// INPUTS only: every block's data is coded (core/act_code.h; "Coded INPUTS"
// below). Any other type with this bit is a BadHeader.
constexpr uint16_t kFlagCoded = 0x0008;
constexpr uint16_t kKnownFlags = kFlagLast | kFlagAckReq | kFlagMac | kFlagCoded;
constexpr size_t kTagSize = 16;
// Largest frame on the wire: kMaxFrame plus a tag. Receive and send buffers
// have this size.
constexpr size_t kMaxFrameBuf = kMaxFrame + kTagSize;

// Largest application-level send window (frames in flight); fixes the size of
// SendWindow's bookkeeping so it needs no heap.
constexpr uint16_t kMaxWindow = 64;

// ---------------------------------------------------------------------------
// Little-endian helpers (explicit, byte by byte)
// ---------------------------------------------------------------------------

using le::get_u16;
using le::get_u32;
using le::put_u16;
using le::put_u32;

// ---------------------------------------------------------------------------
// Message types
// ---------------------------------------------------------------------------

// Direction: C = coordinator, B = board. Boards also talk to each other
// (B->B): HELLO first on a connection a board opens, then INPUT frames that
// carry a layer's outputs straight to the board that consumes them, and the
// ACKs for them. Every type except ACK is sequenced and acknowledged. Payload sizes are enforced by payload_len_ok().
enum class MsgType : uint8_t {
  Hello = 1,       // B->C, B->B  first frame on a connection; HelloPayload
  Store = 2,       // C->B  chunk of a weight fragment at byte `offset`
  Commit = 3,      // C->B  fragment complete; CommitPayload (size + CRC)
  Probe = 4,       // C->B  any payload; measures delay and bandwidth
  ProbeReply = 5,  // B->C  echoes the probe's payload, layer and offset
  Input = 6,       // C->B, B->B  int8 activations of `layer`'s input at `offset`
  Run = 7,         // C->B  compute this board's share of `layer`; no payload
  Output = 8,      // B->C  int8 results of `layer` at output `offset`
  Ack = 9,         // both  AckPayload; unsequenced (header seq is 0)
  Done = 10,       // B->C  a RUN or COMMIT finished; DonePayload
  Error = 11,      // both  ErrorPayload; the request failed
  Reset = 12,      // C->B  drop partial messages and in-progress work; no payload
  Bye = 13,        // both  orderly close follows; no payload
  Peers = 14,      // C->B  where the other boards listen; PeersPayload
  Auth = 15,       // C->B  starts an authenticated session; AuthPayload (core/auth.h)
  Inputs = 16,     // C->B, B->B  blocks of int8 activations of `layer`'s input
                   //   operand `offset >> 28` (element bits 0); InputBlock payload
  Patch = 17,      // C->B  a fragment staged as a delta of the one the board holds:
                   //   copies from it and new bytes, from byte `offset`; PatchOp payload
  Resume = 18,     // C->B  the next inference starts at `layer`: what earlier layers
                   //   made comes from the coordinator (LayerScheduler); no payload
};

// The highest type value (types are 1..kLastMsgType).
constexpr MsgType kLastMsgType = MsgType::Resume;

// INPUT frames carry the operand index in the top bits of their offset.
constexpr uint32_t kOperandShift = 28;
constexpr uint32_t kElementMask = (1u << kOperandShift) - 1u;
inline uint32_t input_offset(uint32_t operand, uint32_t element) { return (operand << kOperandShift) | element; }

// True for the values listed above.
bool is_known_type(uint8_t raw);
// Short upper-case name ("HELLO", ...), or "UNKNOWN".
const char* msg_type_name(MsgType t);
// ACK is the only unsequenced type: it carries no seq and is never acked.
inline bool is_sequenced(MsgType t) { return t != MsgType::Ack; }
// Whether `len` is a legal payload length for `t` (fixed-size payloads must
// match exactly; data-carrying types accept 0..kMaxPayload).
bool payload_len_ok(MsgType t, size_t len);

// ---------------------------------------------------------------------------
// Errors a frame can have (also the FrameReader's counter index)
// ---------------------------------------------------------------------------

enum class WireError : uint8_t {
  Ok = 0,
  Truncated,    // fewer bytes than the header or payload_len says
  BadMagic,     // first two bytes are not 'T' 'S'
  BadLength,    // payload_len > kMaxPayload
  BadCrc,       // CRC mismatch: corruption
  BadVersion,   // intact frame of another protocol version
  BadHeader,    // reserved field or unknown flag bits set
  UnknownType,  // intact frame of a type this version does not know
  BadPayload,   // payload size wrong for its type, or payload fields invalid
  BadMac,       // authentication tag wrong or missing (counted by the caller)
  Count         // number of kinds, not an error
};
constexpr size_t kNumWireErrors = size_t(WireError::Count);
const char* wire_error_name(WireError e);

// ---------------------------------------------------------------------------
// Header, encode and decode
// ---------------------------------------------------------------------------

struct FrameHeader {
  uint8_t version = kProtocolVersion;
  MsgType type = MsgType(0);  // must be set: 0 is not a valid type
  uint16_t src = 0;
  uint16_t dst = 0;
  uint32_t deployment = 0;
  uint32_t seq = 0;
  uint16_t layer = 0;
  uint16_t flags = 0;
  uint32_t offset = 0;
  uint16_t payload_len = 0;
  // Inference tag (offset 26): 0 = untagged; else the pipelined inference
  // the frame belongs to. Only on types with carries_inference().
  uint16_t inference = 0;
  uint32_t crc = 0;  // as received (decode); ignored by encode
};

// The types whose frames may carry a non-zero inference tag: the ones that
// move one inference's data or report on it.
inline bool carries_inference(MsgType t) {
  return t == MsgType::Input || t == MsgType::Inputs || t == MsgType::Run || t == MsgType::Output ||
         t == MsgType::Done || t == MsgType::Error;
}
// Tags of a pipelined run: 1, 2, ..., 0xFFFF, then 1 again (0 means untagged).
inline uint16_t next_inference_tag(uint16_t t) { return t == 0xFFFF ? uint16_t(1) : uint16_t(t + 1); }

// Bytes of the frame on the wire: header, payload and, with kFlagMac, the tag.
inline size_t frame_size(const FrameHeader& h) {
  return kHeaderSize + h.payload_len + ((h.flags & kFlagMac) ? kTagSize : 0);
}

// Writes header + payload to `out` and returns the frame size, or 0 if the
// frame cannot be encoded: payload_len > kMaxPayload, out_cap too small,
// unknown type, unknown flag bits, a payload size illegal for the type, or
// a non-zero inference tag on a type that carries none.
// The encoder writes payload_len from the `payload_len` argument and the
// version from kProtocolVersion; h.payload_len, h.version and h.crc are
// ignored. `payload` may be null when payload_len is 0. With kFlagMac in
// h.flags the frame gets kTagSize zero bytes after the payload (included in
// the returned size) for the caller to fill (auth::FrameMac::seal).
size_t encode_frame(const FrameHeader& h, const uint8_t* payload, size_t payload_len, uint8_t* out,
                    size_t out_cap);

// encode_frame without the tag: with kFlagMac in h.flags the header says a
// tag follows, but only header and payload are written and counted. For a
// sender that keeps the tag in a buffer of its own (the board worker, whose
// frame buffer holds kMaxFrame bytes) and sends it right after.
size_t encode_frame_body(const FrameHeader& h, const uint8_t* payload, size_t payload_len, uint8_t* out,
                         size_t out_cap);

// Parses and checks the header in buf[0..len): Truncated if len <
// kHeaderSize, then magic, length, version, reserved/flags and type. Does not
// check the CRC (it covers the payload too); use decode_frame for that.
WireError decode_header(const uint8_t* buf, size_t len, FrameHeader* out);

// Full check of one complete frame at the start of buf[0..len). Order:
// magic, length, truncation, CRC, then (on an intact frame) version,
// reserved/flags, type and the payload size for the type. Checking the CRC
// before the semantic fields means a corrupt byte is reported as BadCrc,
// while UnknownType/BadVersion mean the peer really sent that.
// On Ok, *payload points into buf at the payload.
WireError decode_frame(const uint8_t* buf, size_t len, FrameHeader* out, const uint8_t** payload);

// ---------------------------------------------------------------------------
// Payloads with structure. Each has a fixed layout (offsets relative to the
// payload start); encode returns bytes written or 0 if `cap` is too small;
// decode returns false if the size or a field is invalid.
// ---------------------------------------------------------------------------

// HELLO, 20 bytes. Sent by a board as the first frame of every connection.
// The header's deployment field carries the id of the fragments already in
// the board's flash (0 if none), so the coordinator can skip re-deploying.
//   0 u16 board_id   (must equal the header's src)
//   2 u8  protocol_version
//   3 u8  links      connections the board holds at once (1..255): the
//                    coordinator's, and one per peer board of a direct plan
//   4 u16 clock_mhz
//   6 u16 rx_window  frames the board accepts in flight (1..kMaxWindow)
//   8 u32 ram_bytes  RAM available for the inference arena
//  12 u32 flash_bytes flash available for fragments (storage limit, eq. 7)
//  16 u32 idle_ms    the board closes a connection silent this long (0: never)
//  20 u8[16] nonce   only in the 36-byte form, sent by a board that holds a
//                    key: fresh for every connection (core/auth.h)
struct HelloPayload {
  static constexpr size_t kSize = 20;
  static constexpr size_t kAuthSize = 36;
  static constexpr size_t kNonceSize = 16;
  uint16_t board_id = 0;
  uint8_t protocol_version = kProtocolVersion;
  uint8_t links = 255;  // a board sets what it holds
  uint16_t clock_mhz = 0;
  uint16_t rx_window = 1;
  uint32_t ram_bytes = 0;
  uint32_t flash_bytes = 0;
  uint32_t idle_ms = 0;
  bool auth = false;  // the 36-byte form: the board requires authentication
  uint8_t nonce[kNonceSize] = {};
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};

// AUTH, 16 bytes: the coordinator's session nonce, fresh for every run. The
// frame itself carries kFlagMac, keyed from this nonce and the board's HELLO.
//   0 u8[16] nonce
struct AuthPayload {
  static constexpr size_t kSize = 16;
  uint8_t nonce[kSize] = {};
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};

// COMMIT, 40 bytes. Asks the board to make fragment `layer` of deployment
// `deployment` (the header's) current. The board answers DONE at once when
// its committed fragment has this SHA-256 (and size, and the header's
// deployment id); else it checks what it has staged (STORE chunks) against
// size, CRC-32 and SHA-256 and commits it, or answers ERROR(HashMismatch).
//   0 u32 fragment_size  bytes
//   4 u32 fragment_crc   crc32() of the whole fragment
//   8 u8[32] digest      SHA-256 of the whole fragment (core/sha256.h)
struct CommitPayload {
  static constexpr size_t kSize = 40;
  uint32_t fragment_size = 0;
  uint32_t fragment_crc = 0;
  uint8_t digest[32] = {};
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};

// ACK, 4 bytes: every sequenced frame up to and including ack_seq has been
// received and consumed (cumulative).
//   0 u32 ack_seq
struct AckPayload {
  static constexpr size_t kSize = 4;
  uint32_t ack_seq = 0;
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};
// An ACK frame on the wire (untagged).
constexpr size_t kAckFrameBytes = kHeaderSize + AckPayload::kSize;

// DONE, 44 bytes: the request with sequence number request_seq (a RUN after
// its OUTPUT messages, or a COMMIT) completed. Metrics are 0 if not measured.
//   0 u32 request_seq
//   4 u32 elapsed_us      compute time on the board
//   8 u32 peak_ram_bytes  arena high-water mark during the request
//  12 u32 frames_sent     frames the request's results took (OUTPUT, INPUT,
//                         INPUTS, to the coordinator and to other boards)
//  16 u32 outputs         outputs of the layer this board computed (0 for a
//                         COMMIT)
//  20 u64 output_digest   core::digest64 of those outputs, region after region
//                         in the board's fragment order, each region in flat
//                         C-H-W order (core/digest.h); 0 for a COMMIT
//  28 u32 compute_instructions  guest instructions the layer's kernels took,
//                         counted exactly (the firmware under QEMU -icount:
//                         its 25 MHz timer ticks x 40); 0 = not counted (host
//                         boards, QEMU without -icount, a COMMIT)
//  32 u32 wait_us         the board's time from being ready for the layer
//                         (its previous layer's results handed to its links,
//                         or the inference's first frame) to starting it:
//                         waiting for its inputs (and, relayed, for RUN)
//  36 u32 span_us         from being ready to this DONE: wait + compute +
//                         handing the results to the links (a reduced
//                         layer: its partial-sum exchange too); 0 for a COMMIT
//  40 u32 bytes_sent      bytes of the frames counted in frames_sent, headers
//                         included (authentication tags not): what the
//                         results really took on the wire, coded or not
struct DonePayload {
  static constexpr size_t kSize = 44;
  uint32_t request_seq = 0;
  uint32_t elapsed_us = 0;
  uint32_t peak_ram_bytes = 0;
  uint32_t frames_sent = 0;
  uint32_t outputs = 0;
  uint64_t output_digest = 0;
  uint32_t compute_instructions = 0;  // exact instruction count of the compute, 0 = not counted
  uint32_t wait_us = 0;
  uint32_t span_us = 0;
  uint32_t bytes_sent = 0;
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};

// PEERS, 8 * n bytes (1 <= n <= kMaxPeerEntries): sent by the coordinator
// after a deploy whose plan has boards sending to boards, so each board can
// open its own connections. Entry i:
//   0 u16 worker   plan index of the board
//   2 u16 port     TCP port it listens on
//   4 u32 ipv4     address, most significant byte first (127.0.0.1 = 0x7F000001)
struct PeerEntry {
  uint16_t worker = 0;
  uint16_t port = 0;
  uint32_t ipv4 = 0;
};
constexpr size_t kPeerEntryBytes = 8;
constexpr size_t kMaxPeerEntries = kMaxPayload / kPeerEntryBytes;
size_t encode_peers(const PeerEntry* entries, size_t n, uint8_t* out, size_t cap);
// Entry i of a PEERS payload of `len` bytes; false if i is out of range.
bool decode_peer(const uint8_t* payload, size_t len, size_t i, PeerEntry* out);

// INPUTS: one or more blocks back to back, each a strided set of segments of
// the consumer's input operand (flat C-H-W element index), so that a halo of
// a band (one row of every channel) or any set of small runs travels as one
// message instead of one per run:
//   0 u32 first    first element of the first segment
//   4 u16 len      elements per segment, >= 1
//   6 u16 count    segments, >= 1
//   8 u32 stride   elements from one segment's start to the next: >= len if
//                  count > 1, else 0
//  12 len*count bytes, segment after segment
// The last element (first + (count-1)*stride + len - 1) must be below 2^28.
//
// Coded INPUTS (header flag kFlagCoded): each block's header has 4 more
// bytes and its data is the values coded (core/act_code.h), one code run
// over the segments in order:
//  12 u16 coded    bytes of coded data that follow the header, >= 1
//  14 u8  mode     core::CodeParams::mode(): bit 0 flag, bit 1 zigzag
//  15 u8  fill     the value the code centres on (the zero point)
//  16 coded bytes, which decode to exactly len*count values (padding bits 0)
// Decoded, a frame may carry more values than kMaxPayload; receivers check
// them against the routing slice as they do plain ones, from the headers,
// before decoding; a code that does not decode to exactly len*count values
// fails the frame (OutOfBounds, "malformed coded input").
struct InputBlock {
  uint32_t first = 0;
  uint16_t len = 0;
  uint16_t count = 0;
  uint32_t stride = 0;
  const uint8_t* data = nullptr;  // bytes_on_wire() bytes (decode)
  uint16_t coded = 0;             // coded blocks: their data's bytes; 0 = plain
  uint8_t mode = 0, fill = 0;     // coded blocks: core::CodeParams
  // Values the block carries.
  uint32_t bytes() const { return uint32_t(len) * count; }
  uint32_t bytes_on_wire() const { return coded ? coded : bytes(); }
};
constexpr size_t kInputBlockHeader = 12;
constexpr size_t kCodedBlockHeader = 16;
// Writes a block's header at out (12 bytes, or 16 with b.coded > 0; the
// caller puts the data after it); 0 if cap is too small or the block is
// invalid.
size_t encode_input_block_header(const InputBlock& b, uint8_t* out, size_t cap);
// Decodes the block at payload[*pos] and advances *pos past its data
// (`coded`: the frame has kFlagCoded). Returns false at the end of the
// payload or on a malformed block (then *pos != len); input_blocks_ok tells
// a whole payload apart.
bool next_input_block(const uint8_t* payload, size_t len, size_t* pos, InputBlock* out, bool coded = false);
// The coding of a coded block (its mode checked by next_input_block).
core::CodeParams code_params(const InputBlock& b);
// A whole INPUTS payload: at least one block, every block valid, nothing
// left over. A coded block's code is checked as it is decoded (a receiver
// decodes once, into place): core::CodeReader refuses a malformed one.
bool input_blocks_ok(const uint8_t* payload, size_t len, bool coded = false);

// PATCH: stages part of a new fragment as copies from the fragment the board
// has committed (its *base*) and new bytes, so that a re-plan whose
// fragments share most of their bytes with the old ones (weights, moved to
// other offsets) sends only what differs. The ops write the staging area
// one after the other from the header's `offset`, as STORE would:
//   0 u8[8] base     first 8 bytes of the base fragment's SHA-256; a board
//                    whose committed fragment has another digest stages
//                    nothing (its COMMIT then fails: the coordinator sends
//                    the fragment whole)
//   8 ops, back to back, each
//     0 u32 code     bits 0..30 len >= 1; bit 31: copy (else new bytes)
//     4 u32 from     copy: byte offset in the base; new bytes: 0
//     8 new bytes only: len bytes
// Bounds against the base and the flash are the board's to check.
constexpr size_t kPatchBaseBytes = 8;
constexpr size_t kPatchOpHeader = 8;
constexpr uint32_t kPatchCopy = 0x80000000u;
struct PatchOp {
  bool copy = false;
  uint32_t len = 0;
  uint32_t from = 0;              // copy: offset in the base
  const uint8_t* data = nullptr;  // new bytes (decode)
};
// Writes an op's 8-byte header at out (new bytes follow it, copied by the
// caller); 0 if cap is too small or the op is invalid.
size_t encode_patch_op(const PatchOp& op, uint8_t* out, size_t cap);
// Decodes the op at payload[*pos] (*pos >= kPatchBaseBytes) and advances
// *pos past it; false at the end or on a malformed op (then *pos != len).
bool next_patch_op(const uint8_t* payload, size_t len, size_t* pos, PatchOp* out);
// A whole PATCH payload: the base, at least one op, every op valid, nothing
// left over.
bool patch_ops_ok(const uint8_t* payload, size_t len);

enum class ErrorCode : uint16_t {
  None = 0,
  BadFrame = 1,         // a frame failed validation; the link is closing
  SequenceError = 2,    // duplicate or missing sequence number
  OutOfBounds = 3,      // offset/length outside the destination buffer
  NoSpace = 4,          // fragment does not fit in flash
  HashMismatch = 5,     // COMMIT size/CRC differs from what was stored
  UnknownLayer = 6,     // INPUT/RUN for a layer the board has no fragment for
  WrongDeployment = 7,  // frame for a deployment the board does not hold
  NotReady = 8,         // RUN before all inputs arrived, STORE before HELLO...
  OutOfMemory = 9,      // arena too small for the request
  VersionMismatch = 10, // peer speaks another protocol version
  Internal = 11,
  AuthFailed = 12,      // a frame failed authentication, or a key is missing
  PeerLost = 13,        // direct route: the link to peer board `request_seq` (plan index) closed
  StoreFailed = 14,     // COMMIT: the board's store could not keep the fragment (full, not a folder, I/O
                        // error); the fragment was good and the previous one is kept
  BoardInUse = 15,      // a coordinator while another session owns the board; the text names the owner
};
const char* error_code_name(ErrorCode c);

constexpr size_t kMaxErrorText = 64;

// ERROR, 8..8+kMaxErrorText bytes.
//   0 u16 code         ErrorCode
//   2 u16 reserved (0)
//   4 u32 request_seq  seq of the failed request, 0 if none in particular
//   8 ...  text        short human-readable detail, ASCII, not NUL-terminated
// In memory the text is kept NUL-terminated for convenience.
struct ErrorPayload {
  static constexpr size_t kMinSize = 8;
  static constexpr size_t kMaxSize = kMinSize + kMaxErrorText;
  ErrorCode code = ErrorCode::None;
  uint32_t request_seq = 0;
  char text[kMaxErrorText + 1] = {};
  // Builds a payload; `msg` is truncated to kMaxErrorText characters.
  static ErrorPayload make(ErrorCode code, uint32_t request_seq, const char* msg);
  size_t text_len() const;
  size_t encode(uint8_t* out, size_t cap) const;
  bool decode(const uint8_t* in, size_t len);
};

// ---------------------------------------------------------------------------
// FrameReader: stream reassembly
// ---------------------------------------------------------------------------

// Turns an arbitrary byte stream into validated frames. Bytes may arrive one
// at a time or many frames per chunk; the reader copies into a fixed
// kMaxFrame buffer and never assumes one recv() is one frame.
//
//   FrameReader r;
//   while (len > 0) {
//     auto res = r.feed(data, len);
//     data += res.consumed; len -= res.consumed;
//     if (res.status == FrameReader::Status::Frame) handle(r.header(), r.payload());
//     else if (res.status == FrameReader::Status::Error) { drop the link; break; }
//   }
//   // at end of stream: r.idle() is false if a frame was cut off.
//
// feed() consumes at most up to the end of one frame, so the caller handles
// frames one by one without the reader needing a queue.
//
// Resynchronisation policy: none. The first bad frame (wrong magic, oversize
// length, CRC mismatch, unknown type, ...) puts the reader in a failed state;
// further feeds return Error and consume nothing until reset(). On TCP the
// byte stream cannot lose or reorder bytes, so a bad frame means a bug, a
// peer speaking something else, or memory corruption; guessing the next frame
// boundary by scanning for the magic could accept bytes from inside a payload
// as a header and desynchronise sequence numbers silently. The coordinator
// therefore closes the connection and treats the board as misbehaving (it may
// reconnect, which restarts sequence numbers, and redeploy).
class FrameReader {
 public:
  enum class Status : uint8_t { NeedMore, Frame, Error };
  struct Result {
    Status status;
    size_t consumed;  // bytes of the input taken by this call
  };

  FrameReader() { reset(); }

  // Feeds bytes. Returns Frame once a complete valid frame is buffered (its
  // header and payload stay valid until the next feed or reset), Error on a
  // bad frame (see error()), else NeedMore after consuming all of `data`.
  Result feed(const uint8_t* data, size_t len);

  const FrameHeader& header() const { return header_; }
  const uint8_t* payload() const { return buf_ + kHeaderSize; }
  // The whole frame as received (header, payload, tag), while a frame is
  // ready: what an authentication tag is checked over.
  const uint8_t* frame() const { return buf_; }
  size_t frame_len() const { return frame_size(header_); }
  // Marks the buffered frame as refused by a check the caller made (BadMac):
  // counted, and the reader fails like on any bad frame.
  void refuse(WireError e) { fail(e, 0); }

  bool failed() const { return failed_; }
  WireError error() const { return error_; }  // Ok unless failed()
  // True when no partial frame is buffered (a clean place for a stream to end).
  bool idle() const { return have_ == 0 || frame_ready_; }
  size_t buffered() const { return frame_ready_ ? 0 : have_; }

  // Counters survive reset() so they can cover several connections.
  uint32_t frames_ok() const { return frames_ok_; }
  uint32_t error_count(WireError e) const;
  uint32_t total_errors() const;

  // Starts a new stream: drops buffered bytes and the failed state.
  void reset();
  void clear_counters();

 private:
  Result fail(WireError e, size_t consumed);

  uint8_t buf_[kMaxFrameBuf];
  size_t have_ = 0;  // bytes buffered of the current frame
  size_t need_ = 0;  // full size of the current frame once its header is in, else 0
  bool frame_ready_ = false;
  bool failed_ = false;
  WireError error_ = WireError::Ok;
  FrameHeader header_;
  uint32_t frames_ok_ = 0;
  uint32_t error_counts_[kNumWireErrors] = {};
};

// ---------------------------------------------------------------------------
// Sliding-window sender (application-level ACKs)
// ---------------------------------------------------------------------------

// Time is passed in by the caller as a uint32 millisecond counter (e.g. a
// board's millis() or a host steady clock); wrap-around is handled by modular
// differences, so timeouts up to ~24 days work across the wrap.
//
// Sequence numbers are uint32 per direction per connection, starting at 1;
// all comparisons are modular so wrap-around is harmless.
enum class AckResult : uint8_t {
  Advanced,    // acknowledged 1 or more frames in flight
  Duplicate,   // acknowledges nothing new (same as the previous ACK)
  BeyondSent,  // acknowledges a frame never sent: peer bug or corruption
  Stale,       // older than a previous ACK: ACKs went backwards
};
const char* ack_result_name(AckResult r);

// Tracks frames in flight: [oldest_unacked, next_seq). Pure logic, no sockets,
// no clock. Typical use:
//
//   if (w.can_send()) {
//     w.take(now_ms, &h.seq);
//     if (w.full()) h.flags |= kFlagAckReq;   // make the peer ACK now
//     send(h)
//   }
//   on ACK:     w.on_ack(ack.ack_seq)   (anything but Advanced/Duplicate is fatal)
//   periodically: if (w.timed_out(now_ms, timeout)) peer is stuck -> fatal
//
// No retransmission: over TCP a frame is never lost, so a missing ACK means
// the peer is stuck or dead, and a timeout is reported instead.
class SendWindow {
 public:
  // window is clamped to 1..kMaxWindow. W = 1 is stop-and-wait.
  explicit SendWindow(uint16_t window = 1, uint32_t first_seq = 1) { reset(window, first_seq); }
  void reset(uint16_t window, uint32_t first_seq = 1);

  uint16_t window() const { return window_; }
  uint32_t next_seq() const { return next_; }
  uint32_t oldest_unacked() const { return base_; }
  uint32_t in_flight() const { return next_ - base_; }
  bool can_send() const { return in_flight() < window_; }
  bool full() const { return !can_send(); }
  bool idle() const { return in_flight() == 0; }

  // Assigns the next sequence number to a frame being sent at now_ms.
  // Returns false and changes nothing if the window is full.
  bool take(uint32_t now_ms, uint32_t* seq);

  // take(), plus the protocol's ACK rule: the frame that fills the window
  // carries kFlagAckReq, so a receiver may batch its ACKs freely and never
  // stall this sender. Every sender of sequenced frames uses this.
  bool stamp(uint32_t now_ms, uint32_t* seq, uint16_t* flags) {
    if (!take(now_ms, seq)) return false;
    if (!can_send()) *flags = uint16_t(*flags | kFlagAckReq);
    return true;
  }

  // Processes a cumulative ACK.
  AckResult on_ack(uint32_t ack_seq);

  // True if the oldest unacked frame was sent at least timeout_ms ago.
  bool timed_out(uint32_t now_ms, uint32_t timeout_ms) const;
  // Age of the oldest unacked frame, 0 if none in flight.
  uint32_t oldest_age(uint32_t now_ms) const;

  uint32_t duplicate_acks() const { return dup_acks_; }
  uint32_t bad_acks() const { return bad_acks_; }

 private:
  uint16_t window_ = 1;
  uint32_t base_ = 1;  // oldest unacked sequence number
  uint32_t next_ = 1;  // next sequence number to hand out
  uint32_t sent_at_[kMaxWindow] = {};  // indexed by seq % kMaxWindow
  uint32_t dup_acks_ = 0;
  uint32_t bad_acks_ = 0;
};

// ---------------------------------------------------------------------------
// Receiver: sequence checking and ACK policy
// ---------------------------------------------------------------------------

enum class SeqCheck : uint8_t {
  InOrder,    // the expected next sequence number
  Duplicate,  // already received
  Gap,        // skips ahead: frames missing
};
const char* seq_check_name(SeqCheck s);

// Checks incoming sequence numbers and decides when to ACK. ACK policy: an
// ACK for everything received so far is due when
//   - ack_every frames have arrived since the last ACK, or
//   - the frame carries kFlagLast (end of a message), or
//   - the frame carries kFlagAckReq (the sender's window is full).
// The sender sets kFlagAckReq when its window fills, so any ack_every works
// with any window without deadlock; ack_every = 1 ACKs every frame (the
// paper's behaviour). The caller sends the ACK after it has consumed the
// frame (stored, placed), then calls ack_sent().
//
// Over TCP a Duplicate or Gap cannot happen on a healthy link: it is reported
// and counted, the state is left unchanged, and the caller should treat it as
// fatal (ERROR SequenceError, close).
//
// The ACK intervals the engine uses (the simulator models the same): a board
// acknowledges every kBoardAckEvery frames (core::WorkerConfig::ack_every),
// the coordinator every kCoordAckEvery (coord::BoardLink).
constexpr uint16_t kBoardAckEvery = 16;
constexpr uint16_t kCoordAckEvery = 32;
class AckTracker {
 public:
  explicit AckTracker(uint16_t ack_every = 1, uint32_t first_seq = 1) { reset(ack_every, first_seq); }
  void reset(uint16_t ack_every, uint32_t first_seq = 1);

  SeqCheck on_frame(uint32_t seq, uint16_t flags);
  bool ack_due() const { return pending_ > 0 && (pending_ >= ack_every_ || forced_); }
  // Cumulative ack value: the last in-order sequence number received.
  uint32_t ack_seq() const { return expected_ - 1; }
  uint32_t expected_seq() const { return expected_; }
  void ack_sent();

  uint32_t duplicates() const { return duplicates_; }
  uint32_t gaps() const { return gaps_; }

 private:
  uint16_t ack_every_ = 1;
  uint32_t expected_ = 1;
  uint32_t pending_ = 0;  // in-order frames since the last ACK
  bool forced_ = false;
  uint32_t duplicates_ = 0;
  uint32_t gaps_ = 0;
};

// ---------------------------------------------------------------------------
// Packetiser: one message <-> frames
// ---------------------------------------------------------------------------

// How a message is cut into frames: the one rule every sender (Packetiser,
// the worker's OUTPUT messages, the coordinator's links) and every counter
// (the planner's cost model, the simulator) uses. Frames of max_payload
// bytes, the last one shorter; an empty message is one empty frame (it still
// carries kFlagLast). (INPUTS frames between boards are packed from several
// sends instead: core/inputs_packer.h.)
//
// Payload bytes of the frame that carries a message of `len` bytes from byte
// `pos` on (pos < len, or 0 for an empty message); the frame is the
// message's last when pos + the result == len.
constexpr size_t frame_payload(size_t len, size_t pos, size_t max_payload = kMaxPayload) {
  return len - pos < max_payload ? len - pos : max_payload;
}
// Number of frames a message of `len` bytes needs: ceil(len / max_payload),
// and 1 for an empty message.
size_t frames_needed(size_t len, size_t max_payload = kMaxPayload);
// Bytes a message of `len` bytes puts on the wire: its payload and one
// header per frame (untagged frames).
inline size_t message_wire_bytes(size_t len) { return len + frames_needed(len) * kHeaderSize; }

// Splits a message (e.g. a run of int8 activations starting at element
// `base_offset`) into frames. Each frame gets a copy of the template header
// with offset, payload_len and kFlagLast (on the final frame) filled in; the
// caller assigns seq (from a SendWindow) and encodes. The data must stay
// alive while iterating. One element is one byte (int8); for STORE the offset
// is a byte offset in the fragment.
//
//   Packetiser pk(tmpl, data, n, base_offset);
//   FrameHeader h; const uint8_t* p;
//   while (pk.next(&h, &p)) { h.seq = ...; encode_frame(h, p, h.payload_len, out, cap); }
class Packetiser {
 public:
  // max_payload is clamped to 1..kMaxPayload (smaller values help tests).
  // If base_offset + len does not fit in 32 bits, valid() is false and next()
  // yields nothing.
  Packetiser(const FrameHeader& tmpl, const uint8_t* data, size_t len, uint32_t base_offset,
             size_t max_payload = kMaxPayload);

  bool valid() const { return valid_; }
  size_t frame_count() const { return valid_ ? frames_needed(len_, max_payload_) : 0; }
  bool done() const { return !valid_ || emitted_ == frame_count(); }
  bool next(FrameHeader* h, const uint8_t** payload);

 private:
  FrameHeader tmpl_;
  const uint8_t* data_;
  size_t len_;
  uint32_t base_offset_;
  size_t max_payload_;
  size_t pos_ = 0;
  size_t emitted_ = 0;
  bool valid_ = true;
};

enum class PlaceResult : uint8_t {
  Ok,
  OutOfBounds,    // offset/length outside the destination window
  NotContiguous,  // within a message, a frame does not start where the last ended
};
const char* place_result_name(PlaceResult r);

// The inverse of Packetiser: copies frame payloads into a destination buffer
// that holds elements [base_offset, base_offset + capacity) of a tensor or
// fragment. Bounds are checked before any byte is written. Within one message
// (frames up to kFlagLast) each frame must continue exactly where the
// previous one ended, which catches gaps and overlaps without a bitmap; a new
// message may start anywhere in the window (a board's inputs may be several
// separate runs of the same tensor). Rejected frames change nothing.
class Assembler {
 public:
  Assembler(uint8_t* dst, size_t capacity, uint32_t base_offset = 0);

  PlaceResult place(uint32_t offset, const uint8_t* payload, size_t len, bool last);
  PlaceResult place(const FrameHeader& h, const uint8_t* payload) {
    return place(h.offset, payload, h.payload_len, (h.flags & kFlagLast) != 0);
  }

  size_t bytes_placed() const { return placed_; }
  size_t messages_done() const { return messages_; }
  // True between kFlagLast frames, i.e. a message is partly received.
  bool in_message() const { return in_message_; }

 private:
  uint8_t* dst_;
  size_t capacity_;
  uint32_t base_;
  size_t placed_ = 0;
  size_t messages_ = 0;
  bool in_message_ = false;
  uint64_t next_offset_ = 0;  // where the current message continues
};

}  // namespace ts::wire
