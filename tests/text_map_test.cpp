// Text detection on the host (model/text_map.h): the DB post-process on
// maps drawn by hand, box IoU and pairing, the overlay PNG; and the CLI
// around it: `run --save-overlay` on a model whose output is a map (the
// U-Net test model), eval's map comparison, and the one-line refusals.
// PP-OCRv4 itself (`--model ppocr-det`) is fetched by scripts/fetch_model.sh
// and measured in docs/upsampling.md.
#include <gtest/gtest.h>

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

TEST(TextMap, RectanglesBecomeUnclippedBoxesInReadingOrder) {
  ProbMap m = blank(64, 96);
  fill(m, 50, 30, 90, 40, 0.9f);  // 40 x 10: unclip distance 400 * 1.5 / 100 = 6
  fill(m, 10, 10, 30, 14, 0.8f);  // 20 x 4: 80 * 1.5 / 48 = 2.5 -> 3 (rounded half away from zero)
  fill(m, 2, 50, 4, 60, 0.95f);   // 2 wide: below min_size, dropped
  fill(m, 40, 50, 60, 60, 0.4f);  // above thresh but its mean is below box_thresh: dropped
  const auto boxes = db_boxes(m);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].x0, 7);
  EXPECT_EQ(boxes[0].y0, 7);
  EXPECT_EQ(boxes[0].x1, 33);
  EXPECT_EQ(boxes[0].y1, 17);
  EXPECT_FLOAT_EQ(boxes[0].score, 0.8f);
  EXPECT_EQ(boxes[1].x0, 44);
  EXPECT_EQ(boxes[1].y0, 24);
  EXPECT_EQ(boxes[1].x1, 96);  // clipped to the map
  EXPECT_EQ(boxes[1].y1, 46);
}

TEST(TextMap, DiagonalNeighboursAreOneRegionAndTheMeanIsOverTheBox) {
  ProbMap m = blank(20, 20);
  fill(m, 2, 2, 6, 6, 1.f);
  fill(m, 6, 6, 10, 10, 1.f);  // touches the first at a corner: 8-connected
  DbParams p;
  p.unclip_ratio = 0;
  p.box_thresh = 0.4f;
  const auto boxes = db_boxes(m, p);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0].x0, 2);
  EXPECT_EQ(boxes[0].x1, 10);
  EXPECT_FLOAT_EQ(boxes[0].score, 0.5f);  // 32 of the box's 64 pixels
  p.box_thresh = 0.6f;
  EXPECT_TRUE(db_boxes(m, p).empty());
}

TEST(TextMap, AgreementIouAndPairing) {
  ProbMap a = blank(10, 10), b = blank(10, 10);
  fill(a, 0, 0, 5, 10, 0.9f);
  fill(b, 0, 0, 4, 10, 0.9f);
  EXPECT_DOUBLE_EQ(binary_agreement(a, b, 0.3f), 0.9);
  EXPECT_DOUBLE_EQ(binary_agreement(a, a, 0.3f), 1.0);
  EXPECT_THROW(binary_agreement(a, blank(10, 9), 0.3f), Error);

  const TextBox p{0, 0, 10, 10, 1}, q{5, 0, 15, 10, 1}, far{50, 50, 60, 60, 1};
  EXPECT_DOUBLE_EQ(box_iou(p, p), 1.0);
  EXPECT_DOUBLE_EQ(box_iou(p, q), 50.0 / 150.0);
  EXPECT_DOUBLE_EQ(box_iou(p, far), 0.0);
  const BoxMatch m = match_boxes({p, far}, {q, p});
  EXPECT_EQ(m.reference, 2);
  EXPECT_EQ(m.candidate, 2);
  EXPECT_EQ(m.matched, 1);           // p with p; far has no partner
  EXPECT_DOUBLE_EQ(m.mean_iou, 0.5); // (1 + 0) / 2
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
  const TextBox b{2, 2, 8, 8, 1};
  const std::vector<uint8_t> png = overlay_png(photo, m, {b});
  const fs::path f = fs::temp_directory_path() / ("ts_overlay_" + std::to_string(::getpid()) + ".png");
  std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  const Image back = load_image(f.string());
  fs::remove(f);
  ASSERT_EQ(back.w, 40);
  ASSERT_EQ(back.h, 30);
  auto px = [&](int x, int y, int c) { return back.rgb[(size_t(y) * 40 + size_t(x)) * 3 + size_t(c)]; };
  const TextBox s = scale_box(b, m, 40, 30);  // 8..32 x 6..24
  EXPECT_EQ(s.x0, 8);
  EXPECT_EQ(s.y1, 24);
  EXPECT_FLOAT_EQ(px(s.x0, s.y0 + 5, 1), 255.f);  // the outline is green
  EXPECT_FLOAT_EQ(px(s.x0, s.y0 + 5, 0), 0.f);
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
  for (const auto& b : j.at("overlay").at("text_boxes")) {  // in photo pixels
    EXPECT_GE(b.at("x0").get<int>(), 0);
    EXPECT_LE(b.at("x1").get<int>(), photo_img.w);
    EXPECT_LE(b.at("y1").get<int>(), photo_img.h);
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
