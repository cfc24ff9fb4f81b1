// Output files written whole or not at all: the bytes go to a temporary file
// beside the target (same folder, so the rename cannot cross file systems),
// every write and the close are checked (a full disk is an error, not a
// truncated file), the data is flushed to disk, and only then is the
// temporary renamed over the target. On any failure the temporary is
// removed, the target is left as it was, and ts::Error says why in one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

void write_file_atomic(const std::string& path, const void* data, size_t size);
// The same, for callers that answer a failure themselves: 0, or the errno of
// the step that failed (the target is then left as it was).
int try_write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}
inline void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// The temporary name write_file_atomic uses for `path` (for writers that
// cannot hand over their bytes, e.g. an external program): write there, then
// commit_file_atomic() checks it is non-empty and renames it.
std::string atomic_temp_path(const std::string& path);
void commit_file_atomic(const std::string& temp, const std::string& path);

}  // namespace ts
