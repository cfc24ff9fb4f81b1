// Test support: the portable board worker driven directly, frame by frame,
// with no sockets (tests/worker_test.cpp, tests/worker_resume_test.cpp): a
// port and a flash in memory, a small real model planned for two boards,
// and a Driver that plays the coordinator's side of one link.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "core/auth.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "core/worker.h"
#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/qgraph.h"
#include "model/quantize.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "mem_flash.h"
#include "tiny_qgraph.h"

namespace ts::testing::worker_driver {

using namespace ts;
using wire::MsgType;
using ts::testing::MemFlash;

using namespace ts;
using wire::MsgType;

class MemPort final : public core::Port {
 public:
  std::vector<uint8_t> sent;
  std::vector<uint8_t> other;  // what went to links other than 0 (peer boards)
  bool send(const uint8_t* d, size_t n) override {
    sent.insert(sent.end(), d, d + n);
    return true;
  }
  bool send(int link, const uint8_t* d, size_t n) override {
    if (link == 0) return send(d, n);
    other.insert(other.end(), d, d + n);
    return true;
  }
  uint32_t now_us() override { return t_ += 10; }

 private:
  uint32_t t_ = 0;
};


// A small real model, quantised and planned for two boards.
struct Fixture {
  QGraph q;
  plan::Plan p;
  std::vector<std::vector<int8_t>> ref;  // every tensor of the reference run
  std::vector<std::vector<uint8_t>> frags;
};

inline const Fixture& fixture() {
  static Fixture f = [] {
    Fixture x;
    std::vector<std::vector<float>> inputs;
    x.q = tiny_qgraph(4, 7, &inputs);
    x.p = plan::make_plan(x.q, plan::default_testbed(2));
    x.ref = run_int8_all(x.q, quantize_input(x.q, inputs[0]));
    for (int w = 0; w < 2; ++w) x.frags.push_back(plan::write_fragment(x.q, x.p, w));
    return x;
  }();
  return f;
}

// Plays the coordinator's side of one link.
struct Driver {
  MemPort port;
  MemFlash flash{8u << 20};
  std::vector<uint8_t> arena = std::vector<uint8_t>(512 * 1024);
  core::Worker w;
  uint32_t seq = 1;
  uint32_t deployment = 0;
  wire::FrameReader reader;
  std::vector<std::pair<wire::FrameHeader, std::vector<uint8_t>>> got;  // frames from the board
  // Authenticated sessions (core/auth.h): the coordinator's ends, and every
  // byte it sent (for replays).
  ts::auth::FrameMac tx, rx;
  std::vector<uint8_t> sent_log;
  uint32_t bad_tags = 0;  // board frames whose tag did not verify

