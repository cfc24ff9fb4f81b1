// Fuzz target: the board worker (src/core/worker.*) fed whole frame sequences.
//
// A Worker is set up with an in-memory flash that already holds a real
// fragment (board 0 of the tiny model planned for two boards, see
// tiny_model.h) and a Port that parses everything the board sends. The input
// is a list of records, each turned into frames with valid CRCs and sequence
// numbers so the fuzzer reaches deep states:
//   0xFF len bytes...            raw bytes, fed as they are
//   0xFE L                       every INPUT run of layer L (mod layers),
//                                with the reference run's activations
//   other: type flags layer(2) offset(4) len(2) payload...
//     type = byte % kLastMsgType + 1 (every type); flags bit0 LAST, bit1 ACK_REQ, bit2 wrong
//     seq, bit3 wrong deployment, bit4 reconnect first, bit5 a wrong tag
// An input whose first byte is 0xFD runs an authenticated board (it holds a
// key, core/auth.h): on every connection the harness answers HELLO with
// AUTH and tags every frame (a bit5 record gets a damaged tag), and checks
// the tag of every frame the board sends after AUTH.
// Checked: every byte the board sends is a valid frame from this board; an
// OUTPUT lies inside the board's run of that layer; and when the layer's
// inputs came only from the reference run, every OUTPUT equals the
// single-process int8 reference byte for byte.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/auth.h"
#include "core/crc32.h"
#include "core/worker.h"
#include "plan/fragment_writer.h"
#include "tiny_model.h"

using namespace ts;
using wire::MsgType;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

namespace {

struct Setup {
  QGraph q;
  std::vector<uint8_t> frag;
  uint32_t plan_id = 0;
  std::vector<std::vector<int8_t>> ref;  // every tensor of the reference run
};

const Setup& setup() {
  static const Setup s = [] {
    Setup x;
    x.q = fuzz::tiny_qgraph();
    const plan::Plan p = fuzz::tiny_plan(x.q);
    x.frag = plan::write_fragment(x.q, p, 0);
    x.plan_id = p.plan_id;
    std::vector<int8_t> in(size_t(x.q.shape(x.q.input).size()));
    for (size_t i = 0; i < in.size(); ++i) in[i] = int8_t(i * 37 + 11);
    x.ref = run_int8_all(x.q, in);
    return x;
  }();
  return s;
}

// The board's flash. It starts every input holding the setup's fragment (read
// in place from setup().frag, which never changes: the opened FragmentReaders
// kept across inputs point into it); a COMMIT installs a copy of the staged
// bytes in `owned`.
class MemFlash final : public core::FlashStore {
 public:
  std::vector<uint8_t> staging, owned;
  bool replaced = false;  // a COMMIT installed other bytes than the setup's fragment
  void reset() {
    staging.clear();
    owned.clear();
    replaced = false;
  }
  uint32_t capacity() const override { return 1u << 20; }
  bool stage(uint32_t off, const uint8_t* d, uint32_t n) override {
    if (uint64_t(off) + n > capacity()) return false;
    if (staging.size() < size_t(off) + n) staging.resize(size_t(off) + n);
    if (n) std::memcpy(staging.data() + off, d, n);
    return true;
  }
  const uint8_t* staged(uint32_t size) const override { return size <= staging.size() ? staging.data() : nullptr; }
  bool commit(uint32_t size, uint32_t crc) override {
    if (size > staging.size() || crc32(staging.data(), size) != crc) return false;
    owned.assign(staging.begin(), staging.begin() + size);
    replaced = true;
    return true;
  }
  const uint8_t* current(uint32_t* size) const override {
    if (!replaced) {
      *size = uint32_t(setup().frag.size());
      return setup().frag.data();
    }
    *size = uint32_t(owned.size());
    return owned.empty() ? nullptr : owned.data();
  }
};

// Parses and checks everything the board sends.
class CheckPort final : public core::Port {
 public:
  core::FragmentReader* frag = nullptr;  // the fragment the board starts with
  const MemFlash* flash = nullptr;
  const bool* pristine = nullptr;        // per layer: inputs only from the reference
  uint32_t last_seq = 0;                 // newest sequenced frame from the board
  std::vector<uint8_t> hello;            // the board's HELLO payload on this connection
  auth::FrameMac rx;                     // active once the harness sent AUTH
  bool send(const uint8_t* d, size_t n) override {
    // The worker may hand over a frame and its tag in two calls.
    pending_.insert(pending_.end(), d, d + n);
    size_t pos = 0;
    while (pos < pending_.size()) {
      const auto r = reader_.feed(pending_.data() + pos, pending_.size() - pos);
      pos += r.consumed;
      FUZZ_CHECK(r.status != wire::FrameReader::Status::Error);  // the board sent a bad frame
      if (r.status != wire::FrameReader::Status::Frame) break;
      const wire::FrameHeader& h = reader_.header();
      FUZZ_CHECK(h.src == 0 && h.dst == wire::kCoordinatorId);
      if (h.type == MsgType::Hello) hello.assign(reader_.payload(), reader_.payload() + h.payload_len);
      // After AUTH every board frame is tagged, and the tag verifies; an
      // untagged ERROR may only refuse authentication.
      if (rx.active()) {
        if (h.flags & wire::kFlagMac) FUZZ_CHECK(rx.check(reader_.frame(), reader_.frame_len()));
        else FUZZ_CHECK(h.type == MsgType::Error);
      }
      if (wire::is_sequenced(h.type) && h.type != MsgType::Error) last_seq = h.seq;
      if (h.type == MsgType::Output) check_output(h, reader_.payload());
    }
    pending_.erase(pending_.begin(), pending_.begin() + int64_t(pos));
    return true;
  }
  uint32_t now_us() override { return t_ += 7; }
  // A new connection.
  void reset() {
    reader_.reset();
    pending_.clear();
    last_seq = 0;
    hello.clear();
    rx.stop();
  }
  // A new input: also the clock, as a fresh port's.
  void restart() {
    reset();
    t_ = 0;
  }

