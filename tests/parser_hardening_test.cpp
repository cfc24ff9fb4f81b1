// Hostile inputs to the parsers that see outside bytes (issue 12): each case
// used to crash (SIGFPE, SIGSEGV, a read past a buffer or gigabytes of
// memory) and must now be one clear ts::Error. Inputs that the fuzz targets
// (fuzz/) found are kept in tests/data/fuzz/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/tiny_qgraph.h"
#include "model/fold.h"
#include "model/image.h"
#include "model/import_onnx.h"
#include "model/import_tfjs.h"
#include "model/qgraph.h"
#include "model/quantize.h"

using namespace ts;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ts::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "no ts::Error thrown";
}

// The folders temp_dir made, removed when the test program ends.
struct TempDirs {
  std::vector<fs::path> made;
  ~TempDirs() {
    for (const fs::path& d : made) {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  }
};

fs::path temp_dir(const std::string& name) {
  static TempDirs dirs;
  const fs::path d = fs::temp_directory_path() / ("ts_parser_test_" + std::to_string(::getpid()) + "_" + name);
  fs::create_directories(d);
  dirs.made.push_back(d);
  return d;
}

// ---------------------------------------------------------------- TF.js

// A TF.js layers model: input 8x8x3, Conv2D(2 filters, 3x3), then `extra`
// layers; weights are float32 zeros sized from the manifest.
struct Tfjs {
  json layers = json::array();
  json manifest = json::array();
  size_t floats = 0;
  std::string out = "conv";

