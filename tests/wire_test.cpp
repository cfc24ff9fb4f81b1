// Tests of the wire format (core/wire.h) and CRC-32 (core/crc32.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/crc32.h"
#include "core/wire.h"

namespace {

using namespace ts::wire;
using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

FrameHeader make_header(MsgType t, uint32_t seq = 1) {
  FrameHeader h;
  h.type = t;
  h.src = 3;
  h.dst = kCoordinatorId;
  h.deployment = 0xDEADBEEF;
  h.seq = seq;
  h.layer = 5;
  h.flags = kFlagLast;
  h.offset = 1234;
  return h;
}

Bytes encode(const FrameHeader& h, const Bytes& payload) {
  Bytes out(kMaxFrame);
  size_t n = encode_frame(h, payload.data(), payload.size(), out.data(), out.size());
  EXPECT_GT(n, 0u) << msg_type_name(h.type);
  out.resize(n);
  return out;
}

// Rewrites the CRC after a test edits header bytes on purpose, so the frame
// is intact and the reader must reject it for the edited field itself.
void fix_crc(Bytes& frame) {
  put_u32(frame.data() + kOffCrc, 0);
  put_u32(frame.data() + kOffCrc, ts::crc32(frame.data(), frame.size()));
}

// A legal payload for each message type.
Bytes sample_payload(MsgType t, std::mt19937& rng) {
  Bytes p;
  auto random_bytes = [&](size_t n) {
    Bytes b(n);
    for (auto& x : b) x = uint8_t(rng());
    return b;
  };
  switch (t) {
    case MsgType::Hello: {
      HelloPayload hp;
      hp.board_id = 3;
      hp.clock_mhz = 600;
      hp.rx_window = 8;
      hp.ram_bytes = 512 * 1024;
      hp.flash_bytes = 7 * 1024 * 1024;
      p.resize(HelloPayload::kSize);
      hp.encode(p.data(), p.size());
      return p;
    }
    case MsgType::Commit: {
      CommitPayload cp{123456, 0xCAFEBABE};
      p.resize(CommitPayload::kSize);
      cp.encode(p.data(), p.size());
      return p;
    }
    case MsgType::Ack: {
      AckPayload ap{77};
      p.resize(AckPayload::kSize);
      ap.encode(p.data(), p.size());
      return p;
    }
    case MsgType::Done: {
      DonePayload dp{9, 15370, 480 * 1024, 17, 1234, 0x0123456789ABCDEFull};
      p.resize(DonePayload::kSize);
      dp.encode(p.data(), p.size());
      return p;
    }
    case MsgType::Error: {
      auto ep = ErrorPayload::make(ErrorCode::HashMismatch, 42, "fragment 5: crc differs");
      p.resize(ErrorPayload::kMaxSize);
      p.resize(ep.encode(p.data(), p.size()));
      return p;
    }
    case MsgType::Auth: return random_bytes(AuthPayload::kSize);
    case MsgType::Run:
    case MsgType::Reset:
    case MsgType::Bye: return p;
    case MsgType::Peers: {
      const PeerEntry e[2] = {{0, 7001, 0x7F000001u}, {2, 7003, 0x7F000001u}};
      p.resize(2 * kPeerEntryBytes);
      encode_peers(e, 2, p.data(), p.size());
      return p;
    }
    case MsgType::Inputs: {
      // Two blocks: a strided halo (3 rows of 5 at distance 20) and one run.
      InputBlock a;
      a.first = 40; a.len = 5; a.count = 3; a.stride = 20;
      InputBlock b;
      b.first = 400; b.len = 7; b.count = 1; b.stride = 0;
      p.resize(2 * kInputBlockHeader + a.bytes() + b.bytes());
      size_t at = encode_input_block_header(a, p.data(), p.size());
      for (uint32_t i = 0; i < a.bytes(); ++i) p[at++] = uint8_t(i);
      at += encode_input_block_header(b, p.data() + at, p.size() - at);
      for (uint32_t i = 0; i < b.bytes(); ++i) p[at++] = uint8_t(100 + i);
      return p;
    }
    case MsgType::Patch: {
      // A base prefix, a copy and some new bytes.
      p.assign(kPatchBaseBytes, 0xB5);
      PatchOp c;
      c.copy = true;
      c.from = 100;
      c.len = 3000;
      PatchOp n;
      n.len = 9;
      uint8_t op[kPatchOpHeader];
      encode_patch_op(c, op, sizeof op);
      p.insert(p.end(), op, op + sizeof op);
      encode_patch_op(n, op, sizeof op);
      p.insert(p.end(), op, op + sizeof op);
      for (int i = 0; i < 9; ++i) p.push_back(uint8_t(i));
      return p;
    }
    case MsgType::Store:
    case MsgType::Probe:
    case MsgType::ProbeReply:
    case MsgType::Input:
    case MsgType::Output: return random_bytes(rng() % (kMaxPayload + 1));
  }
  return p;
}

const MsgType kAllTypes[] = {MsgType::Hello,  MsgType::Store, MsgType::Commit, MsgType::Probe,
                             MsgType::ProbeReply, MsgType::Input, MsgType::Run, MsgType::Output,
                             MsgType::Ack,    MsgType::Done,  MsgType::Error,  MsgType::Reset,
                             MsgType::Bye,    MsgType::Peers, MsgType::Auth, MsgType::Inputs,
                             MsgType::Patch};

struct Got {
  FrameHeader h;
  Bytes payload;
};

// Feeds `stream` in chunks chosen by `next_chunk` and collects frames.
// Fails the test on any reader error.
template <class ChunkFn>
std::vector<Got> read_all(const Bytes& stream, ChunkFn next_chunk) {
  FrameReader r;
  std::vector<Got> got;
  size_t pos = 0;
  while (pos < stream.size()) {
    size_t chunk = std::min(next_chunk(), stream.size() - pos);
    const uint8_t* data = stream.data() + pos;
    size_t left = chunk;
    while (left > 0) {
      auto res = r.feed(data, left);
      data += res.consumed;
      left -= res.consumed;
      EXPECT_NE(res.status, FrameReader::Status::Error) << wire_error_name(r.error());
      if (res.status == FrameReader::Status::Error) return got;
      if (res.status == FrameReader::Status::Frame)
        got.push_back({r.header(), Bytes(r.payload(), r.payload() + r.header().payload_len)});
    }
    pos += chunk;
  }
  EXPECT_TRUE(r.idle());
  EXPECT_EQ(r.frames_ok(), got.size());
  return got;
}

// Feeds a whole buffer; returns the first non-NeedMore status (or NeedMore).
FrameReader::Status feed_until_event(FrameReader& r, const Bytes& bytes) {
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    auto res = r.feed(p, left);
    p += res.consumed;
    left -= res.consumed;
    if (res.status != FrameReader::Status::NeedMore) return res.status;
  }
  return FrameReader::Status::NeedMore;
}

// ---------------------------------------------------------------------------
// CRC-32
// ---------------------------------------------------------------------------

