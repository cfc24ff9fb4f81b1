// The portable board worker driven directly, frame by frame, with no sockets:
// a correct deployment and inference reproduce the reference, and every kind
// of malformed or out-of-protocol input is refused (an ERROR frame and/or a
// dropped link), never a crash, never a wrong result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "net/fault_port.h"
#include "support/worker_driver.h"

namespace {

using namespace ts;
using namespace ts::testing::worker_driver;
using wire::MsgType;

TEST(Worker, DeploysAndComputesEveryLayerExactly) {
  const auto& f = fixture();
  for (int w = 0; w < 2; ++w)
    for (uint16_t window : {1, 8, 32}) {
      SCOPED_TRACE("board " + std::to_string(w) + " window " + std::to_string(window));
      Driver d(window);
      ASSERT_TRUE(d.saw(MsgType::Hello));
      ASSERT_TRUE(d.deploy(f.frags[w]));
      ASSERT_TRUE(d.saw(MsgType::Done)) << d.last_error();
      for (size_t n = 0; n < f.q.nodes.size(); ++n) {
        const auto& s = f.p.workers[w].layers[n];
        if (s.run.empty()) continue;
        d.got.clear();
        ASSERT_TRUE(send_inputs(d, w, int(n)));
        ASSERT_TRUE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
        // Gather its outputs and compare with the reference slice.
        const auto& out = f.ref[f.q.nodes[n].output];
        int64_t got = 0;
        bool done = false;
        for (auto& fr : d.got) {
          if (fr.first.type == MsgType::Output) {
            ASSERT_GE(int64_t(fr.first.offset), s.run.begin);
            ASSERT_LE(int64_t(fr.first.offset + fr.second.size()), s.run.end);
            EXPECT_EQ(0, std::memcmp(fr.second.data(), out.data() + fr.first.offset, fr.second.size()))
                << "layer " << n;
            got += int64_t(fr.second.size());
          }
          if (fr.first.type == MsgType::Done) {
            wire::DonePayload dp;
            ASSERT_TRUE(dp.decode(fr.second.data(), fr.second.size()));
            EXPECT_EQ(int64_t(dp.peak_ram_bytes), int64_t(core::kWorkerFixedArena) + s.ram_bytes);
            done = true;
          }
        }
        EXPECT_TRUE(done) << "layer " << n;
        EXPECT_EQ(got, s.run.size()) << "layer " << n;
      }
    }
}

// Board w's outputs of layer n (in order) and the digest its DONE reports.
std::pair<std::vector<uint8_t>, uint64_t> run_layer(Driver& d, int w, int n) {
  std::pair<std::vector<uint8_t>, uint64_t> r{{}, 0};
  d.got.clear();
  EXPECT_TRUE(send_inputs(d, w, n));
  EXPECT_TRUE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
  for (auto& fr : d.got) {
    if (fr.first.type == MsgType::Output) r.first.insert(r.first.end(), fr.second.begin(), fr.second.end());
    wire::DonePayload dp;
    if (fr.first.type == MsgType::Done && dp.decode(fr.second.data(), fr.second.size())) r.second = dp.output_digest;
  }
  return r;
}

// The flip fault (`run --inject-fault flip:BOARD:LAYER`) is a decorator on
// the board's Port (net/fault_port.h), outside core: the layer it names hands
// on one changed output, before the digest; other layers are untouched.
TEST(Worker, FlipPortChangesOneOutputOfItsLayerBeforeTheDigest) {
  const auto& f = fixture();
  std::vector<int> layers;
  for (size_t n = 0; n < f.q.nodes.size(); ++n)
    if (!f.p.workers[0].layers[n].run.empty()) layers.push_back(int(n));
  ASSERT_GE(layers.size(), 2u);
  const int flipped = layers[0];
  Driver good, bad;
  net::FaultPort flip(bad.port, {net::FaultKind::Flip, flipped}, nullptr);
  core::WorkerConfig cfg;
  cfg.window = 8;
  ASSERT_TRUE(bad.w.init(cfg, bad.arena.data(), uint32_t(bad.arena.size()), &bad.flash, &flip));
  bad.reconnect();
  ASSERT_TRUE(good.deploy(f.frags[0]));
  ASSERT_TRUE(bad.deploy(f.frags[0]));
  for (int n : layers) {
    SCOPED_TRACE(n);
    const auto g = run_layer(good, 0, n), b = run_layer(bad, 0, n);
    ASSERT_EQ(g.first.size(), b.first.size());
    ASSERT_FALSE(g.first.empty());
    if (n != flipped) {
      EXPECT_EQ(g.first, b.first);
      EXPECT_EQ(g.second, b.second);
      continue;
    }
    EXPECT_EQ(b.first[0], uint8_t(g.first[0] ^ 1));
    EXPECT_TRUE(std::equal(g.first.begin() + 1, g.first.end(), b.first.begin() + 1));
    EXPECT_NE(g.second, b.second);
  }
}

TEST(Worker, RedeployOfTheSameFragmentIsACacheHit) {
  const auto& f = fixture();
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  d.got.clear();
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_TRUE(d.saw(MsgType::Done));
  // Another digest without the bytes is refused (and the old one kept).
  std::vector<uint8_t> other = f.frags[0];
  other.back() ^= 1;
  d.got.clear();
  ASSERT_TRUE(d.commit(other));
  EXPECT_TRUE(d.saw(MsgType::Error));
  EXPECT_FALSE(d.saw(MsgType::Done));
  d.got.clear();
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_TRUE(d.saw(MsgType::Done));
}

// The fragment of `f`'s plan for board w, but of a plan with another id:
// another deployment whose fragment has exactly the same size.
std::vector<uint8_t> fragment_of_other_plan(int w, uint32_t* plan_id) {
  const auto& f = fixture();
  plan::Plan p = f.p;
  p.plan_id ^= 0x5A5A5A5Au;
  *plan_id = p.plan_id;
  return plan::write_fragment(f.q, p, w);
}

TEST(Worker, AStoreThatCannotWriteIsSaidAsSoNotAsABadFragment) {
  // Issue 26: every commit failure was answered HashMismatch, so a full disk
  // looked like a bad fragment and failover dropped a healthy board.
  const auto& f = fixture();
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  const std::vector<uint8_t> before = d.flash.committed();
  uint32_t other_id = 0;
  const std::vector<uint8_t> other = fragment_of_other_plan(0, &other_id);
  d.flash.full = true;
  d.got.clear();
  d.deploy(other, other_id);
  bool store_failed = false, hash_mismatch = false;
  for (auto& g : d.got)
    if (g.first.type == MsgType::Error) {
      wire::ErrorPayload e;
      ASSERT_TRUE(e.decode(g.second.data(), g.second.size()));
      store_failed = store_failed || e.code == wire::ErrorCode::StoreFailed;
      hash_mismatch = hash_mismatch || (e.code == wire::ErrorCode::HashMismatch && e.text != std::string("not stored"));
    }
  EXPECT_TRUE(store_failed);
  EXPECT_FALSE(hash_mismatch);
  EXPECT_EQ(d.last_error(), "store full: no space left on device");
  EXPECT_EQ(d.flash.committed(), before);  // the previous fragment is kept
  // With room again the same fragment commits.
  d.flash.full = false;
  d.got.clear();
  ASSERT_TRUE(d.deploy(other, other_id));
  EXPECT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  EXPECT_EQ(d.flash.committed(), other);
}

TEST(Worker, EqualSizeFragmentOfAnotherPlanIsNotTakenForCached) {
  // The old cache compared size and the CRC-32 of a fragment that ends in its
  // own CRC-32 (a constant): any fragment of the same size passed.
  const auto& f = fixture();
  uint32_t other_id = 0;
  const std::vector<uint8_t> other = fragment_of_other_plan(0, &other_id);
  ASSERT_EQ(other.size(), f.frags[0].size());
  ASSERT_NE(other, f.frags[0]);
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  d.got.clear();
  d.deployment = other_id;
  ASSERT_TRUE(d.commit(other));
  EXPECT_FALSE(d.saw(MsgType::Done)) << "a fragment of another plan was taken as cached";
  EXPECT_TRUE(d.saw(MsgType::Error));
  // Redeploying it then works, and the board holds the new plan.
  d.got.clear();
  ASSERT_TRUE(d.deploy(other, other_id));
  EXPECT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  EXPECT_EQ(d.flash.committed(), other);
}

TEST(Worker, SwappedBoardsRedeployInsteadOfFailing) {
  // Board 0 holds board 1's fragment (two boards swapped in a testbed): the
  // COMMIT for board 0's fragment is not a cache hit; after the redeploy the
  // board computes board 0's share exactly.
  const auto& f = fixture();
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[1]));
  d.got.clear();
  d.deployment = f.p.plan_id;
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_FALSE(d.saw(MsgType::Done));
  d.got.clear();
  ASSERT_TRUE(d.deploy(f.frags[0]));
  EXPECT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  EXPECT_EQ(d.flash.committed(), f.frags[0]);
}

