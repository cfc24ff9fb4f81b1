// Text detection on the host (model/text_map.h): the DB post-process on
// maps drawn by hand (rotated rectangles, model/polygon.h: hull, calipers,
// convex clipping), quad IoU and pairing, the overlay PNG; and the CLI
// around it: `run --save-overlay` on a model whose output is a map (the
// U-Net test model), eval's map comparison, and the one-line refusals.
// PP-OCRv4 itself (`--model ppocr-det`) is fetched by scripts/fetch_model.sh
// and measured in docs/upsampling.md.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "model/image.h"
#include "model/text_map.h"
#include "support/shell.h"

namespace {

using namespace ts;
namespace fs = std::filesystem;
using ts::testing::tinysplit;

ProbMap blank(int h, int w) {
  ProbMap m;
  m.h = h, m.w = w;
  m.p.assign(size_t(h) * size_t(w), 0.f);
  return m;
}

void fill(ProbMap& m, int x0, int y0, int x1, int y1, float v) {
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) m.p[size_t(y) * size_t(m.w) + size_t(x)] = v;
}

// An axis-aligned box from x0, y0 to x1, y1 (map pixels).
TextBox rect_box(double x0, double y0, double x1, double y1, float score = 1) {
  RotatedRect r;
  r.center = Point{(x0 + x1) / 2, (y0 + y1) / 2};
  r.width = x1 - x0;
  r.height = y1 - y0;
  return text_box(r, score);
}

void expect_corner(const Point& p, double x, double y) {
  EXPECT_NEAR(p.x, x, 1e-9);
  EXPECT_NEAR(p.y, y, 1e-9);
}

// The unclip distance of a w x h rectangle: area x 1.5 / perimeter.
double unclip(double w, double h) { return w * h * 1.5 / (2 * (w + h)); }

TEST(TextMap, RectanglesBecomeUnclippedBoxesInReadingOrder) {
  ProbMap m = blank(64, 96);
  fill(m, 50, 30, 90, 40, 0.9f);  // 40 x 10 pixels: centres 50.5..89.5 x 30.5..39.5, a 39 x 9 rectangle
  fill(m, 10, 10, 30, 14, 0.8f);  // 20 x 4: a 19 x 3 rectangle
  fill(m, 2, 50, 4, 60, 0.95f);   // 2 wide: a rectangle 1 wide, below min_size, dropped
  fill(m, 40, 50, 60, 60, 0.4f);  // above thresh but its mean is below box_thresh: dropped
  const auto boxes = db_boxes(m);
  ASSERT_EQ(boxes.size(), 2u);
  ASSERT_EQ(boxes[0].quad.size(), 4u);
  const double d0 = unclip(19, 3), d1 = unclip(39, 9);
  // top-left, top-right, bottom-right, bottom-left
  expect_corner(boxes[0].quad[0], 10.5 - d0, 10.5 - d0);
  expect_corner(boxes[0].quad[1], 29.5 + d0, 10.5 - d0);
  expect_corner(boxes[0].quad[2], 29.5 + d0, 13.5 + d0);
  expect_corner(boxes[0].quad[3], 10.5 - d0, 13.5 + d0);
  EXPECT_NEAR(boxes[0].rect.angle, 0.0, 1e-9);
  EXPECT_NEAR(boxes[0].rect.width, 19 + 2 * d0, 1e-9);
  EXPECT_NEAR(boxes[0].rect.height, 3 + 2 * d0, 1e-9);
  EXPECT_FLOAT_EQ(boxes[0].score, 0.8f);  // the pixels whose centres lie in the rectangle: the region
  expect_corner(boxes[1].quad[0], 50.5 - d1, 30.5 - d1);
  expect_corner(boxes[1].quad[2], 89.5 + d1, 39.5 + d1);  // past the map's edge (96): not clipped
  EXPECT_GT(boxes[1].quad[2].x, 94.9);
  EXPECT_FLOAT_EQ(boxes[1].score, 0.9f);
}