TEST(Crc32, KnownVectors) {
  EXPECT_EQ(ts::crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(ts::crc32("", 0), 0u);
  EXPECT_EQ(ts::crc32("a", 1), 0xE8B7BE43u);
  const char* fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(ts::crc32(fox, std::strlen(fox)), 0x414FA339u);
  uint8_t zeros[32] = {};
  EXPECT_EQ(ts::crc32(zeros, sizeof zeros), 0x190A55ADu);
  uint8_t ones[32];
  std::memset(ones, 0xFF, sizeof ones);
  EXPECT_EQ(ts::crc32(ones, sizeof ones), 0xFF6CAB0Bu);
}

TEST(Crc32, IncrementalEqualsOneShotAtEverySplit) {
  std::mt19937 rng(1);
  Bytes data(300);
  for (auto& b : data) b = uint8_t(rng());
  const uint32_t whole = ts::crc32(data.data(), data.size());
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    uint32_t c = ts::crc32_update(0, data.data(), cut);
    c = ts::crc32_update(c, data.data() + cut, data.size() - cut);
    ASSERT_EQ(c, whole) << "cut at " << cut;
  }
  // Three pieces, including empty ones.
  uint32_t c = ts::crc32_update(0, data.data(), 0);
  c = ts::crc32_update(c, data.data(), 7);
  c = ts::crc32_update(c, data.data() + 7, 0);
  c = ts::crc32_update(c, data.data() + 7, data.size() - 7);
  EXPECT_EQ(c, whole);
}

// ---------------------------------------------------------------------------
// Header layout and round trips
// ---------------------------------------------------------------------------

TEST(Wire, GoldenFrameBytes) {
  // Expected bytes computed independently (Python struct '<HBBHHIIHHIHHI' and
  // zlib.crc32 over header-with-zero-crc + payload).
  const uint8_t golden[] = {0x54, 0x53, 0x01, 0x06, 0xff, 0xff, 0x03, 0x00, 0xd4, 0xc3, 0xb2, 0xa1,
                            0x04, 0x03, 0x02, 0x01, 0x07, 0x00, 0x01, 0x00, 0x20, 0x00, 0x10, 0x00,
                            0x04, 0x00, 0x00, 0x00, 0x2c, 0x71, 0xde, 0xde, 0x10, 0x20, 0x30, 0x40};
  FrameHeader h;
  h.type = MsgType::Input;
  h.src = kCoordinatorId;
  h.dst = 3;
  h.deployment = 0xA1B2C3D4;
  h.seq = 0x01020304;
  h.layer = 7;
  h.flags = kFlagLast;
  h.offset = 0x00100020;
  const Bytes payload = {0x10, 0x20, 0x30, 0x40};
  Bytes f = encode(h, payload);
  ASSERT_EQ(f.size(), sizeof golden);
  EXPECT_EQ(0, std::memcmp(f.data(), golden, sizeof golden));

  FrameHeader d;
  const uint8_t* p = nullptr;
  ASSERT_EQ(decode_frame(golden, sizeof golden, &d, &p), WireError::Ok);
  EXPECT_EQ(d.crc, 0xDEDE712Cu);
  EXPECT_EQ(d.offset, 0x00100020u);
  EXPECT_EQ(p, golden + kHeaderSize);
  EXPECT_EQ(kHeaderSize + kMaxPayload, kMaxFrame);
}

TEST(Wire, RoundTripEveryMessageType) {
  std::mt19937 rng(2);
  for (MsgType t : kAllTypes) {
    SCOPED_TRACE(msg_type_name(t));
    FrameHeader h = make_header(t, 1000 + uint32_t(t));
    h.flags = (uint8_t(t) & 1) ? kFlagLast : uint16_t(kFlagLast | kFlagAckReq);
    Bytes payload = sample_payload(t, rng);
    Bytes f = encode(h, payload);
    ASSERT_EQ(f.size(), kHeaderSize + payload.size());
    ASSERT_LE(f.size(), kMaxFrame);

    FrameHeader hd;
    ASSERT_EQ(decode_header(f.data(), f.size(), &hd), WireError::Ok);
    FrameHeader d;
    const uint8_t* p = nullptr;
    ASSERT_EQ(decode_frame(f.data(), f.size(), &d, &p), WireError::Ok);
    EXPECT_EQ(d.version, kProtocolVersion);
    EXPECT_EQ(d.type, t);
    EXPECT_EQ(d.src, h.src);
    EXPECT_EQ(d.dst, h.dst);
    EXPECT_EQ(d.deployment, h.deployment);
    EXPECT_EQ(d.seq, h.seq);
    EXPECT_EQ(d.layer, h.layer);
    EXPECT_EQ(d.flags, h.flags);
    EXPECT_EQ(d.offset, h.offset);
    EXPECT_EQ(d.payload_len, payload.size());
    EXPECT_EQ(hd.crc, d.crc);
    EXPECT_EQ(Bytes(p, p + d.payload_len), payload);
  }
}

