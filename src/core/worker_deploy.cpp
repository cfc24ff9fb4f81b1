#include "core/worker_deploy.h"

#include "core/worker.h"

namespace ts {
namespace core {

using wire::ErrorCode;
using wire::FrameHeader;
using wire::MsgType;

uint64_t share_macs(const FragLayer& e) {
  // The one MAC count (core/op.h), over the share's region segments.
  uint64_t macs = 0;
  for (uint32_t i = 0; i < e.n_regions; ++i)
    e.region(i).segments(e.desc.out, [&](int32_t b, int32_t end) {
      macs += range_macs(e.desc, b, end);
      return true;
    });
  return macs;
}

uint32_t windows_top(const FragLayer& e, uint32_t at) {
  uint32_t top = 0;
  for (int k = 0; k < e.desc.n_inputs; ++k) {
    const uint32_t n = uint32_t(e.box[k].elems(e.desc.in[k].w));
    if (n && e.avail_from[k] <= at && e.box_at[k] + arena_block(n) > top) top = e.box_at[k] + arena_block(n);
  }
  return top;
}

void LayerIndex::build(const FragmentReader& f) {
  n_ = 0;
  const uint32_t n = f.layer_count() < kMaxIndexedLayers ? f.layer_count() : kMaxIndexedLayers;
  FragLayer e;
  for (uint32_t i = 0; i < n; ++i) {
    if (f.layer(i, &e) != FragStatus::Ok) return;
    Facts& x = f_[i];
    x.active = e.active();
    x.macs = x.active ? share_macs(e) : 0;
    n_ = i + 1;
  }
}

void DeploySession::init(const WorkerConfig* cfg, FlashStore* flash, WorkerStats* stats, LinkSet* links,
                         Worker* worker) {
  cfg_ = cfg;
  flash_ = flash;
  stats_ = stats;
  links_ = links;
  worker_ = worker;
}

const FragLayer* DeploySession::entry(uint32_t i) {
  if (!have_ || i >= frag_.layer_count()) return nullptr;
  const uint32_t c = i % kEntryCache;
  if (cache_layer_[c] != i) {
    cache_layer_[c] = ~0u;
    if (frag_.layer(i, &cache_[c]) != FragStatus::Ok) return nullptr;
    cache_layer_[c] = i;
  }
  return &cache_[c];
}

const FragLayer* DeploySession::entry_aside(uint32_t i) {
  if (!have_ || i >= frag_.layer_count()) return nullptr;
  const uint32_t c = i % kEntryCache;
  if (cache_layer_[c] == i) return &cache_[c];
  return frag_.layer(i, &spare_) == FragStatus::Ok ? &spare_ : nullptr;
}

bool DeploySession::active(uint32_t i) {
  if (index_.indexed(i)) return index_.active(i);
  const FragLayer* e = entry(i);
  return e && e->active();
}

bool DeploySession::open_fragment() {
  uint32_t size = 0;
  const uint8_t* p = flash_->current(&size);
  have_ = p && frag_.open(p, size) == FragStatus::Ok;
  plan_id_ = have_ ? frag_.header().plan_id : 0;
  // The deploy cache's identity of what this board holds (on_commit).
  if (have_) sha256(p, size, digest_);
  else
    for (uint8_t& b : digest_) b = 0;
  for (uint32_t& c : cache_layer_) c = ~0u;
  index_.clear();
  first_active_ = 0;
  if (have_) {
    index_.build(frag_);
    const uint32_t n = frag_.layer_count();
    while (first_active_ < n && !active(first_active_)) ++first_active_;
  }
  worker_->abort_layer();
  return have_;
}

bool DeploySession::stage(int link, const FrameHeader& h, uint32_t offset, const uint8_t* data, uint32_t len) {
  if (uint64_t(offset) + len > flash_->capacity() || !flash_->stage(offset, data, len)) {
    links_->send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
    return false;
  }
  // Hash the staged bytes as they come (a deploy sends them in order from
  // offset 0), so COMMIT can check them against its SHA-256 without reading
  // the staging area back.
  if (offset == 0) {
    stage_sha_.reset();
    stage_hashed_ = 0;
    stage_in_order_ = true;
    stage_refused_ = nullptr;
  }
  if (stage_in_order_ && offset == stage_hashed_) {
    stage_sha_.update(data, len);
    stage_hashed_ += len;
  } else {
    stage_in_order_ = false;
  }
  return true;
}

bool DeploySession::on_store(int link, const FrameHeader& h, const uint8_t* payload, bool idle) {
  if (!idle) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "store during a layer");
    return false;
  }
  return stage(link, h, h.offset, payload, h.payload_len);
}