// A rectangle at 30 degrees (and one at -30), rasterised: the region's
// minimum-area rectangle gives back its angle and sides to within the pixel
// squares' overhang, and its corners in PaddleOCR's order.
TEST(TextMap, RotatedRegionGivesBackItsAngleAndSides) {
  for (const double deg : {30.0, -30.0}) {
    ProbMap m = blank(80, 100);
    const double a = deg * M_PI / 180, ux = std::cos(a), uy = std::sin(a), cx = 50, cy = 40;
    for (int y = 0; y < m.h; ++y)
      for (int x = 0; x < m.w; ++x) {
        const double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
        if (std::fabs(dx * ux + dy * uy) <= 20 && std::fabs(-dx * uy + dy * ux) <= 6) fill(m, x, y, x + 1, y + 1, 0.9f);
      }
    DbParams p;
    p.unclip_ratio = 0;
    const auto boxes = db_boxes(m, p);
    ASSERT_EQ(boxes.size(), 1u) << deg;
    const RotatedRect& r = boxes[0].rect;
    // Angles are in [0, 90): -30 degrees is 60 with the sides swapped.
    const double angle = deg > 0 ? 30 : 60, along = deg > 0 ? r.width : r.height, across = deg > 0 ? r.height : r.width;
    EXPECT_NEAR(r.angle, angle, 2.0) << deg;
    EXPECT_NEAR(along, 39.2, 0.8) << deg;  // the pixel centres inside 40 x 12
    EXPECT_NEAR(across, 11.2, 0.8) << deg;
    EXPECT_NEAR(r.center.x, cx, 0.5);
    EXPECT_NEAR(r.center.y, cy, 0.5);
    EXPECT_GT(boxes[0].score, 0.85f);
    const auto& q = boxes[0].quad;
    EXPECT_LT(q[0].y, q[3].y);  // top-left above bottom-left
    EXPECT_LT(q[1].y, q[2].y);  // top-right above bottom-right
    EXPECT_LT(std::max(q[0].x, q[3].x), std::min(q[1].x, q[2].x) + 1e-9);
  }
}

// The L of two 8 x 2 arms: its least rectangle is the 7 x 7 square around
// its pixel centres (at 45 degrees it would be 56), and the score is the mean
// over the 64 pixels whose centres it holds, 28 of them text. 8-connected: a
// corner contact joins (two 4 x 4 squares: at 45 degrees, 42 against 49).
TEST(TextMap, TheScoreIsTheMeanOverTheRectangleAndDiagonalsJoin) {
  ProbMap m = blank(20, 20);
  fill(m, 2, 2, 10, 4, 1.f);
  fill(m, 2, 4, 4, 10, 1.f);
  DbParams p;
  p.unclip_ratio = 0;
  p.box_thresh = 0.4f;
  auto boxes = db_boxes(m, p);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_NEAR(boxes[0].rect.width * boxes[0].rect.height, 49.0, 1e-9);
  EXPECT_FLOAT_EQ(boxes[0].score, 28.f / 64.f);
  p.box_thresh = 0.6f;
  EXPECT_TRUE(db_boxes(m, p).empty());

  ProbMap d = blank(20, 20);
  fill(d, 2, 2, 6, 6, 1.f);
  fill(d, 6, 6, 10, 10, 1.f);  // touches the first at a corner
  p.box_thresh = 0.f;
  p.min_size = 2;  // the rectangle is 9.9 x 4.2 and not unclipped: min_size + 2 must be below 4.2
  boxes = db_boxes(d, p);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_NEAR(boxes[0].rect.width * boxes[0].rect.height, 42.0, 1e-9);
  EXPECT_NEAR(boxes[0].rect.angle, 45.0, 1e-9);
}

// Known rectangles: corners and points inside give back the rectangle; on
// random point sets the calipers' answer is the least over every hull edge.
TEST(Polygon, MinAreaRectIsTheLeastOverTheHullEdges) {
  RotatedRect want;
  want.center = Point{10, 5};
  want.width = 8;
  want.height = 2;
  want.angle = 20;
  std::vector<Point> pts = want.corners();
  pts.push_back(Point{10, 5});
  pts.push_back(Point{11, 5.2});
  const RotatedRect got = min_area_rect(pts);
  EXPECT_NEAR(got.angle, 20, 1e-9);
  EXPECT_NEAR(got.width, 8, 1e-9);
  EXPECT_NEAR(got.height, 2, 1e-9);
  EXPECT_NEAR(got.center.x, 10, 1e-9);
  EXPECT_NEAR(got.center.y, 5, 1e-9);

  uint32_t seed = 12345;
  auto rnd = [&] { return double((seed = seed * 1103515245u + 12345u) >> 8 & 0xffff) / 655.36; };
  for (int t = 0; t < 300; ++t) {
    std::vector<Point> cloud(size_t(3 + t % 40));
    for (Point& c : cloud) c = Point{rnd(), rnd() * 0.4};
    const std::vector<Point> h = convex_hull(cloud);
    if (h.size() < 3) continue;
    double least = 1e300;
    for (size_t i = 0; i < h.size(); ++i) {
      const Point &a = h[i], &b = h[(i + 1) % h.size()];
      const double len = std::hypot(b.x - a.x, b.y - a.y), ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;
      double u0 = 1e300, u1 = -1e300, v0 = 1e300, v1 = -1e300;
      for (const Point& q : h) {
        u0 = std::min(u0, q.x * ux + q.y * uy), u1 = std::max(u1, q.x * ux + q.y * uy);
        v0 = std::min(v0, -q.x * uy + q.y * ux), v1 = std::max(v1, -q.x * uy + q.y * ux);
      }
      least = std::min(least, (u1 - u0) * (v1 - v0));
    }
    const RotatedRect r = min_area_rect(cloud);
    EXPECT_NEAR(r.width * r.height, least, 1e-9 * least) << "cloud " << t;
    for (const Point& c : cloud) {  // every point inside the rectangle
      const double a = r.angle * M_PI / 180, dx = c.x - r.center.x, dy = c.y - r.center.y;
      EXPECT_LE(std::fabs(dx * std::cos(a) + dy * std::sin(a)), r.width / 2 + 1e-9);
      EXPECT_LE(std::fabs(-dx * std::sin(a) + dy * std::cos(a)), r.height / 2 + 1e-9);
    }
  }
}

