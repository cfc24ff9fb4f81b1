// Image decoding and preprocessing shared by the float and int8 paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"

namespace ts {

struct Image {
  int w = 0, h = 0;
  std::vector<float> rgb;  // interleaved RGB, 0..255
};

// Decodes JPEG/PNG/BMP/... with stb_image; grey images become RGB.
// Throws Error naming the file if it cannot be read or decoded.
Image load_image(const std::string& path);

// Largest image accepted: the header's size is checked before decoding, so a
// small file that declares a huge picture cannot take gigabytes (a decoded
// pixel costs 15 bytes here: 3 from the decoder, 12 as floats).
constexpr int kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = int64_t(1) << 25;  // 33.5 megapixels, ~0.5 GB decoded

// Decodes an image held in memory; `what` names it in errors. Throws Error if
// it is not a decodable image or is larger than max_pixels.
Image decode_image(const uint8_t* data, size_t len, const std::string& what,
                   int64_t max_pixels = kMaxImagePixels);

// Bilinear resize (half-pixel centres, edge clamped) to size x size, then
// x = (pixel/255 - mean[c]) / std[c], returned in C-H-W order.
std::vector<float> preprocess(const Image& img, int size, const ImageNorm& norm);

// Lists image files (by extension) in a folder, sorted by name.
std::vector<std::string> list_images(const std::string& dir);

}  // namespace ts
