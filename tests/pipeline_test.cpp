// Pipelined inferences (docs/execution.md, "Pipelined inferences"): the
// inference tag on the wire, boards that hold a peer's frames of the next
// inference until they are done with the current one, and pipelined runs on
// real host boards that stay bit-exact, also with one slow board.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "support/mem_flash.h"
#include "support/tiny_qgraph.h"
#include "support/worker_process.h"
#include "coord/boards.h"
#include "coord/coordinator.h"
#include "coord/verify.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "core/halo_first.h"
#include "core/worker.h"
#include "model/fold.h"
#include "model/import_onnx.h"
#include "model/qgraph.h"
#include "model/quantize.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"
#include "support/boards.h"
#include "support/shell.h"

namespace {

using namespace ts;
using wire::MsgType;

// ---- the tag on the wire ----

TEST(PipelineWire, InferenceTagRoundTripsOnDataFramesOnly) {
  uint8_t buf[wire::kMaxFrameBuf];
  const uint8_t pay[4] = {1, 2, 3, 4};
  for (MsgType t : {MsgType::Input, MsgType::Output}) {
    wire::FrameHeader h;
    h.type = t;
    h.inference = 0xBEEF;
    const size_t n = wire::encode_frame(h, pay, sizeof pay, buf, sizeof buf);
    ASSERT_GT(n, 0u);
    EXPECT_EQ(buf[wire::kOffInference], 0xEF);
    EXPECT_EQ(buf[wire::kOffInference + 1], 0xBE);
    wire::FrameHeader d;
    const uint8_t* p = nullptr;
    ASSERT_EQ(wire::decode_frame(buf, n, &d, &p), wire::WireError::Ok);
    EXPECT_EQ(d.inference, 0xBEEF);
  }
  // A type that carries no inference: the encoder refuses a tag, and a
  // tagged frame of it (CRC fixed up) is refused as BadHeader.
  wire::FrameHeader h;
  h.type = MsgType::Probe;
  h.inference = 1;
  EXPECT_EQ(wire::encode_frame(h, pay, sizeof pay, buf, sizeof buf), 0u);
  h.inference = 0;
  const size_t n = wire::encode_frame(h, pay, sizeof pay, buf, sizeof buf);
  ASSERT_GT(n, 0u);
  wire::put_u16(buf + wire::kOffInference, 1);
  wire::put_u32(buf + wire::kOffCrc, 0);
  wire::put_u32(buf + wire::kOffCrc, ts::crc32(buf, n));
  wire::FrameHeader d;
  EXPECT_EQ(wire::decode_frame(buf, n, &d, nullptr), wire::WireError::BadHeader);
  EXPECT_EQ(wire::next_inference_tag(0xFFFF), 1);
  EXPECT_EQ(wire::next_inference_tag(7), 8);
}

// ---- two boards and a coordinator, frame by frame, no sockets ----


struct Net;

class NetPort final : public core::Port {
 public:
  Net* net = nullptr;
  int me = 0;
  // What the board did, in order: 'p' compute_part, 'a' after_compute (with
  // the layer), 'i' an INPUTS frame to a peer (its consumer layer).
  std::vector<std::pair<char, int>> log;
  bool send(int link, const uint8_t* d, size_t n) override;
  uint32_t now_us() override { return t_ += 10; }
  int open_link(uint16_t worker) override;
  uint32_t compute_part(uint32_t layer, uint64_t, uint32_t us) override {
    log.emplace_back('p', int(layer));
    return us;
  }
  uint32_t after_compute(uint32_t layer, uint64_t, uint32_t us) override {
    log.emplace_back('a', int(layer));
    return us;
  }