 private:
  void check_output(const wire::FrameHeader& h, const uint8_t* p) {
    if (flash->replaced) return;  // another fragment: nothing to compare with
    FUZZ_CHECK(frag != nullptr && h.layer < frag->layer_count());
    core::FragLayer L;
    FUZZ_CHECK(frag->layer(h.layer, &L) == core::FragStatus::Ok);
    FUZZ_CHECK(int64_t(h.offset) >= L.run_begin && int64_t(h.offset) + h.payload_len <= L.run_end);
    if (pristine && pristine[h.layer]) {
      const auto& s = setup();
      const auto& want = s.ref[size_t(s.q.nodes[L.node].output)];
      FUZZ_CHECK(std::memcmp(p, want.data() + h.offset, h.payload_len) == 0);
    }
  }
  wire::FrameReader reader_;
  std::vector<uint8_t> pending_;
  uint32_t t_ = 0;
};

const uint8_t kFuzzKey[auth::kKeyBytes] = {7, 1, 7, 2, 7, 3, 7, 4, 7, 5, 7, 6, 7, 7, 7, 8,
                                           7, 9, 7, 10, 7, 11, 7, 12, 7, 13, 7, 14, 7, 15, 7, 16};

constexpr size_t kMaxLayers = 256;

// One board, kept across inputs: building it opens and verifies the fragment
// twice (CRC-32, SHA-256, every layer entry: the FragmentReader the checks use
// and the worker's own), which took most of the time per input. So the worker
// is initialised once per key setting (the `fresh` copies) and every input
// starts from a copy of one of them, on a zeroed arena and a flash holding the
// setup's fragment: the same state a newly built board has, so each input is
// still independent of the ones before it. (Worker is a value type: its
// pointers lead to the arena, flash and port, which stay put.)
struct Harness {
  MemFlash flash;
  CheckPort port;
  core::FragmentReader frag;
  std::vector<uint8_t> arena = std::vector<uint8_t>(512 * 1024);
  core::Worker fresh[2];  // [keyed]: as init() left it
  core::Worker w;
  uint32_t seq = 1;
  bool pristine[kMaxLayers] = {};
  bool open = true;
  bool keyed = false;
  auth::FrameMac tx;