  static json in(const std::string& a) { return json::array({json::array({json::array({a, 0, 0, json::object()})})}); }
  Tfjs() {
    layers.push_back({{"name", "input"}, {"class_name", "InputLayer"},
                      {"config", {{"batch_input_shape", {nullptr, 8, 8, 3}}}}, {"inbound_nodes", json::array()}});
    conv({3, 3}, {1, 1});
  }
  json& conv(json kernel, json strides) {
    layers.push_back({{"name", "conv"}, {"class_name", "Conv2D"},
                      {"config", {{"filters", 2}, {"kernel_size", kernel}, {"strides", strides}, {"padding", "valid"},
                                  {"use_bias", false}}},
                      {"inbound_nodes", in("input")}});
    weight("conv/kernel", {3, 3, 3, 2});
    return layers.back();
  }
  void weight(const std::string& name, std::vector<int> shape) {
    size_t n = 1;
    for (int d : shape) n *= size_t(d);
    floats += n;
    manifest.push_back({{"name", name}, {"shape", shape}, {"dtype", "float32"}});
  }
  // Writes model.json and the shard to a fresh folder; returns model.json.
  std::string write(const std::string& name) const {
    const fs::path d = temp_dir(name);
    json m = {{"format", "layers-model"},
              {"modelTopology",
               {{"model_config",
                 {{"class_name", "Model"},
                  {"config", {{"layers", layers}, {"input_layers", {{"input", 0, 0}}}, {"output_layers", {{out, 0, 0}}}}}}}}},
              {"weightsManifest", {{{"paths", {"w.bin"}}, {"weights", manifest}}}}};
    std::ofstream(d / "model.json") << m.dump();
    const std::string zeros(floats * 4, '\0');
    std::ofstream(d / "w.bin", std::ios::binary).write(zeros.data(), std::streamsize(zeros.size()));
    return (d / "model.json").string();
  }
};

TEST(TfjsHardening, ValidModelImports) {
  const Graph g = import_tfjs(Tfjs().write("valid"), 0);
  EXPECT_EQ(g.shape(g.output).c, 2);
  EXPECT_EQ(g.shape(g.output).h, 6);
}

TEST(TfjsHardening, KernelSizeZeroIsAnError) {
  Tfjs t;
  t.layers[1]["config"]["kernel_size"] = {0, 3};
  expect_error([&] { import_tfjs(t.write("k0"), 0); }, {"layer 'conv'", "kernel_size", "between 1 and"});
}

TEST(TfjsHardening, StrideZeroIsAnError) {
  Tfjs t;
  t.layers[1]["config"]["strides"] = 0;
  expect_error([&] { import_tfjs(t.write("s0"), 0); }, {"layer 'conv'", "strides"});
}

TEST(TfjsHardening, PoolSizeZeroAndHugeNumbersAreErrors) {
  Tfjs t;
  t.layers.push_back({{"name", "pool"}, {"class_name", "MaxPooling2D"},
                      {"config", {{"pool_size", {2, 0}}}}, {"inbound_nodes", Tfjs::in("conv")}});
  t.out = "pool";
  expect_error([&] { import_tfjs(t.write("p0"), 0); }, {"layer 'pool'", "pool_size"});
  Tfjs u;
  u.layers[1]["config"]["filters"] = 1e300;  // a float where an integer belongs
  expect_error([&] { import_tfjs(u.write("f"), 0); }, {"layer 'conv'", "filters", "whole number"});
}

TEST(TfjsHardening, AddWithoutInboundNodesIsAnError) {
  for (const json& inbound : {json::array(), json::array({json::array()})}) {
    Tfjs t;
    t.layers.push_back({{"name", "add"}, {"class_name", "Add"}, {"config", json::object()}, {"inbound_nodes", inbound}});
    t.out = "add";
    expect_error([&] { import_tfjs(t.write("add"), 0); }, {"layer 'add'"});
  }
}

TEST(TfjsHardening, ManifestShapeLargerThanTheShardIsAnError) {
  Tfjs t;
  t.manifest[0]["shape"] = {100000, 100000, 3, 2};  // 240 GB of floats declared, 216 bytes present
  expect_error([&] { import_tfjs(t.write("big"), 0); }, {"truncated", "conv/kernel"});
}

TEST(TfjsHardening, DeeplyNestedJsonIsAnError) {
  const fs::path d = temp_dir("deep");
  std::ofstream(d / "model.json") << std::string(200000, '[') << std::string(200000, ']');
  expect_error([&] { import_tfjs((d / "model.json").string(), 0); }, {"nested deeper than"});
}

TEST(TfjsHardening, InputSizeTheHeadCannotTakeSaysSo) {
  // Conv 3x3 valid -> Flatten -> Dense: trained at 8x8 (6*6*2 = 72 inputs).
  Tfjs t;
  t.layers.push_back({{"name", "flat"}, {"class_name", "Flatten"}, {"config", json::object()}, {"inbound_nodes", Tfjs::in("conv")}});
  t.layers.push_back({{"name", "dense"}, {"class_name", "Dense"}, {"config", {{"units", 2}, {"use_bias", false}}},
                      {"inbound_nodes", Tfjs::in("flat")}});
  t.weight("dense/kernel", {72, 2});
  t.out = "dense";
  const std::string path = t.write("head");
  EXPECT_EQ(import_tfjs(path, 8).shape(0).h, 8);
  expect_error([&] { import_tfjs(path, 16); }, {"layer 'dense'", "input size 16", "does not take this input size"});
}

// ---------------------------------------------------------------- .tsqm

const QGraph& small_model() {
  static const QGraph q = ts::testing::tiny_qgraph(2, 3);
  return q;
}

// Index of the first node with op `op`.
int first(const QGraph& q, core::QOp op) {
  for (size_t i = 0; i < q.nodes.size(); ++i)
    if (q.nodes[i].op == op) return int(i);
  return -1;
}

// Serialises a model changed by `edit` (with a valid checksum) and expects
// the reader to refuse it naming the node; a model the reader accepts would
// run into the kernels.
void expect_refused(const std::function<void(QGraph&)>& edit, const std::string& why) {
  QGraph q = small_model();
  edit(q);
  const auto bytes = serialize_qgraph(q);
  SCOPED_TRACE(why);
  expect_error([&] { run_int8(deserialize_qgraph(bytes, "bad.tsqm"), std::vector<int8_t>(size_t(q.shape(q.input).size()))); },
               {"quantised model: node", why});
}
}  // namespace

TEST(TsqmHardening, TheSmallModelRoundTrips) {
  const QGraph& q = small_model();
  ASSERT_GE(first(q, core::QOp::Conv), 0);
  const QGraph back = deserialize_qgraph(serialize_qgraph(q), "ok.tsqm");
  EXPECT_EQ(serialize_qgraph(back), serialize_qgraph(q));
  const std::vector<int8_t> x(size_t(q.shape(q.input).size()), 3);
  EXPECT_EQ(run_int8(back, x), run_int8(q, x));
}

TEST(TsqmHardening, InconsistentConvGeometryIsRefused) {
  const int c = first(small_model(), core::QOp::Conv);
  ASSERT_GE(c, 0);
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.sh = 0; }, "kernel, stride or dilation out of range");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.kw = 0; }, "kernel, stride or dilation out of range");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.dh = 1 << 20; }, "kernel, stride or dilation out of range");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.pad_t = -5; }, "padding out of range");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.pad_b += 7; }, "output size disagrees");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.groups = 0; }, "bad group count");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.in_zp[0] = 300; }, "zero point");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].geo.act_min = 100; q.nodes[size_t(c)].geo.act_max = 10; },
                 "activation clamp");
}

