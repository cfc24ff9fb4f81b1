#include "model/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

#include "model/graph.h"
#include "util/atomic_file.h"
#include "util/input_file.h"

namespace ts {
namespace {

const char kMagic[] = "\x93NUMPY";

// Parser for the header's dict literal: string keys; values are strings,
// True/False or tuples of non-negative integers.
struct HeaderParser {
  const std::string& s;
  size_t i = 0;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool str(std::string* out) {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    const char q = s[i++];
    const size_t e = s.find(q, i);
    if (e == std::string::npos) return false;
    *out = s.substr(i, e - i);
    i = e + 1;
    return true;
  }
  bool word(const char* w) {
    ws();
    const size_t n = std::strlen(w);
    if (s.compare(i, n, w) != 0) return false;
    i += n;
    return true;
  }
  bool tuple(std::vector<int64_t>* out) {
    if (!eat('(')) return false;
    out->clear();
    for (;;) {
      if (eat(')')) return true;
      ws();
      if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
      int64_t v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        v = v * 10 + (s[i++] - '0');
        if (v > (int64_t(1) << 40)) return false;
      }
      out->push_back(v);
      if (eat(')')) return true;
      if (!eat(',')) return false;
    }
  }
};

}  // namespace

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray parse_npy(const std::string& b, const std::string& name) {
  auto fail = [&](const std::string& what) { return Error(name + ": " + what); };
  if (b.size() < 10 || b.compare(0, 6, kMagic, 6) != 0) throw fail("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  size_t hlen = 0, start = 0;
  if (major == 1) {
    hlen = size_t(static_cast<unsigned char>(b[8])) | size_t(static_cast<unsigned char>(b[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw fail("truncated header");
    for (int k = 0; k < 4; ++k) hlen |= size_t(static_cast<unsigned char>(b[8 + k])) << (8 * k);
    start = 12;
  } else {
    throw fail("unsupported .npy version " + std::to_string(major));
  }
  if (b.size() < start + hlen) throw fail("truncated header");
  const std::string h = b.substr(start, hlen);

  HeaderParser p{h};
  std::string descr;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::vector<int64_t> shape;
  if (!p.eat('{')) throw fail("malformed header (expected a dict)");
  for (;;) {
    if (p.eat('}')) break;
    std::string key;
    if (!p.str(&key) || !p.eat(':')) throw fail("malformed header");
    if (key == "descr") {
      if (!p.str(&descr)) throw fail("malformed header: 'descr' is not a string (structured arrays are not supported)");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (p.word("True")) fortran = true;
      else if (p.word("False")) fortran = false;
      else throw fail("malformed header: 'fortran_order' must be True or False");
      have_order = true;
    } else if (key == "shape") {
      if (!p.tuple(&shape)) throw fail("malformed header: 'shape' must be a tuple of integers");
      have_shape = true;
    } else {
      throw fail("unexpected key '" + key + "' in the header");
    }
    if (p.eat('}')) break;
    if (!p.eat(',')) throw fail("malformed header");
  }
  p.ws();
  while (p.i < h.size() && (h[p.i] == ' ' || h[p.i] == '\n')) ++p.i;
  if (p.i != h.size()) throw fail("malformed header (text after the dict)");
  if (!have_descr || !have_order || !have_shape) throw fail("header lacks 'descr', 'fortran_order' or 'shape'");
  if (fortran) throw fail("Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");

  NpyArray a;
  a.shape = shape;
  size_t item = 0;
  if (descr == "<f4" || (descr == "=f4")) {
    a.type = NpyArray::Type::Float32;
    item = 4;
  } else if (descr == "|i1" || descr == "<i1" || descr == ">i1" || descr == "=i1") {
    a.type = NpyArray::Type::Int8;
    item = 1;
  } else if (descr == ">f4") {
    throw fail("big-endian float32 is not supported; save little-endian ('<f4')");
  } else {
    throw fail("dtype '" + descr + "' is not supported; expected float32 ('<f4') or int8 ('|i1')");
  }
  // The product is checked before each step, so it cannot overflow (a
  // shape of (2^32, 2^32) wrapped to 0); a zero anywhere makes it 0.
  constexpr int64_t kMaxValues = int64_t(1) << 34;
  int64_t n = 1;
  const bool empty = std::find(shape.begin(), shape.end(), int64_t(0)) != shape.end();
  for (int64_t d : shape) {
    if (empty) n = 0;
    else if (n > kMaxValues / d) throw fail("shape is too large (more than 2^34 values)");
    else n *= d;
  }
  const size_t need = size_t(n) * item, have = b.size() - start - hlen;
  if (have < need)
    throw fail("truncated: the shape needs " + std::to_string(need) + " data bytes, the file has " + std::to_string(have));
  if (have > need) throw fail(std::to_string(have - need) + " bytes after the data the shape describes");
  const char* d = b.data() + start + hlen;
  if (a.type == NpyArray::Type::Float32) {
    a.f32.resize(size_t(n));
    std::memcpy(a.f32.data(), d, need);  // the host is little-endian (x86, Arm)
  } else {
    a.i8.resize(size_t(n));
    std::memcpy(a.i8.data(), d, need);
  }
  return a;
}

NpyArray read_npy(const std::string& path) {
  return parse_npy(read_input_file(path, "tensor file", kMaxTensorFileBytes), path);
}

std::string npy_bytes(const std::vector<int64_t>& shape, const std::string& descr, const void* data, size_t bytes) {
  // numpy spells a 1-tuple "(3,)" and others "(1, 3)"; either parses.
  std::string tuple = "(";
  for (size_t i = 0; i < shape.size(); ++i) tuple += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) tuple += ",";
  tuple += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + ", }";
  const size_t base = 10 + h.size() + 1;
  h.append((64 - base % 64) % 64, ' ');
  h += '\n';
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char((h.size() >> 8) & 0xff);
  out += h;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

namespace {
void write_file(const std::string& path, const std::string& bytes) { write_file_atomic(path, bytes); }

void check_size(const std::vector<int64_t>& shape, size_t n) {
  int64_t want = 1;
  for (int64_t d : shape) want *= d;
  if (want != int64_t(n)) throw Error("npy: " + std::to_string(n) + " values do not match the shape");
}
}  // namespace

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data) {
  check_size(shape, data.size());
  write_file(path, npy_bytes(shape, "<f4", data.data(), data.size() * 4));
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<int8_t>& data) {
  check_size(shape, data.size());
  write_file(path, npy_bytes(shape, "|i1", data.data(), data.size()));
}

}  // namespace ts