TEST(Worker, DamagedCachedFragmentIsRepairedByRedeploy) {
  const auto& f = fixture();
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  // The flash copy rots (one byte of the weights); the board restarts.
  d.flash.committed()[d.flash.committed().size() / 2] ^= 0x40;
  core::WorkerConfig cfg;
  cfg.window = 8;
  ASSERT_TRUE(d.w.init(cfg, d.arena.data(), uint32_t(d.arena.size()), &d.flash, &d.port));
  d.reconnect();
  d.got.clear();
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_FALSE(d.saw(MsgType::Done)) << "a damaged fragment was taken as cached";
  d.got.clear();
  ASSERT_TRUE(d.deploy(f.frags[0]));
  EXPECT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  EXPECT_EQ(d.flash.committed(), f.frags[0]);
}

TEST(Worker, StagedBytesWithAnotherDigestAreNotCommitted) {
  // STORE of foreign bytes then a COMMIT naming the real fragment: nothing
  // is committed (the old check compared the constant CRC and took them).
  const auto& f = fixture();
  Driver d;
  d.deployment = f.p.plan_id;
  std::vector<uint8_t> junk(f.frags[0].size(), 0x33);
  ASSERT_TRUE(d.message(MsgType::Store, 0, 0, junk.data(), junk.size()));
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_FALSE(d.saw(MsgType::Done));
  EXPECT_NE(d.last_error().find("digest"), std::string::npos) << d.last_error();
  EXPECT_TRUE(d.flash.committed().empty());
}

