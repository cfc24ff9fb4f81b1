// Text detection on the host, after a detector's probability map (PP-OCR's
// DB head, `--model ppocr-det`): the map binarised, text boxes found the way
// PaddleOCR's DB post-process finds them, the boxes of two maps compared, and
// the map and boxes drawn over the photo as a PNG.
//
// As PaddleOCR's DBPostProcess: a box is the minimum-area rotated rectangle
// around one 8-connected region of the binarised map (model/polygon.h), its
// score the mean probability inside it, and the unclip step grows it by
// area x ratio / perimeter on every side (the distance PaddleOCR offsets
// the rectangle by; the minimum-area rectangle of that offset polygon is the
// rectangle grown so). The rectangle is fitted to the region's pixel
// centres, as PaddleOCR fits it to its contour's points (so a region of
// 40 x 10 pixels gives a 39 x 9 rectangle before the unclip, and a region
// fewer than min_size + 1 pixels across is dropped). Coordinates are in map
// pixels with pixel (x, y) covering [x, x+1) x [y, y+1), its centre at
// (x + 0.5, y + 0.5) (PaddleOCR scales pixel indices, half a pixel apart).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/image.h"
#include "model/polygon.h"

namespace ts {

// A probability map of h x w values in 0..1 (row-major), e.g. a detector's
// output plane 0.
struct ProbMap {
  int h = 0, w = 0;
  std::vector<float> p;
  float at(int y, int x) const { return p[size_t(y) * size_t(w) + size_t(x)]; }
};

// Plane 0 of a C x H x W output (e.g. a detector's probabilities), or an
// Error naming what the output is when it is no map (H or W of 1).
ProbMap output_map(const std::vector<float>& values, int c, int h, int w);

// PaddleOCR's DB defaults (det_db_thresh, det_db_box_thresh,
// det_db_unclip_ratio, min_size, max_candidates).
struct DbParams {
  float thresh = 0.3f;       // a pixel is text when its probability is above this
  float box_thresh = 0.6f;   // a box is kept when the mean probability inside it is at least this
  float unclip_ratio = 1.5f;
  int min_size = 3;          // boxes with a side shorter than this (map pixels) are dropped
  int max_boxes = 1000;      // regions considered, largest first
};

// A text box: a rotated rectangle (after the unclip) and its corners in
// PaddleOCR's order (top-left, top-right, bottom-right, bottom-left). Not
// clipped to the map (scale_box clips the corners to the photo).
struct TextBox {
  RotatedRect rect;
  std::vector<Point> quad;  // rect.corners(), or the scaled, clipped corners
  float score = 0;          // mean probability inside the rectangle before the unclip
};

// The rectangle as a box (its corners in PaddleOCR's order).
TextBox text_box(const RotatedRect& r, float score);

// 1 where the map is above `thresh`, else 0.
std::vector<uint8_t> binarise(const ProbMap& m, float thresh);

// The fraction of pixels on which two maps agree after binarising both.
double binary_agreement(const ProbMap& a, const ProbMap& b, float thresh);

// The text boxes of a map, in reading order (top to bottom, then left to right).
std::vector<TextBox> db_boxes(const ProbMap& m, const DbParams& p = {});

// Intersection over union of the two quads (convex polygons).
double box_iou(const TextBox& a, const TextBox& b);

// Boxes of a reference (e.g. float) and of a candidate (int8) paired
// greedily by IoU, best first; a pair counts when its IoU is at least
// `min_iou`. mean_iou is over the reference boxes (an unpaired one counts 0);
// 1 when both are empty.
struct BoxMatch {
  int reference = 0, candidate = 0, matched = 0;
  double mean_iou = 0;
};
BoxMatch match_boxes(const std::vector<TextBox>& reference, const std::vector<TextBox>& candidate,
                     double min_iou = 0.5);

// A box in map pixels scaled to a photo of photo_w x photo_h (the map covers
// the whole photo, resized to the map's size): its corners scaled and each
// clipped to [0, photo_w] x [0, photo_h], as PaddleOCR clips them; `rect`
// stays in map pixels.
TextBox scale_box(const TextBox& b, const ProbMap& m, int photo_w, int photo_h);

// The photo with the map in red over it (scaled to the photo) and each box
// (map pixels) outlined in green along its four sides, as PNG bytes.
std::vector<uint8_t> overlay_png(const Image& photo, const ProbMap& m, const std::vector<TextBox>& boxes);

}  // namespace ts