 private:
  uint32_t t_ = 0;
};

// A small model planned for boards that send to each other (direct route),
// the boards, and a coordinator on link 0 of each that tags its frames.
struct Net {
  QGraph q;
  plan::Plan p;
  int B = 0;
  struct Board {
    NetPort port;
    ts::testing::MemFlash flash{8u << 20};
    std::vector<uint8_t> arena = std::vector<uint8_t>(512 * 1024);
    core::Worker w;
    int next_link = 1;
    std::map<int, std::pair<int, int>> peer;  // my link -> (board, its link)
    std::map<int, std::deque<uint8_t>> in;     // bytes waiting to be delivered, per link
    // The coordinator's end of link 0.
    wire::FrameReader reader;
    uint32_t seq = 1;
  };
  std::vector<std::unique_ptr<Board>> boards;
  std::mt19937 rng;
  int slow = -1;       // a board served less often
  int next_holds = 0;  // frames of another inference a board held (not applied)
  int dropped = 0;     // links a board closed (a frame it refused)
  std::vector<std::pair<int, std::string>> errors;  // ERRORs the boards sent the coordinator
  // Per board, per tag: DONE per layer (digest) and the OUTPUT bytes.
  std::map<uint16_t, std::vector<std::map<int, wire::DonePayload>>> done;
  std::map<uint16_t, std::vector<int8_t>> output;