TEST(Worker, DigestCorrectBytesThatAreNoFragmentOfThisDeploymentAreNotCommitted) {
  // The digest, size and CRC vouch for the staged bytes, but they are no
  // fragment, or a fragment of another deployment than the COMMIT's: the
  // board refuses them before committing, so the fragment it holds stays
  // (committing first replaced it and left the board with none).
  const auto& f = fixture();
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  ASSERT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  std::vector<uint8_t> junk(f.frags[0].size() / 2);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t(i * 131u + 7u);
  d.got.clear();
  ASSERT_TRUE(d.deploy(junk));
  EXPECT_FALSE(d.saw(MsgType::Done));
  EXPECT_EQ(d.last_error(), "fragment invalid");
  EXPECT_EQ(d.flash.committed(), f.frags[0]);
  uint32_t other_id = 0;
  const std::vector<uint8_t> other = fragment_of_other_plan(0, &other_id);
  d.got.clear();
  ASSERT_TRUE(d.deploy(other, f.p.plan_id));  // COMMIT under this plan's id
  EXPECT_FALSE(d.saw(MsgType::Done));
  EXPECT_EQ(d.last_error(), "fragment invalid");
  EXPECT_EQ(d.flash.committed(), f.frags[0]);
  // The held fragment is still the cached one.
  d.got.clear();
  ASSERT_TRUE(d.commit(f.frags[0]));
  EXPECT_TRUE(d.saw(MsgType::Done)) << d.last_error();
}

TEST(Worker, ADamagedFragmentIsRefusedNamingTheLayerAndField) {
  // A fragment whose CRC and digest vouch for it but whose entry is wrong
  // (the writer and the reader disagree): the ERROR says where, so the
  // coordinator's error line does.
  const auto& f = fixture();
  std::vector<uint8_t> bad = f.frags[0];
  const size_t at = core::frag::kHeaderBytes + core::frag::kNInputs;  // layer 0's operand count
  bad[at] = 0;
  const size_t body = bad.size() - 4;
  const uint32_t crc = ts::crc32(bad.data(), body);
  for (int i = 0; i < 4; ++i) bad[body + size_t(i)] = uint8_t(crc >> (8 * i));
  Driver d;
  ASSERT_TRUE(d.deploy(bad));
  EXPECT_FALSE(d.saw(MsgType::Done));
  EXPECT_EQ(d.last_error(), "fragment invalid: layer 0 n_inputs = 0");
  EXPECT_TRUE(d.flash.committed().empty());
}

// ---- authenticated sessions (core/auth.h) ----

