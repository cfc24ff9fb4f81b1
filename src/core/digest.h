// The output digest: a 64-bit hash of a board's outputs of one layer, sent
// in that layer's DONE (wire.h) and compared by the coordinator with the same
// digest of the single-process reference (docs/execution.md, "Every layer
// verified").
//
// Definition (docs/protocol.md, DONE, which gives the constants): the bytes
// are taken in 8-byte words w[0..n), little-endian (the last word
// zero-padded). Four lanes: lane j starts at kDigestSeed + j * G and takes
// the words w[j], w[j+4], w[j+8], ...: h_j = mix(h_j ^ w). Then
// v = kDigestSeed, v = mix(v ^ h_j) for j = 0..3, v = mix(v ^ (byte count * L)),
// and the digest is v ^ (v >> 32), where
// mix(x) = ((x * K1) ^ ((x * K1) >> 29)) * K2 modulo 2^64. Every step is a
// bijection of the 64-bit state it updates (odd multipliers and a right
// xor-shift are invertible), so two inputs of the same length that differ in
// one word always give different digests; inputs differing in more places
// collide with a probability of about 2^-64. The four independent multiply
// chains let a core overlap them (one chain was a serial 8 bytes per
// multiply latency; the per-layer digest of every output was a sizeable
// part of a board's time, docs/benchmarks.md).
//
// Incremental: update() may be called with any split of the bytes (the
// coordinator feeds region segments, a board its whole output buffer) and
// gives the digest of their concatenation.
//
// Portable C++17 shared with the boards: no heap, no exceptions.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace ts {
namespace core {

constexpr uint64_t kDigestSeed = 0x6a09e667f3bcc909ull;
constexpr int kDigestLanes = 4;

class Digest64 {
 public:
  Digest64();
  void update(const void* data, size_t len);
  // The digest of every byte given so far (the state is not changed).
  uint64_t finish() const;
  uint64_t bytes() const { return total_; }

 private:
  uint64_t h_[kDigestLanes];
  uint64_t total_ = 0;
  uint8_t tail_[8 * kDigestLanes] = {};
  uint32_t tail_n_ = 0;  // bytes waiting in tail_ (0..31): one block of a word per lane
};

// One-shot form.
uint64_t digest64(const void* data, size_t len);

}  // namespace core
}  // namespace ts
