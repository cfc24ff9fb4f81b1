// Coordinator::deploy and the PEERS table (coordinator.h): every board's
// fragment goes as nothing (the board holds it), as a PATCH against the
// fragment the coordinator knows it holds (coord/fragment_patch.h), or whole
// (STORE chunks), then COMMIT.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <unistd.h>

#include "coord/coordinator.h"
#include "coord/fragment_patch.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "plan/fragment_writer.h"
#include "util/endpoint.h"

namespace ts::coord {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A patch is sent when it carries at most this share of the fragment's
// bytes; past it, STORE (no base digest and op headers to pay for).
constexpr double kPatchWorthIt = 0.75;

}  // namespace

// The COMMIT payload of `frag` (size, CRC-32, SHA-256).
static wire::CommitPayload commit_payload(const std::vector<uint8_t>& frag) {
  wire::CommitPayload c;
  c.fragment_size = uint32_t(frag.size());
  c.fragment_crc = crc32(frag.data(), frag.size());
  sha256(frag.data(), frag.size(), c.digest);
  return c;
}

// COMMIT `c`: the board answers DONE (it holds that fragment now) or ERROR.
Frame Coordinator::commit(BoardLink& l, const wire::CommitPayload& c) const {
  uint8_t buf[wire::CommitPayload::kSize];
  c.encode(buf, sizeof buf);
  l.send(MsgType::Commit, 0, 0, buf, sizeof buf, wire::kFlagLast, plan().plan_id);
  Frame f = l.recv_or_error();
  if (f.h.type != MsgType::Done && f.h.type != MsgType::Error)
    throw BoardError(l.who() + ": unexpected answer to COMMIT", l.index());
  return f;
}

// The answer to the COMMIT after the board was sent the fragment: DONE, or
// the error the run ends with.
void Coordinator::committed(BoardLink& l, const Frame& f) const {
  if (f.h.type == MsgType::Done) return;
  wire::ErrorPayload e;
  e.decode(f.payload.data(), f.payload.size());
  // The board is healthy and its fragment good, but its store failed (full
  // disk, not a folder): no failover fixes that, so the run ends with the
  // reason (ts::Error, not BoardError).
  if (e.code == wire::ErrorCode::StoreFailed)
    throw Error(l.who() + ": its store could not keep the fragment (" + e.text + "); the previous fragment is kept");
  throw BoardError(l.who() + ": refused its fragment: " + wire::error_code_name(e.code) + " " + e.text, l.index());
}