const uint8_t kKeyA[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                           17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
const uint8_t kKeyB[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                           17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33};

// Deploys and runs every layer of board w over an authenticated session;
// every board frame's tag must verify and the outputs equal the reference.
void expect_authenticated_run(Driver& d, int w) {
  const auto& f = fixture();
  ASSERT_TRUE(d.deploy(f.frags[w]));
  ASSERT_TRUE(d.saw(MsgType::Done)) << d.last_error();
  for (size_t n = 0; n < f.q.nodes.size(); ++n) {
    const auto& s = f.p.workers[w].layers[n];
    if (s.run.empty()) continue;
    d.got.clear();
    ASSERT_TRUE(send_inputs(d, w, int(n)));
    ASSERT_TRUE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
    const auto& out = f.ref[f.q.nodes[n].output];
    int64_t got = 0;
    for (auto& fr : d.got)
      if (fr.first.type == MsgType::Output) {
        EXPECT_TRUE(fr.first.flags & wire::kFlagMac);
        EXPECT_EQ(0, std::memcmp(fr.second.data(), out.data() + fr.first.offset, fr.second.size()));
        got += int64_t(fr.second.size());
      }
    EXPECT_EQ(got, s.run.size()) << "layer " << n;
  }
  EXPECT_EQ(d.bad_tags, 0u);
}

TEST(WorkerAuth, RightKeyDeploysAndComputesExactly) {
  Driver d(8, kKeyA);
  ASSERT_EQ(d.hello().size(), wire::HelloPayload::kAuthSize);
  ASSERT_TRUE(d.authenticate(kKeyA)) << d.last_error();
  EXPECT_TRUE(d.saw(MsgType::Ack));
  expect_authenticated_run(d, 0);
  EXPECT_EQ(d.w.stats().auth_failures, 0u);
}

TEST(WorkerAuth, WrongKeyIsRefused) {
  Driver d(8, kKeyA);
  EXPECT_FALSE(d.authenticate(kKeyB));
  EXPECT_NE(d.last_error().find("key"), std::string::npos) << d.last_error();
  EXPECT_EQ(d.w.stats().auth_failures, 1u);
  EXPECT_FALSE(d.w.link_open(0));
}

TEST(WorkerAuth, UnauthenticatedCoordinatorIsRefused) {
  const auto& f = fixture();
  Driver d(8, kKeyA);
  d.deployment = f.p.plan_id;
  EXPECT_FALSE(d.raw(MsgType::Store, 0, 0, f.frags[0].data(), 100, 0));
  EXPECT_NE(d.last_error().find("requires a key"), std::string::npos) << d.last_error();
  EXPECT_TRUE(d.flash.committed().empty());
}

TEST(WorkerAuth, BoardWithoutKeyRefusesAuth) {
  Driver d(8);
  ASSERT_EQ(d.hello().size(), wire::HelloPayload::kSize);
  wire::AuthPayload a;
  uint8_t buf[wire::AuthPayload::kSize];
  a.encode(buf, sizeof buf);
  EXPECT_FALSE(d.raw(MsgType::Auth, 0, 0, buf, sizeof buf, wire::kFlagLast));
  EXPECT_NE(d.last_error().find("no key"), std::string::npos) << d.last_error();
}

TEST(WorkerAuth, ForgedFramesAreRefused) {
  const auto& f = fixture();
  // (a) a frame whose tag is wrong (an attacker without the key), (b) a frame
  // altered on the way with its CRC fixed up, (c) an untagged frame in the
  // session: each ends the link with AuthFailed and nothing is stored.
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    Driver d(8, kKeyA);
    ASSERT_TRUE(d.authenticate(kKeyA));
    d.deployment = f.p.plan_id;
    wire::FrameHeader h;
    h.type = MsgType::Store;
    h.src = wire::kCoordinatorId;
    h.deployment = d.deployment;
    h.seq = d.seq;
    h.flags = kind == 2 ? 0 : wire::kFlagMac;
    std::vector<uint8_t> frame(wire::kMaxFrameBuf);
    frame.resize(wire::encode_frame(h, f.frags[0].data(), 200, frame.data(), frame.size()));
    ASSERT_GT(frame.size(), 0u);
    if (kind == 1) {
      // Seal honestly, then change a payload byte and fix the CRC.
      d.tx.seal(frame.data(), frame.size() - wire::kTagSize, frame.data() + frame.size() - wire::kTagSize);
      frame[wire::kHeaderSize + 5] ^= 0xFF;
      wire::put_u32(frame.data() + wire::kOffCrc, 0);
      wire::put_u32(frame.data() + wire::kOffCrc, ts::crc32(frame.data(), frame.size() - wire::kTagSize));
    } else if (kind == 0) {
      for (size_t i = frame.size() - wire::kTagSize; i < frame.size(); ++i) frame[i] = uint8_t(i * 31);
    }
    EXPECT_FALSE(d.feed(frame));
    EXPECT_NE(d.last_error().find("authentic"), std::string::npos) << d.last_error();
    EXPECT_EQ(d.w.stats().auth_failures, 1u);
    EXPECT_FALSE(d.w.link_open(0));
  }
}

TEST(WorkerAuth, FrameReplayedWithinTheSessionIsRefused) {
  const auto& f = fixture();
  Driver d(8, kKeyA);
  ASSERT_TRUE(d.authenticate(kKeyA));
  d.deployment = f.p.plan_id;
  const size_t before = d.sent_log.size();
  ASSERT_TRUE(d.raw(MsgType::Probe, 0, 0, f.frags[0].data(), 64, wire::kFlagLast));
  EXPECT_TRUE(d.saw(MsgType::ProbeReply));
  const std::vector<uint8_t> probe(d.sent_log.begin() + int64_t(before), d.sent_log.end());
  // The same bytes again: the tag was for an earlier frame count.
  d.got.clear();
  EXPECT_FALSE(d.feed(probe));
  EXPECT_FALSE(d.saw(MsgType::ProbeReply));
  EXPECT_EQ(d.w.stats().auth_failures, 1u);
}

TEST(WorkerAuth, SessionReplayedOnANewConnectionIsRefused) {
  // Record everything a coordinator sent in one session (AUTH, a deploy),
  // then replay it to the board on a new connection: the board's new HELLO
  // nonce gives new keys, so the recorded AUTH already fails.
  const auto& f = fixture();
  Driver d(8, kKeyA);
  ASSERT_TRUE(d.authenticate(kKeyA));
  ASSERT_TRUE(d.deploy(f.frags[0]));
  ASSERT_TRUE(d.saw(MsgType::Done));
  const std::vector<uint8_t> recorded = d.sent_log;
  const std::vector<uint8_t> first_hello = d.hello();
  d.flash.committed().clear();  // so a replayed deploy would show
  d.w.on_disconnect(0);
  d.reconnect();
  ASSERT_NE(d.hello(), first_hello) << "the board reused its nonce";
  EXPECT_FALSE(d.feed(recorded));
  EXPECT_FALSE(d.saw(MsgType::Done));
  EXPECT_TRUE(d.flash.committed().empty());
  EXPECT_EQ(d.w.stats().auth_failures, 1u);
}

