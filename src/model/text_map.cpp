#include "model/text_map.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

#include "util/error.h"

namespace ts {

ProbMap output_map(const std::vector<float>& values, int c, int h, int w) {
  if (h <= 1 || w <= 1)
    throw Error("the model's output is " + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) +
                ", not a map (text maps come from a detector such as ppocr-det)");
  if (values.size() != size_t(c) * size_t(h) * size_t(w)) throw Error("output_map: output size does not match its shape");
  ProbMap m;
  m.h = h, m.w = w;
  m.p.assign(values.begin(), values.begin() + ptrdiff_t(size_t(h) * size_t(w)));
  return m;
}

std::vector<uint8_t> binarise(const ProbMap& m, float thresh) {
  std::vector<uint8_t> b(m.p.size());
  for (size_t i = 0; i < m.p.size(); ++i) b[i] = m.p[i] > thresh ? 1 : 0;
  return b;
}

double binary_agreement(const ProbMap& a, const ProbMap& b, float thresh) {
  if (a.h != b.h || a.w != b.w || a.p.size() != b.p.size()) throw Error("binary_agreement: maps of different sizes");
  if (a.p.empty()) return 1.0;
  size_t same = 0;
  for (size_t i = 0; i < a.p.size(); ++i) same += (a.p[i] > thresh) == (b.p[i] > thresh);
  return double(same) / double(a.p.size());
}

namespace {

struct Region {
  int x0, y0, x1, y1;  // bounding box, exclusive ends
  size_t pixels;
};

// The 8-connected regions of a binary image (an explicit stack: no recursion).
std::vector<Region> regions_of(const std::vector<uint8_t>& bin, int h, int w) {
  std::vector<uint8_t> seen(bin.size(), 0);
  std::vector<Region> out;
  std::vector<int> stack;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t i0 = size_t(y) * size_t(w) + size_t(x);
      if (!bin[i0] || seen[i0]) continue;
      Region r{x, y, x + 1, y + 1, 0};
      seen[i0] = 1;
      stack.assign(1, int(i0));
      while (!stack.empty()) {
        const int i = stack.back();
        stack.pop_back();
        const int cy = i / w, cx = i % w;
        ++r.pixels;
        r.x0 = std::min(r.x0, cx), r.x1 = std::max(r.x1, cx + 1);
        r.y0 = std::min(r.y0, cy), r.y1 = std::max(r.y1, cy + 1);
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int ny = cy + dy, nx = cx + dx;
            if (ny < 0 || ny >= h || nx < 0 || nx >= w) continue;
            const size_t j = size_t(ny) * size_t(w) + size_t(nx);
            if (bin[j] && !seen[j]) {
              seen[j] = 1;
              stack.push_back(int(j));
            }
          }
      }
      out.push_back(r);
    }
  return out;
}

double mean_inside(const ProbMap& m, const Region& r) {
  double s = 0;
  for (int y = r.y0; y < r.y1; ++y)
    for (int x = r.x0; x < r.x1; ++x) s += m.at(y, x);
  return s / (double(r.x1 - r.x0) * double(r.y1 - r.y0));
}

}  // namespace

std::vector<TextBox> db_boxes(const ProbMap& m, const DbParams& p) {
  std::vector<Region> regs = regions_of(binarise(m, p.thresh), m.h, m.w);
  // PaddleOCR takes up to max_candidates contours; here the largest regions.
  std::stable_sort(regs.begin(), regs.end(), [](const Region& a, const Region& b) { return a.pixels > b.pixels; });
  if (int(regs.size()) > p.max_boxes) regs.resize(size_t(p.max_boxes));
  std::vector<TextBox> boxes;
  for (const Region& r : regs) {
    const int bw = r.x1 - r.x0, bh = r.y1 - r.y0;
    if (std::min(bw, bh) < p.min_size) continue;
    const double score = mean_inside(m, r);
    if (score < p.box_thresh) continue;
    // Unclip: the region shrunk by the DB head's training grows back by
    // area x ratio / perimeter on every side.
    const double d = double(bw) * double(bh) * p.unclip_ratio / (2.0 * double(bw + bh));
    const int g = int(std::lround(d));
    TextBox b{std::max(0, r.x0 - g), std::max(0, r.y0 - g), std::min(m.w, r.x1 + g), std::min(m.h, r.y1 + g),
              float(score)};
    if (std::min(b.width(), b.height()) < p.min_size + 2) continue;
    boxes.push_back(b);
  }
  std::sort(boxes.begin(), boxes.end(),
            [](const TextBox& a, const TextBox& b) { return a.y0 != b.y0 ? a.y0 < b.y0 : a.x0 < b.x0; });
  return boxes;
}