  Net(const std::string& model, int n, uint32_t seed) : B(n), rng(seed) {
    Graph g = fold(import_onnx(std::string(TS_SOURCE_DIR) + "/tests/data/onnx/" + model, 0));
    std::mt19937 r(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<std::vector<float>> xs(4, std::vector<float>(size_t(g.shape(g.input).size())));
    for (auto& x : xs)
      for (auto& v : x) v = u(r);
    q = quantize(g, calibrate(g, xs, CalibOptions{}));
    plan::PlanOptions po;
    po.strategy = "spatial";
    po.route = plan::Route::Direct;
    p = plan::make_plan(q, plan::default_testbed(n), po);
    for (int b = 0; b < n; ++b) {
      auto bd = std::make_unique<Board>();
      bd->port.net = this;
      bd->port.me = b;
      core::WorkerConfig cfg;
      cfg.id = uint16_t(b);
      cfg.window = 4;
      cfg.ack_every = 2;
      EXPECT_TRUE(bd->w.init(cfg, bd->arena.data(), uint32_t(bd->arena.size()), &bd->flash, &bd->port));
      boards.push_back(std::move(bd));
    }
    for (int b = 0; b < n; ++b) EXPECT_TRUE(boards[size_t(b)]->w.on_connect(0));
  }
  // Bytes a board sent on a link: to the coordinator (link 0) or a peer.
  void sent(int b, int link, const uint8_t* d, size_t n) {
    Board& s = *boards[size_t(b)];
    if (link == 0) {
      coord_receive(b, d, n);
      return;
    }
    const auto [to, their] = s.peer.at(link);
    auto& q = boards[size_t(to)]->in[their];
    q.insert(q.end(), d, d + n);
  }
  int open(int from, int to) {
    Board& a = *boards[size_t(from)];
    Board& z = *boards[size_t(to)];
    const int la = a.next_link++, lz = z.next_link++;
    a.peer[la] = {to, lz};
    z.peer[lz] = {from, la};
    EXPECT_TRUE(z.w.on_connect(lz));  // the acceptor greets first, as over TCP
    return la;
  }
  // The coordinator's frame to board b (tagged), straight into the board.
  void coord_send(int b, MsgType t, uint16_t layer, uint32_t offset, const uint8_t* p, size_t n, uint16_t flags,
                  uint16_t tag) {
    Board& s = *boards[size_t(b)];
    wire::FrameHeader h;
    h.type = t;
    h.src = wire::kCoordinatorId;
    h.dst = uint16_t(b);
    h.deployment = this->p.plan_id;
    h.layer = layer;
    h.offset = offset;
    h.flags = flags;
    h.seq = s.seq++;
    h.inference = tag;
    uint8_t buf[wire::kMaxFrameBuf];
    const size_t len = wire::encode_frame(h, p, n, buf, sizeof buf);
    ASSERT_GT(len, 0u);
    auto& q = s.in[0];
    q.insert(q.end(), buf, buf + len);
  }
  void coord_message(int b, MsgType t, uint16_t layer, uint32_t offset, const uint8_t* p, size_t n, uint16_t tag) {
    size_t pos = 0;
    do {
      const size_t k = std::min(n - pos, wire::kMaxPayload);
      coord_send(b, t, layer, offset + uint32_t(pos), p + pos, k, pos + k == n ? wire::kFlagLast : 0, tag);
      pos += k;
    } while (pos < n);
  }
  void coord_receive(int b, const uint8_t* d, size_t n) {
    Board& s = *boards[size_t(b)];
    size_t pos = 0;
    uint32_t last = 0;
    while (pos < n) {
      const auto r = s.reader.feed(d + pos, n - pos);
      pos += r.consumed;
      ASSERT_NE(r.status, wire::FrameReader::Status::Error);
      if (r.status != wire::FrameReader::Status::Frame) break;
      const wire::FrameHeader& h = s.reader.header();
      const uint8_t* pl = s.reader.payload();
      if (h.type != MsgType::Ack && h.type != MsgType::Error) last = h.seq;
      if (h.type == MsgType::Error) {
        wire::ErrorPayload e;
        e.decode(pl, h.payload_len);
        errors.emplace_back(b, e.text);
      } else if (h.type == MsgType::Done && h.inference != 0) {
        wire::DonePayload dp;
        EXPECT_TRUE(dp.decode(pl, h.payload_len));
        auto& v = done[h.inference];
        v.resize(size_t(B));
        v[size_t(b)][h.layer] = dp;
      } else if (h.type == MsgType::Output) {
        auto& o = output[h.inference];
        o.resize(size_t(q.shape(q.output).size()));
        std::memcpy(o.data() + h.offset, pl, h.payload_len);
      }
    }
    if (last) {  // ACK what came, at once
      wire::AckPayload a;
      a.ack_seq = last;
      uint8_t buf[4], frame[64];
      a.encode(buf, 4);
      wire::FrameHeader h;
      h.type = MsgType::Ack;
      h.src = wire::kCoordinatorId;
      const size_t len = wire::encode_frame(h, buf, 4, frame, sizeof frame);
      auto& q0 = s.in[0];
      q0.insert(q0.end(), frame, frame + len);
    }
  }
  // Delivers one link's waiting bytes to its board (a random one; the slow
  // board's less often). False when nothing could move.
  bool step() {
    std::vector<std::pair<int, int>> ready;
    for (int b = 0; b < B; ++b)
      for (auto& [link, q] : boards[size_t(b)]->in)
        if (!q.empty() && !boards[size_t(b)]->w.holding(link)) {
          ready.emplace_back(b, link);
          if (b != slow) {  // weight: others 4x as often
            ready.emplace_back(b, link);
            ready.emplace_back(b, link);
            ready.emplace_back(b, link);
          }
        }
    if (ready.empty()) return false;
    const auto [b, link] = ready[rng() % ready.size()];
    Board& s = *boards[size_t(b)];
    auto& q = s.in[link];
    const size_t take = std::min<size_t>(q.size(), 1 + rng() % 3000);
    std::vector<uint8_t> chunk(q.begin(), q.begin() + long(take));
    const int32_t used = s.w.on_bytes(link, chunk.data(), chunk.size());
    if (used < 0) {
      ++dropped;
      q.clear();
      return true;
    }
    q.erase(q.begin(), q.begin() + used);
    if (s.w.holding(link)) {
      wire::FrameHeader h;
      std::vector<uint8_t> head(q.begin(), q.begin() + long(std::min<size_t>(q.size(), wire::kHeaderSize)));
      if (wire::decode_header(head.data(), head.size(), &h) == wire::WireError::Ok && h.inference != s.w.inference())
        ++next_holds;
    }
    EXPECT_TRUE(s.w.resume());
    return true;
  }
  // Runs until nothing moves.
  void settle(int limit = 2000000) {
    while (limit-- > 0 && step()) {
    }
  }
};

bool NetPort::send(int link, const uint8_t* d, size_t n) {
  wire::FrameHeader h;
  if (link != 0 && wire::decode_header(d, n, &h) == wire::WireError::Ok && h.type == MsgType::Inputs)
    log.emplace_back('i', int(h.layer));
  net->sent(me, link, d, n);
  return true;
}
int NetPort::open_link(uint16_t worker) { return net->open(me, worker); }

void deploy(Net& n) {
  for (int b = 0; b < n.B; ++b) {
    const std::vector<uint8_t> frag = plan::write_fragment(n.q, n.p, b);
    n.coord_message(b, MsgType::Store, 0, 0, frag.data(), frag.size(), 0);
    wire::CommitPayload c;
    c.fragment_size = uint32_t(frag.size());
    c.fragment_crc = ts::crc32(frag.data(), frag.size());
    ts::sha256(frag.data(), frag.size(), c.digest);
    uint8_t buf[wire::CommitPayload::kSize];
    c.encode(buf, sizeof buf);
    n.coord_send(b, MsgType::Commit, 0, 0, buf, sizeof buf, wire::kFlagLast, 0);
  }
  n.settle();
}

// Board b's coordinator inputs of inference `tag` (the graph's input).
void send_graph_input(Net& n, int b, const std::vector<int8_t>& x, uint16_t tag) {
  const auto& layers = n.p.workers[size_t(b)].layers;
  for (size_t node = 0; node < layers.size(); ++node)
    for (size_t k = 0; k < layers[node].inputs.size(); ++k)
      for (const auto& r : layers[node].inputs[k].coord_runs)
        n.coord_message(b, MsgType::Input, uint16_t(node), core::input_offset(uint32_t(k), r.offset),
                        reinterpret_cast<const uint8_t*>(x.data()) + r.offset, r.count, tag);
}

int last_layer(const Net& n, int b) {
  int last = -1;
  for (size_t node = 0; node < n.p.workers[size_t(b)].layers.size(); ++node)
    if (n.p.workers[size_t(b)].layers[node].active()) last = int(node);
  return last;
}

// Inferences 1..K pipelined, two in flight, as Coordinator::infer_pipelined
// schedules them (a board gets inference k's input once it reported its
// last layer of k-1), with random delivery orders and one slow board: every
// board's digest of every layer and every output equal the reference's, and
// boards did hold frames of the next inference while on the current one.
TEST(PipelineBoards, NextInferenceFramesWaitAndEveryInferenceIsExact) {
  int holds = 0;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u, 12u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Net n("tiny.onnx", 3, seed);
    n.slow = int(seed % 3);
    deploy(n);
    ASSERT_TRUE(n.errors.empty()) << n.errors[0].second;
    const int K = 5;
    std::vector<std::vector<int8_t>> xs;
    for (int k = 0; k < K; ++k) xs.push_back(ts::testing::random_int8_input(n.q, 100 + uint32_t(k) + seed * 10));
    std::vector<int> next(size_t(n.B), 0);  // next inference (0-based) each board gets input of
    for (int guard = 0; guard < 100000; ++guard) {
      bool progressed = false;
      for (int b = 0; b < n.B; ++b) {
        const int k = next[size_t(b)];
        if (k >= K) continue;
        // Two in flight: inference k waits for k-2 to be complete on every board.
        bool window_ok = true;
        if (k >= 2)
          for (int o = 0; o < n.B; ++o)
            window_ok = window_ok && n.done.count(uint16_t(k - 1)) &&
                        n.done[uint16_t(k - 1)][size_t(o)].count(last_layer(n, o));
        const bool prev_done =
            k == 0 || (n.done.count(uint16_t(k)) && n.done[uint16_t(k)][size_t(b)].count(last_layer(n, b)));
        if (!window_ok || !prev_done) continue;
        send_graph_input(n, b, xs[size_t(k)], uint16_t(k + 1));
        ++next[size_t(b)];
        progressed = true;
      }
      if (!n.step() && !progressed) break;
    }
    ASSERT_TRUE(n.errors.empty()) << "board " << n.errors[0].first << ": " << n.errors[0].second;
    EXPECT_EQ(n.dropped, 0);
    for (int k = 0; k < K; ++k) {
      SCOPED_TRACE("inference " + std::to_string(k));
      const uint16_t tag = uint16_t(k + 1);
      const auto tensors = run_int8_all(n.q, xs[size_t(k)]);
      const auto want = coord::reference_digests(n.q, n.p, tensors);
      ASSERT_TRUE(n.done.count(tag));
      for (size_t node = 0; node < n.q.nodes.size(); ++node)
        for (int b = 0; b < n.B; ++b) {
          const auto& w = want[node][size_t(b)];
          if (w.outputs == 0) continue;
          const auto it = n.done[tag][size_t(b)].find(int(node));
          ASSERT_NE(it, n.done[tag][size_t(b)].end()) << "no DONE from board " << b << " for layer " << node;
          EXPECT_EQ(it->second.outputs, w.outputs);
          EXPECT_EQ(it->second.output_digest, w.digest) << "board " << b << " layer " << node;
        }
      EXPECT_EQ(n.output[tag], tensors[n.q.output]);
    }
    holds += n.next_holds;
  }
  // The path under test ran: some board was still on inference k when a
  // frame of k+1 reached it, and held it (4 of the 12 seeds' runs do since
  // tiny's global pool sums its rows, which keeps the boards closer in step;
  // all of the first 4 did before).
  EXPECT_GT(holds, 0);
}

// Overlap inside a layer (core/halo_first.h, docs/execution.md). Halos
// first: a board whose band's sends to other boards read only rows near its
// ends computes those, sends them, and only then computes the rest. Inner
// rows first: a board some of whose inputs come from other boards computes
// the rows that read none of them before they are all in. On a spatial
// plan, boards split layers so where the planner's rule on the plan says
// (and only there), the halos leave between the two parts of such a layer,
// and the inference is bit-exact on every layer of every board.
TEST(PipelineBoards, HalosLeaveFirstAndInnerRowsAreComputedBeforeTheRest) {
  Net n("mobilenet_v2.onnx", 3, 5);
  deploy(n);
  ASSERT_TRUE(n.errors.empty()) << n.errors[0].second;
  // Where the plan's shares split (the simulator's and the estimate's rule).
  std::vector<std::vector<bool>> halo(size_t(n.B), std::vector<bool>(n.q.nodes.size(), false)), inner = halo;
  int planned = 0, planned_inner = 0;
  for (int b = 0; b < n.B; ++b)
    for (const plan::LayerShare& ls : n.p.workers[size_t(b)].layers) {
      if (!ls.active()) continue;
      const core::HaloSplit hs = plan::halo_split_of(n.q.desc(ls.node), ls);
      const core::HaloSplit is = plan::inner_split_of(n.q.desc(ls.node), ls);
      EXPECT_FALSE(hs.on() && is.on()) << "board " << b << " layer " << ls.node << ": both splits";
      halo[size_t(b)][size_t(ls.node)] = hs.on();
      inner[size_t(b)][size_t(ls.node)] = is.on();
      planned += hs.on();
      planned_inner += is.on();
    }
  ASSERT_GT(planned, 0) << "no share of this plan splits: the test would not test halos first";
  ASSERT_GT(planned_inner, 0) << "no share of this plan splits: the test would not test inner rows first";
  const auto x = ts::testing::random_int8_input(n.q, 77);
  for (int b = 0; b < n.B; ++b) send_graph_input(n, b, x, 1);
  n.settle();
  ASSERT_TRUE(n.errors.empty()) << "board " << n.errors[0].first << ": " << n.errors[0].second;
  const auto tensors = run_int8_all(n.q, x);
  const auto want = coord::reference_digests(n.q, n.p, tensors);
  ASSERT_TRUE(n.done.count(1));
  for (size_t node = 0; node < n.q.nodes.size(); ++node)
    for (int b = 0; b < n.B; ++b) {
      if (want[node][size_t(b)].outputs == 0) continue;
      const auto it = n.done[1][size_t(b)].find(int(node));
      ASSERT_NE(it, n.done[1][size_t(b)].end()) << "no DONE from board " << b << " for layer " << node;
      EXPECT_EQ(it->second.output_digest, want[node][size_t(b)].digest) << "board " << b << " layer " << node;
    }
  EXPECT_EQ(n.output[1], tensors[n.q.output]);
  // Every halos-first layer was computed in two parts with INPUTS frames
  // between them; an inner-rows layer in two parts when its inputs from
  // other boards were not all in when the board reached it (often, not
  // always, in this random delivery); no other layer in two parts.
  int early = 0, inner_parted = 0;
  for (int b = 0; b < n.B; ++b) {
    const auto& log = n.boards[size_t(b)]->port.log;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i].first == 'a') {
        const size_t node = size_t(log[i].second);
        const bool parted = i > 0 && std::any_of(log.begin(), log.begin() + long(i), [&](const auto& e) {
          return e.first == 'p' && e.second == log[i].second;
        });
        if (halo[size_t(b)][node]) EXPECT_TRUE(parted) << "board " << b << " layer " << node;
        else if (!inner[size_t(b)][node]) EXPECT_FALSE(parted) << "board " << b << " layer " << node;
        else inner_parted += parted;
      }
      if (log[i].first != 'p' || !halo[size_t(b)][size_t(log[i].second)]) continue;
      size_t j = i + 1, frames = 0;
      for (; j < log.size() && log[j].first != 'a'; ++j) frames += log[j].first == 'i';
      ASSERT_LT(j, log.size());
      EXPECT_EQ(log[j].second, log[i].second);
      EXPECT_GT(frames, 0u) << "board " << b << " layer " << log[i].second << ": no halo left before the rest";
      early += frames > 0;
    }
  }
  EXPECT_EQ(early, planned);
  EXPECT_GT(inner_parted, 0) << "no board computed inner rows before the rest arrived";
}