// ---- board-to-board links ----

// A peer board (plan index 1) connects on link 1 and greets with its HELLO.
void peer_hello(Driver& d, uint32_t deployment) {
  EXPECT_TRUE(d.w.on_connect(1));
  wire::HelloPayload hp;
  hp.board_id = 1;
  uint8_t pay[32], frame[128];
  wire::FrameHeader h;
  h.type = MsgType::Hello;
  h.src = 1;
  h.dst = 0;
  h.deployment = deployment;
  h.seq = 1;
  h.flags = wire::kFlagLast;
  const size_t n = wire::encode_frame(h, pay, hp.encode(pay, sizeof pay), frame, sizeof frame);
  EXPECT_EQ(d.w.on_bytes(1, frame, n), int32_t(n));
  d.collect();
}

// A board that loses the link to a peer of its deployment in an inference
// says so to the coordinator at once (an ERROR naming the peer), so the
// coordinator can decide instead of waiting for its deadline; the same link
// closing between inferences (an idle limit, a peer that went while nothing
// was owed) is no news, and neither is a link of an older deployment.
TEST(WorkerPeers, LostPeerLinkIsReportedToTheCoordinator) {
  const auto& f = fixture();
  Driver d(8);
  ASSERT_TRUE(d.deploy(f.frags[0]));
  peer_hello(d, f.p.plan_id);
  ASSERT_TRUE(d.w.link_open(1));
  d.got.clear();
  d.w.on_disconnect(1);  // at rest: quiet
  d.collect();
  EXPECT_FALSE(d.saw(MsgType::Error)) << d.last_error();
  EXPECT_EQ(d.w.stats().peers_lost, 0u);

  // In an inference: part of the first layer's inputs came.
  size_t n = 0;
  while (f.p.workers[0].layers[n].run.empty()) ++n;
  const auto& s = f.p.workers[0].layers[n];
  const auto& r = s.inputs[0].runs[0];
  ASSERT_TRUE(d.raw(MsgType::Input, uint16_t(n), core::input_offset(0, r.offset),
                    reinterpret_cast<const uint8_t*>(f.ref[s.inputs[0].tensor].data()) + r.offset, 1, 0));
  peer_hello(d, f.p.plan_id);
  d.got.clear();
  d.w.on_disconnect(1);
  d.collect();
  EXPECT_NE(d.last_error().find("lost the link to peer board 1"), std::string::npos) << d.last_error();
  EXPECT_EQ(d.w.stats().peers_lost, 1u);

  peer_hello(d, f.p.plan_id + 1);  // a link learnt under another deployment
  d.got.clear();
  d.w.on_disconnect(1);
  d.collect();
  EXPECT_FALSE(d.saw(MsgType::Error)) << d.last_error();
  EXPECT_EQ(d.w.stats().peers_lost, 1u);
}

// A new session (another coordinator, once the last one went) closes the
// board-to-board links of the last one: they were opened for its plan. No
// PeerLost for them: the new session never had those peers.
TEST(WorkerPeers, NewSessionClosesTheLastSessionsPeerLinks) {
  const auto& f = fixture();
  Driver d(8);
  ASSERT_TRUE(d.deploy(f.frags[0]));
  peer_hello(d, f.p.plan_id);
  ASSERT_TRUE(d.w.link_open(1));
  d.w.on_disconnect(0);  // the coordinator went; its peer link stays for now
  ASSERT_TRUE(d.w.link_open(1));
  ASSERT_TRUE(d.w.on_connect(2));
  d.port.other.clear();
  wire::FrameHeader h;
  h.type = MsgType::Probe;
  h.src = wire::kCoordinatorId;
  h.seq = 1;
  h.flags = wire::kFlagLast;
  const uint8_t ping[4] = {9, 8, 7, 6};
  uint8_t frame[128];
  const size_t n = wire::encode_frame(h, ping, sizeof ping, frame, sizeof frame);
  ASSERT_EQ(d.w.on_bytes(2, frame, n), int32_t(n));
  EXPECT_FALSE(d.w.link_open(1));
  std::vector<MsgType> types;
  wire::FrameReader r;
  for (size_t pos = 0; pos < d.port.other.size();) {
    const auto got = r.feed(d.port.other.data() + pos, d.port.other.size() - pos);
    pos += got.consumed;
    if (got.status != wire::FrameReader::Status::Frame) break;
    types.push_back(r.header().type);
  }
  EXPECT_NE(std::find(types.begin(), types.end(), MsgType::ProbeReply), types.end());
  EXPECT_EQ(std::find(types.begin(), types.end(), MsgType::Error), types.end());
  EXPECT_EQ(d.w.stats().peers_lost, 0u);
}

