// Fuzz target: the TF.js layers importer (src/model/import_tfjs.cpp), then
// folding. The input is model.json text, a NUL byte, then the bytes every
// weight shard named in the manifest reads as.
//
// Checked for an accepted model: the graph validates, every tensor has a
// usable shape, and folding keeps the input and output shapes. Refusals must
// be ts::Error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/fold.h"
#include "model/import_tfjs.h"

using namespace ts;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(p, 0, size);
  const size_t jn = nul ? size_t(static_cast<const char*>(nul) - p) : size;
  const std::string text(p, jn);
  const std::string shard = nul ? std::string(p + jn + 1, size - jn - 1) : std::string();
  Graph g;
  try {
    g = import_tfjs_text(text, "fuzz/model.json", [&](const std::string&) { return shard; }, 0);
  } catch (const Error&) {
    return 0;
  }
  for (const auto& t : g.tensors) FUZZ_CHECK(t.shape.c >= 1 && t.shape.h >= 1 && t.shape.w >= 1);
  Graph copy = g;
  copy.validate();
  try {
    const Graph f = fold(g);
    FUZZ_CHECK(f.shape(f.input) == g.shape(g.input));
    FUZZ_CHECK(f.shape(f.output) == g.shape(g.output));
  } catch (const Error&) {
  }
  return 0;
}