// The coordinator must not send inference k+1's input to a board still on
// k (its link would then wait behind the held frame): the board refuses it.
TEST(PipelineBoards, CoordinatorInputOfTheNextInferenceWhileBusyIsRefused) {
  Net n("tiny.onnx", 2, 9);
  deploy(n);
  const auto x0 = ts::testing::random_int8_input(n.q, 1), x1 = ts::testing::random_int8_input(n.q, 2);
  send_graph_input(n, 0, x0, 1);
  n.settle();  // board 0 is on inference 1, waiting for board 1's halos
  ASSERT_TRUE(n.errors.empty()) << n.errors[0].second;
  ASSERT_EQ(n.boards[0]->w.inference(), 1);
  send_graph_input(n, 0, x1, 2);
  n.settle();
  ASSERT_FALSE(n.errors.empty());
  EXPECT_NE(n.errors[0].second.find("another inference"), std::string::npos) << n.errors[0].second;
  EXPECT_EQ(n.dropped, 1);
  EXPECT_FALSE(n.boards[0]->w.link_open(0));
}

// ---- real host boards ----

// Coordinator::infer_pipelined on 3 spawned host boards, one of them slower
// (a delay before each of its sends and receives): every inference, in
// order, bit-exact and every layer digest the reference's.
TEST(PipelineHost, SlowBoardPipelinedRunIsExact) {
  const QGraph q = ts::testing::tiny_qgraph(4, 5);
  const plan::Testbed tb = plan::default_testbed(3);
  plan::PlanOptions po;
  po.strategy = "spatial";
  po.route = plan::Route::Direct;
  const plan::Plan p = plan::make_plan(q, tb, po);
  coord::SpawnOptions so;
  so.exe = TS_TINYSPLIT;
  so.board_args = {{}, {"--delay-ms", "2"}, {}};
  coord::BoardSet boards(tb, so);
  const auto tmo = std::chrono::milliseconds(20000);
  coord::CoordOptions copt;
  copt.timeout = tmo;
  coord::Coordinator c(q, p, boards.links(tmo), copt);
  c.handshake();
  c.deploy();
  std::vector<std::vector<int8_t>> xs;
  for (int k = 0; k < 8; ++k) xs.push_back(ts::testing::random_int8_input(q, 40 + uint32_t(k)));
  std::vector<const std::vector<int8_t>*> in;
  for (auto& x : xs) in.push_back(&x);
  for (int window : {2, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    std::vector<int> seen;
    c.infer_pipelined(in, window, [&](int k, coord::InferenceResult& res) {
      seen.push_back(k);
      const auto tensors = run_int8_all(q, xs[size_t(k)]);
      EXPECT_EQ(res.output, tensors[q.output]) << "inference " << k;
      const coord::Verification v = coord::verify_layers(coord::reference_digests(q, p, tensors), res);
      EXPECT_TRUE(v.ok()) << "inference " << k << ": layer " << v.node << " board " << v.board;
      EXPECT_EQ(v.verified_layers, int(q.nodes.size()));
    });
    ASSERT_EQ(seen.size(), xs.size());
    for (size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k], int(k));
  }
  // After pipelined batches, a plain (untagged) inference still works.
  const auto res = c.infer(xs[0]);
  EXPECT_EQ(res.output, run_int8(q, xs[0]));
  c.close();
}