  explicit Driver(uint16_t window = 8, const uint8_t* key = nullptr) {
    core::WorkerConfig cfg;
    cfg.window = window;
    if (key) {
      cfg.has_key = true;
      std::memcpy(cfg.key, key, sizeof cfg.key);
    }
    EXPECT_TRUE(w.init(cfg, arena.data(), uint32_t(arena.size()), &flash, &port));
    EXPECT_TRUE(w.on_connect());
    collect();
  }
  // A new connection to the same board (after the last one closed).
  void reconnect() {
    reader.reset();
    got.clear();
    tx.stop();
    rx.stop();
    seq = 1;
    sent_log.clear();
    EXPECT_TRUE(w.on_connect());
    collect();
  }
  // The board's HELLO payload on this connection.
  std::vector<uint8_t> hello() const {
    for (auto& f : got)
      if (f.first.type == MsgType::Hello) return f.second;
    return {};
  }
  // Starts a session keyed with `key` and sends AUTH; returns on_bytes' word.
  bool authenticate(const uint8_t* key, uint8_t nonce_byte = 1) {
    const std::vector<uint8_t> h = hello();
    EXPECT_EQ(h.size(), wire::HelloPayload::kAuthSize);
    wire::AuthPayload a;
    for (auto& b : a.nonce) b = nonce_byte;
    ts::auth::SessionKeys k;
    ts::auth::derive_session(key, a.nonce, h.data(), h.size(), &k);
    tx.start(k.c2b);
    rx.start(k.b2c);
    uint8_t buf[wire::AuthPayload::kSize];
    a.encode(buf, sizeof buf);
    return raw(MsgType::Auth, 0, 0, buf, sizeof buf, wire::kFlagLast);
  }
  // Feeds bytes as received from the coordinator.
  bool feed(const std::vector<uint8_t>& bytes) {
    const bool ok = w.on_bytes(bytes.data(), bytes.size());
    collect();
    return ok;
  }
  size_t encode(wire::FrameHeader& h, const uint8_t* p, size_t n, uint8_t* out, size_t cap) {
    if (tx.active()) h.flags = uint16_t(h.flags | wire::kFlagMac);
    const size_t len = wire::encode_frame(h, p, n, out, cap);
    if (len && tx.active()) tx.seal(out, len - wire::kTagSize, out + len - wire::kTagSize);
    if (len) sent_log.insert(sent_log.end(), out, out + len);
    return len;
  }
  // Decodes everything the board sent; ACKs it, which may release more of
  // its window, until the board has nothing more to say.
  void collect() {
    while (!port.sent.empty()) {
      const std::vector<uint8_t> bytes = std::move(port.sent);
      port.sent.clear();
      size_t pos = 0;
      uint32_t last_seq = 0;
      while (pos < bytes.size()) {
        const auto r = reader.feed(bytes.data() + pos, bytes.size() - pos);
        pos += r.consumed;
        ASSERT_NE(r.status, wire::FrameReader::Status::Error) << "the board sent a malformed frame";
        if (r.status != wire::FrameReader::Status::Frame) break;
        const auto& h = reader.header();
        if (rx.active() && !((h.flags & wire::kFlagMac) && rx.check(reader.frame(), reader.frame_len()))) ++bad_tags;
        got.emplace_back(h, std::vector<uint8_t>(reader.payload(), reader.payload() + h.payload_len));
        if (h.type != MsgType::Ack && h.type != MsgType::Error) last_seq = h.seq;
      }
      if (!last_seq) break;
      wire::AckPayload a;
      a.ack_seq = last_seq;
      uint8_t buf[4];
      a.encode(buf, 4);
      wire::FrameHeader h;
      h.type = MsgType::Ack;
      h.src = wire::kCoordinatorId;
      uint8_t frame[64];
      const size_t len = encode(h, buf, 4, frame, sizeof frame);
      if (!w.on_bytes(frame, len)) break;
    }
  }
  // Sends one frame; returns what the worker's on_bytes said.
  bool raw(MsgType t, uint16_t layer, uint32_t offset, const uint8_t* p, size_t n, uint16_t flags,
           bool sequenced = true) {
    wire::FrameHeader h;
    h.type = t;
    h.src = wire::kCoordinatorId;
    h.deployment = deployment;
    h.layer = layer;
    h.offset = offset;
    h.flags = flags;
    h.seq = sequenced ? seq++ : 0;
    uint8_t buf[wire::kMaxFrameBuf];
    const size_t len = encode(h, p, n, buf, sizeof buf);
    EXPECT_GT(len, 0u);
    const bool ok = w.on_bytes(buf, len);
    collect();
    return ok;
  }
  bool message(MsgType t, uint16_t layer, uint32_t offset, const uint8_t* p, size_t n) {
    size_t pos = 0;
    do {
      const size_t k = std::min(n - pos, wire::kMaxPayload);
      if (!raw(t, layer, offset + uint32_t(pos), p + pos, k, pos + k == n ? wire::kFlagLast : 0)) return false;
      pos += k;
    } while (pos < n);
    return true;
  }
  // COMMIT of `frag` (size, CRC, SHA-256) under the current deployment id.
  bool commit(const std::vector<uint8_t>& frag) {
    wire::CommitPayload c;
    c.fragment_size = uint32_t(frag.size());
    c.fragment_crc = ts::crc32(frag.data(), frag.size());
    ts::sha256(frag.data(), frag.size(), c.digest);
    uint8_t buf[wire::CommitPayload::kSize];
    c.encode(buf, sizeof buf);
    return raw(MsgType::Commit, 0, 0, buf, sizeof buf, wire::kFlagLast);
  }
  bool deploy(const std::vector<uint8_t>& frag, uint32_t plan_id = fixture().p.plan_id) {
    deployment = plan_id;
    if (!message(MsgType::Store, 0, 0, frag.data(), frag.size())) return false;
    return commit(frag);
  }
  bool saw(MsgType t) const {
    for (auto& f : got)
      if (f.first.type == t) return true;
    return false;
  }
  std::string last_error() const {
    for (auto it = got.rbegin(); it != got.rend(); ++it)
      if (it->first.type == MsgType::Error) {
        wire::ErrorPayload e;
        if (e.decode(it->second.data(), it->second.size())) return e.text;
      }
    return {};
  }
};

// Sends board w's inputs of layer n from the reference tensors.
inline bool send_inputs(Driver& d, int w, int n) {
  const auto& f = fixture();
  const auto& s = f.p.workers[w].layers[n];
  for (size_t k = 0; k < s.inputs.size(); ++k)
    for (const auto& r : s.inputs[k].runs)
      if (!d.message(MsgType::Input, uint16_t(n), core::input_offset(uint32_t(k), r.offset),
                     reinterpret_cast<const uint8_t*>(f.ref[s.inputs[k].tensor].data()) + r.offset, r.count))
        return false;
  return true;
}

}  // namespace ts::testing::worker_driver
