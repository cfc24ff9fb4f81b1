// Plane geometry for the text boxes of model/text_map.h: convex hulls, the
// minimum-area rotated rectangle around a point set (rotating calipers), and
// the intersection of two convex polygons (for a box IoU). Coordinates are
// doubles; y grows downwards as in an image, so "clockwise" below is as seen
// on the image.
#pragma once

#include <vector>

namespace ts {

struct Point {
  double x = 0, y = 0;
};

// The convex hull of the points, counter-clockwise in the usual x-right,
// y-up sense (clockwise on the image), without repeated or collinear
// points. Fewer than three distinct points give those points.
std::vector<Point> convex_hull(std::vector<Point> pts);

// Twice the signed area (positive when the vertices run counter-clockwise
// in the x-right, y-up sense), and the absolute area.
double signed_area2(const std::vector<Point>& poly);
double polygon_area(const std::vector<Point>& poly);

// A rectangle at any angle: its centre, its side lengths (`width` along
// the direction `angle`, in degrees from the x axis, in [0, 90); `height`
// across it) and its corners.
struct RotatedRect {
  Point center;
  double width = 0, height = 0;
  double angle = 0;
  // The corners in PaddleOCR's order: top-left, top-right, bottom-right,
  // bottom-left on the image (the two leftmost by x, the upper one first).
  std::vector<Point> corners() const;
};

// The rectangle of least area holding every point (one of its sides lies
// on an edge of the points' convex hull: each hull edge is tried, the
// extreme points along it and across it followed with rotating calipers).
// Empty input gives a zero rectangle; one or two points a degenerate one.
RotatedRect min_area_rect(const std::vector<Point>& pts);

// The intersection of two convex polygons, each with its vertices in either
// order (Sutherland-Hodgman clipping); empty when they do not overlap.
std::vector<Point> clip_convex(const std::vector<Point>& subject, const std::vector<Point>& clip);

// Area of the intersection over area of the union of two convex polygons;
// 0 when the union has no area.
double convex_iou(const std::vector<Point>& a, const std::vector<Point>& b);

}  // namespace ts
