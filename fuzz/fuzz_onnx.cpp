// Fuzz target: the ONNX importer (src/model/import_onnx.cpp), then folding,
// as `tinysplit` runs them on a model file.
//
// Checked for an accepted model: the graph validates (shapes re-inferred
// agree with the stored ones), every tensor has a usable shape, and folding
// keeps the input and output shapes. Refusals must be ts::Error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/fold.h"
#include "model/import_onnx.h"

using namespace ts;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Graph g;
  try {
    g = import_onnx_bytes(bytes, "fuzz.onnx", 0);
  } catch (const Error&) {
    return 0;
  }
  for (const auto& t : g.tensors) FUZZ_CHECK(t.shape.c >= 1 && t.shape.h >= 1 && t.shape.w >= 1);
  Graph copy = g;
  copy.validate();  // throws (uncaught: a crash report) if the importer left it inconsistent
  try {
    const Graph f = fold(g);
    FUZZ_CHECK(f.shape(f.input) == g.shape(g.input));
    FUZZ_CHECK(f.shape(f.output) == g.shape(g.output));
  } catch (const Error&) {
    // Folding may refuse (e.g. a pattern it cannot fold): a clear error is fine.
  }
  return 0;
}
