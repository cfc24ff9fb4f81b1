#include "model/polygon.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ts {

namespace {

double cross(const Point& o, const Point& a, const Point& b) {
  return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

double dot(const Point& a, double ux, double uy) { return a.x * ux + a.y * uy; }

// The polygon with its vertices counter-clockwise (x right, y up).
std::vector<Point> ccw(std::vector<Point> p) {
  if (signed_area2(p) < 0) std::reverse(p.begin(), p.end());
  return p;
}

// Where segment a-b crosses the line through c-d (a and b on either side).
Point crossing(const Point& a, const Point& b, const Point& c, const Point& d) {
  const double ca = cross(c, d, a), cb = cross(c, d, b);
  const double t = ca / (ca - cb);
  return Point{a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t};
}

// Index i + 1 around a polygon of n vertices.
size_t next(size_t i, size_t n) { return i + 1 == n ? 0 : i + 1; }

}  // namespace

std::vector<Point> convex_hull(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x != b.x ? a.x < b.x : a.y < b.y; });
  pts.erase(std::unique(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x == b.x && a.y == b.y; }),
            pts.end());
  if (pts.size() < 3) return pts;
  // Andrew's monotone chain: the lower hull left to right, then the upper
  // hull right to left, dropping every turn that is not strictly left.
  std::vector<Point> h(2 * pts.size());
  size_t k = 0;
  for (const Point& p : pts) {
    while (k >= 2 && cross(h[k - 2], h[k - 1], p) <= 0) --k;
    h[k++] = p;
  }
  for (size_t i = pts.size() - 1, lower = k + 1; i-- > 0;) {
    while (k >= lower && cross(h[k - 2], h[k - 1], pts[i]) <= 0) --k;
    h[k++] = pts[i];
  }
  h.resize(k - 1);  // the last point is the first again
  return h;
}

double signed_area2(const std::vector<Point>& poly) {
  double s = 0;
  for (size_t i = 0; i < poly.size(); ++i) {
    const Point &a = poly[i], &b = poly[next(i, poly.size())];
    s += a.x * b.y - b.x * a.y;
  }
  return s;
}

double polygon_area(const std::vector<Point>& poly) { return std::fabs(signed_area2(poly)) / 2; }

std::vector<Point> RotatedRect::corners() const {
  const double a = angle * M_PI / 180, ux = std::cos(a), uy = std::sin(a);
  const double hw = width / 2, hh = height / 2;
  static const int kSigns[4][2] = {{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};
  std::vector<Point> c;
  for (const auto& s : kSigns)
    c.push_back(Point{center.x + s[0] * hw * ux - s[1] * hh * uy, center.y + s[0] * hw * uy + s[1] * hh * ux});
  // PaddleOCR's order: by x; of the two leftmost the upper is top-left, of
  // the two rightmost the upper is top-right.
  std::stable_sort(c.begin(), c.end(), [](const Point& p, const Point& q) { return p.x < q.x; });
  const Point tl = c[1].y < c[0].y ? c[1] : c[0], bl = c[1].y < c[0].y ? c[0] : c[1];
  const Point tr = c[3].y < c[2].y ? c[3] : c[2], br = c[3].y < c[2].y ? c[2] : c[3];
  return {tl, tr, br, bl};
}

RotatedRect min_area_rect(const std::vector<Point>& pts) {
  const std::vector<Point> h = convex_hull(pts);
  RotatedRect best;
  if (h.empty()) return best;
  if (h.size() < 3) {  // a point or a segment
    const Point &a = h.front(), &b = h.back();
    best.center = Point{(a.x + b.x) / 2, (a.y + b.y) / 2};
    best.width = std::hypot(b.x - a.x, b.y - a.y);
    best.angle = h.size() == 2 ? std::atan2(b.y - a.y, b.x - a.x) * 180 / M_PI : 0;
  } else {
    // Rotating calipers: for hull edge i (direction u, inward normal v), the
    // extreme vertices along u (hi, lo) and along v (far) only move forward
    // as i does, so the whole sweep is linear in the hull's size.
    const size_t n = h.size();
    size_t hi = 1, far = 1, lo = 1;
    double best_area = -1;
    for (size_t i = 0; i < n; ++i) {
      const Point &a = h[i], &b = h[next(i, n)];
      const double len = std::hypot(b.x - a.x, b.y - a.y);
      const double ux = (b.x - a.x) / len, uy = (b.y - a.y) / len, vx = -uy, vy = ux;
      auto advance = [&](size_t& j, double dx, double dy, double sign) {
        for (size_t steps = 0; steps < n && sign * dot(h[next(j, n)], dx, dy) >= sign * dot(h[j], dx, dy); ++steps)
          j = next(j, n);
      };
      if (i == 0) hi = next(i, n);
      advance(hi, ux, uy, 1);
      if (i == 0) far = hi;
      advance(far, vx, vy, 1);
      if (i == 0) lo = far;
      advance(lo, ux, uy, -1);
      const double u0 = dot(h[lo], ux, uy) - dot(a, ux, uy), u1 = dot(h[hi], ux, uy) - dot(a, ux, uy);
      const double height = dot(h[far], vx, vy) - dot(a, vx, vy), width = u1 - u0;
      if (best_area >= 0 && width * height >= best_area) continue;
      best_area = width * height;
      best.width = width;
      best.height = height;
      best.angle = std::atan2(uy, ux) * 180 / M_PI;
      const double um = (u0 + u1) / 2, vm = height / 2;
      best.center = Point{a.x + ux * um + vx * vm, a.y + uy * um + vy * vm};
    }
  }
  // The angle into [0, 90): each quarter turn swaps the sides.
  const double turns = std::floor(best.angle / 90);
  best.angle -= 90 * turns;
  if (best.angle >= 90) best.angle -= 90;  // rounding at the boundary
  if (int64_t(turns) % 2 != 0) std::swap(best.width, best.height);
  return best;
}

std::vector<Point> clip_convex(const std::vector<Point>& subject, const std::vector<Point>& clip) {
  if (subject.size() < 3 || clip.size() < 3) return {};
  const std::vector<Point> c = ccw(clip);
  std::vector<Point> out = ccw(subject), in;
  for (size_t i = 0; i < c.size() && !out.empty(); ++i) {
    const Point &a = c[i], &b = c[next(i, c.size())];
    in.swap(out);
    out.clear();
    // Keep what lies left of a -> b (inside a counter-clockwise polygon).
    for (size_t j = 0; j < in.size(); ++j) {
      const Point &p = in[j], &q = in[next(j, in.size())];
      const bool p_in = cross(a, b, p) >= 0, q_in = cross(a, b, q) >= 0;
      if (p_in) out.push_back(p);
      if (p_in != q_in) out.push_back(crossing(p, q, a, b));
    }
  }
  return out.size() < 3 ? std::vector<Point>{} : out;
}

double convex_iou(const std::vector<Point>& a, const std::vector<Point>& b) {
  const double inter = polygon_area(clip_convex(a, b));
  const double uni = polygon_area(a) + polygon_area(b) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

}  // namespace ts
