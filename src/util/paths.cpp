#include "util/paths.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace ts {
namespace fs = std::filesystem;

std::string project_home() {
  if (const char* h = std::getenv("TINYSPLIT_HOME"); h && *h) return h;
  auto search = [](fs::path p) -> std::string {
    for (; !p.empty(); p = p.parent_path()) {
      if (fs::is_directory(p / "models") || fs::is_directory(p / "data")) return p.string();
      if (p == p.parent_path()) break;
    }
    return {};
  };
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = 0;
    if (auto s = search(fs::path(buf).parent_path()); !s.empty()) return s;
  }
  std::error_code ec;
  if (auto s = search(fs::current_path(ec)); !s.empty()) return s;
#ifdef TS_BUILD_SOURCE_DIR
  // A binary built outside the source tree (cmake -B /elsewhere), run from
  // outside it: the tree it was built from.
  return search(fs::path(TS_BUILD_SOURCE_DIR));
#else
  return {};
#endif
}

}  // namespace ts
