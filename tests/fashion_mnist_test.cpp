// Fashion-MNIST (Debian's dataset-fashion-mnist): the IDX reader against the
// data set's known facts, and `eval --dataset` / `run --dataset` on a small
// one-channel 28x28 model built here, checked against the library's own
// float and int8 executors on the same images. The trained model and the
// full 10,000-image figures come from scripts/fashion_mnist.sh (not run here:
// training takes minutes).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "model/dataset.h"
#include "model/float_exec.h"
#include "model/pipeline.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::tinysplit;

fs::path tmp_dir() {
  const fs::path d = fs::temp_directory_path() / ("ts_fashion_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

int64_t pixel_sum(const ts::LabelledImages& s, int i) {
  const size_t n = size_t(s.rows) * size_t(s.cols);
  return std::accumulate(s.pixels.begin() + std::ptrdiff_t(i * n), s.pixels.begin() + std::ptrdiff_t((i + 1) * n),
                         int64_t(0));
}

TEST(FashionMnist, TestAndTrainSplitsAreWhatTheDataSetSays) {
  const auto test = ts::load_fashion_mnist("test");
  EXPECT_EQ(test.count(), 10000);
  EXPECT_EQ(test.rows, 28);
  EXPECT_EQ(test.cols, 28);
  ASSERT_EQ(test.pixels.size(), size_t(10000) * 28 * 28);
  std::vector<int> counts(10, 0);
  for (uint8_t l : test.labels) ++counts[l];
  EXPECT_EQ(counts, std::vector<int>(10, 1000));
  EXPECT_EQ(std::vector<int>(test.labels.begin(), test.labels.begin() + 10),
            (std::vector<int>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_EQ(pixel_sum(test, 0), 33456);
  EXPECT_EQ(test.classes[9], "Ankle boot");

  const auto train = ts::load_fashion_mnist("train");
  EXPECT_EQ(train.count(), 60000);
  std::fill(counts.begin(), counts.end(), 0);
  for (uint8_t l : train.labels) ++counts[l];
  EXPECT_EQ(counts, std::vector<int>(10, 6000));
  EXPECT_EQ(std::vector<int>(train.labels.begin(), train.labels.begin() + 10),
            (std::vector<int>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(pixel_sum(train, 0), 76247);

  const auto some = ts::load_fashion_mnist("test", 7);
  EXPECT_EQ(some.count(), 7);
  EXPECT_EQ(some.pixels.size(), size_t(7) * 28 * 28);
  const auto x = some.input(0);
  ASSERT_EQ(x.size(), size_t(28 * 28));
  EXPECT_NEAR(std::accumulate(x.begin(), x.end(), 0.0), 33456 / 255.0, 1e-3);
}

void gz_write(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error (wanted '" << needle << "')";
  } catch (const ts::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(FashionMnist, BadFilesGiveOneLine) {
  const fs::path d = tmp_dir() / "bad";
  fs::create_directories(d);
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "dataset-fashion-mnist");
  expect_error([&] { ts::load_fashion_mnist("validation"); }, "train or test");
  // Header says 3 images of 28x28, the data holds 2.
  std::string h = std::string("\0\0\x08\x03", 4) + std::string("\0\0\0\x03\0\0\0\x1c\0\0\0\x1c", 12);
  gz_write(d / "t10k-images-idx3-ubyte.gz", h + std::string(2 * 784, '\x10'));
  gz_write(d / "t10k-labels-idx1-ubyte.gz", std::string("\0\0\x08\x01\0\0\0\x03", 8) + std::string("\x01\x02\x03", 3));
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "truncated");
  gz_write(d / "t10k-images-idx3-ubyte.gz", h + std::string(3 * 784, '\x10'));
  gz_write(d / "t10k-labels-idx1-ubyte.gz", std::string("\0\0\x08\x01\0\0\0\x02", 8) + std::string("\x01\x02", 2));
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "3 images but 2 labels");
  gz_write(d / "t10k-labels-idx1-ubyte.gz", std::string("\0\0\x08\x01\0\0\0\x03", 8) + std::string("\x01\x02\x0b", 3));
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "label 11");
  gz_write(d / "t10k-labels-idx1-ubyte.gz", std::string("PK\x03\x04 not idx"));
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "not an IDX");
  {
    std::ofstream f(d / "t10k-labels-idx1-ubyte.gz", std::ios::binary);
    f << "\x1f\x8b\x08\x00garbage that is not deflate";
  }
  expect_error([&] { ts::load_fashion_mnist("test", 0, d.string()); }, "t10k-labels");
  fs::remove_all(d.parent_path());
}

// A small 1x28x28 classifier: Conv 3x3/2 (8) + Relu, Conv 3x3/2 (16) + Clip
// 0..6, GlobalAveragePool, Flatten, Gemm to 10 classes; seeded weights.
std::string small_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("fashion_small");
  auto* in = g->add_input();
  in->set_name("image");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 1, 28, 28}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto weights = [&](const std::string& name, std::vector<int64_t> dims, float scale) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(nd(rng) * scale);
  };
  auto node = [&](const std::string& type, std::vector<std::string> ins, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(type);
    n->set_name(type + "_" + out);
    for (auto& s : ins) n->add_input(s);
    n->add_output(out);
    return n;
  };
  auto ints = [](onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  weights("w1", {8, 1, 3, 3}, 0.6f);
  weights("b1", {8}, 0.1f);
  weights("w2", {16, 8, 3, 3}, 0.25f);
  weights("b2", {16}, 0.1f);
  weights("wf", {10, 16}, 0.5f);
  weights("bf", {10}, 0.1f);
  auto* c1 = node("Conv", {"image", "w1", "b1"}, "c1");
  ints(c1, "strides", {2, 2});
  ints(c1, "pads", {1, 1, 1, 1});
  ints(c1, "kernel_shape", {3, 3});
  node("Relu", {"c1"}, "r1");
  auto* c2 = node("Conv", {"r1", "w2", "b2"}, "c2");
  ints(c2, "strides", {2, 2});
  ints(c2, "pads", {1, 1, 1, 1});
  ints(c2, "kernel_shape", {3, 3});
  weights("lo", {}, 0.f);
  g->mutable_initializer(g->initializer_size() - 1)->set_float_data(0, 0.f);
  auto* hi = g->add_initializer();
  hi->set_name("hi");
  hi->set_data_type(onnx::TensorProto::FLOAT);
  hi->add_float_data(6.f);
  node("Clip", {"c2", "lo", "hi"}, "r2");
  node("GlobalAveragePool", {"r2"}, "p");
  node("Flatten", {"p"}, "f");
  auto* gemm = node("Gemm", {"f", "wf", "bf"}, "logits");
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  g->add_output()->set_name("logits");
  return m.SerializeAsString();
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

TEST(FashionMnist, EvalAndRunOnADataSetAgreeWithTheExecutors) {
  const fs::path d = tmp_dir();
  const fs::path model = d / "small.onnx";
  std::ofstream(model, std::ios::binary) << small_model();
  constexpr int kImages = 300;

  // What the executors say on the first 300 test images, calibrated on the
  // training images as the command does.
  const auto test = ts::load_fashion_mnist("test", kImages);
  const ts::Graph g = ts::import_model(model.string(), 0);
  const ts::QGraph q = ts::quantized_model(model.string(), 0, ts::fashion_mnist_calibration());
  int ok_f = 0, ok_q = 0;
  std::vector<int> int8_top(kImages);
  for (int i = 0; i < kImages; ++i) {
    const auto x = test.input(i);
    ok_f += argmax(ts::run_float(g, x)) == test.labels[size_t(i)];
    const auto out = ts::run_int8(q, ts::quantize_input(q, x));
    int8_top[size_t(i)] = int(std::max_element(out.begin(), out.end()) - out.begin());
    ok_q += int8_top[size_t(i)] == test.labels[size_t(i)];
  }
  // Seeded random weights: better than nothing, far from trained.
  EXPECT_GT(ok_f, kImages / 20);

  const auto r = tinysplit("eval --json --dataset fashion-mnist --limit " + std::to_string(kImages) + " --model " +
                           model.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("images").get<int>(), kImages);
  EXPECT_DOUBLE_EQ(j.at("float_accuracy").get<double>(), double(ok_f) / kImages);
  EXPECT_DOUBLE_EQ(j.at("int8_accuracy").get<double>(), double(ok_q) / kImages);
  EXPECT_NE(j.at("calibration").get<std::string>().find("fashion-mnist training images"), std::string::npos);
  int per_class_images = 0;
  for (const auto& c : j.at("per_class")) per_class_images += c.at("images").get<int>();
  EXPECT_EQ(per_class_images, kImages);

  // The same images through 3 boards: every one bit-exact with the int8
  // reference, the same accuracy.
  constexpr int kRun = 12;
  const auto rr = tinysplit("run --json --workers 3 --dataset fashion-mnist --limit " + std::to_string(kRun) +
                            " --model " + model.string());
  ASSERT_EQ(rr.code, 0) << rr.err;
  const auto rj = nlohmann::json::parse(rr.out);
  EXPECT_TRUE(rj.at("match_reference").get<bool>());
  const auto& ds = rj.at("dataset");
  EXPECT_EQ(ds.at("images").get<int>(), kRun);
  EXPECT_EQ(ds.at("bit_exact_images").get<int>(), kRun);
  int ok_run = 0;
  for (int i = 0; i < kRun; ++i) ok_run += int8_top[size_t(i)] == test.labels[size_t(i)];
  EXPECT_DOUBLE_EQ(ds.at("accuracy").get<double>(), double(ok_run) / kRun);
  EXPECT_DOUBLE_EQ(ds.at("reference_accuracy").get<double>(), double(ok_run) / kRun);
  fs::remove_all(d);
}

TEST(FashionMnist, CommandErrorsAreOneLine) {
  const fs::path d = tmp_dir();
  for (const std::string args : {"eval --dataset mnist", "run --dataset cifar --workers 2",
                                  "eval --limit 5", "eval --dataset fashion-mnist --images /tmp"}) {
    const auto r = tinysplit(args);
    EXPECT_NE(r.code, 0) << args;
    std::string e = r.err;
    while (!e.empty() && e.back() == '\n') e.pop_back();
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find("error"), std::string::npos) << args << ": " << e;
  }
  // A 3-channel model is refused with the shapes named.
  const auto r = tinysplit("eval --dataset fashion-mnist --limit 5 --model " +
                           (fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx" / "tiny.onnx").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("1x28x28"), std::string::npos) << r.err;
  fs::remove_all(d);
}

}  // namespace
