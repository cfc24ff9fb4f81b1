// The deploy session of a board (core/worker.h): the fragment it holds in
// flash (opened in place, STORE staging with its running SHA-256, COMMIT and
// the deploy cache), the facts of its layers worked out once (LayerIndex, a
// small cache of decoded entries), and the authentication of its links (AUTH
// with the coordinator, keyed board-to-board sessions: core/auth.h).
//
// Portable C++17: no heap, no exceptions, no RTTI, no OS calls.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/sha256.h"
#include "core/worker_api.h"

namespace ts {
namespace core {

class LinkSet;
class Worker;

// MACs a board spends on its share of a layer (the emulated clock's count).
uint64_t share_macs(const FragLayer& e);
// Top of the arena buffers of a layer's input windows in use at layer `at`
// (those taking frames from `at` on, avail_from <= at; the end of the
// highest one, relative to the planned buffers; 0 if none).
uint32_t windows_top(const FragLayer& e, uint32_t at);

// Layers whose facts a board works out once, when it opens a fragment
// (LayerIndex); a fragment of more layers computes the rest per use.
#ifndef TS_MAX_INDEXED_LAYERS
#define TS_MAX_INDEXED_LAYERS 256
#endif
constexpr uint32_t kMaxIndexedLayers = TS_MAX_INDEXED_LAYERS;

// What the board would otherwise work out from a layer's entry at every
// inference (its MAC count, a walk over its regions' segments) or every
// frame (whether it has a share), computed once per
// fragment into a fixed table: the worker's per-inference bookkeeping.
class LayerIndex {
 public:
  // Indexes the first kMaxIndexedLayers layers of an opened fragment.
  void build(const FragmentReader& f);
  void clear() { n_ = 0; }
  bool indexed(uint32_t i) const { return i < n_; }
  // Valid for indexed layers only.
  bool active(uint32_t i) const { return f_[i].active; }
  uint64_t macs(uint32_t i) const { return f_[i].macs; }

 private:
  struct Facts {
    uint64_t macs = 0;
    bool active = false;
  };
  Facts f_[kMaxIndexedLayers];
  uint32_t n_ = 0;
};

class DeploySession {
 public:
  void init(const WorkerConfig* cfg, FlashStore* flash, WorkerStats* stats, LinkSet* links, Worker* worker);
  // Opens the committed fragment (if any) and drops the work in progress;
  // true if the board holds one.
  bool open_fragment();

  bool have() const { return have_; }
  const FragmentReader& fragment() const { return frag_; }
  const FragHeader& header() const { return frag_.header(); }
  uint32_t plan_id() const { return plan_id_; }
  uint32_t layer_count() const { return have_ ? frag_.layer_count() : 0; }
  // The first layer this board has a share of.
  uint32_t first_active() const { return first_active_; }
  // Entry i of the fragment, decoded once into a small cache (valid until
  // the next call that maps to the same place: layers i and i + kEntryCache),
  // or nullptr.
  const FragLayer* entry(uint32_t i);
  // Entry i for a caller that holds one from entry() meanwhile: the cached
  // copy if there is one, else decoded into a spare entry (valid until the
  // next call), so the cache keeps what it holds.
  const FragLayer* entry_aside(uint32_t i);
  bool active(uint32_t i);
  uint64_t macs(const FragLayer& e) const { return index_.indexed(e.node) ? index_.macs(e.node) : share_macs(e); }

  // STORE (refused unless the board is idle) and COMMIT (answered with DONE,
  // or an ERROR the coordinator acts on). False: the link must close.
  bool on_store(int link, const wire::FrameHeader& h, const uint8_t* payload, bool idle);
  // PATCH (wire.h): like STORE, the bytes built from the committed fragment
  // and the new bytes the frame carries. A patch for another base, or one
  // that reads past it, stages nothing more (COMMIT then fails, and says why).
  bool on_patch(int link, const wire::FrameHeader& h, const uint8_t* payload, bool idle);
  bool on_commit(int link, const wire::FrameHeader& h, const uint8_t* payload);

  // Every frame passes here once, before the worker handles it.
  Verdict authenticate(int link);

 private:
  Verdict peer_session(int link);  // keyed board-to-board link: derive its keys from both HELLOs
  bool commit_staged(int link, const wire::FrameHeader& h, const wire::CommitPayload& c);
  // Stages `len` bytes at `offset` and hashes them if they continue the
  // in-order run from offset 0; false (NoSpace sent) if the flash refuses.
  bool stage(int link, const wire::FrameHeader& h, uint32_t offset, const uint8_t* data, uint32_t len);

  const WorkerConfig* cfg_ = nullptr;
  FlashStore* flash_ = nullptr;
  WorkerStats* stats_ = nullptr;
  LinkSet* links_ = nullptr;
  Worker* worker_ = nullptr;
  FragmentReader frag_;
  bool have_ = false;
  uint32_t plan_id_ = 0;
  uint32_t first_active_ = 0;
  LayerIndex index_;
  static constexpr uint32_t kEntryCache = 4;
  FragLayer cache_[kEntryCache];
  FragLayer spare_;  // entry_aside's
  uint32_t cache_layer_[kEntryCache] = {~0u, ~0u, ~0u, ~0u};  // ~0u: empty
  uint8_t digest_[kSha256Bytes] = {};  // SHA-256 of the committed fragment
  // Deploy in progress: SHA-256 of the STORE bytes staged so far, valid while
  // they arrive in order from offset 0 (stage_hashed_ bytes).
  Sha256 stage_sha_;
  uint32_t stage_hashed_ = 0;
  bool stage_in_order_ = true;
  // Why the staged bytes cannot be committed, set by a PATCH that did not
  // apply (nullptr: none); cleared by the next deploy from offset 0.
  const char* stage_refused_ = nullptr;
};

}  // namespace core
}  // namespace ts