TEST(Wire, StructuredPayloadsRoundTrip) {
  uint8_t buf[ErrorPayload::kMaxSize];

  HelloPayload h;
  h.board_id = 0xFFFE;
  h.clock_mhz = 600;
  h.rx_window = kMaxWindow;
  h.ram_bytes = 1u << 20;
  h.flash_bytes = 8u << 20;
  h.links = 200;
  h.idle_ms = 0xFEDCBA98;
  ASSERT_EQ(h.encode(buf, sizeof buf), HelloPayload::kSize);
  HelloPayload h2;
  ASSERT_TRUE(h2.decode(buf, HelloPayload::kSize));
  EXPECT_EQ(h2.board_id, h.board_id);
  EXPECT_EQ(h2.protocol_version, kProtocolVersion);
  EXPECT_EQ(h2.clock_mhz, 600);
  EXPECT_EQ(h2.rx_window, kMaxWindow);
  EXPECT_EQ(h2.ram_bytes, 1u << 20);
  EXPECT_EQ(h2.flash_bytes, 8u << 20);
  EXPECT_EQ(h2.links, 200);
  EXPECT_EQ(h2.idle_ms, 0xFEDCBA98u);
  EXPECT_EQ(h.encode(buf, HelloPayload::kSize - 1), 0u);

  CommitPayload c{0xFFFFFFFF, 0x12345678}, c2;
  ASSERT_EQ(c.encode(buf, sizeof buf), CommitPayload::kSize);
  ASSERT_TRUE(c2.decode(buf, CommitPayload::kSize));
  EXPECT_EQ(c2.fragment_size, c.fragment_size);
  EXPECT_EQ(c2.fragment_crc, c.fragment_crc);
  for (int i = 0; i < 32; ++i) c.digest[i] = uint8_t(i * 7 + 1);
  ASSERT_EQ(c.encode(buf, sizeof buf), CommitPayload::kSize);
  ASSERT_TRUE(c2.decode(buf, CommitPayload::kSize));
  EXPECT_EQ(0, std::memcmp(c2.digest, c.digest, 32));
  EXPECT_FALSE(c2.decode(buf, 8));  // the old 8-byte COMMIT is refused

  AckPayload a{0x80000001}, a2;
  ASSERT_EQ(a.encode(buf, sizeof buf), AckPayload::kSize);
  ASSERT_TRUE(a2.decode(buf, AckPayload::kSize));
  EXPECT_EQ(a2.ack_seq, a.ack_seq);

  DonePayload d{5, 7070000, 300000, 42, 40960, 0xF1E2D3C4B5A69788ull}, d2;
  ASSERT_EQ(d.encode(buf, sizeof buf), DonePayload::kSize);
  // frames_sent at 12, outputs at 16, the digest little-endian at bytes
  // 20..27 (docs/protocol.md).
  EXPECT_EQ(buf[12], 42);
  EXPECT_EQ(buf[16], 0x00);
  EXPECT_EQ(buf[17], 0xA0);
  EXPECT_EQ(buf[20], 0x88);
  EXPECT_EQ(buf[27], 0xF1);
  ASSERT_TRUE(d2.decode(buf, DonePayload::kSize));
  EXPECT_EQ(d2.frames_sent, 42u);
  EXPECT_EQ(d2.request_seq, 5u);
  EXPECT_EQ(d2.elapsed_us, 7070000u);
  EXPECT_EQ(d2.peak_ram_bytes, 300000u);
  EXPECT_EQ(d2.outputs, 40960u);
  EXPECT_EQ(d2.output_digest, 0xF1E2D3C4B5A69788ull);
  EXPECT_EQ(d2.compute_instructions, 0u);  // not counted unless set
  d.compute_instructions = 0x89ABCDEFu;
  ASSERT_EQ(d.encode(buf, sizeof buf), DonePayload::kSize);
  EXPECT_EQ(DonePayload::kSize, 44u);
  EXPECT_EQ(buf[28], 0xEF);  // little-endian at 28..31
  EXPECT_EQ(buf[31], 0x89);
  ASSERT_TRUE(d2.decode(buf, DonePayload::kSize));
  EXPECT_EQ(d2.compute_instructions, 0x89ABCDEFu);
  EXPECT_EQ(d2.wait_us, 0u);
  EXPECT_EQ(d2.bytes_sent, 0u);
  d.bytes_sent = 0x01020304u;  // little-endian at 40..43
  ASSERT_EQ(d.encode(buf, sizeof buf), DonePayload::kSize);
  EXPECT_EQ(buf[40], 0x04);
  EXPECT_EQ(buf[43], 0x01);
  ASSERT_TRUE(d2.decode(buf, DonePayload::kSize));
  EXPECT_EQ(d2.bytes_sent, 0x01020304u);
  d.wait_us = 0x01020304u;
  d.span_us = 0xA0B0C0D0u;
  ASSERT_EQ(d.encode(buf, sizeof buf), DonePayload::kSize);
  EXPECT_EQ(buf[32], 0x04);  // wait_us little-endian at 32..35
  EXPECT_EQ(buf[39], 0xA0);  // span_us at 36..39
  ASSERT_TRUE(d2.decode(buf, DonePayload::kSize));
  EXPECT_EQ(d2.wait_us, 0x01020304u);
  EXPECT_EQ(d2.span_us, 0xA0B0C0D0u);
  EXPECT_FALSE(d2.decode(buf, 32)) << "the 32-byte DONE before the wait and span is refused";
  EXPECT_FALSE(d2.decode(buf, 28));  // the 28-byte DONE before the count is refused
  EXPECT_FALSE(d2.decode(buf, 12)) << "a DONE of the old 12-byte size is refused, not misread";
  EXPECT_FALSE(d2.decode(buf, 24)) << "nor one of 24 bytes";

  auto e = ErrorPayload::make(ErrorCode::NoSpace, 17, "flash full");
  size_t n = e.encode(buf, sizeof buf);
  ASSERT_EQ(n, ErrorPayload::kMinSize + 10);
  ErrorPayload e2;
  ASSERT_TRUE(e2.decode(buf, n));
  EXPECT_EQ(e2.code, ErrorCode::NoSpace);
  EXPECT_EQ(e2.request_seq, 17u);
  EXPECT_STREQ(e2.text, "flash full");

  // Long text is cut to kMaxErrorText; an empty text is legal.
  std::string long_text(200, 'x');
  auto el = ErrorPayload::make(ErrorCode::Internal, 0, long_text.c_str());
  EXPECT_EQ(el.text_len(), kMaxErrorText);
  EXPECT_EQ(el.encode(buf, sizeof buf), ErrorPayload::kMaxSize);
  auto ee = ErrorPayload::make(ErrorCode::BadFrame, 0, nullptr);
  EXPECT_EQ(ee.encode(buf, sizeof buf), ErrorPayload::kMinSize);
  ASSERT_TRUE(e2.decode(buf, ErrorPayload::kMinSize));
  EXPECT_STREQ(e2.text, "");
}

TEST(Wire, PayloadDecodeRejectsBadFields) {
  uint8_t buf[ErrorPayload::kMaxSize + 4] = {};
  HelloPayload h;
  h.rx_window = 1;
  h.encode(buf, sizeof buf);
  HelloPayload out;
  EXPECT_FALSE(out.decode(buf, HelloPayload::kSize - 1));  // short
  EXPECT_TRUE(out.decode(buf, HelloPayload::kSize));
  buf[3] = 0;  // no links: not even the coordinator's
  EXPECT_FALSE(out.decode(buf, HelloPayload::kSize));
  EXPECT_FALSE(out.decode(buf, 16));  // the 16-byte HELLO before links and idle_ms
  buf[3] = 1;
  put_u16(buf + 6, 0);  // window 0 cannot work
  EXPECT_FALSE(out.decode(buf, HelloPayload::kSize));
  put_u16(buf + 6, kMaxWindow + 1);
  EXPECT_FALSE(out.decode(buf, HelloPayload::kSize));

  ErrorPayload e;
  std::memset(buf, 'a', sizeof buf);
  put_u16(buf, 1);
  put_u16(buf + 2, 0);
  EXPECT_FALSE(e.decode(buf, ErrorPayload::kMaxSize + 1));  // text too long
  EXPECT_TRUE(e.decode(buf, ErrorPayload::kMaxSize));
  buf[10] = 0;  // embedded NUL
  EXPECT_FALSE(e.decode(buf, ErrorPayload::kMaxSize));
  put_u16(buf + 2, 9);  // reserved
  EXPECT_FALSE(e.decode(buf, ErrorPayload::kMinSize));
  EXPECT_FALSE(e.decode(buf, ErrorPayload::kMinSize - 1));

  AckPayload a;
  EXPECT_FALSE(a.decode(buf, 3));
  EXPECT_FALSE(a.decode(buf, 5));
}

