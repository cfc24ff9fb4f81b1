// Fuzz target: the frame decoder (src/core/wire.*).
//
// The input is a byte stream as a board or the coordinator would receive it.
// Checked on every input:
//  - decode_frame of the stream's first frame: an accepted frame re-encodes to
//    exactly the bytes it was decoded from, and its fixed-layout payload
//    decodes and re-encodes to the same bytes;
//  - an accepted INPUTS frame walks block by block to its end, every block
//    header encodes back to its bytes, and a coded block's data decodes
//    (core/act_code.h) either to its values, which code back to exactly its
//    bytes, or to an error, never past its bytes;
//  - FrameReader fed the same stream in uneven chunks (sizes taken from the
//    data) yields exactly the frames a walk with decode_frame finds, and stops
//    with an error exactly where decode_frame first fails.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/wire.h"

using namespace ts::wire;

namespace {

#define FUZZ_CHECK(c)                                                  \
  do {                                                                 \
    if (!(c)) {                                                        \
      __builtin_printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
      std::abort();                                                    \
    }                                                                  \
  } while (0)

template <typename P>
void payload_roundtrip(const uint8_t* p, size_t n) {
  P v;
  if (!v.decode(p, n)) return;
  uint8_t out[kMaxPayload];
  const size_t m = v.encode(out, sizeof out);
  FUZZ_CHECK(m == n && std::memcmp(out, p, n) == 0);
}

void check_payload(const FrameHeader& h, const uint8_t* p) {
  switch (h.type) {
    case MsgType::Hello: payload_roundtrip<HelloPayload>(p, h.payload_len); break;
    case MsgType::Commit: payload_roundtrip<CommitPayload>(p, h.payload_len); break;
    case MsgType::Ack: payload_roundtrip<AckPayload>(p, h.payload_len); break;
    case MsgType::Done: payload_roundtrip<DonePayload>(p, h.payload_len); break;
    case MsgType::Inputs: {
      const bool coded = (h.flags & kFlagCoded) != 0;
      size_t pos = 0, n = 0;
      std::vector<uint8_t> values, again;
      for (InputBlock b;;) {
        const size_t at = pos;
        if (!next_input_block(p, h.payload_len, &pos, &b, coded)) break;
        uint8_t head[kCodedBlockHeader];
        const size_t hn = encode_input_block_header(b, head, sizeof head);
        FUZZ_CHECK(hn == (coded ? kCodedBlockHeader : kInputBlockHeader) && std::memcmp(head, p + at, hn) == 0);
        ++n;
        if (!coded) continue;
        const ts::core::CodeParams cp = code_params(b);
        values.assign(b.bytes(), 0);
        ts::core::CodeReader r(b.data, b.coded, cp);
        if (!r.get(values.data(), values.size()) || !r.finish()) continue;
        again.assign(b.coded, 0);
        ts::core::CodeWriter w(again.data(), again.size(), cp);
        FUZZ_CHECK(w.put(values.data(), values.size()));
        FUZZ_CHECK(w.finish() == b.coded && std::memcmp(again.data(), b.data, b.coded) == 0);
      }
      FUZZ_CHECK(n > 0 && pos == h.payload_len);
      break;
    }
    case MsgType::Patch: {
      // A frame that decoded walks op by op to its end, and every op's
      // header encodes back to its bytes.
      size_t pos = kPatchBaseBytes, n = 0;
      for (PatchOp op;;) {
        const size_t at = pos;
        if (!next_patch_op(p, h.payload_len, &pos, &op)) break;
        uint8_t b[kPatchOpHeader];
        FUZZ_CHECK(encode_patch_op(op, b, sizeof b) == kPatchOpHeader && std::memcmp(b, p + at, sizeof b) == 0);
        ++n;
      }
      FUZZ_CHECK(n > 0 && pos == h.payload_len);
      break;
    }
    case MsgType::Error: {
      // Text is kept NUL-terminated in memory: re-encoding gives the same
      // code and request and a prefix of the text; decoding that again is a
      // fixed point.
      ErrorPayload e;
      if (!e.decode(p, h.payload_len)) break;
      uint8_t out[ErrorPayload::kMaxSize];
      const size_t m = e.encode(out, sizeof out);
      FUZZ_CHECK(m >= ErrorPayload::kMinSize && m <= h.payload_len);
      FUZZ_CHECK(std::memcmp(out, p, ErrorPayload::kMinSize) == 0);
      ErrorPayload e2;
      FUZZ_CHECK(e2.decode(out, m));
      FUZZ_CHECK(e2.code == e.code && e2.request_seq == e.request_seq && std::strcmp(e2.text, e.text) == 0);
      break;
    }
    default: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. Single-frame decode and re-encode.
  FrameHeader h;
  const uint8_t* payload = nullptr;
  if (decode_frame(data, size, &h, &payload) == WireError::Ok) {
    FUZZ_CHECK(frame_size(h) <= size && frame_size(h) <= kMaxFrameBuf);
    FUZZ_CHECK(payload == data + kHeaderSize);
    uint8_t out[kMaxFrameBuf];
    const size_t n = encode_frame(h, payload, h.payload_len, out, sizeof out);
    FUZZ_CHECK(n == frame_size(h));
    // The encoder leaves a tagged frame's tag zero (the sender seals it).
    const size_t tag = (h.flags & kFlagMac) ? kTagSize : 0;
    FUZZ_CHECK(std::memcmp(out, data, n - tag) == 0);
    for (size_t i = n - tag; i < n; ++i) FUZZ_CHECK(out[i] == 0);
    FrameHeader h2;
    FUZZ_CHECK(decode_header(data, size, &h2) == WireError::Ok);
    check_payload(h, payload);
  }

  // 2. The reference walk: consecutive frames until the first bad one.
  struct Seen {
    size_t at, len;
  };
  std::vector<Seen> expect;
  size_t pos = 0;
  WireError stop = WireError::Ok;
  while (pos < size) {
    FrameHeader fh;
    const uint8_t* pl;
    const WireError e = decode_frame(data + pos, size - pos, &fh, &pl);
    if (e != WireError::Ok) {
      stop = e;
      break;
    }
    expect.push_back({pos, frame_size(fh)});
    pos += frame_size(fh);
  }

  // 3. FrameReader over the same bytes in chunks of 1..64 bytes, the sizes
  // drawn from the data itself.
  FrameReader r;
  size_t fed = 0, k = 0, chunk_i = 0;
  bool failed = false;
  while (fed < size && !failed) {
    size_t chunk = 1 + (data[chunk_i++ % size] & 63);
    if (chunk > size - fed) chunk = size - fed;
    const uint8_t* p = data + fed;
    size_t left = chunk;
    while (left > 0) {
      const auto res = r.feed(p, left);
      FUZZ_CHECK(res.consumed <= left);
      p += res.consumed;
      left -= res.consumed;
      fed += res.consumed;
      if (res.status == FrameReader::Status::Frame) {
        FUZZ_CHECK(k < expect.size());
        FUZZ_CHECK(fed == expect[k].at + expect[k].len);
        FUZZ_CHECK(std::memcmp(r.payload(), data + expect[k].at + kHeaderSize, r.header().payload_len) == 0);
        ++k;
      } else if (res.status == FrameReader::Status::Error) {
        failed = true;
        break;
      } else {
        FUZZ_CHECK(left == 0);
      }
    }
  }
  FUZZ_CHECK(k == expect.size());
  if (failed) {
    // The reader may only fail where the walk found a bad frame; the
    // truncation of an incomplete last frame is not an error for it.
    FUZZ_CHECK(stop != WireError::Ok && stop != WireError::Truncated);
    FUZZ_CHECK(r.error() == stop);
  } else {
    FUZZ_CHECK(stop == WireError::Ok || stop == WireError::Truncated);
    FUZZ_CHECK(r.idle() == (stop == WireError::Ok));
  }
  return 0;
}
