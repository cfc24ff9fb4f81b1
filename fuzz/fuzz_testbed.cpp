// Fuzz target: the testbed parser (src/plan/testbed.cpp).
//
// Checked for an accepted testbed: it is valid, its canonical JSON parses
// back to the same testbed, and the spawn-limit check answers with a
// ts::Error or nothing. Refusals must be ts::Error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "plan/testbed.h"

using namespace ts;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  plan::Testbed t;
  try {
    t = plan::parse_testbed(text, "fuzz.json");
  } catch (const Error& e) {
    FUZZ_CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line
    return 0;
  }
  FUZZ_CHECK(!t.boards.empty());
  plan::validate_testbed(t, "fuzz.json");
  const plan::Testbed back = plan::parse_testbed(plan::to_json(t).dump(2), "canonical");
  FUZZ_CHECK(back == t);
  try {
    plan::check_spawn_limit(t, "fuzz.json");
  } catch (const Error&) {
  }
  return 0;
}