// On a keyed board a peer's first frame must be its 32-byte HELLO; an
// untagged frame after it, a tag made without the key, or a peer without a
// key is refused (AuthFailed) and counted as a board-to-board failure.
TEST(WorkerPeers, KeyedBoardRefusesForgedPeerFrames) {
  const auto& f = fixture();
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    Driver d(8, kKeyA);
    ASSERT_TRUE(d.authenticate(kKeyA));
    ASSERT_TRUE(d.deploy(f.frags[0]));
    ASSERT_TRUE(d.w.on_connect(1));
    wire::HelloPayload hp;
    hp.board_id = 1;
    hp.auth = kind != 2;  // kind 2: a peer without a key (16-byte HELLO)
    for (auto& b : hp.nonce) b = 9;
    uint8_t pay[32], frame[256];
    wire::FrameHeader h;
    h.type = MsgType::Hello;
    h.src = 1;
    h.deployment = f.p.plan_id;
    h.seq = 1;
    h.flags = wire::kFlagLast;
    size_t n = wire::encode_frame(h, pay, hp.encode(pay, sizeof pay), frame, sizeof frame);
    const int32_t r = d.w.on_bytes(1, frame, n);
    if (kind == 2) {
      EXPECT_EQ(r, -1);
    } else {
      ASSERT_EQ(r, int32_t(n));
      h.type = MsgType::Probe;  // any frame; refused before it is looked at
      h.seq = 2;
      h.flags = uint16_t(kind == 0 ? wire::kFlagMac : 0);
      const uint8_t p8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      n = wire::encode_frame(h, p8, sizeof p8, frame, sizeof frame);
      if (kind == 0)
        for (size_t i = n - wire::kTagSize; i < n; ++i) frame[i] = uint8_t(i);
      EXPECT_EQ(d.w.on_bytes(1, frame, n), -1);
    }
    EXPECT_FALSE(d.w.link_open(1));
    EXPECT_EQ(d.w.stats().peer_auth_failures, 1u);
    EXPECT_EQ(d.w.stats().auth_failures, 1u);
    EXPECT_TRUE(d.w.link_open(0));  // the coordinator's session goes on
  }
}

// First layer with a non-empty share on board 0.
int first_layer(int w) {
  const auto& f = fixture();
  for (size_t n = 0; n < f.q.nodes.size(); ++n)
    if (!f.p.workers[w].layers[n].run.empty() && !f.p.workers[w].layers[n].inputs[0].runs.empty()) return int(n);
  return -1;
}

TEST(Worker, RefusesInputsOutsideItsRoutingSlice) {
  const auto& f = fixture();
  // A layer of board 0 and an element of its first operand that board 0 does
  // not need (the box around its runs is larger than the runs themselves, or
  // the board needs only part of the tensor).
  int n = -1;
  int64_t outside = -1;
  for (size_t l = 0; l < f.q.nodes.size() && outside < 0; ++l) {
    const auto& sl = f.p.workers[0].layers[l];
    if (sl.run.empty() || sl.inputs.empty() || sl.inputs[0].runs.empty()) continue;
    const int64_t total = f.q.shape(sl.inputs[0].tensor).size();
    for (int64_t e = 0; e < total && outside < 0; ++e) {
      bool in = false;
      for (auto& r : sl.inputs[0].runs) in = in || (e >= r.offset && e < int64_t(r.offset) + r.count);
      if (!in) {
        outside = e;
        n = int(l);
      }
    }
  }
  ASSERT_GE(outside, 0) << "board 0 needs every input of every layer: the fixture cannot test this";
  const auto& s = f.p.workers[0].layers[n];
  uint8_t v = 0;
  {
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    EXPECT_FALSE(d.raw(MsgType::Input, uint16_t(n), core::input_offset(0, uint32_t(outside)), &v, 1, wire::kFlagLast));
    EXPECT_NE(d.last_error().find("outside"), std::string::npos) << d.last_error();
  }
  {  // an operand the layer does not have
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    EXPECT_FALSE(d.raw(MsgType::Input, uint16_t(n), core::input_offset(7, 0), &v, 1, wire::kFlagLast));
    EXPECT_TRUE(d.saw(MsgType::Error));
  }
  {  // a layer that does not exist
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    EXPECT_FALSE(d.raw(MsgType::Input, 60000, 0, &v, 1, wire::kFlagLast));
    EXPECT_NE(d.last_error().find("unknown layer"), std::string::npos) << d.last_error();
  }
  {  // the same run twice: more elements than expected
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    ASSERT_TRUE(send_inputs(d, 0, n));
    const auto& r = s.inputs[0].runs[0];
    EXPECT_FALSE(d.message(MsgType::Input, uint16_t(n), core::input_offset(0, r.offset),
                           reinterpret_cast<const uint8_t*>(f.ref[s.inputs[0].tensor].data()) + r.offset, r.count));
    EXPECT_TRUE(d.saw(MsgType::Error));
  }
}

