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

TextBox text_box(const RotatedRect& r, float score) {
  TextBox b;
  b.rect = r;
  b.quad = r.corners();
  b.score = score;
  return b;
}

namespace {

struct Region {
  size_t pixels = 0;
  std::vector<Point> hull;  // of the region's pixel centres
};

// The convex hull of a region's pixel centres (as PaddleOCR's contour
// points): for each of its rows, the centres of its leftmost and rightmost
// pixels.
std::vector<Point> region_hull(const std::vector<int>& pixels, int w) {
  int y0 = pixels[0] / w, y1 = y0;
  for (int i : pixels) y0 = std::min(y0, i / w), y1 = std::max(y1, i / w);
  std::vector<int> lo(size_t(y1 - y0 + 1), w), hi(size_t(y1 - y0 + 1), -1);
  for (int i : pixels) {
    const size_t r = size_t(i / w - y0);
    lo[r] = std::min(lo[r], i % w), hi[r] = std::max(hi[r], i % w);
  }
  std::vector<Point> pts;
  for (size_t r = 0; r < lo.size(); ++r) {
    const double y = double(y0) + double(r) + 0.5;
    pts.push_back({lo[r] + 0.5, y});
    pts.push_back({hi[r] + 0.5, y});
  }
  return convex_hull(std::move(pts));
}

// The 8-connected regions of a binary image (an explicit stack: no recursion).
std::vector<Region> regions_of(const std::vector<uint8_t>& bin, int h, int w) {
  std::vector<uint8_t> seen(bin.size(), 0);
  std::vector<Region> out;
  std::vector<int> stack, pixels;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t i0 = size_t(y) * size_t(w) + size_t(x);
      if (!bin[i0] || seen[i0]) continue;
      seen[i0] = 1;
      stack.assign(1, int(i0));
      pixels.clear();
      while (!stack.empty()) {
        const int i = stack.back();
        stack.pop_back();
        pixels.push_back(i);
        const int cy = i / w, cx = i % w;
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
      out.push_back(Region{pixels.size(), region_hull(pixels, w)});
    }
  return out;
}

// The mean probability over the pixels whose centres lie inside the convex
// quad (0 if none does).
double mean_inside(const ProbMap& m, const std::vector<Point>& quad) {
  double xmin = m.w, xmax = 0, ymin = m.h, ymax = 0;
  for (const Point& p : quad) xmin = std::min(xmin, p.x), xmax = std::max(xmax, p.x), ymin = std::min(ymin, p.y), ymax = std::max(ymax, p.y);
  const std::vector<Point> poly = signed_area2(quad) < 0 ? std::vector<Point>(quad.rbegin(), quad.rend()) : quad;
  auto inside = [&](double x, double y) {
    for (size_t i = 0; i < poly.size(); ++i) {
      const Point &a = poly[i], &b = poly[(i + 1) % poly.size()];
      if ((b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x) < -1e-9) return false;
    }
    return true;
  };
  double s = 0;
  size_t n = 0;
  const int y0 = std::max(0, int(std::floor(ymin))), y1 = std::min(m.h, int(std::ceil(ymax)));
  const int x0 = std::max(0, int(std::floor(xmin))), x1 = std::min(m.w, int(std::ceil(xmax)));
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      if (inside(x + 0.5, y + 0.5)) s += m.at(y, x), ++n;
  return n ? s / double(n) : 0.0;
}

}  // namespace

std::vector<TextBox> db_boxes(const ProbMap& m, const DbParams& p) {
  std::vector<Region> regs = regions_of(binarise(m, p.thresh), m.h, m.w);
  // PaddleOCR takes up to max_candidates contours; here the largest regions.
  std::stable_sort(regs.begin(), regs.end(), [](const Region& a, const Region& b) { return a.pixels > b.pixels; });
  if (int(regs.size()) > p.max_boxes) regs.resize(size_t(p.max_boxes));
  std::vector<TextBox> boxes;
  for (const Region& r : regs) {
    RotatedRect rect = min_area_rect(r.hull);
    if (std::min(rect.width, rect.height) < p.min_size) continue;
    const double score = mean_inside(m, rect.corners());
    if (score < p.box_thresh) continue;
    // Unclip: the region shrunk by the DB head's training grows back by
    // area x ratio / perimeter on every side.
    const double d = rect.width * rect.height * p.unclip_ratio / (2.0 * (rect.width + rect.height));
    rect.width += 2 * d;
    rect.height += 2 * d;
    if (std::min(rect.width, rect.height) < p.min_size + 2) continue;
    boxes.push_back(text_box(rect, float(score)));
  }
  std::sort(boxes.begin(), boxes.end(), [](const TextBox& a, const TextBox& b) {
    return a.quad[0].y != b.quad[0].y ? a.quad[0].y < b.quad[0].y : a.quad[0].x < b.quad[0].x;
  });
  return boxes;
}

double box_iou(const TextBox& a, const TextBox& b) { return convex_iou(a.quad, b.quad); }

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
  for (Point& p : s.quad)
    p = Point{std::clamp(p.x * sx, 0.0, double(photo_w)), std::clamp(p.y * sy, 0.0, double(photo_h))};
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
  // A side from corner p to corner q, t pixels thick: the pixels under
  // points one pixel apart along it (a corner at the photo's right or
  // bottom edge lies on its last pixel).
  auto side = [&](const Point& p, const Point& q) {
    const int steps = std::max(1, int(std::ceil(std::max(std::fabs(q.x - p.x), std::fabs(q.y - p.y)))));
    for (int s = 0; s <= steps; ++s) {
      const double x = p.x + (q.x - p.x) * s / steps, y = p.y + (q.y - p.y) * s / steps;
      const int px = std::min(W - 1, int(std::floor(x))) - t / 2, py = std::min(H - 1, int(std::floor(y))) - t / 2;
      for (int dy = 0; dy < t; ++dy)
        for (int dx = 0; dx < t; ++dx) paint(px + dx, py + dy);
    }
  };
  for (const TextBox& mb : boxes) {
    const TextBox b = scale_box(mb, m, W, H);
    for (size_t k = 0; k < b.quad.size(); ++k) side(b.quad[k], b.quad[(k + 1) % b.quad.size()]);
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