TEST(Wire, EncodeRejectsIllegalFrames) {
  Bytes out(kMaxFrame + 10);
  Bytes big(kMaxPayload + 1, 7);
  FrameHeader h = make_header(MsgType::Input);
  EXPECT_EQ(encode_frame(h, big.data(), big.size(), out.data(), out.size()), 0u);  // oversize
  EXPECT_EQ(encode_frame(h, big.data(), kMaxPayload, out.data(), out.size()), kMaxFrame);
  EXPECT_EQ(encode_frame(h, big.data(), 10, out.data(), kHeaderSize + 9), 0u);  // no room
  h.flags = 0x0100;  // unknown flag
  EXPECT_EQ(encode_frame(h, big.data(), 10, out.data(), out.size()), 0u);
  h.flags = 0;
  h.type = MsgType(0);
  EXPECT_EQ(encode_frame(h, big.data(), 10, out.data(), out.size()), 0u);
  h.type = MsgType(200);
  EXPECT_EQ(encode_frame(h, big.data(), 10, out.data(), out.size()), 0u);
  h.type = MsgType::Run;  // RUN carries no payload
  EXPECT_EQ(encode_frame(h, big.data(), 1, out.data(), out.size()), 0u);
  EXPECT_EQ(encode_frame(h, nullptr, 0, out.data(), out.size()), kHeaderSize);
  h.type = MsgType::Hello;  // HELLO is exactly 20 bytes (36 with a nonce)
  EXPECT_EQ(encode_frame(h, big.data(), 19, out.data(), out.size()), 0u);
  EXPECT_TRUE(payload_len_ok(MsgType::Hello, 20));
  EXPECT_TRUE(payload_len_ok(MsgType::Hello, 36));
  EXPECT_FALSE(payload_len_ok(MsgType::Hello, 16));  // a board from before links and idle_ms
  EXPECT_FALSE(payload_len_ok(MsgType::Hello, 32));
}

TEST(Wire, EncodeAcceptsPayloadBuiltInPlace) {
  uint8_t out[kMaxFrame];
  for (int i = 0; i < 100; ++i) out[kHeaderSize + i] = uint8_t(i);
  FrameHeader h = make_header(MsgType::Output);
  ASSERT_EQ(encode_frame(h, out + kHeaderSize, 100, out, sizeof out), kHeaderSize + 100);
  FrameHeader d;
  const uint8_t* p;
  ASSERT_EQ(decode_frame(out, kHeaderSize + 100, &d, &p), WireError::Ok);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], uint8_t(i));
}

// ---------------------------------------------------------------------------
// FrameReader: reassembly
// ---------------------------------------------------------------------------

class Reassembly : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(3);
    for (int i = 0; i < 300; ++i) {
      MsgType t = kAllTypes[rng() % std::size(kAllTypes)];
      FrameHeader h = make_header(t, uint32_t(i + 1));
      h.offset = uint32_t(rng());
      Bytes payload = sample_payload(t, rng);
      Bytes f = encode(h, payload);
      stream.insert(stream.end(), f.begin(), f.end());
      sent.push_back({h, payload});
    }
  }

  void expect_same(const std::vector<Got>& got) {
    ASSERT_EQ(got.size(), sent.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].h.type, sent[i].h.type) << i;
      ASSERT_EQ(got[i].h.seq, sent[i].h.seq) << i;
      ASSERT_EQ(got[i].h.offset, sent[i].h.offset) << i;
      ASSERT_EQ(got[i].payload, sent[i].payload) << i;
    }
  }

  Bytes stream;
  std::vector<Got> sent;
};

TEST_F(Reassembly, OneByteAtATime) {
  expect_same(read_all(stream, [] { return size_t(1); }));
}

TEST_F(Reassembly, RandomSplits) {
  for (uint32_t seed = 0; seed < 5; ++seed) {
    std::mt19937 rng(seed);
    expect_same(read_all(stream, [&] { return size_t(1 + rng() % 3000); }));
  }
}

TEST_F(Reassembly, AllFramesInOneChunk) {
  expect_same(read_all(stream, [&] { return stream.size(); }));
}

TEST_F(Reassembly, SplitsAtEveryHeaderBoundary) {
  // Chunk sizes around the header size exercise the header/payload switch.
  for (size_t c : {kHeaderSize - 1, kHeaderSize, kHeaderSize + 1, kMaxFrame, kMaxFrame + 1}) {
    expect_same(read_all(stream, [c] { return c; }));
  }
}

TEST(FrameReader, FeedConsumesAtMostOneFrame) {
  Bytes a = encode(make_header(MsgType::Input, 1), Bytes(10, 1));
  Bytes b = encode(make_header(MsgType::Run, 2), {});
  Bytes both = a;
  both.insert(both.end(), b.begin(), b.end());
  FrameReader r;
  auto res = r.feed(both.data(), both.size());
  EXPECT_EQ(res.status, FrameReader::Status::Frame);
  EXPECT_EQ(res.consumed, a.size());
  EXPECT_EQ(r.header().seq, 1u);
  res = r.feed(both.data() + a.size(), both.size() - a.size());
  EXPECT_EQ(res.status, FrameReader::Status::Frame);
  EXPECT_EQ(res.consumed, b.size());
  EXPECT_EQ(r.header().type, MsgType::Run);
  EXPECT_TRUE(r.idle());
  res = r.feed(nullptr, 0);
  EXPECT_EQ(res.status, FrameReader::Status::NeedMore);
  EXPECT_EQ(r.frames_ok(), 2u);
}

// ---------------------------------------------------------------------------
// FrameReader: corruption and rejection
// ---------------------------------------------------------------------------

TEST(FrameReader, EveryFlippedBitIsDetected) {
  std::mt19937 rng(5);
  Bytes payload(200);
  for (auto& b : payload) b = uint8_t(rng());
  const Bytes good = encode(make_header(MsgType::Input, 9), payload);
  // A max-size valid frame after the corrupt one, so a length that grew has
  // bytes to read and the check is not hidden behind "need more".
  const Bytes next = encode(make_header(MsgType::Output, 10), Bytes(kMaxPayload, 0x55));
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    Bytes f = good;
    f[bit / 8] ^= uint8_t(1u << (bit % 8));
    f.insert(f.end(), next.begin(), next.end());
    FrameReader r;
    ASSERT_EQ(feed_until_event(r, f), FrameReader::Status::Error) << "bit " << bit;
    ASSERT_EQ(r.frames_ok(), 0u);
    size_t byte = bit / 8;
    WireError want = byte < 2 ? WireError::BadMagic : WireError::BadCrc;
    // Length 200 with bit 11..15 set exceeds kMaxPayload and is caught at the
    // header; any other length change (e.g. bit 10: 1224) makes the reader
    // take too few or too many bytes, which the CRC catches. Flips in type,
    // version, flags or reserved report BadCrc, not a semantic error, because
    // the CRC is checked first.
    if (byte == kOffPayloadLen + 1 && (bit % 8) >= 3) want = WireError::BadLength;
    EXPECT_EQ(r.error(), want) << "bit " << bit;
  }
}

TEST(FrameReader, TruncatedFrame) {
  Bytes f = encode(make_header(MsgType::Store, 1), Bytes(100, 9));
  Bytes cut(f.begin(), f.end() - 1);
  FrameReader r;
  auto res = r.feed(cut.data(), cut.size());
  EXPECT_EQ(res.status, FrameReader::Status::NeedMore);
  EXPECT_EQ(res.consumed, cut.size());
  EXPECT_FALSE(r.idle());  // the stream must not end here
  EXPECT_EQ(r.buffered(), cut.size());

  FrameHeader h;
  const uint8_t* p;
  EXPECT_EQ(decode_frame(cut.data(), cut.size(), &h, &p), WireError::Truncated);
  EXPECT_EQ(decode_header(cut.data(), kHeaderSize - 1, &h), WireError::Truncated);

  // A truncated frame followed by the next frame: the next frame's bytes are
  // taken as the rest of the payload, and the CRC catches it.
  Bytes g = encode(make_header(MsgType::Store, 2), Bytes(100, 9));
  FrameReader r2;
  Bytes s = cut;
  s.insert(s.end(), g.begin(), g.end());
  EXPECT_EQ(feed_until_event(r2, s), FrameReader::Status::Error);
  EXPECT_EQ(r2.error(), WireError::BadCrc);
}

