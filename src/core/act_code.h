// Lossless coding of int8 activations for board-to-board INPUTS frames
// (wire.h, "Coded INPUTS"): a layer's outputs cross a link in fewer bytes,
// and arrive bit for bit as they left.
//
// What it exploits: activations sit near their zero point, and after a
// ReLU/ReLU6 (an output clamp at the zero point) a third to two thirds of
// them are exactly the zero point. Each value d = (v - fill) mod 256 is
// coded on its own, least significant bit first into bytes:
//   * `flag` mode (outputs clamped at the zero point): one bit, 1 if d == 0
//     (then nothing more), else 0 and the rest of the code for d - 1 (d
//     unsigned: 1..255) or for zigzag(d) - 1 (signed);
//   * otherwise the code for d (unsigned) or zigzag(d) (signed: 0, -1, 1,
//     -2, ... as 0, 1, 2, 3, ...);
//   * the code of u (0..255) is Rice's: q = u >> k one bits, a zero bit,
//     then the k low bits of u; a quotient of kEscape or more is kEscape one
//     bits and the 8 bits of u instead (at most 21 bits a value);
//   * k adapts as the values go: the smallest k <= 7 with 2^k >= the mean
//     of the recent codes' u (a running mean in which each new u weighs
//     1/16, from 4; RiceState). Coder and decoder keep the same state, so
//     nothing about k is sent.
// The last byte's unused bits are 0.
//
// A second coding, `mask`, trades size for CPU: values go in groups of 8, a
// byte whose bit i is 1 when value i equals `fill`, then the group's other
// values as they are (the last group's unused bits 0): larger, but less
// than half the Rice code's CPU; on a 100 Mbit/s link only `mask` codes
// about as fast as the link sends (docs/protocol.md, "Coded INPUTS").
//
// Costs (no tables, no division): the loops take 15-20 instructions a value
// for mask on x86; on the Cortex-M7, with packing and placing, 60 for mask
// and 135 for Rice, against about 51 cycles a byte for the Teensy 4.1's link
// (docs/coding.md).
//
// Portable C++17 (shared with the firmware): no heap, no exceptions.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace ts {
namespace core {

// How one block's values are coded (wire.h carries it in the block header).
struct CodeParams {
  uint8_t fill = 0;     // the value that costs least: the tensor's zero point
  bool flag = false;    // one bit marks a value equal to `fill`
  bool zigzag = false;  // values on both sides of `fill`
  bool mask = false;    // the `mask` coding instead (flag and zigzag false)
  // The header byte: bit 0 flag, bit 1 zigzag, bit 2 mask (alone); other
  // bits must be 0.
  uint8_t mode() const { return uint8_t((flag ? 1 : 0) | (zigzag ? 2 : 0) | (mask ? 4 : 0)); }
  static bool from_mode(uint8_t mode, uint8_t fill, CodeParams* out);
};

// The parameters for a layer's outputs: its zero point, flagged when the
// layer clamps its outputs at the zero point (then no value lies below it);
// `mask`: the mask coding around the same value.
CodeParams code_params_for(int32_t out_zp, int32_t act_min, bool mask = false);

constexpr uint32_t kCodeEscape = 12;
constexpr uint32_t kCodeMaxBits = kCodeEscape + 8 + 1;  // one value, at most

// The adaptive Rice parameter, shared by coder and decoder: a_ is 16 times
// a running mean of the codes' u (each new u weighs 1/16), and k the
// smallest k <= 7 with 2^k >= that mean.
class RiceState {
 public:
  uint32_t k() const { return k_; }
  void update(uint32_t u) {
    a_ += u - (a_ >> 4);
    const uint32_t m = a_ >> 4;
    const uint32_t k = m > 1 ? 32u - uint32_t(__builtin_clz(m - 1)) : 0u;
    k_ = k > 7 ? 7 : k;
  }

 private:
  uint32_t a_ = 64, k_ = 2;
};

// Codes values into out[0, cap): put() appends whole runs of values or
// nothing, so a frame can be filled up to its room; finish() writes the
// last bits and gives the coded size. Bits go out a byte at a time from a
// 32-bit accumulator (a 32-bit core's word).
class CodeWriter {
 public:
  CodeWriter(uint8_t* out, size_t cap, CodeParams p) : out_(out), cap_bits_(uint64_t(cap) * 8), p_(p) {}
  // Appends v[0, n) if all of them fit, else appends nothing and returns false.
  bool put(const uint8_t* v, size_t n);
  // Appends as many values of v[0, n) as fit, in order; returns how many.
  size_t put_most(const uint8_t* v, size_t n);
  // Bytes coded so far (the last one padded with 0 bits).
  size_t bytes() const { return p_.mask ? s_.at : size_t((bits() + 7) / 8); }
  // Writes the bits still held back; returns bytes().
  size_t finish();

 private:
  struct State {
    size_t at;      // bytes written to out_
    uint32_t acc;   // Rice: bits not yet written, fewer than 8 between values;
    uint32_t nacc;  //   mask: the open group's mask and its values so far
    RiceState rice;
    size_t mask_at;  // mask: where the open group's mask byte is
  };
  uint64_t bits() const { return uint64_t(s_.at) * 8 + s_.nacc; }
  // Codes v[0, n) while they fit; returns how many did.
  size_t code(const uint8_t* v, size_t n);
  size_t code_masked(const uint8_t* v, size_t n);
  uint8_t* out_;
  uint64_t cap_bits_;
  CodeParams p_;
  State s_{0, 0, 0, RiceState(), 0};
};

// Decodes a coded run of bytes. get() checks as it goes: a code that runs
// past the end or names no byte value is an error, and finish() requires
// every byte used and the padding bits 0.
class CodeReader {
 public:
  CodeReader(const uint8_t* in, size_t len, CodeParams p) : in_(in), len_(len), p_(p) {}
  // Decodes the next n values into dst (nullptr: checks them only).
  bool get(uint8_t* dst, size_t n);
  bool finish() const;

 private:
  bool get_masked(uint8_t* dst, size_t n);
  const uint8_t* in_;
  size_t len_;
  size_t at_ = 0;       // bytes moved into buf_
  uint32_t buf_ = 0;    // bits not yet used, least significant first
  uint32_t nbuf_ = 0;   // how many of them came from the input (mask: the group's values left)
  CodeParams p_;
  RiceState rice_;
};

// The coded size of n values alone (a dry CodeWriter), for tests and the
// planner's estimates.
size_t coded_bytes(const uint8_t* v, size_t n, CodeParams p);

}  // namespace core
}  // namespace ts