// `run --objective throughput` where no board holds the model (200 KiB of
// RAM each, without streamed chains, which would let one board hold it):
// one group of 3 boards, images pipelined (2 in flight), every output and
// every layer digest checked; --in-flight 1 runs them one after another.
// Rates are not asserted (wall clock).
TEST(PipelineHost, RunThroughputPipelinesInsideOneDeployment) {
  const std::string base = "timeout 300 " + std::string(TS_TINYSPLIT) +
                           " run --size 112 --json --timeout 20 --workers 3 --ram 200K --stream off --objective throughput "
                           "--repeat 6";
  const ts::testing::Shell r = ts::testing::shell(base);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["groups"], 1);
  EXPECT_EQ(j["pipelined"], true);
  EXPECT_EQ(j["in_flight"], 2);
  EXPECT_EQ(j["inferences"], 6);
  EXPECT_EQ(j["bit_exact_inferences"], 6);
  EXPECT_EQ(j["verified_layers"], j["layers"]);
  EXPECT_EQ(j["match_reference"], true);
  EXPECT_GT(j["images_per_s"].get<double>(), 0.0);
  const ts::testing::Shell s = ts::testing::shell(base + " --in-flight 1 --route relay --strategy neuron");
  ASSERT_EQ(s.code, 0) << s.err;
  const nlohmann::json k = nlohmann::json::parse(s.out);
  EXPECT_EQ(k["pipelined"], false);
  EXPECT_EQ(k["bit_exact_inferences"], 6);
  EXPECT_EQ(k["verified_layers"], k["layers"]);
}