bool DeploySession::on_patch(int link, const FrameHeader& h, const uint8_t* payload, bool idle) {
  if (!idle) {
    links_->send_error(link, ErrorCode::NotReady, h.seq, "patch during a layer");
    return false;
  }
  uint32_t base_size = 0;
  const uint8_t* base = flash_->current(&base_size);
  // The ops name no base: a patch for another fragment than the one held
  // here stages nothing, and the COMMIT after it says so.
  auto refuse = [&](const char* why) {
    if (h.offset == 0 || stage_refused_ == nullptr) stage_refused_ = why;
    stage_in_order_ = false;
    return true;
  };
  if (!have_ || !base || !equal_ct(digest_, payload, wire::kPatchBaseBytes))
    return refuse("patch for a fragment this board does not hold");
  if (h.offset == 0) stage_refused_ = nullptr;
  if (stage_refused_) return true;  // an earlier part did not apply
  uint32_t at = h.offset;
  size_t pos = wire::kPatchBaseBytes;
  wire::PatchOp op;
  while (next_patch_op(payload, h.payload_len, &pos, &op)) {
    if (op.copy && uint64_t(op.from) + op.len > base_size) return refuse("patch reads past the fragment it applies to");
    if (uint64_t(at) + op.len > flash_->capacity()) {
      links_->send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
      return false;
    }
    // Copies go in pieces: the hash and the flash see them as a run of STOREs.
    constexpr uint32_t kPiece = 4096;
    const uint8_t* src = op.copy ? base + op.from : op.data;
    for (uint32_t done = 0; done < op.len;) {
      const uint32_t n = op.len - done < kPiece ? op.len - done : kPiece;
      if (!stage(link, h, at, src + done, n)) return false;
      done += n;
      at += n;
    }
  }
  return true;
}

// Commits the staged fragment COMMIT `c` asks for and opens it; false if it
// is refused (an ERROR the coordinator acts on was sent).
bool DeploySession::commit_staged(int link, const FrameHeader& h, const wire::CommitPayload& c) {
  if (c.fragment_size > flash_->capacity()) {
    links_->send_error(link, ErrorCode::NoSpace, h.seq, "fragment exceeds flash");
    return false;
  }
  // Commit what was staged only if all of it arrived in order and has the
  // digest asked for.
  uint8_t staged[kSha256Bytes];
  Sha256 s = stage_sha_;
  s.finish(staged);
  const bool complete = stage_in_order_ && stage_hashed_ == c.fragment_size;
  const bool match = complete && equal_ct(staged, c.digest, kSha256Bytes);
  stage_hashed_ = 0;
  stage_in_order_ = false;
  if (!match) {
    // "not stored" is expected on a first deploy: the coordinator then stores it.
    const char* why = stage_refused_ ? stage_refused_ : complete ? "staged fragment has another digest" : "not stored";
    stage_refused_ = nullptr;
    links_->send_error(link, ErrorCode::HashMismatch, h.seq, why);
    return false;
  }
  // Bytes with the right digest that are no fragment of this deployment
  // are refused before the commit: committing them would replace the
  // fragment held now (A/B keeps only the newest valid slot), leaving
  // the board with none.
  const uint8_t* staged_bytes = flash_->staged(c.fragment_size);
  FragmentReader check;
  const FragStatus st = staged_bytes ? check.open(staged_bytes, c.fragment_size) : FragStatus::TooShort;
  if (st != FragStatus::Ok || check.header().plan_id != h.deployment) {
    char text[wire::kMaxErrorText + 1];  // names the refused entry's layer and field
    fragment_invalid_text(st, check.refusal(), text, sizeof text);
    links_->send_error(link, ErrorCode::HashMismatch, h.seq, text);
    return false;
  }
  if (!flash_->commit(c.fragment_size, c.fragment_crc)) {
    // A store that failed is said as what it is: the fragment was good.
    const char* why = flash_->commit_error();
    links_->send_error(link, why ? ErrorCode::StoreFailed : ErrorCode::HashMismatch, h.seq, why ? why : "not stored");
    return false;
  }
  if (!open_fragment() || plan_id_ != h.deployment) {
    links_->send_error(link, ErrorCode::HashMismatch, h.seq, "fragment invalid");
    return false;
  }
  return true;
}

bool DeploySession::on_commit(int link, const FrameHeader& h, const uint8_t* payload) {
  wire::CommitPayload c;
  if (!c.decode(payload, h.payload_len)) {
    links_->send_error(link, ErrorCode::BadFrame, h.seq, "bad commit payload");
    return false;
  }
  if (!links_->send_ack_if_due(link)) return false;
  // Cached: the committed fragment is valid and is exactly the one asked
  // for (SHA-256 and size), of the deployment the COMMIT names. A fragment
  // of another plan or another board, or a damaged one, is never taken for it.
  uint32_t size = 0;
  flash_->current(&size);
  const bool cached = have_ && size == c.fragment_size && plan_id_ == h.deployment &&
                      equal_ct(digest_, c.digest, kSha256Bytes);
  if (!cached) {
    if (!commit_staged(link, h, c)) return true;  // recoverable: the coordinator reports it
  } else {
    worker_->abort_layer();
  }
  wire::DonePayload d;
  d.request_seq = h.seq;
  d.elapsed_us = 0;
  d.peak_ram_bytes = worker_->arena().high_water();
  uint8_t buf[wire::DonePayload::kSize];
  d.encode(buf, sizeof buf);
  return links_->send_frame(link, MsgType::Done, 0, 0, buf, uint16_t(sizeof buf), wire::kFlagLast, true);
}

