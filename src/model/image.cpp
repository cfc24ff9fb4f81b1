#include "model/image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO_WARNINGS
// Debian's stb_image 2.27 has memory and integer bugs in its PNM (PGM/PPM)
// reader (found by fuzz_image: a 16-bit PGM read past its buffer, header
// numbers overflow int). Photos come as JPEG or PNG; PNM is not compiled in.
#define STBI_NO_PNM
#include <stb_image.h>

#include "util/input_file.h"

namespace ts {

namespace {

// Debian's stb_image (2.27) writes one byte past a Huffman size table when a
// JPEG's DHT segment declares more than 256 codes in one table (found by
// fuzz_image), and it reads the tables of DQT/DHT segments without holding
// them to the segment's length. So before stb sees a JPEG, walk its marker
// segments (including those between progressive scans) and refuse a DQT or
// DHT segment whose tables do not fill it exactly, lie outside the file, or
// hold a Huffman table of more than 256 codes. stb refuses such segments
// itself, but only after it has built the tables. A scan that selects a
// Huffman table no DHT segment defined is refused too: stb decodes it with a
// table it never built and reads past the table's code limits (found by
// fuzz_image: maxcode[18] of an 18-entry array). The walk also reads the
// frame's declared size from its SOF segment (into *w, *h; 0 if none).
bool jpeg_tables_ok(const uint8_t* d, size_t n, int* w, int* h) {
  bool defined[2][4] = {};  // [DC, AC][table id] seen in a DHT segment
  bool progressive = false;
  // SOI, which stb also finds after any number of 0xFF fill bytes.
  size_t i = 0;
  while (i < n && d[i] == 0xFF) ++i;
  if (i == 0 || i >= n || d[i] != 0xD8) return true;  // not a JPEG
  ++i;
  while (i + 1 < n) {
    if (d[i] != 0xFF) {  // entropy-coded data: skip to the next marker
      ++i;
      continue;
    }
    const uint8_t m = d[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    i += 2;
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;  // stuffed byte, TEM, RSTn, SOI
    if (m == 0xD9) return true;                                         // EOI
    if (i + 2 > n) return m != 0xC4 && m != 0xDB;
    const size_t seg = size_t(d[i]) << 8 | d[i + 1];
    if (seg < 2) return false;
    if (m == 0xC2) progressive = true;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && i + 7 <= n) {  // SOFn: (length, precision, height, width, ...)
      *h = d[i + 3] << 8 | d[i + 4];
      *w = d[i + 5] << 8 | d[i + 6];
    }
    if (m == 0xDA) {  // SOS: (count, per component (id, DC/AC table ids), Ss, Se, Ah/Al)
      if (i + seg > n || seg < 3) return false;
      const size_t ns = d[i + 2];
      if (seg != 6 + 2 * ns) return false;
      const uint8_t ss = d[i + 3 + 2 * ns], ah = d[i + 5 + 2 * ns] >> 4;
      for (size_t k = 0; k < ns; ++k) {
        const uint8_t td = d[i + 4 + 2 * k] >> 4, ta = d[i + 4 + 2 * k] & 15;
        if (td > 3 || ta > 3) return false;
        const bool dc = progressive ? (ss == 0 && ah == 0) : true;
        const bool ac = progressive ? ss > 0 : true;
        if ((dc && !defined[0][td]) || (ac && !defined[1][ta])) return false;
      }
    }
    if (m == 0xC4 || m == 0xDB) {
      if (i + seg > n) return false;
      const size_t end = i + seg;
      size_t p = i + 2;
      while (p < end) {
        if (m == 0xDB) {  // DQT: (precision/id, 64 entries of 1 or 2 bytes)
          p += (d[p] >> 4) ? 129 : 65;
        } else {  // DHT: (class/id, 16 counts, symbols)
          if (p + 17 > end) return false;
          if ((d[p] >> 4) > 1 || (d[p] & 15) > 3) return false;
          defined[d[p] >> 4][d[p] & 15] = true;
          size_t codes = 0;
          for (int k = 0; k < 16; ++k) codes += d[p + 1 + k];
          if (codes > 256) return false;
          p += 17 + codes;
        }
      }
      if (p != end) return false;
    }
    i += seg;
  }
  return true;
}

// stb_image (2.27) grows its buffer to an IDAT chunk's declared length before
// it checks that the file holds that many bytes: a 157-byte PNG that declares
// a 1 GB IDAT made it allocate 2 GB (found by fuzz_image). So before stb sees
// a PNG, walk its chunks and refuse one that runs past the end of the file.
bool png_chunks_ok(const uint8_t* d, size_t n) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n < 8 || !std::equal(kSig, kSig + 8, d)) return true;  // not a PNG
  size_t i = 8;
  while (i + 12 <= n) {
    const uint64_t len = (uint64_t(d[i]) << 24) | (uint64_t(d[i + 1]) << 16) | (uint64_t(d[i + 2]) << 8) | d[i + 3];
    if (len > n - i - 12) return false;
    const bool end = d[i + 4] == 'I' && d[i + 5] == 'E' && d[i + 6] == 'N' && d[i + 7] == 'D';
    i += 12 + size_t(len);
    if (end) return true;  // stb stops at IEND; what follows is never read
  }
  return i == n;  // a partial chunk header at the end is a truncated file
}

