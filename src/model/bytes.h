// Little-endian byte writer/reader for host-side file formats (codecs: core/bytes.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "model/graph.h"

namespace ts {

class ByteWriter {
 public:
  std::vector<uint8_t> buf;
  void u8(uint8_t v) { buf.push_back(v); }
  void u16(uint16_t v) { uint8_t b[2]; le::put_u16(b, v); bytes(b, 2); }
  void u32(uint32_t v) { uint8_t b[4]; le::put_u32(b, v); bytes(b, 4); }
  void i32(int32_t v) { u32(uint32_t(v)); }
  void u64(uint64_t v) { for (int i = 0; i < 8; ++i) buf.push_back(uint8_t(v >> (8 * i))); }
  void f32(float f) { uint32_t v; std::memcpy(&v, &f, 4); u32(v); }
  void str(const std::string& s) { u32(uint32_t(s.size())); buf.insert(buf.end(), s.begin(), s.end()); }
  void bytes(const void* p, size_t n) { auto* b = static_cast<const uint8_t*>(p); buf.insert(buf.end(), b, b + n); }
  template <class T> void vec_i8(const std::vector<T>& v) { u32(uint32_t(v.size())); bytes(v.data(), v.size()); }
  void vec_i32(const std::vector<int32_t>& v) { u32(uint32_t(v.size())); for (int32_t x : v) i32(x); }
  void align(size_t a) { while (buf.size() % a) buf.push_back(0); }
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n, std::string what) : p_(p), n_(n), what_(std::move(what)) {}
  uint8_t u8() { need(1); return p_[off_++]; }
  uint16_t u16() { need(2); const uint16_t v = le::get_u16(p_ + off_); off_ += 2; return v; }
  uint32_t u32() { need(4); const uint32_t v = le::get_u32(p_ + off_); off_ += 4; return v; }
  int32_t i32() { return int32_t(u32()); }
  uint64_t u64() { uint64_t lo = u32(); uint64_t hi = u32(); return lo | (hi << 32); }
  float f32() { uint32_t v = u32(); float f; std::memcpy(&f, &v, 4); return f; }
  std::string str() { uint32_t n = count(1); std::string s(reinterpret_cast<const char*>(p_ + off_), n); off_ += n; return s; }
  template <class T> std::vector<T> vec_i8() {
    uint32_t n = count(1);
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), p_ + off_, n);
    off_ += n;
    return v;
  }
  std::vector<int32_t> vec_i32() {
    uint32_t n = count(4);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = i32();
    return v;
  }
  size_t offset() const { return off_; }
  size_t remaining() const { return n_ - off_; }

 private:
  uint32_t count(size_t elem) {
    uint32_t n = u32();
    if (size_t(n) * elem > n_ - off_) throw Error(what_ + ": corrupt (length field past the end)");
    return n;
  }
  void need(size_t k) {
    if (n_ - off_ < k) throw Error(what_ + ": truncated");
  }
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  std::string what_;
};

}  // namespace ts