// Throughput runs fail over (issue 26). A board killed inside a pipelined
// batch of a group of 3 (300 KiB each: 2 boards hold the model at 112): the
// group re-plans on its other 2 and the batch goes on from its first
// unfinished image, every image bit-exact and every layer verified on the
// plan that ran it. 4 groups of 1: the killed board's group stops and its
// images go to the other groups (pipelined, and one after another on the
// relay). With --no-failover the first failure ends the run.
// A throughput group that stopped (its one board died, and no re-plan
// holds the model without it) checks its board again while the other group
// works: the board is started again at its address, the group takes it
// back (per_group[].rejoins) and runs images again. Every image bit-exact.
// The boards emulate a 600 MHz clock at 2 cycles per MAC (0.23 s an image),
// so the other group still has images when the board is back.
TEST(PipelineHost, AStoppedThroughputGroupRejoins) {
  const std::string args = "--ram 1M --cycles-per-mac 2";
  ts::testing::WorkerProcess b0("127.0.0.1:0", "--id 0 " + args);
  auto b1 = std::make_unique<ts::testing::WorkerProcess>("127.0.0.1:0", "--id 1 " + args + " --inject-fault kill:20");
  ASSERT_FALSE(b0.address.empty() || b1->address.empty());
  const std::string addr1 = b1->address;
  const std::filesystem::path tbf =
      std::filesystem::temp_directory_path() / ("ts_rejoin_groups_" + std::to_string(getpid()) + ".json");
  nlohmann::json tb;
  for (int i = 0; i < 2; ++i)
    tb["boards"].push_back({{"id", i}, {"address", i ? addr1 : b0.address}, {"ram_bytes", "1M"}});
  std::ofstream(tbf) << tb.dump();
  ts::testing::Shell r;
  std::thread runner([&] {
    r = ts::testing::shell("timeout 300 " + std::string(TS_TINYSPLIT) + " run --size 112 --json --timeout 20 " +
                           "--objective throughput --repeat 16 --testbed " + tbf.string());
  });
  const bool died = b1->wait_exit();
  if (died) b1 = std::make_unique<ts::testing::WorkerProcess>(addr1, "--id 1 " + args);
  runner.join();
  std::filesystem::remove(tbf);
  ASSERT_TRUE(died) << "board 1 did not die at its injected fault";
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["groups"], 2);
  EXPECT_EQ(j["bit_exact_inferences"], 16);
  EXPECT_EQ(j["verified_layers"], j["layers"]);
  const nlohmann::json& g1 = j["per_group"][1];
  ASSERT_EQ(g1["failovers"].size(), 1u) << g1.dump();
  ASSERT_GE(g1["rejoins"].size(), 1u) << g1.dump();
  EXPECT_EQ(g1["rejoins"][0]["board"], 1);
  EXPECT_TRUE(g1["dropped"].is_null()) << g1.dump();
  EXPECT_GT(g1["inferences"].get<int>(), 0);
  EXPECT_EQ(j["per_group"][0]["inferences"].get<int>() + g1["inferences"].get<int>(), 16);
}