TEST(FrameReader, OversizeLengthRejectedAtHeader) {
  Bytes f = encode(make_header(MsgType::Input, 1), Bytes(10, 1));
  put_u16(f.data() + kOffPayloadLen, uint16_t(kMaxPayload + 1));
  fix_crc(f);
  FrameReader r;
  auto res = r.feed(f.data(), f.size());
  EXPECT_EQ(res.status, FrameReader::Status::Error);
  EXPECT_EQ(res.consumed, kHeaderSize);  // decided without waiting for a payload
  EXPECT_EQ(r.error(), WireError::BadLength);
  EXPECT_EQ(r.error_count(WireError::BadLength), 1u);
  FrameHeader h;
  EXPECT_EQ(decode_header(f.data(), f.size(), &h), WireError::BadLength);
}

TEST(FrameReader, UnknownTypeRejectedAndCounted) {
  FrameReader r;
  for (uint8_t raw : {uint8_t(0), uint8_t(19), uint8_t(200), uint8_t(255)}) {
    Bytes f = encode(make_header(MsgType::Probe, 1), Bytes(4, 1));
    f[kOffType] = raw;
    fix_crc(f);
    FrameHeader h;
    EXPECT_EQ(decode_header(f.data(), f.size(), &h), WireError::UnknownType);
    r.reset();
    EXPECT_EQ(feed_until_event(r, f), FrameReader::Status::Error);
    EXPECT_EQ(r.error(), WireError::UnknownType);
  }
  EXPECT_EQ(r.error_count(WireError::UnknownType), 4u);
  EXPECT_EQ(r.total_errors(), 4u);
  EXPECT_FALSE(is_known_type(0));
  EXPECT_FALSE(is_known_type(19));
  for (MsgType t : kAllTypes) EXPECT_TRUE(is_known_type(uint8_t(t)));
}

TEST(FrameReader, IntactButIllegalHeadersRejected) {
  struct Case {
    const char* what;
    void (*edit)(Bytes&);
    WireError want;
  } cases[] = {
      {"version", [](Bytes& f) { f[kOffVersion] = 2; }, WireError::BadVersion},
      {"reserved", [](Bytes& f) { put_u16(f.data() + kOffReserved, 1); }, WireError::BadHeader},
      {"flags", [](Bytes& f) { put_u16(f.data() + kOffFlags, 0x8000); }, WireError::BadHeader},
      {"hello size",
       [](Bytes& f) {
         f[kOffType] = uint8_t(MsgType::Hello);  // 4-byte payload, HELLO needs 20
       },
       WireError::BadPayload},
      {"magic", [](Bytes& f) { f[0] = 'X'; }, WireError::BadMagic},
  };
  for (const Case& c : cases) {
    Bytes f = encode(make_header(MsgType::Probe, 1), Bytes(4, 1));
    c.edit(f);
    fix_crc(f);
    FrameReader r;
    EXPECT_EQ(feed_until_event(r, f), FrameReader::Status::Error) << c.what;
    EXPECT_EQ(r.error(), c.want) << c.what;
    EXPECT_EQ(r.error_count(c.want), 1u) << c.what;
  }
}

TEST(FrameReader, FailureIsStickyUntilReset) {
  Bytes bad = encode(make_header(MsgType::Probe, 1), Bytes(4, 1));
  bad[kHeaderSize] ^= 1;  // payload corruption
  Bytes good = encode(make_header(MsgType::Probe, 2), Bytes(4, 1));
  FrameReader r;
  EXPECT_EQ(feed_until_event(r, bad), FrameReader::Status::Error);
  EXPECT_TRUE(r.failed());
  // No resynchronisation: a valid frame after a bad one is not accepted.
  auto res = r.feed(good.data(), good.size());
  EXPECT_EQ(res.status, FrameReader::Status::Error);
  EXPECT_EQ(res.consumed, 0u);
  EXPECT_EQ(r.error_count(WireError::BadCrc), 1u);  // counted once
  // A new stream (reconnect) starts clean; counters survive.
  r.reset();
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(feed_until_event(r, good), FrameReader::Status::Frame);
  EXPECT_EQ(r.error_count(WireError::BadCrc), 1u);
  r.clear_counters();
  EXPECT_EQ(r.total_errors(), 0u);
  EXPECT_EQ(r.frames_ok(), 0u);
}

// ---------------------------------------------------------------------------
// SendWindow and AckTracker
// ---------------------------------------------------------------------------

TEST(SendWindow, StopAndWait) {
  SendWindow w(1);
  EXPECT_EQ(w.window(), 1);
  EXPECT_TRUE(w.idle());
  uint32_t seq = 0;
  ASSERT_TRUE(w.take(0, &seq));
  EXPECT_EQ(seq, 1u);
  EXPECT_TRUE(w.full());
  EXPECT_FALSE(w.take(0, &seq));
  EXPECT_EQ(seq, 1u);  // unchanged on failure
  EXPECT_EQ(w.on_ack(1), AckResult::Advanced);
  EXPECT_TRUE(w.idle());
  EXPECT_EQ(w.on_ack(1), AckResult::Duplicate);
  EXPECT_EQ(w.duplicate_acks(), 1u);
  ASSERT_TRUE(w.take(0, &seq));
  EXPECT_EQ(seq, 2u);
  EXPECT_EQ(w.on_ack(3), AckResult::BeyondSent);  // 3 was never sent
  EXPECT_EQ(w.in_flight(), 1u);                     // error changed nothing
  EXPECT_EQ(w.on_ack(2), AckResult::Advanced);
  EXPECT_EQ(w.bad_acks(), 1u);
}

TEST(SendWindow, WindowOfEightCumulativeAcks) {
  SendWindow w(8);
  uint32_t seq = 0;
  for (uint32_t i = 1; i <= 8; ++i) {
    ASSERT_TRUE(w.take(0, &seq));
    EXPECT_EQ(seq, i);
  }
  EXPECT_TRUE(w.full());
  EXPECT_FALSE(w.take(0, &seq));
  EXPECT_EQ(w.on_ack(3), AckResult::Advanced);  // covers 1..3
  EXPECT_EQ(w.oldest_unacked(), 4u);
  EXPECT_EQ(w.in_flight(), 5u);
  for (uint32_t i = 9; i <= 11; ++i) {
    ASSERT_TRUE(w.take(0, &seq));
    EXPECT_EQ(seq, i);
  }
  EXPECT_TRUE(w.full());
  EXPECT_EQ(w.on_ack(3), AckResult::Duplicate);
  EXPECT_EQ(w.on_ack(12), AckResult::BeyondSent);
  EXPECT_EQ(w.on_ack(11), AckResult::Advanced);  // one ACK covers 8 frames
  EXPECT_TRUE(w.idle());
  EXPECT_EQ(w.next_seq(), 12u);
  EXPECT_EQ(w.on_ack(5), AckResult::Stale);  // ACKs went backwards
  EXPECT_EQ(w.bad_acks(), 2u);
}