DeployResult Coordinator::deploy(std::vector<HeldFragment>* held) {
  std::vector<HeldFragment> fragments;
  for (int w = 0; w < plan().n_workers(); ++w)
    fragments.push_back(std::make_shared<const std::vector<uint8_t>>(plan::write_fragment(q_, plan(), w)));
  if (held && held->size() != fragments.size()) throw Error("deploy: one held fragment (or none) per board expected");
  DeployResult res;
  const auto t0 = Clock::now();
  std::atomic<int64_t> sent_bytes{0};
  std::atomic<int64_t> stored{0};  // fragment bytes actually sent
  std::atomic<int> sent{0}, cached{0}, patched{0}, finished{0};
  int64_t total = 0;
  for (auto& f : fragments) total += int64_t(f->size());
  std::vector<int> all(links_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);

  std::thread bar;
  std::atomic<bool> stop{false};
  if (opt_.progress && isatty(2)) {
    bar = std::thread([&] {
      while (!stop.load()) {
        const int64_t s = sent_bytes.load();
        const int fill = total ? int(30 * s / total) : 30;
        std::fprintf(stderr, "\rdeploy [%s%s] %lld/%lld bytes, %d/%zu boards", std::string(size_t(fill), '#').c_str(),
                     std::string(size_t(30 - fill), ' ').c_str(), (long long)s, (long long)total, finished.load(),
                     links_.size());
        std::fflush(stderr);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      std::fprintf(stderr, "\n");
    });
  }
  // Board i: nothing, a patch, or the whole fragment; then what it holds.
  auto one = [&](int i) {
    BoardLink& l = *links_[size_t(i)];
    const auto& frag = *fragments[size_t(i)];
    const wire::CommitPayload c = commit_payload(frag);
    const auto done = [&] {
      if (held) (*held)[size_t(i)] = fragments[size_t(i)];
      ++finished;
    };
    if (commit(l, c).h.type == MsgType::Done) {  // already holds this fragment
      ++cached;
      sent_bytes += int64_t(frag.size());
      done();
      return;
    }
    const HeldFragment base = held ? (*held)[size_t(i)] : nullptr;
    if (base) {
      uint8_t digest[32];
      sha256(base->data(), base->size(), digest);
      const Patch p = make_patch(*base, digest, frag);
      if (double(p.bytes) <= kPatchWorthIt * double(frag.size())) {
        for (size_t k = 0; k < p.frames.size(); ++k) {
          const auto& f = p.frames[k];
          l.send(MsgType::Patch, 0, f.offset, f.payload.data(), f.payload.size(),
                 k + 1 == p.frames.size() ? wire::kFlagLast : 0, plan().plan_id);
        }
        stored += p.bytes;
        const Frame f = commit(l, c);
        if (f.h.type == MsgType::Done) {
          sent_bytes += int64_t(frag.size());
          ++patched;
          done();
          return;
        }
        // The board did not hold that base after all (restarted, another
        // run's fragment): store it whole below.
        wire::ErrorPayload e;
        e.decode(f.payload.data(), f.payload.size());
        if (e.code != wire::ErrorCode::HashMismatch) committed(l, f);
      }
    }
    // Stored in 64 KiB messages so the progress bar moves while it goes.
    constexpr size_t kChunk = 64 * 1024;
    for (size_t pos = 0; pos < frag.size(); pos += kChunk) {
      const size_t n = std::min(kChunk, frag.size() - pos);
      l.send_message(MsgType::Store, 0, uint32_t(pos), frag.data() + pos, n, plan().plan_id);
      sent_bytes += int64_t(n);
      stored += int64_t(n);
    }
    committed(l, commit(l, c));
    ++sent;
    done();
  };
  try {
    parallel(all, one);
  } catch (...) {
    stop = true;
    if (bar.joinable()) bar.join();
    throw;
  }
  stop = true;
  if (bar.joinable()) bar.join();
  if (plan().route == plan::Route::Direct) send_peers();
  res.sent = sent.load();
  res.cached = cached.load();
  res.patched = patched.load();
  res.bytes = stored.load();
  res.full_bytes = total;
  res.seconds = seconds_since(t0);
  return res;
}

void Coordinator::send_peers() {
  std::vector<wire::PeerEntry> entries;
  for (size_t i = 0; i < links_.size(); ++i) {
    wire::PeerEntry e;
    e.worker = uint16_t(i);
    Endpoint at;
    if (!parse_endpoint(links_[i]->peer(), &at) || at.family != Endpoint::Family::IPv4)
      throw Error("direct routing needs boards the others can reach over TCP/IPv4; " + links_[i]->who() +
                  " is at '" + links_[i]->peer() + "' (use --route relay)");
    e.ipv4 = at.ipv4;
    e.port = at.port;
    entries.push_back(e);
  }
  if (entries.size() > wire::kMaxPeerEntries) throw Error("direct routing supports at most " +
                                                          std::to_string(wire::kMaxPeerEntries) + " boards");
  std::vector<uint8_t> payload(entries.size() * wire::kPeerEntryBytes);
  wire::encode_peers(entries.data(), entries.size(), payload.data(), payload.size());
  std::vector<int> all(links_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  parallel(all, [&](int i) {
    links_[i]->send(MsgType::Peers, 0, 0, payload.data(), payload.size(), wire::kFlagLast, plan().plan_id);
    links_[i]->flush();
  });
}

}  // namespace ts::coord
