// NumPy .npy files: a small, strict reader and writer for the tensors that go
// into and come out of a model (float32 or int8, C order, little-endian).
//
// Format (numpy's NEP 1): the magic "\x93NUMPY", a version byte pair (1.0,
// 2.0 or 3.0), the header length (u16 for 1.0, u32 otherwise), an ASCII
// header holding a Python dict literal {'descr': '<f4', 'fortran_order':
// False, 'shape': (1, 3, 32, 32), } padded with spaces and ended by '\n',
// then the raw data. The writer emits version 1.0 with the header padded so
// that the data starts at a multiple of 64 bytes, as numpy does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts {

struct NpyArray {
  enum class Type { Float32, Int8 };
  Type type = Type::Float32;
  std::vector<int64_t> shape;
  std::vector<float> f32;  // Type::Float32
  std::vector<int8_t> i8;  // Type::Int8
  int64_t size() const;    // product of shape (1 for a scalar)
};

// Reads a .npy of dtype float32 ('<f4') or int8 ('|i1'). Throws ts::Error with
// one line naming the file for anything else: another dtype or byte order,
// Fortran order, a malformed header, truncated data or bytes after the data.
NpyArray read_npy(const std::string& path);
NpyArray parse_npy(const std::string& bytes, const std::string& name);

// Writes a C-order array; data.size() must equal the product of shape.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data);
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<int8_t>& data);
std::string npy_bytes(const std::vector<int64_t>& shape, const std::string& descr, const void* data, size_t bytes);

}  // namespace ts
