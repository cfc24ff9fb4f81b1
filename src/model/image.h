// Image decoding and preprocessing shared by the float and int8 paths.
#pragma once

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

// Bilinear resize (half-pixel centres, edge clamped) to size x size, then
// x = (pixel/255 - mean[c]) / std[c], returned in C-H-W order.
std::vector<float> preprocess(const Image& img, int size, const float mean[3], const float stdv[3]);

// Lists image files (by extension) in a folder, sorted by name.
std::vector<std::string> list_images(const std::string& dir);

}  // namespace ts
