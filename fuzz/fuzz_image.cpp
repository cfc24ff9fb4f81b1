// Fuzz target: image decoding (src/model/image.cpp, stb_image) and the
// preprocessing every photo goes through.
//
// Checked for a decoded image: its size is within the limit passed, it holds
// w*h*3 values in 0..255, and resizing it to 16x16 gives 768 finite values.
// Refusals must be ts::Error. The pixel limit is lower than the tool's so the
// fuzzer does not spend its time on huge pictures; the header check that
// enforces it is the same code. It is 128x128 pixels: a few bytes of RLE
// TGA, PNG or BMP declare that many, and decoding them pixel by pixel under
// the sanitizers and coverage counters was most of the time per input at the
// earlier 512x512 (2026-12-01 profile: stbi__tga_load and stbi__get8 ~70 %).
// The decoders take the same paths at 128x128 (several JPEG MCU rows, all 7
// PNG interlace passes, RLE packets across rows); only size arithmetic the
// limit refuses (over 2^31 bytes) is out of reach, as it was before.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "model/image.h"

using namespace ts;

#define FUZZ_CHECK(c)                                                         \
  do {                                                                        \
    if (!(c)) {                                                               \
      std::printf("check failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);      \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kLimit = 1 << 14;
  Image img;
  try {
    img = decode_image(data, size, "fuzz", kLimit);
  } catch (const Error&) {
    return 0;
  }
  FUZZ_CHECK(img.w >= 1 && img.h >= 1 && int64_t(img.w) * img.h <= kLimit);
  FUZZ_CHECK(img.rgb.size() == size_t(img.w) * size_t(img.h) * 3);
  for (float v : img.rgb) FUZZ_CHECK(v >= 0.f && v <= 255.f);
  ImageNorm norm;
  for (int c = 0; c < 3; ++c) {
    norm.mean[c] = 0.5f;
    norm.std[c] = 0.25f;
  }
  norm.bgr = (size & 1) != 0;  // both channel orders
  const auto x = preprocess(img, 16, norm);
  FUZZ_CHECK(x.size() == 768);
  for (float v : x) FUZZ_CHECK(std::isfinite(v));
  return 0;
}