// Sends board w's inputs of layer n as INPUTS frames: each run cut into
// segments of `seg` elements, consecutive segments one strided block (stride
// seg, i.e. contiguous), blocks packed into frames up to the payload limit.
bool send_input_blocks(Driver& d, int w, int n, uint16_t seg) {
  const auto& f = fixture();
  const auto& s = f.p.workers[w].layers[n];
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const auto& src = f.ref[s.inputs[k].tensor];
    std::vector<uint8_t> pay;
    auto flush = [&](bool last) {
      if (pay.empty()) return true;
      const bool ok = d.raw(MsgType::Inputs, uint16_t(n), core::input_offset(uint32_t(k), 0), pay.data(), pay.size(),
                            last ? wire::kFlagLast : 0);
      pay.clear();
      return ok;
    };
    for (const auto& r : s.inputs[k].runs) {
      uint32_t at = r.offset;
      const uint32_t end = r.offset + r.count;
      while (at < end) {
        size_t room = wire::kMaxPayload - pay.size();
        if (room < wire::kInputBlockHeader + seg) {
          if (!flush(false)) return false;
          room = wire::kMaxPayload;
        }
        wire::InputBlock b;
        b.first = at;
        const uint32_t left = end - at;
        if (left < seg) {
          b.len = uint16_t(left);
          b.count = 1;
        } else {
          b.len = seg;
          b.count = uint16_t(std::min<size_t>(left / seg, (room - wire::kInputBlockHeader) / seg));
          b.stride = b.count > 1 ? seg : 0;
        }
        const size_t h = pay.size();
        pay.resize(h + wire::kInputBlockHeader);
        EXPECT_EQ(wire::encode_input_block_header(b, pay.data() + h, wire::kInputBlockHeader), wire::kInputBlockHeader);
        pay.insert(pay.end(), reinterpret_cast<const uint8_t*>(src.data()) + at,
                   reinterpret_cast<const uint8_t*>(src.data()) + at + b.bytes());
        at += b.bytes();
      }
    }
    if (!flush(true)) return false;
  }
  return true;
}

TEST(Worker, TakesInputsAsStridedBlocksAndRefusesStraySegments) {
  const auto& f = fixture();
  for (uint16_t seg : {uint16_t(1), uint16_t(7), uint16_t(300)}) {
    SCOPED_TRACE("segments of " + std::to_string(seg));
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    for (size_t n = 0; n < f.q.nodes.size(); ++n) {
      const auto& s = f.p.workers[0].layers[n];
      if (s.run.empty()) continue;
      d.got.clear();
      ASSERT_TRUE(send_input_blocks(d, 0, int(n), seg)) << d.last_error();
      ASSERT_TRUE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast)) << d.last_error();
      const auto& out = f.ref[f.q.nodes[n].output];
      int64_t got = 0;
      for (auto& fr : d.got)
        if (fr.first.type == MsgType::Output) {
          EXPECT_EQ(0, std::memcmp(fr.second.data(), out.data() + fr.first.offset, fr.second.size())) << "layer " << n;
          got += int64_t(fr.second.size());
        }
      EXPECT_EQ(got, s.run.size()) << "layer " << n;
    }
  }
  // A frame whose second block strays outside the routing slice is refused
  // as a whole.
  int n = -1;
  int64_t outside = -1;
  for (size_t l = 0; l < f.q.nodes.size() && outside < 0; ++l) {
    const auto& sl = f.p.workers[0].layers[l];
    if (sl.run.empty() || sl.inputs.empty() || sl.inputs[0].runs.empty()) continue;
    const int64_t total = f.q.shape(sl.inputs[0].tensor).size();
    for (int64_t e = 0; e < total && outside < 0; ++e) {
      bool in = false;
      for (auto& r : sl.inputs[0].runs) in = in || (e >= r.offset && e < int64_t(r.offset) + r.count);
      if (!in) {
        outside = e;
        n = int(l);
      }
    }
  }
  ASSERT_GE(outside, 0);
  const auto& r0 = f.p.workers[0].layers[n].inputs[0].runs[0];
  Driver d;
  ASSERT_TRUE(d.deploy(f.frags[0]));
  std::vector<uint8_t> pay(2 * wire::kInputBlockHeader + 2, 0);
  wire::InputBlock good, stray;
  good.first = r0.offset;
  good.len = 1;
  good.count = 1;
  stray.first = uint32_t(outside);
  stray.len = 1;
  stray.count = 1;
  wire::encode_input_block_header(good, pay.data(), pay.size());
  wire::encode_input_block_header(stray, pay.data() + wire::kInputBlockHeader + 1, pay.size());
  EXPECT_FALSE(d.raw(MsgType::Inputs, uint16_t(n), core::input_offset(0, 0), pay.data(), pay.size(), wire::kFlagLast));
  EXPECT_NE(d.last_error().find("outside"), std::string::npos) << d.last_error();
}