// A PNG's size from its IHDR chunk (which must come first), else 0.
void png_size(const uint8_t* d, size_t n, int* w, int* h) {
  if (n < 24 || d[0] != 0x89 || d[1] != 'P' || std::memcmp(d + 12, "IHDR", 4) != 0) return;
  auto be32 = [&](size_t i) { return uint32_t(d[i]) << 24 | uint32_t(d[i + 1]) << 16 | uint32_t(d[i + 2]) << 8 | d[i + 3]; };
  const uint32_t ww = be32(16), hh = be32(20);
  *w = ww > uint32_t(INT32_MAX) ? INT32_MAX : int(ww);
  *h = hh > uint32_t(INT32_MAX) ? INT32_MAX : int(hh);
}

}  // namespace

Image decode_image(const uint8_t* data, size_t len, const std::string& what, int64_t max_pixels) {
  if (len > size_t(INT32_MAX)) throw Error("image '" + what + "' is too large to decode");
  if (len >= 2 && data[0] == 'P' && data[1] >= '1' && data[1] <= '7')
    throw Error("cannot decode image '" + what + "': PGM/PPM images are not supported (use PNG or JPEG)");
  int w = 0, h = 0, ch = 0;
  // The declared size is checked before any pixel memory is taken: first
  // from the PNG or JPEG header itself (stb refuses a very large image with
  // "unknown image type"), then from stb's header reader.
  auto check_size = [&] {
    if (w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > max_pixels)
      throw Error("image '" + what + "' is too large: " + std::to_string(w) + "x" + std::to_string(h) +
                  " pixels; at most " + std::to_string(max_pixels) + " pixels and " + std::to_string(kMaxImageSide) +
                  " per side are accepted");
  };
  if (!jpeg_tables_ok(data, len, &w, &h))
    throw Error("cannot decode image '" + what + "': corrupt JPEG (bad quantisation or Huffman table)");
  if (!png_chunks_ok(data, len))
    throw Error("cannot decode image '" + what + "': corrupt PNG (a chunk runs past the end of the file)");
  png_size(data, len, &w, &h);
  check_size();
  if (!stbi_info_from_memory(data, int(len), &w, &h, &ch))
    throw Error("cannot decode image '" + what + "': " + (stbi_failure_reason() ? stbi_failure_reason() : "unknown format"));
  if (w <= 0 || h <= 0) throw Error("image '" + what + "' is empty");
  check_size();
  unsigned char* px = stbi_load_from_memory(data, int(len), &w, &h, &ch, 3);
  if (!px) throw Error("cannot decode image '" + what + "': " + (stbi_failure_reason() ? stbi_failure_reason() : "unknown"));
  // The decoder must deliver what the header declared (checked above).
  if (w <= 0 || h <= 0 || w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > max_pixels) {
    stbi_image_free(px);
    throw Error("image '" + what + "' decodes to an unexpected size");
  }
  Image img;
  img.w = w;
  img.h = h;
  img.rgb.assign(px, px + size_t(w) * h * 3);
  stbi_image_free(px);
  return img;
}

Image load_image(const std::string& path) {
  const std::string bytes = read_input_file(path, "image", kMaxImageFileBytes);
  return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

std::vector<float> preprocess(const Image& img, int size, const ImageNorm& norm) {
  if (size <= 0) throw Error("image size must be positive");
  std::vector<float> out(size_t(3) * size * size);
  const double sy = double(img.h) / size, sx = double(img.w) / size;
  for (int y = 0; y < size; ++y) {
    const double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, double(img.h - 1));
    const int y0 = int(fy), y1 = std::min(y0 + 1, img.h - 1);
    const double wy = fy - y0;
    for (int x = 0; x < size; ++x) {
      const double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, double(img.w - 1));
      const int x0 = int(fx), x1 = std::min(x0 + 1, img.w - 1);
      const double wx = fx - x0;
      for (int c = 0; c < 3; ++c) {
        const int p = norm.bgr ? 2 - c : c;
        auto px = [&](int yy, int xx) { return double(img.rgb[(size_t(yy) * img.w + xx) * 3 + p]); };
        const double v = (1 - wy) * ((1 - wx) * px(y0, x0) + wx * px(y0, x1)) + wy * ((1 - wx) * px(y1, x0) + wx * px(y1, x1));
        out[(size_t(c) * size + y) * size + x] = float((v / 255.0 - norm.mean[c]) / norm.std[c]);
      }
    }
  }
  return out;
}

std::vector<std::string> list_images(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error("image folder '" + dir + "' does not exist");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp" || ext == ".gif" || ext == ".tga")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error("no images in '" + dir + "'");
  return files;
}

}  // namespace ts