// Every frame passes here once, before handle(): with a session its tag must
// verify; a board with a key takes nothing but AUTH before a session; a board
// without a key refuses AUTH and tagged frames. Refusals are one ERROR
// (AuthFailed) and the link closes.
Verdict DeploySession::authenticate(int link) {
  Link& l = (*links_)[link];
  const FrameHeader& h = l.reader.header();
  const bool tagged = (h.flags & wire::kFlagMac) != 0;
  auto refuse = [&](const char* why) {
    stats_->auth_failures++;
    if (link != links_->coord() && (l.dialled || l.worker >= 0 || l.claimed >= 0 || h.src != wire::kCoordinatorId))
      stats_->peer_auth_failures++;
    l.reader.refuse(wire::WireError::BadMac);
    links_->send_error(link, ErrorCode::AuthFailed, h.seq, why);
    return Verdict::Fail;
  };
  if (l.rx.active()) {
    if (!tagged) return refuse("unauthenticated frame in an authenticated session");
    if (!l.rx.check(l.reader.frame(), l.reader.frame_len())) return refuse("frame failed authentication");
    if (l.worker < 0 && l.claimed >= 0) {
      // The board that connected to us proved it holds the key (its first
      // tagged frame, the ACK of our HELLO): the link is now its.
      l.worker = l.claimed;
      l.deployment = l.claimed_deployment;
    }
    return Verdict::Ok;
  }
  if (!cfg_->has_key) {
    if (tagged || h.type == MsgType::Auth) return refuse("this board has no key");
    return Verdict::Ok;
  }
  if (l.dialled || h.src != wire::kCoordinatorId) return peer_session(link);
  // The coordinator acknowledges HELLO before it can key anything; an ACK
  // only moves this link's window, so it is the one frame taken untagged.
  if (h.type == MsgType::Ack && !tagged) return Verdict::Ok;
  if (h.type != MsgType::Auth || !tagged) return refuse("this board requires a key (AUTH first)");
  wire::AuthPayload a;
  if (!a.decode(l.reader.payload(), h.payload_len) || l.hello_len == 0) return refuse("bad AUTH");
  auth::SessionKeys k;
  auth::derive_session(cfg_->key, a.nonce, l.hello, l.hello_len, &k);
  l.rx.start(k.c2b);
  const bool ok = l.rx.check(l.reader.frame(), l.reader.frame_len());
  if (ok) l.tx.start(k.b2c);
  for (uint8_t& b : k.c2b) b = 0;
  for (uint8_t& b : k.b2c) b = 0;
  if (!ok) {
    l.rx.stop();
    return refuse("authentication failed: the coordinator's key differs");
  }
  return Verdict::Ok;
}

// A keyed board-to-board link: each board's first frame is its HELLO
// (untagged, 32 bytes, a fresh nonce); once a board has both HELLOs it
// derives the link's keys (auth::derive_peer) and every later frame in both
// directions is tagged. Called for the peer's first frame only.
Verdict DeploySession::peer_session(int link) {
  Link& l = (*links_)[link];
  const FrameHeader& h = l.reader.header();
  auto refuse = [&](const char* why) {
    stats_->auth_failures++;
    stats_->peer_auth_failures++;
    l.reader.refuse(wire::WireError::BadMac);
    links_->send_error(link, ErrorCode::AuthFailed, h.seq, why);
    return Verdict::Fail;
  };
  if (h.type != MsgType::Hello || (h.flags & wire::kFlagMac))
    return refuse("board-to-board link: HELLO first (frame refused)");
  wire::HelloPayload p;
  if (!p.decode(l.reader.payload(), h.payload_len) || !p.auth) return refuse("peer board has no key");
  if (!have_ || l.hello_len == 0) return refuse("no deployment for a board-to-board link");
  const uint16_t me = frag_.header().worker;
  uint16_t opener = me, acceptor = me;
  const uint8_t *ho = l.hello, *ha = l.hello;
  size_t no = l.hello_len, na = l.hello_len;
  if (l.dialled) {
    acceptor = uint16_t(l.worker);
    ha = l.reader.payload();
    na = h.payload_len;
  } else {
    if (h.src == me || h.src >= frag_.header().n_workers) return refuse("hello from a board outside the plan");
    opener = h.src;
    ho = l.reader.payload();
    no = h.payload_len;
  }
  auth::PeerKeys k;
  auth::derive_peer(cfg_->key, plan_id_, opener, acceptor, ho, no, ha, na, &k);
  l.tx.start(l.dialled ? k.o2a : k.a2o);
  l.rx.start(l.dialled ? k.a2o : k.o2a);
  for (uint8_t& b : k.o2a) b = 0;
  for (uint8_t& b : k.a2o) b = 0;
  return Verdict::Ok;
}

}  // namespace core
}  // namespace ts