TEST(Worker, RefusesRunBeforeInputsAndForeignDeployments) {
  const auto& f = fixture();
  const int n = first_layer(0);
  {
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    EXPECT_FALSE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast));
    EXPECT_NE(d.last_error().find("before all inputs"), std::string::npos) << d.last_error();
    EXPECT_FALSE(d.saw(MsgType::Output));
  }
  {
    Driver d;
    ASSERT_TRUE(d.deploy(f.frags[0]));
    d.deployment ^= 0x5A5A5A5A;
    EXPECT_FALSE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast));
    EXPECT_TRUE(d.saw(MsgType::Error));
  }
  {  // no fragment at all
    Driver d;
    d.deployment = f.p.plan_id;
    EXPECT_FALSE(d.raw(MsgType::Run, uint16_t(n), 0, nullptr, 0, wire::kFlagLast));
    EXPECT_TRUE(d.saw(MsgType::Error));
  }
}

TEST(Worker, RefusesSequenceErrorsAndGarbage) {
  const auto& f = fixture();
  {  // a skipped sequence number
    Driver d;
    d.seq = 5;
    EXPECT_FALSE(d.raw(MsgType::Probe, 0, 0, nullptr, 0, wire::kFlagLast));
    EXPECT_NE(d.last_error().find("sequence"), std::string::npos) << d.last_error();
  }
  {  // a flipped bit anywhere in a frame
    for (size_t bit = 0; bit < 8 * 48; bit += 7) {
      Driver d;
      d.deployment = f.p.plan_id;
      wire::FrameHeader h;
      h.type = MsgType::Probe;
      h.seq = 1;
      uint8_t payload[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
      uint8_t buf[64];
      const size_t len = wire::encode_frame(h, payload, sizeof payload, buf, sizeof buf);
      buf[bit / 8] ^= uint8_t(1u << (bit % 8));
      EXPECT_FALSE(d.w.on_bytes(buf, len)) << "bit " << bit;
      d.collect();
      EXPECT_FALSE(d.saw(MsgType::ProbeReply)) << "bit " << bit;
    }
  }
  {  // random bytes, fed in random chunks, never crash or answer anything but ERROR
    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
      Driver d;
      ASSERT_TRUE(d.deploy(f.frags[trial % 2]));
      d.got.clear();
      std::vector<uint8_t> junk(size_t(rng() % 4000));
      for (auto& b : junk) b = uint8_t(rng());
      if (junk.size() > 2 && trial % 3 == 0) {  // sometimes start with a valid magic
        junk[0] = 0x54;
        junk[1] = 0x53;
      }
      size_t pos = 0;
      while (pos < junk.size()) {
        const size_t k = std::min(junk.size() - pos, size_t(1 + rng() % 300));
        if (!d.w.on_bytes(junk.data() + pos, k)) break;
        pos += k;
      }
      d.collect();
      for (auto& fr : d.got) EXPECT_TRUE(fr.first.type == MsgType::Error || fr.first.type == MsgType::Ack);
    }
  }
}

TEST(Worker, ArenaTooSmallIsAnErrorNotACrash) {
  const auto& f = fixture();
  const int n = first_layer(0);
  MemPort port;
  MemFlash flash(8u << 20);
  std::vector<uint8_t> arena(core::kWorkerFixedArena + 64);
  core::Worker w;
  core::WorkerConfig cfg;
  ASSERT_TRUE(w.init(cfg, arena.data(), uint32_t(arena.size()), &flash, &port));
  // Too small for even the fixed part: init refuses.
  core::Worker w2;
  std::vector<uint8_t> tiny(100);
  EXPECT_FALSE(w2.init(cfg, tiny.data(), uint32_t(tiny.size()), &flash, &port));
  // With the fragment committed directly, a layer that does not fit fails cleanly.
  ASSERT_TRUE(flash.stage(0, f.frags[0].data(), uint32_t(f.frags[0].size())));
  ASSERT_TRUE(flash.commit(uint32_t(f.frags[0].size()), ts::crc32(f.frags[0].data(), f.frags[0].size())));
  core::Worker w3;
  ASSERT_TRUE(w3.init(cfg, arena.data(), uint32_t(arena.size()), &flash, &port));
  ASSERT_TRUE(w3.on_connect());
  port.sent.clear();
  wire::FrameHeader h;
  h.type = MsgType::Run;
  h.src = wire::kCoordinatorId;
  h.seq = 1;
  h.layer = uint16_t(n);
  h.flags = wire::kFlagLast;
  h.deployment = f.p.plan_id;
  uint8_t buf[64];
  const size_t len = wire::encode_frame(h, nullptr, 0, buf, sizeof buf);
  EXPECT_FALSE(w3.on_bytes(buf, len));
  wire::FrameReader r;
  bool error = false;
  size_t pos = 0;
  while (pos < port.sent.size()) {
    auto res = r.feed(port.sent.data() + pos, port.sent.size() - pos);
    pos += res.consumed;
    if (res.status != wire::FrameReader::Status::Frame) break;
    if (r.header().type == MsgType::Error) {
      wire::ErrorPayload e;
      ASSERT_TRUE(e.decode(r.payload(), r.header().payload_len));
      EXPECT_EQ(e.code, wire::ErrorCode::OutOfMemory);
      error = true;
    }
  }
  EXPECT_TRUE(error);
  EXPECT_LE(w3.arena().high_water(), arena.size());
}

}  // namespace
