// Every file the program reads as input (a model, its weight shards, an
// image, a tensor, a testbed, a cost file, a stored fragment) is opened here:
// a regular file only (a directory, a device such as /dev/zero or a FIFO is
// refused without reading a byte), no larger than the cap of its kind
// (checked on the open file before the read), and read whole. A refusal is
// one ts::Error line naming the file and the reason.
#pragma once

#include <cstdint>
#include <string>

namespace ts {

// The caps, one per kind of input (docs/reliability.md, "Bounded inputs").
inline constexpr uint64_t kMaxModelFileBytes = uint64_t(1) << 30;   // TF.js json and shards, ONNX, .tsqm
inline constexpr uint64_t kMaxImageFileBytes = uint64_t(64) << 20;  // PNG, JPEG
inline constexpr uint64_t kMaxTensorFileBytes = uint64_t(256) << 20;  // .npy
inline constexpr uint64_t kMaxTextFileBytes = uint64_t(16) << 20;   // testbed, cost and calibration JSON, labels

// `what` names the kind in the message ("model file", "image", ...).
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// The same checks without the read (for readers that stream or peek);
// returns the file's size.
uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// A readable size: "64 MiB", "1 GiB", "1234 bytes".
std::string size_text(uint64_t bytes);

}  // namespace ts