TEST(Polygon, IouOfKnownConvexQuads) {
  const std::vector<Point> square{{-1, -1}, {1, -1}, {1, 1}, {-1, 1}};
  const std::vector<Point> inner{{1, 0}, {0, 1}, {-1, 0}, {0, -1}};  // area 2, inside the square
  const double r = std::sqrt(2.0);
  const std::vector<Point> diamond{{r, 0}, {0, r}, {-r, 0}, {0, -r}};  // the square turned 45 degrees
  EXPECT_NEAR(convex_iou(square, square), 1.0, 1e-12);
  EXPECT_NEAR(convex_iou(square, inner), 0.5, 1e-12);
  EXPECT_NEAR(convex_iou(square, diamond), 1 / std::sqrt(2.0), 1e-12);  // octagon 8(r-1) over union 8(2-r)
  const std::vector<Point> reversed(diamond.rbegin(), diamond.rend());  // either vertex order
  EXPECT_NEAR(convex_iou(reversed, square), 1 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(convex_iou(square, {{5, 5}, {6, 5}, {6, 6}, {5, 6}}), 0.0, 1e-12);
  EXPECT_NEAR(polygon_area(clip_convex(square, diamond)), 8 * (r - 1), 1e-12);
}

TEST(TextMap, AgreementIouAndPairing) {
  ProbMap a = blank(10, 10), b = blank(10, 10);
  fill(a, 0, 0, 5, 10, 0.9f);
  fill(b, 0, 0, 4, 10, 0.9f);
  EXPECT_DOUBLE_EQ(binary_agreement(a, b, 0.3f), 0.9);
  EXPECT_DOUBLE_EQ(binary_agreement(a, a, 0.3f), 1.0);
  EXPECT_THROW(binary_agreement(a, blank(10, 9), 0.3f), Error);

  const TextBox p = rect_box(0, 0, 10, 10), q = rect_box(5, 0, 15, 10), far = rect_box(50, 50, 60, 60);
  EXPECT_NEAR(box_iou(p, p), 1.0, 1e-12);
  EXPECT_NEAR(box_iou(p, q), 50.0 / 150.0, 1e-12);
  EXPECT_DOUBLE_EQ(box_iou(p, far), 0.0);
  const BoxMatch m = match_boxes({p, far}, {q, p});
  EXPECT_EQ(m.reference, 2);
  EXPECT_EQ(m.candidate, 2);
  EXPECT_EQ(m.matched, 1);           // p with p; far has no partner
  EXPECT_NEAR(m.mean_iou, 0.5, 1e-12); // (1 + 0) / 2
  EXPECT_DOUBLE_EQ(match_boxes({}, {}).mean_iou, 1.0);
  EXPECT_DOUBLE_EQ(match_boxes({}, {p}).mean_iou, 0.0);
}

TEST(TextMap, OutputMapTakesPlaneZeroAndRefusesAVector) {
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  const ProbMap m = output_map(v, 2, 3, 4);
  EXPECT_EQ(m.h, 3);
  EXPECT_EQ(m.w, 4);
  EXPECT_EQ(m.p.size(), 12u);
  EXPECT_FLOAT_EQ(m.at(2, 3), 11.f);
  try {
    (void)output_map(std::vector<float>(5), 5, 1, 1);
    FAIL() << "a 5-value output was taken as a map";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5x1x1, not a map"), std::string::npos) << e.what();
  }
}

TEST(TextMap, OverlayIsAPngOfThePhotosSizeWithTheBoxesDrawn) {
  Image photo;
  photo.w = 40, photo.h = 30;
  photo.rgb.assign(size_t(40) * 30 * 3, 100.f);
  ProbMap m = blank(10, 10);
  fill(m, 2, 2, 8, 8, 1.f);
  const TextBox b = rect_box(2, 2, 8, 8);
  const std::vector<uint8_t> png = overlay_png(photo, m, {b});
  const fs::path f = fs::temp_directory_path() / ("ts_overlay_" + std::to_string(::getpid()) + ".png");
  std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  const Image back = load_image(f.string());
  fs::remove(f);
  ASSERT_EQ(back.w, 40);
  ASSERT_EQ(back.h, 30);
  auto px = [&](int x, int y, int c) { return back.rgb[(size_t(y) * 40 + size_t(x)) * 3 + size_t(c)]; };
  const TextBox s = scale_box(b, m, 40, 30);  // 8..32 x 6..24
  expect_corner(s.quad[0], 8, 6);
  expect_corner(s.quad[2], 32, 24);
  EXPECT_FLOAT_EQ(px(8, 11, 1), 255.f);  // the outline is green
  EXPECT_FLOAT_EQ(px(8, 11, 0), 0.f);
  EXPECT_FLOAT_EQ(px(20, 24, 1), 255.f);  // the bottom side
  const TextBox clipped = scale_box(rect_box(-2, 5, 12, 9), m, 40, 30);  // corners clipped to the photo
  expect_corner(clipped.quad[0], 0, 15);
  expect_corner(clipped.quad[2], 40, 27);
  EXPECT_GT(px(20, 15, 0), px(20, 15, 1));         // inside: the map tints it red
  EXPECT_FLOAT_EQ(px(1, 1, 0), 60.f);              // outside: the photo, dimmed to 60 %
}

const std::string kUnet = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/unet_small.onnx";

TEST(TextMapCli, RunWritesTheOverlayOfAMapModelAndStaysBitExact) {
  const fs::path png = fs::temp_directory_path() / ("ts_run_overlay_" + std::to_string(::getpid()) + ".png");
  const std::string photo = std::string(TS_SOURCE_DIR) + "/data/eval/darknet_dog.jpg";
  ASSERT_TRUE(fs::exists(photo)) << "run scripts/setup.sh first";
  const auto r = tinysplit("run --model " + kUnet + " --workers 3 --image " + photo + " --save-overlay " + png.string() +
                           " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("overlay").at("file").get<std::string>(), png.string());
  const Image photo_img = load_image(photo), back = load_image(png.string());
  EXPECT_EQ(back.w, photo_img.w);
  EXPECT_EQ(back.h, photo_img.h);
  for (const auto& b : j.at("overlay").at("text_boxes")) {  // corners in photo pixels
    ASSERT_EQ(b.at("quad").size(), 4u);
    for (const auto& c : b.at("quad")) {
      EXPECT_GE(c.at(0).get<int>(), 0);
      EXPECT_LE(c.at(0).get<int>(), photo_img.w);
      EXPECT_GE(c.at(1).get<int>(), 0);
      EXPECT_LE(c.at(1).get<int>(), photo_img.h);
    }
    EXPECT_GE(b.at("angle").get<double>(), 0.0);
    EXPECT_LT(b.at("angle").get<double>(), 90.0);
  }
  fs::remove(png);
}

TEST(TextMapCli, EvalComparesTheBinarisedMaps) {
  const std::string photos = std::string(TS_SOURCE_DIR) + "/data/eval";
  const auto r = tinysplit("eval --model " + kUnet + " --images " + photos + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double mean = j.at("mean_pixel_agreement").get<double>(), lo = j.at("min_pixel_agreement").get<double>();
  EXPECT_GT(lo, 0.0);
  EXPECT_LE(lo, mean);
  EXPECT_LE(mean, 1.0);
  EXPECT_EQ(j.at("per_image").size(), j.at("images").get<size_t>());
  EXPECT_GT(j.at("images").get<int>(), 0);
}

TEST(TextMapCli, OverlayRefusals) {
  const fs::path png = fs::temp_directory_path() / ("ts_no_overlay_" + std::to_string(::getpid()) + ".png");
  auto r = tinysplit("run --workers 1 --save-overlay " + png.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "tinysplit: error: run: --save-overlay: the model's output is 5x1x1, not a map (text maps come "
                   "from a detector such as ppocr-det)\n");
  r = tinysplit("run --model " + kUnet + " --input /nonexistent.npy --save-overlay " + png.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "tinysplit: error: run: --save-overlay draws over a photo; it does not combine with --input or "
                   "--dataset\n");
  EXPECT_FALSE(fs::exists(png));
}

}  // namespace