TEST(TsqmHardening, WrongDataSizesAreRefused) {
  const int c = first(small_model(), core::QOp::Conv);
  ASSERT_GE(c, 0);
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].weights.pop_back(); }, "weights have the wrong size");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].bias.pop_back(); }, "per-channel data has the wrong size");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].shift.push_back(0); }, "per-channel data has the wrong size");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].shift[0] = -40; }, "shift out of range");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].bias[0] = INT32_MAX; }, "bias too large");
  expect_refused([&](QGraph& q) { q.nodes[size_t(c)].lut.assign(256, 0); }, "unexpected lookup table");
}

TEST(TsqmHardening, WrongOperandsAreRefused) {
  const QGraph& m = small_model();
  const int g = first(m, core::QOp::Gemm);
  ASSERT_GE(g, 0);
  expect_refused([&](QGraph& q) { q.nodes[size_t(g)].geo.out_shift = 45; }, "output shift out of range");
  // An op whose operand count or shapes do not fit it: turn the Gemm into an
  // Add (one operand) and into a Lut (output shape differs from the input).
  expect_refused([&](QGraph& q) { q.nodes[size_t(g)].op = q.nodes[size_t(g)].geo.op = core::QOp::Add; },
                 "needs two operands");
  expect_refused([&](QGraph& q) { q.nodes[size_t(g)].op = q.nodes[size_t(g)].geo.op = core::QOp::Lut; },
                 "output shape differs from the input's");
}

// ---------------------------------------------------------------- images

TEST(ImageHardening, HugeDeclaredSizeIsRefusedBeforeDecoding) {
  // A valid PNG signature and IHDR that declare 16000 x 16000 RGB pixels,
  // followed by a few bytes: decoding it used to take 3.8 GB.
  std::string png = "\x89PNG\r\n\x1a\n";
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char((v >> 16) & 255), char((v >> 8) & 255), char(v & 255)};
  };
  std::string ihdr = "IHDR" + be32(16000) + be32(16000) + std::string("\x08\x02\x00\x00\x00", 5);
  png += be32(13) + ihdr + be32(0);  // the CRC is not checked by stb
  png += be32(4) + "IDAT" + std::string("\x78\x9c\x03\x00", 4) + be32(0);
  const fs::path f = temp_dir("img") / "huge.png";
  std::ofstream(f, std::ios::binary) << png;
  expect_error([&] { load_image(f.string()); }, {"huge.png", "16000x16000", "at most"});
}

TEST(ImageHardening, InputsFoundByFuzzingAreRefused) {
  const std::string dir = std::string(TS_SOURCE_DIR) + "/tests/data/fuzz/";
  // JPEG Huffman tables with more than 256 codes (stb wrote past its table),
  // also behind 0xFF fill bytes, and a 16-bit PGM (stb read past its buffer).
  expect_error([&] { load_image(dir + "jpeg_huffman_overflow.jpg"); }, {"corrupt JPEG"});
  expect_error([&] { load_image(dir + "jpeg_dht_fill_prefix.jpg"); }, {"corrupt JPEG"});
  expect_error([&] { load_image(dir + "pnm16_overflow.pgm"); }, {"PGM/PPM images are not supported"});
  // A scan that selects a Huffman table no DHT defined (stb read past it).
  expect_error([&] { load_image(dir + "jpeg_undefined_huffman.jpg"); }, {"corrupt JPEG"});
  // A PNG whose IDAT declares about 1 GB in a 157-byte file (stb took 2 GB).
  expect_error([&] { load_image(dir + "png_idat_length.png"); }, {"corrupt PNG", "past the end"});
}

TEST(ImageHardening, PhotosStillDecode) {
  const fs::path calib = fs::path(TS_SOURCE_DIR) / "data" / "calib";
  ASSERT_TRUE(fs::is_directory(calib)) << "run scripts/setup.sh first";
  for (const auto& f : list_images(calib.string())) {
    const Image img = load_image(f);
    EXPECT_GT(img.w, 0) << f;
    EXPECT_EQ(img.rgb.size(), size_t(img.w) * img.h * 3) << f;
  }
}