double box_iou(const TextBox& a, const TextBox& b) {
  const double iw = std::max(0, std::min(a.x1, b.x1) - std::max(a.x0, b.x0));
  const double ih = std::max(0, std::min(a.y1, b.y1) - std::max(a.y0, b.y0));
  const double inter = iw * ih;
  const double uni = double(a.width()) * a.height() + double(b.width()) * b.height() - inter;
  return uni > 0 ? inter / uni : 0.0;
}

BoxMatch match_boxes(const std::vector<TextBox>& reference, const std::vector<TextBox>& candidate, double min_iou) {
  BoxMatch r;
  r.reference = int(reference.size());
  r.candidate = int(candidate.size());
  if (reference.empty()) {
    r.mean_iou = candidate.empty() ? 1.0 : 0.0;
    return r;
  }
  struct Pair {
    double iou;
    size_t a, b;
  };
  std::vector<Pair> pairs;
  for (size_t a = 0; a < reference.size(); ++a)
    for (size_t b = 0; b < candidate.size(); ++b)
      if (const double v = box_iou(reference[a], candidate[b]); v > 0) pairs.push_back({v, a, b});
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) { return x.iou > y.iou; });
  std::vector<uint8_t> used_a(reference.size(), 0), used_b(candidate.size(), 0);
  double sum = 0;
  for (const Pair& q : pairs) {
    if (used_a[q.a] || used_b[q.b]) continue;
    used_a[q.a] = used_b[q.b] = 1;
    sum += q.iou;
    r.matched += q.iou >= min_iou;
  }
  r.mean_iou = sum / double(reference.size());
  return r;
}

TextBox scale_box(const TextBox& b, const ProbMap& m, int photo_w, int photo_h) {
  const double sx = double(photo_w) / m.w, sy = double(photo_h) / m.h;
  TextBox s = b;
  s.x0 = int(std::floor(b.x0 * sx));
  s.x1 = std::min(photo_w, int(std::ceil(b.x1 * sx)));
  s.y0 = int(std::floor(b.y0 * sy));
  s.y1 = std::min(photo_h, int(std::ceil(b.y1 * sy)));
  return s;
}

std::vector<uint8_t> overlay_png(const Image& photo, const ProbMap& m, const std::vector<TextBox>& boxes) {
  if (photo.w <= 0 || photo.h <= 0 || m.w <= 0 || m.h <= 0) throw Error("overlay: empty photo or map");
  const int W = photo.w, H = photo.h;
  std::vector<uint8_t> rgb(size_t(W) * size_t(H) * 3);
  for (int y = 0; y < H; ++y) {
    const int my = std::min(m.h - 1, int(int64_t(y) * m.h / H));
    for (int x = 0; x < W; ++x) {
      const int mx = std::min(m.w - 1, int(int64_t(x) * m.w / W));
      const float a = 0.6f * std::clamp(m.at(my, mx), 0.f, 1.f);
      const size_t i = (size_t(y) * size_t(W) + size_t(x)) * 3;
      for (int c = 0; c < 3; ++c) {
        const float grey = 0.6f * photo.rgb[i + size_t(c)];  // the photo dimmed, so the map shows
        const float v = c == 0 ? (1 - a) * grey + a * 255.f : (1 - a) * grey;
        rgb[i + size_t(c)] = uint8_t(std::lround(std::clamp(v, 0.f, 255.f)));
      }
    }
  }
  const int t = std::max(1, std::min(W, H) / 300);  // outline thickness
  auto paint = [&](int x, int y) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    const size_t i = (size_t(y) * size_t(W) + size_t(x)) * 3;
    rgb[i] = 0, rgb[i + 1] = 255, rgb[i + 2] = 0;
  };
  for (const TextBox& mb : boxes) {
    const TextBox b = scale_box(mb, m, W, H);
    for (int k = 0; k < t; ++k) {
      for (int x = b.x0; x < b.x1; ++x) paint(x, b.y0 + k), paint(x, b.y1 - 1 - k);
      for (int y = b.y0; y < b.y1; ++y) paint(b.x0 + k, y), paint(b.x1 - 1 - k, y);
    }
  }
  std::vector<uint8_t> png;
  auto sink = [](void* ctx, void* data, int size) {
    auto* out = static_cast<std::vector<uint8_t>*>(ctx);
    const auto* p = static_cast<const uint8_t*>(data);
    out->insert(out->end(), p, p + size);
  };
  if (!stbi_write_png_to_func(sink, &png, W, H, 3, rgb.data(), W * 3) || png.empty())
    throw Error("overlay: PNG encoding failed");
  return png;
}

}  // namespace ts