TEST(SendWindow, SequenceWrapAround) {
  SendWindow w(4, 0xFFFFFFFEu);
  uint32_t s[4];
  for (auto& x : s) ASSERT_TRUE(w.take(0, &x));
  EXPECT_EQ(s[0], 0xFFFFFFFEu);
  EXPECT_EQ(s[1], 0xFFFFFFFFu);
  EXPECT_EQ(s[2], 0u);
  EXPECT_EQ(s[3], 1u);
  EXPECT_EQ(w.on_ack(2), AckResult::BeyondSent);
  EXPECT_EQ(w.on_ack(0), AckResult::Advanced);
  EXPECT_EQ(w.in_flight(), 1u);
  EXPECT_EQ(w.on_ack(0xFFFFFFFFu), AckResult::Stale);
  EXPECT_EQ(w.on_ack(1), AckResult::Advanced);
  EXPECT_TRUE(w.idle());
}

TEST(SendWindow, TimeoutsUseCallerTime) {
  SendWindow w(4);
  uint32_t seq;
  EXPECT_FALSE(w.timed_out(1000000, 1));  // nothing in flight
  ASSERT_TRUE(w.take(100, &seq));
  ASSERT_TRUE(w.take(180, &seq));
  EXPECT_EQ(w.oldest_age(150), 50u);
  EXPECT_FALSE(w.timed_out(199, 100));
  EXPECT_TRUE(w.timed_out(200, 100));
  w.on_ack(1);  // the oldest is now the frame sent at 180
  EXPECT_FALSE(w.timed_out(200, 100));
  EXPECT_TRUE(w.timed_out(280, 100));
  w.on_ack(2);
  EXPECT_FALSE(w.timed_out(100000, 100));
  // Millisecond counter wrap.
  ASSERT_TRUE(w.take(0xFFFFFFF0u, &seq));
  EXPECT_EQ(w.oldest_age(0x10), 0x20u);
  EXPECT_TRUE(w.timed_out(0x10, 0x20));
  EXPECT_FALSE(w.timed_out(0x10, 0x21));
}

TEST(SendWindow, WindowIsClamped) {
  EXPECT_EQ(SendWindow(0).window(), 1);
  EXPECT_EQ(SendWindow(kMaxWindow).window(), kMaxWindow);
  EXPECT_EQ(SendWindow(1000).window(), kMaxWindow);
  SendWindow w(1000);
  uint32_t seq;
  for (int i = 0; i < kMaxWindow; ++i) ASSERT_TRUE(w.take(uint32_t(i), &seq));
  EXPECT_FALSE(w.take(0, &seq));
}

TEST(AckTracker, AckEveryFrame) {
  AckTracker t(1);
  for (uint32_t s = 1; s <= 5; ++s) {
    EXPECT_EQ(t.on_frame(s, 0), SeqCheck::InOrder);
    EXPECT_TRUE(t.ack_due());
    EXPECT_EQ(t.ack_seq(), s);
    t.ack_sent();
    EXPECT_FALSE(t.ack_due());
  }
}

TEST(AckTracker, AckEveryKAndAtMessageEnd) {
  AckTracker t(4);
  EXPECT_EQ(t.ack_seq(), 0u);  // nothing received yet
  for (uint32_t s = 1; s <= 3; ++s) {
    t.on_frame(s, 0);
    EXPECT_FALSE(t.ack_due()) << s;
  }
  t.on_frame(4, 0);
  EXPECT_TRUE(t.ack_due());
  EXPECT_EQ(t.ack_seq(), 4u);
  t.ack_sent();
  t.on_frame(5, kFlagLast);  // end of message: ACK now
  EXPECT_TRUE(t.ack_due());
  EXPECT_EQ(t.ack_seq(), 5u);
  t.ack_sent();
  t.on_frame(6, kFlagAckReq);  // sender's window is full: ACK now
  EXPECT_TRUE(t.ack_due());
  t.ack_sent();
  t.on_frame(7, 0);
  EXPECT_FALSE(t.ack_due());
}

TEST(AckTracker, DuplicateAndGapAreReportedAndIgnored) {
  AckTracker t(1);
  EXPECT_EQ(t.on_frame(1, 0), SeqCheck::InOrder);
  EXPECT_EQ(t.on_frame(2, 0), SeqCheck::InOrder);
  t.ack_sent();
  EXPECT_EQ(t.on_frame(2, 0), SeqCheck::Duplicate);
  EXPECT_EQ(t.on_frame(1, 0), SeqCheck::Duplicate);
  EXPECT_EQ(t.on_frame(4, 0), SeqCheck::Gap);
  EXPECT_EQ(t.on_frame(0x80000000u, 0), SeqCheck::Gap);
  EXPECT_FALSE(t.ack_due());  // rejected frames never trigger an ACK
  EXPECT_EQ(t.expected_seq(), 3u);
  EXPECT_EQ(t.duplicates(), 2u);
  EXPECT_EQ(t.gaps(), 2u);
  EXPECT_EQ(t.on_frame(3, 0), SeqCheck::InOrder);

  AckTracker w(1, 0xFFFFFFFFu);  // wrap
  EXPECT_EQ(w.on_frame(0xFFFFFFFFu, 0), SeqCheck::InOrder);
  EXPECT_EQ(w.on_frame(0, 0), SeqCheck::InOrder);
  EXPECT_EQ(w.ack_seq(), 0u);
  EXPECT_EQ(w.on_frame(0xFFFFFFFFu, 0), SeqCheck::Duplicate);
}