TEST(PipelineHost, ThroughputRunsFailOver) {
  // Without streamed chains, which would let one board hold the model.
  const std::string run = "timeout 300 " + std::string(TS_TINYSPLIT) +
                          " run --size 112 --json --timeout 20 --objective throughput --stream off";
  {
    SCOPED_TRACE("a group of 3 re-plans on 2");
    const ts::testing::Shell r = ts::testing::shell(run + " --workers 3 --ram 300K --repeat 8 --inject-fault kill:1:20");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["groups"], 1);
    EXPECT_EQ(j["pipelined"], true);
    EXPECT_EQ(j["bit_exact_inferences"], 8);
    EXPECT_EQ(j["verified_layers"], j["layers"]);
    EXPECT_EQ(j["match_reference"], true);
    const nlohmann::json& g = j["per_group"][0];
    EXPECT_TRUE(g["dropped"].is_null());
    EXPECT_EQ(g["inferences"], 8);
    ASSERT_EQ(g["failovers"].size(), 1u);
    EXPECT_EQ(g["failovers"][0]["board"], 1);
    EXPECT_EQ(g["failovers"][0]["boards_left"], 2);
    EXPECT_GT(g["failovers"][0]["redeployed_bytes"].get<int64_t>(), 0);
  }
  for (const std::string route : {"direct", "relay"}) {
    SCOPED_TRACE("groups of 1, " + route);
    const ts::testing::Shell r =
        ts::testing::shell(run + " --workers 4 --repeat 12 --route " + route + " --inject-fault kill:2:20");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["groups"], 4);
    EXPECT_EQ(j["bit_exact_inferences"], 12);
    EXPECT_EQ(j["verified_layers"], j["layers"]);
    int done = 0;
    for (size_t g = 0; g < 4; ++g) {
      const nlohmann::json& pg = j["per_group"][g];
      done += pg["inferences"].get<int>();
      EXPECT_EQ(pg["dropped"].is_null(), g != 2) << g;
      EXPECT_EQ(pg["failovers"].size(), g == 2 ? 1u : 0u) << g;
    }
    EXPECT_EQ(done, 12);
  }
  {
    SCOPED_TRACE("--no-failover");
    const ts::testing::Shell r = ts::testing::shell(run + " --workers 4 --repeat 8 --inject-fault kill:2:20 --no-failover");
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err.rfind("tinysplit: error: run --objective throughput: group 2: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