  Harness() {
    FUZZ_CHECK(frag.open(setup().frag.data(), setup().frag.size()) == core::FragStatus::Ok);
    FUZZ_CHECK(frag.layer_count() <= kMaxLayers);
    port.frag = &frag;
    port.flash = &flash;
    port.pristine = pristine;
    for (int k = 0; k < 2; ++k) {
      core::WorkerConfig cfg;
      cfg.window = 4;
      cfg.ack_every = 2;
      if (k) {
        cfg.has_key = true;
        std::memcpy(cfg.key, kFuzzKey, sizeof cfg.key);
      }
      FUZZ_CHECK(fresh[k].init(cfg, arena.data(), uint32_t(arena.size()), &flash, &port));
    }
  }
  // A fresh board for the next input.
  void begin(bool with_key) {
    // The worker only writes the arena up to its fragment's planned size
    // (it refuses to run a fragment that needs more than the arena): zero
    // that much, or all of it after a COMMIT installed another fragment.
    const size_t dirty = flash.replaced ? arena.size()
                                        : std::min<size_t>(arena.size(), frag.header().arena_bytes);
    std::memset(arena.data(), 0, dirty);
    flash.reset();
    port.restart();
    keyed = with_key;
    w = fresh[keyed ? 1 : 0];
    connect();
  }
  void connect() {
    port.reset();
    tx.stop();
    seq = 1;
    for (bool& b : pristine) b = false;
    w.abort_layer();
    open = w.on_connect();
    ack();
    if (open && keyed) authenticate();
  }
  // AUTH with the right key, keyed from this connection's HELLO.
  void authenticate() {
    FUZZ_CHECK(port.hello.size() == wire::HelloPayload::kAuthSize);
    wire::AuthPayload a;
    for (size_t i = 0; i < sizeof a.nonce; ++i) a.nonce[i] = uint8_t(i * 3 + seq);
    auth::SessionKeys k;
    auth::derive_session(kFuzzKey, a.nonce, port.hello.data(), port.hello.size(), &k);
    tx.start(k.c2b);
    port.rx.start(k.b2c);
    uint8_t pl[wire::AuthPayload::kSize];
    a.encode(pl, sizeof pl);
    wire::FrameHeader h;
    h.type = MsgType::Auth;
    h.src = wire::kCoordinatorId;
    h.flags = wire::kFlagLast;
    h.seq = seq++;
    uint8_t buf[wire::kMaxFrameBuf];
    const size_t len = encode(h, pl, sizeof pl, buf, sizeof buf, false);
    open = w.on_bytes(buf, len);
    FUZZ_CHECK(open);  // the right key is accepted
    ack();
  }
  // Encodes (tagged in a session; `bad_tag` damages the tag).
  size_t encode(wire::FrameHeader& h, const uint8_t* p, size_t n, uint8_t* out, size_t cap, bool bad_tag) {
    if (tx.active()) h.flags = uint16_t(h.flags | wire::kFlagMac);
    const size_t len = wire::encode_frame(h, p, n, out, cap);
    if (len && tx.active()) {
      tx.seal(out, len - wire::kTagSize, out + len - wire::kTagSize);
      if (bad_tag) out[len - 1] ^= 0x01;
    }
    return len;
  }
  // Feeds bytes; a refused link is reopened for the next record, as the
  // coordinator would reconnect.
  void feed(const uint8_t* d, size_t n) {
    if (!open) connect();
    open = w.on_bytes(d, n);
    if (open) ack();
  }
  // ACKs what the board sent until it has nothing more in flight.
  void ack() {
    for (int guard = 0; guard < 10000 && open && port.last_seq != 0; ++guard) {
      const uint32_t s = port.last_seq;
      port.last_seq = 0;
      wire::AckPayload a;
      a.ack_seq = s;
      uint8_t pl[4], buf[64];
      a.encode(pl, 4);
      wire::FrameHeader h;
      h.type = MsgType::Ack;
      h.src = wire::kCoordinatorId;
      h.deployment = setup().plan_id;
      const size_t len = encode(h, pl, 4, buf, sizeof buf, false);
      open = w.on_bytes(buf, len);
    }
  }
  void frame(MsgType t, uint16_t layer, uint32_t offset, const uint8_t* p, size_t n, uint16_t flags,
             uint8_t perturb) {
    wire::FrameHeader h;
    h.type = t;
    h.src = wire::kCoordinatorId;
    h.dst = 0;
    h.deployment = setup().plan_id ^ ((perturb & 8) ? 0x10u : 0u);
    h.layer = layer;
    h.offset = offset;
    h.flags = flags;
    if (!open) connect();
    h.seq = wire::is_sequenced(t) ? seq++ : 0;
    if (perturb & 4) h.seq += 1;
    uint8_t buf[wire::kMaxFrameBuf];
    const size_t len = encode(h, p, n, buf, sizeof buf, (perturb & 32) != 0);
    if (len == 0) return;  // not encodable (payload size illegal for the type)
    if (t == MsgType::Input || t == MsgType::Reset) {
      // Fuzzer-made activations: the layer's outputs are no longer the reference.
      for (bool& b : pristine) b = false;
    }
    feed(buf, len);
  }
  // Every INPUT run of layer i, from the reference run's tensors.
  void inputs(uint32_t i) {
    core::FragLayer L;
    if (frag.layer(i, &L) != core::FragStatus::Ok) return;
    const auto& s = setup();
    const QNode& node = s.q.nodes[L.node];
    for (int k = 0; k < L.desc.n_inputs; ++k) {
      const auto& t = s.ref[size_t(node.inputs[size_t(k)])];
      for (uint32_t r = 0; r < L.n_runs[k]; ++r) {
        const core::InputRun run = L.run(k, r);
        for (uint32_t done = 0; done < run.count;) {
          const uint32_t n = std::min<uint32_t>(run.count - done, uint32_t(wire::kMaxPayload));
          const bool last = done + n == run.count;
          wire::FrameHeader h;
          h.type = MsgType::Input;
          h.src = wire::kCoordinatorId;
          h.deployment = s.plan_id;
          h.layer = uint16_t(i);
          h.offset = core::input_offset(uint32_t(k), run.offset + done);
          h.flags = last ? wire::kFlagLast : 0;
          if (!open) connect();
          h.seq = seq++;
          uint8_t buf[wire::kMaxFrameBuf];
          const size_t len = encode(h, reinterpret_cast<const uint8_t*>(t.data()) + run.offset + done, n, buf,
                                    sizeof buf, false);
          feed(buf, len);
          done += n;
        }
      }
    }
    pristine[i] = true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness H;
  const bool keyed = size > 0 && data[0] == 0xFD;
  H.begin(keyed);  // a fresh board per input
  size_t pos = keyed ? 1 : 0;
  while (pos < size) {
    const uint8_t kind = data[pos++];
    if (kind == 0xFF) {
      if (pos >= size) break;
      size_t n = data[pos++];
      if (n > size - pos) n = size - pos;
      for (bool& b : H.pristine) b = false;
      H.feed(data + pos, n);
      pos += n;
    } else if (kind == 0xFE) {
      if (pos >= size) break;
      H.inputs(data[pos++] % H.frag.layer_count());
    } else {
      if (size - pos < 9) break;
      const uint8_t flags = data[pos];
      const uint16_t layer = uint16_t(data[pos + 1] | (data[pos + 2] << 8));
      const uint32_t offset = wire::get_u32(data + pos + 3);
      size_t n = wire::get_u16(data + pos + 7);
      pos += 9;
      if (n > size - pos) n = size - pos;
      if (n > wire::kMaxPayload) n = wire::kMaxPayload;
      if (flags & 16) H.connect();
      H.frame(MsgType(kind % uint8_t(wire::kLastMsgType) + 1), layer, offset, data + pos, n, uint16_t(flags & 3), flags);
      pos += n;
    }
  }
  return 0;
}