// Sender and receiver wired back to back through encoded frames: any ack
// period works with any window because the sender asks for an ACK when its
// window fills; ends with everything acknowledged, in order.
TEST(AckTracker, WindowAndTrackerNeverDeadlock) {
  for (uint16_t window : {1, 3, 8, 64}) {
    for (uint16_t every : {1, 2, 5, 100}) {
      SendWindow snd(window);
      AckTracker rcv(every);
      FrameReader at_board, at_host;
      const int kFrames = 200;
      int sent = 0, acks = 0, steps = 0;
      uint8_t buf[kMaxFrame];
      while (!(sent == kFrames && snd.idle())) {
        ASSERT_LT(++steps, 10000) << "deadlock W=" << window << " k=" << every;
        // Coordinator sends while the window allows.
        while (sent < kFrames && snd.can_send()) {
          FrameHeader h = make_header(MsgType::Input);
          h.flags = sent == kFrames - 1 ? kFlagLast : 0;
          ASSERT_TRUE(snd.take(uint32_t(steps), &h.seq));
          if (snd.full()) h.flags |= kFlagAckReq;
          size_t n = encode_frame(h, buf, 1, buf, sizeof buf);
          ASSERT_EQ(at_board.feed(buf, n).status, FrameReader::Status::Frame);
          ASSERT_EQ(rcv.on_frame(at_board.header().seq, at_board.header().flags), SeqCheck::InOrder);
          ++sent;
          if (rcv.ack_due()) {  // board answers with a cumulative ACK
            FrameHeader a = make_header(MsgType::Ack, 0);
            a.flags = 0;
            uint8_t pl[AckPayload::kSize];
            AckPayload{rcv.ack_seq()}.encode(pl, sizeof pl);
            uint8_t abuf[kMaxFrame];
            size_t an = encode_frame(a, pl, sizeof pl, abuf, sizeof abuf);
            ASSERT_EQ(at_host.feed(abuf, an).status, FrameReader::Status::Frame);
            AckPayload got;
            ASSERT_TRUE(got.decode(at_host.payload(), at_host.header().payload_len));
            ASSERT_EQ(snd.on_ack(got.ack_seq), AckResult::Advanced);
            rcv.ack_sent();
            ++acks;
          }
        }
      }
      EXPECT_EQ(snd.next_seq(), uint32_t(kFrames + 1));
      EXPECT_EQ(rcv.ack_seq(), uint32_t(kFrames));
      if (every == 1) {
        EXPECT_EQ(acks, kFrames);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Packetiser and Assembler
// ---------------------------------------------------------------------------

TEST(Packetiser, SplitsIntoCeilFramesAndReassemblesExactly) {
  std::mt19937 rng(6);
  for (size_t n : {size_t(1), size_t(100), kMaxPayload - 1, kMaxPayload, kMaxPayload + 1,
                   size_t(5000), size_t(112 * 112 * 3)}) {
    SCOPED_TRACE(n);
    Bytes data(n);
    for (auto& b : data) b = uint8_t(rng());
    const uint32_t base = 4096;
    FrameHeader tmpl = make_header(MsgType::Input);
    tmpl.flags = 0;
    Packetiser pk(tmpl, data.data(), n, base);
    ASSERT_TRUE(pk.valid());
    const size_t want_frames = (n + kMaxPayload - 1) / kMaxPayload;
    EXPECT_EQ(pk.frame_count(), want_frames);
    EXPECT_EQ(frames_needed(n), want_frames);

    // Full path: packetise, encode, stream through a reader, assemble.
    Bytes dst(n, 0);
    Assembler as(dst.data(), dst.size(), base);
    FrameReader reader;
    FrameHeader h;
    const uint8_t* p;
    size_t frames = 0;
    uint8_t out[kMaxFrame];
    while (pk.next(&h, &p)) {
      h.seq = uint32_t(++frames);
      EXPECT_EQ(h.offset, base + (frames - 1) * kMaxPayload);
      EXPECT_EQ((h.flags & kFlagLast) != 0, frames == want_frames);
      size_t len = encode_frame(h, p, h.payload_len, out, sizeof out);
      ASSERT_GT(len, 0u);
      ASSERT_LE(len, kMaxFrame);
      ASSERT_EQ(reader.feed(out, len).status, FrameReader::Status::Frame);
      ASSERT_EQ(as.place(reader.header(), reader.payload()), PlaceResult::Ok);
    }
    EXPECT_TRUE(pk.done());
    EXPECT_EQ(frames, want_frames);
    EXPECT_EQ(as.bytes_placed(), n);
    EXPECT_EQ(as.messages_done(), 1u);
    EXPECT_FALSE(as.in_message());
    EXPECT_EQ(dst, data);
  }
}

TEST(Packetiser, EmptyMessageIsOneFrame) {
  FrameHeader tmpl = make_header(MsgType::Output);
  tmpl.flags = 0;
  Packetiser pk(tmpl, nullptr, 0, 77);
  EXPECT_EQ(pk.frame_count(), 1u);
  FrameHeader h;
  const uint8_t* p;
  ASSERT_TRUE(pk.next(&h, &p));
  EXPECT_EQ(h.payload_len, 0);
  EXPECT_EQ(h.offset, 77u);
  EXPECT_EQ(h.flags, kFlagLast);
  EXPECT_FALSE(pk.next(&h, &p));
}

TEST(Packetiser, SmallMaxPayloadAndTemplateFlags) {
  Bytes data(50);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
  FrameHeader tmpl = make_header(MsgType::Store);
  tmpl.flags = kFlagAckReq | kFlagLast;  // Last in the template is not copied to every frame
  Packetiser pk(tmpl, data.data(), data.size(), 0, 7);
  EXPECT_EQ(pk.frame_count(), 8u);  // ceil(50 / 7)
  FrameHeader h;
  const uint8_t* p;
  size_t count = 0, total = 0;
  while (pk.next(&h, &p)) {
    ++count;
    EXPECT_EQ(h.type, MsgType::Store);
    EXPECT_EQ(h.layer, tmpl.layer);
    EXPECT_TRUE(h.flags & kFlagAckReq);
    EXPECT_EQ((h.flags & kFlagLast) != 0, count == 8);
    EXPECT_EQ(h.payload_len, count < 8 ? 7 : 1);
    EXPECT_EQ(p[0], uint8_t(h.offset));
    total += h.payload_len;
  }
  EXPECT_EQ(total, 50u);
  EXPECT_EQ(frames_needed(50, 7), 8u);
  EXPECT_EQ(frames_needed(49, 7), 7u);
}

TEST(Packetiser, RejectsOffsetsBeyond32Bits) {
  Bytes data(0x200);
  FrameHeader tmpl = make_header(MsgType::Input);
  Packetiser bad(tmpl, data.data(), data.size(), 0xFFFFFF00u);
  EXPECT_FALSE(bad.valid());
  FrameHeader h;
  const uint8_t* p;
  EXPECT_FALSE(bad.next(&h, &p));
  Packetiser edge(tmpl, data.data(), 0x100, 0xFFFFFF00u);  // ends exactly at 2^32
  EXPECT_TRUE(edge.valid());
}

TEST(Assembler, RejectsOutOfBoundsWithoutWriting) {
  Bytes dst(100, 0xEE);
  Assembler as(dst.data(), dst.size(), 1000);
  Bytes chunk(20, 1);
  EXPECT_EQ(as.place(999, chunk.data(), 1, true), PlaceResult::OutOfBounds);     // before
  EXPECT_EQ(as.place(1090, chunk.data(), 11, true), PlaceResult::OutOfBounds);   // past end
  EXPECT_EQ(as.place(1100, chunk.data(), 1, true), PlaceResult::OutOfBounds);    // at end
  EXPECT_EQ(as.place(0xFFFFFFF0u, chunk.data(), 20, true), PlaceResult::OutOfBounds);  // wraps
  EXPECT_EQ(as.place(0, chunk.data(), 20, true), PlaceResult::OutOfBounds);
  EXPECT_EQ(dst, Bytes(100, 0xEE));
  EXPECT_EQ(as.bytes_placed(), 0u);
  EXPECT_EQ(as.place(1090, chunk.data(), 10, true), PlaceResult::Ok);  // exactly fits
  EXPECT_EQ(as.place(1100, chunk.data(), 0, true), PlaceResult::Ok);   // empty at end
  EXPECT_EQ(dst[89], 0xEE);
  EXPECT_EQ(dst[90], 1);
  EXPECT_EQ(dst[99], 1);

  // Through a decoded frame header too.
  FrameHeader h = make_header(MsgType::Input);
  h.offset = 1095;
  h.payload_len = 6;
  EXPECT_EQ(as.place(h, chunk.data()), PlaceResult::OutOfBounds);
}

TEST(Assembler, DetectsGapsAndOverlapsWithinAMessage) {
  Bytes dst(100, 0);
  Assembler as(dst.data(), dst.size(), 0);
  Bytes chunk(10, 2);
  EXPECT_EQ(as.place(10, chunk.data(), 10, false), PlaceResult::Ok);
  EXPECT_TRUE(as.in_message());
  EXPECT_EQ(as.place(30, chunk.data(), 10, false), PlaceResult::NotContiguous);  // gap
  EXPECT_EQ(as.place(15, chunk.data(), 10, false), PlaceResult::NotContiguous);  // overlap
  EXPECT_EQ(as.place(20, chunk.data(), 10, true), PlaceResult::Ok);
  EXPECT_FALSE(as.in_message());
  // A second message may start anywhere (a separate run of the same tensor).
  EXPECT_EQ(as.place(70, chunk.data(), 10, true), PlaceResult::Ok);
  EXPECT_EQ(as.messages_done(), 2u);
  EXPECT_EQ(as.bytes_placed(), 30u);
  EXPECT_EQ(dst[9], 0);
  EXPECT_EQ(dst[10], 2);
  EXPECT_EQ(dst[29], 2);
  EXPECT_EQ(dst[30], 0);
  EXPECT_EQ(dst[70], 2);
}

}  // namespace

namespace {

// INPUTS blocks: encode and decode side by side, and every malformed block
// refused (by the block decoder and by the frame reader, as BadPayload).
TEST(InputBlocks, RoundTripAndRefusals) {
  using namespace ts::wire;
  uint8_t buf[64] = {};
  InputBlock b;
  b.first = 1000; b.len = 4; b.count = 3; b.stride = 50;
  ASSERT_EQ(encode_input_block_header(b, buf, sizeof buf), kInputBlockHeader);
  for (int i = 0; i < 12; ++i) buf[kInputBlockHeader + i] = uint8_t(i + 1);
  size_t pos = 0;
  InputBlock g;
  ASSERT_TRUE(next_input_block(buf, kInputBlockHeader + 12, &pos, &g));
  EXPECT_EQ(g.first, 1000u);
  EXPECT_EQ(g.len, 4);
  EXPECT_EQ(g.count, 3);
  EXPECT_EQ(g.stride, 50u);
  EXPECT_EQ(g.data, buf + kInputBlockHeader);
  EXPECT_EQ(pos, kInputBlockHeader + 12);
  EXPECT_FALSE(next_input_block(buf, kInputBlockHeader + 12, &pos, &g));  // end
  EXPECT_TRUE(input_blocks_ok(buf, kInputBlockHeader + 12));
  EXPECT_FALSE(input_blocks_ok(buf, kInputBlockHeader + 11));  // data cut short
  EXPECT_FALSE(input_blocks_ok(buf, kInputBlockHeader + 13));  // a stray byte after the block
  EXPECT_FALSE(input_blocks_ok(buf, 0));                        // no block at all
  // Invalid headers are not encoded.
  InputBlock bad = b;
  bad.len = 0;
  EXPECT_EQ(encode_input_block_header(bad, buf, sizeof buf), 0u);
  bad = b;
  bad.stride = 3;  // segments would overlap
  EXPECT_EQ(encode_input_block_header(bad, buf, sizeof buf), 0u);
  bad = b;
  bad.count = 1;  // one segment carries no stride
  EXPECT_EQ(encode_input_block_header(bad, buf, sizeof buf), 0u);
  bad = b;
  bad.first = (1u << kOperandShift) - 10;  // past the element range
  EXPECT_EQ(encode_input_block_header(bad, buf, sizeof buf), 0u);
  EXPECT_EQ(encode_input_block_header(b, buf, kInputBlockHeader - 1), 0u);
  // A frame whose blocks do not add up is BadPayload at the reader.
  FrameHeader h;
  h.type = MsgType::Inputs;
  h.src = 1;
  h.dst = 2;
  h.seq = 1;
  h.flags = kFlagLast;
  uint8_t frame[kMaxFrame];
  ASSERT_EQ(encode_input_block_header(b, buf, sizeof buf), kInputBlockHeader);
  const size_t n = encode_frame(h, buf, kInputBlockHeader + 12, frame, sizeof frame);
  ASSERT_GT(n, 0u);
  FrameHeader out;
  const uint8_t* pl = nullptr;
  EXPECT_EQ(decode_frame(frame, n, &out, &pl), WireError::Ok);
  // count 4: the data is 4 bytes short. The encoder refuses it; patched
  // into an encoded frame (CRC fixed) the reader refuses it.
  buf[6] = 4;
  EXPECT_EQ(encode_frame(h, buf, kInputBlockHeader + 12, frame, sizeof frame), 0u);
  Bytes f(frame, frame + n);
  f[kHeaderSize + 6] = 4;
  fix_crc(f);
  EXPECT_EQ(decode_frame(f.data(), f.size(), &out, &pl), WireError::BadPayload);
}

TEST(WirePatch, OpsDecodeAndMalformedPayloadsAreRefused) {
  std::vector<uint8_t> p(kPatchBaseBytes, 1);
  uint8_t op[kPatchOpHeader];
  PatchOp lit;
  lit.len = 3;
  ASSERT_EQ(encode_patch_op(lit, op, sizeof op), kPatchOpHeader);
  p.insert(p.end(), op, op + sizeof op);
  p.insert(p.end(), {7, 8, 9});
  PatchOp cp;
  cp.copy = true;
  cp.from = 0xFFFFFFF0u;  // bounds against the base are the board's to check
  cp.len = 0x7FFFFFFFu;
  ASSERT_EQ(encode_patch_op(cp, op, sizeof op), kPatchOpHeader);
  p.insert(p.end(), op, op + sizeof op);
  EXPECT_TRUE(patch_ops_ok(p.data(), p.size()));
  size_t pos = kPatchBaseBytes;
  PatchOp got;
  ASSERT_TRUE(next_patch_op(p.data(), p.size(), &pos, &got));
  EXPECT_FALSE(got.copy);
  EXPECT_EQ(got.len, 3u);
  EXPECT_EQ(got.data[2], 9);
  ASSERT_TRUE(next_patch_op(p.data(), p.size(), &pos, &got));
  EXPECT_TRUE(got.copy);
  EXPECT_EQ(got.from, 0xFFFFFFF0u);
  EXPECT_EQ(pos, p.size());
  EXPECT_FALSE(patch_ops_ok(p.data(), p.size() - 1));          // an op cut short
  EXPECT_FALSE(patch_ops_ok(p.data(), kPatchBaseBytes));       // no op
  auto bad = p;
  put_u32(bad.data() + kPatchBaseBytes, 0);                    // a zero-length op
  EXPECT_FALSE(patch_ops_ok(bad.data(), bad.size()));
  bad = p;
  put_u32(bad.data() + kPatchBaseBytes + 4, 5);                // new bytes with a source
  EXPECT_FALSE(patch_ops_ok(bad.data(), bad.size()));
  PatchOp zero;
  EXPECT_EQ(encode_patch_op(zero, op, sizeof op), 0u);
  // Whole frames: refused on decode and on encode alike.
  FrameHeader h;
  h.type = MsgType::Patch;
  h.seq = 1;
  uint8_t frame[kMaxFrameBuf];
  EXPECT_GT(encode_frame(h, p.data(), p.size(), frame, sizeof frame), 0u);
  EXPECT_EQ(encode_frame(h, p.data(), p.size() - 1, frame, sizeof frame), 0u);
}

}  // namespace
