// The output digest: a 64-bit hash of a board's outputs of one layer, sent
// in that layer's DONE (wire.h) and compared by the coordinator with the same
// digest of the single-process reference (docs/execution.md, "Every layer
// verified").
//
// Definition (docs/protocol.md, DONE, which gives the constants): the bytes
// are taken in 4-byte words w[0..n), little-endian (the last word
// zero-padded). Eight lanes, each a 64-bit state of two 32-bit halves
// (a, b): lane j starts from kDigestSeed + j * G (a the low half) and takes
// the words w[j], w[j+8], w[j+16], ...; a word is one Feistel round,
// t = a ^ w, p = t * M (32 x 32 -> 64 bits), (a, b) = (b ^ lo(p) ^ hi(p), t).
// Then v = kDigestSeed, v = mix(v ^ (b_j << 32 | a_j)) for j = 0..7,
// v = mix(v ^ (byte count * L)), and the digest is v ^ (v >> 32), where
// mix(x) = ((x * K1) ^ ((x * K1) >> 29)) * K2 modulo 2^64. Every step is a
// bijection of the state it updates (a Feistel round is one whatever its
// round function; odd multipliers and a right xor-shift are invertible), so
// two inputs of the same length that differ in one word always give
// different digests; inputs differing in more places collide with a
// probability of about 2^-64 (a cancelling second difference has to match
// a 32-bit value that depends on the data, twice). A round is five
// instructions on a 32-bit core (load, eor, umull, eor, eor): the 64-bit
// multiplies of the digest before cost a Cortex-M7 about 2.5 instructions
// per byte, and the per-layer digest of every output is a sizeable part of
// a board's work outside its kernels (docs/firmware.md). The eight lanes are
// independent chains: a 32-bit core runs four of them at a time in its
// registers, x86 all eight in SSE2 registers (digest.cpp).
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
constexpr int kDigestLanes = 8;

class Digest64 {
 public:
  Digest64();
  void update(const void* data, size_t len);
  // The digest of every byte given so far (the state is not changed).
  uint64_t finish() const;
  uint64_t bytes() const { return total_; }

 private:
  uint32_t s_[2 * kDigestLanes];  // lane j: a = s_[2j], b = s_[2j + 1]
  uint64_t total_ = 0;
  uint8_t tail_[4 * kDigestLanes] = {};
  uint32_t tail_n_ = 0;  // bytes waiting in tail_ (0..31): one block, a word per lane
};

// The lanes' rounds over n whole blocks of 32 bytes (state: a_j, b_j of lane
// j at [2j], [2j + 1]): the build's fastest form, and the portable one every
// form must equal (tests/digest_test.cpp).
void digest_blocks(uint32_t* state, const uint8_t* blocks, size_t n);
void digest_blocks_portable(uint32_t* state, const uint8_t* blocks, size_t n);

// One-shot form.
uint64_t digest64(const void* data, size_t len);

}  // namespace core
}  // namespace ts
