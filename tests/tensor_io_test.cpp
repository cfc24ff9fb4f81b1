// Tensors in and out (.npy), and models at their own input size.
//  - the .npy reader/writer: round trips, numpy's own layout, one clear error
//    for every malformed file;
//  - `eval --input x.npy` on the ONNX test models: the float output equals
//    the reference runtime's output (tests/data/onnx/*.ref.bin, torch) within
//    1e-4 of the largest output;
//  - `run --input`, `--save-output`, `--save-int8-output`: bit-exact, and the
//    saved files hold what the JSON reports;
//  - fixed-size ONNX models run at their stored size with no --size, and
//    another size is one error line naming the stored size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/npy.h"
#include "model/pipeline.h"
#include "support/shell.h"

namespace {

namespace fs = std::filesystem;
using ts::testing::tinysplit;

const fs::path kData = fs::path(TS_SOURCE_DIR) / "tests" / "data" / "onnx";

fs::path tmp_dir() {
  const fs::path d = fs::temp_directory_path() / ("ts_tensor_io_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A hand-written .npy: magic, version 1.0, header, data.
std::string npy_file(const std::string& header, const std::string& data, int major = 1) {
  std::string h = header;
  const size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  if (major == 1) {
    out += char(h.size() & 0xff);
    out += char(h.size() >> 8);
  } else {
    for (int k = 0; k < 4; ++k) out += char((h.size() >> (8 * k)) & 0xff);
  }
  return out + h + data;
}

void expect_npy_error(const std::string& bytes, const std::string& needle) {
  try {
    ts::parse_npy(bytes, "x.npy");
    ADD_FAILURE() << "no error for a file that should give '" << needle << "'";
  } catch (const ts::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_NE(m.find("x.npy"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(Npy, RoundTripsFloat32AndInt8) {
  const fs::path d = tmp_dir();
  const std::vector<float> f = {1.5f, -2.25f, 0.f, 3e-8f, 1e30f, -0.f};
  ts::write_npy((d / "f.npy").string(), {1, 2, 3}, f);
  const ts::NpyArray a = ts::read_npy((d / "f.npy").string());
  EXPECT_EQ(a.type, ts::NpyArray::Type::Float32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(a.f32.size(), f.size());
  EXPECT_EQ(std::memcmp(a.f32.data(), f.data(), f.size() * 4), 0);
  // numpy's layout: the data starts at a multiple of 64 bytes.
  const std::string raw = read_all(d / "f.npy");
  EXPECT_EQ((raw.size() - f.size() * 4) % 64, 0u);
  EXPECT_NE(raw.find("'descr': '<f4'"), std::string::npos);

  const std::vector<int8_t> q = {-128, -1, 0, 1, 127};
  ts::write_npy((d / "q.npy").string(), {5}, q);
  const ts::NpyArray b = ts::read_npy((d / "q.npy").string());
  EXPECT_EQ(b.type, ts::NpyArray::Type::Int8);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(b.i8, q);
  EXPECT_NE(read_all(d / "q.npy").find("(5,)"), std::string::npos);
  fs::remove_all(d);
}

TEST(Npy, ReadsVersionTwoAndTolerantSpacing) {
  std::string data(8, '\0');
  const float v[2] = {1.f, -1.f};
  std::memcpy(data.data(), v, 8);
  const auto a = ts::parse_npy(npy_file("{'shape':(2,),'fortran_order':False,'descr':'<f4'}", data, 2), "x.npy");
  EXPECT_EQ(a.f32, (std::vector<float>{1.f, -1.f}));
}

TEST(Npy, RefusesWhatItCannotReadWithOneLine) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  const std::string ok_data(16, '\0');
  EXPECT_NO_THROW(ts::parse_npy(npy_file(f4, ok_data), "x.npy"));
  expect_npy_error(npy_file(f4, std::string(15, '\0')), "truncated");
  expect_npy_error(npy_file(f4, std::string(17, '\0')), "after the data");
  expect_npy_error(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", std::string(32, '\0')),
                   "'<f8' is not supported");
  expect_npy_error(npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", std::string(16, '\0')),
                   "'<i4' is not supported");
  expect_npy_error(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", ok_data), "big-endian");
  expect_npy_error(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", ok_data), "Fortran");
  expect_npy_error(npy_file("{'descr': '<f4', 'shape': (2, 2), }", ok_data), "lacks");
  expect_npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 2], }", ok_data), "shape");
  expect_npy_error(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", ok_data),
                   "structured");
  expect_npy_error("PK\x03\x04 a zip file", "not a .npy");
  expect_npy_error(npy_file(f4, ok_data).substr(0, 40), "truncated header");
  std::string v9 = npy_file(f4, ok_data);
  v9[6] = 9;
  expect_npy_error(v9, "version 9");
}

// Reference inputs and outputs stored with the ONNX test models (torch).
struct Ref {
  std::vector<int64_t> in_shape;
  std::vector<float> x, y;
};

Ref load_ref(const std::string& name) {
  const auto meta = nlohmann::json::parse(read_all(kData / (name + ".ref.json")));
  const std::string bin = read_all(kData / meta.at("data").get<std::string>());
  Ref r;
  size_t ni = 1, no = 1;
  for (auto& d : meta.at("input_shape")) {
    r.in_shape.push_back(d.get<int64_t>());
    ni *= d.get<size_t>();
  }
  for (auto& d : meta.at("output_shape")) no *= d.get<size_t>();
  EXPECT_GE(bin.size(), (ni + no) * 4);
  r.x.resize(ni);
  r.y.resize(no);
  std::memcpy(r.x.data(), bin.data(), ni * 4);  // first case: input, then output
  std::memcpy(r.y.data(), bin.data() + ni * 4, no * 4);
  return r;
}

nlohmann::json json_of(const std::string& args) {
  const auto r = tinysplit(args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(r.out);
}

TEST(EvalInput, FloatOutputMatchesTheReferenceRuntime) {
  const fs::path d = tmp_dir();
  int models = 0;
  for (const char* name : {"tiny", "mobilenet_v2", "resnet_small", "mnasnet"}) {
    SCOPED_TRACE(name);
    const Ref ref = load_ref(name);
    const fs::path x = d / (std::string(name) + ".npy");
    ts::write_npy(x.string(), ref.in_shape, ref.x);
    const auto j = json_of("eval --json --model " + (kData / (std::string(name) + ".onnx")).string() + " --input " +
                           x.string());
    ASSERT_FALSE(j.is_null());
    const auto out = j.at("float_output").get<std::vector<double>>();
    ASSERT_EQ(out.size(), ref.y.size());
    double largest = 0, worst = 0;
    for (float v : ref.y) largest = std::max(largest, std::fabs(double(v)));
    for (size_t k = 0; k < out.size(); ++k) worst = std::max(worst, std::fabs(out[k] - ref.y[k]));
    EXPECT_LE(worst, 1e-4 * largest) << "largest |output| " << largest;
    // The int8 output is reported beside it, in the same terms and raw.
    EXPECT_EQ(j.at("int8_output").size(), out.size());
    EXPECT_EQ(j.at("int8_output_raw").size(), out.size());
    EXPECT_EQ(j.at("input_dtype").get<std::string>(), "float32");
    ++models;
  }
  EXPECT_EQ(models, 4);
  fs::remove_all(d);
}

TEST(EvalInput, Int8InputAndSavedOutputs) {
  const fs::path d = tmp_dir();
  const Ref ref = load_ref("tiny");
  const std::string model = (kData / "tiny.onnx").string();
  ts::write_npy((d / "x.npy").string(), ref.in_shape, ref.x);
  const auto jf = json_of("eval --json --model " + model + " --input " + (d / "x.npy").string() + " --save-output " +
                          (d / "f.npy").string() + " --save-int8-output " + (d / "q.npy").string());
  ASSERT_FALSE(jf.is_null());
  const auto f = ts::read_npy((d / "f.npy").string());
  EXPECT_EQ(f.shape, (std::vector<int64_t>{1, int64_t(ref.y.size())}));
  ASSERT_EQ(f.f32.size(), jf.at("float_output").size());
  for (size_t k = 0; k < f.f32.size(); ++k) EXPECT_FLOAT_EQ(f.f32[k], jf.at("float_output")[k].get<float>());
  const auto q = ts::read_npy((d / "q.npy").string());
  EXPECT_EQ(q.type, ts::NpyArray::Type::Int8);
  EXPECT_EQ(std::vector<int>(q.i8.begin(), q.i8.end()), jf.at("int8_output_raw").get<std::vector<int>>());

  // The same input already quantised gives the same int8 output.
  const ts::QGraph qg = ts::quantized_model(model, 0, ts::QuantizeOptions{});
  ts::write_npy((d / "xq.npy").string(), ref.in_shape, ts::quantize_input(qg, ref.x));
  const auto jq = json_of("eval --json --model " + model + " --input " + (d / "xq.npy").string());
  ASSERT_FALSE(jq.is_null());
  EXPECT_EQ(jq.at("input_dtype").get<std::string>(), "int8");
  EXPECT_EQ(jq.at("int8_output_raw"), jf.at("int8_output_raw"));
  fs::remove_all(d);
}

TEST(RunInput, DistributedRunOnATensorIsExactAndSavesItsOutput) {
  const fs::path d = tmp_dir();
  const Ref ref = load_ref("mobilenet_v2");
  const std::string model = (kData / "mobilenet_v2.onnx").string();
  // (C, H, W) is accepted as well as (1, C, H, W).
  ts::write_npy((d / "x.npy").string(), {ref.in_shape[1], ref.in_shape[2], ref.in_shape[3]}, ref.x);
  const auto j = json_of("run --json --workers 3 --model " + model + " --input " + (d / "x.npy").string() +
                         " --save-output " + (d / "o.npy").string() + " --save-int8-output " + (d / "q.npy").string());
  ASSERT_FALSE(j.is_null());
  EXPECT_TRUE(j.at("match_reference").get<bool>());
  EXPECT_EQ(j.at("size").get<int>(), 96);
  const auto o = ts::read_npy((d / "o.npy").string());
  ASSERT_EQ(o.f32.size(), j.at("probs").size());
  for (size_t k = 0; k < o.f32.size(); ++k) EXPECT_FLOAT_EQ(o.f32[k], j.at("probs")[k].get<float>());
  const auto q = ts::read_npy((d / "q.npy").string());
  EXPECT_EQ(std::vector<int>(q.i8.begin(), q.i8.end()), j.at("logits_int8").get<std::vector<int>>());
  // The int8 model's output is close to the float reference (a loose check
  // that the right tensor went in: 10 random-weight classes).
  int argmax_ref = int(std::max_element(ref.y.begin(), ref.y.end()) - ref.y.begin());
  EXPECT_EQ(j.at("top1").at("index").get<int>(), argmax_ref);
  fs::remove_all(d);
}

void expect_one_line_error(const std::string& args, const std::vector<std::string>& needles) {
  const auto r = tinysplit(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_TRUE(r.out.empty()) << r.out;
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  for (const auto& n : needles) EXPECT_NE(err.find(n), std::string::npos) << "'" << n << "' not in: " << err;
}

TEST(RunInput, BadTensorsGiveOneLine) {
  const fs::path d = tmp_dir();
  const std::string model = (kData / "tiny.onnx").string();
  ts::write_npy((d / "wrong.npy").string(), {1, 3, 16, 16}, std::vector<float>(3 * 16 * 16, 0.f));
  expect_one_line_error("run --model " + model + " --input " + (d / "wrong.npy").string(),
                        {"(1, 3, 16, 16)", "(1, 3, 32, 32)"});
  expect_one_line_error("eval --model " + model + " --input " + (d / "wrong.npy").string(), {"(1, 3, 32, 32)"});
  expect_one_line_error("run --model " + model + " --input " + (d / "missing.npy").string(), {"missing.npy"});
  std::vector<float> nan(3 * 32 * 32, 0.f);
  nan[77] = std::nanf("");
  ts::write_npy((d / "nan.npy").string(), {1, 3, 32, 32}, nan);
  expect_one_line_error("eval --model " + model + " --input " + (d / "nan.npy").string(), {"nan.npy", "NaN"});
  expect_one_line_error("eval --model " + model + " --save-output " + (d / "o.npy").string(), {"--input"});
  expect_one_line_error("run --model " + model + " --input " + (d / "wrong.npy").string() + " --image x.jpg",
                        {"only one of"});
  fs::remove_all(d);
}

// ------------------------------------------------------------ input sizes

TEST(ModelSize, FixedSizeOnnxRunsAtItsStoredSize) {
  const std::string tiny = (kData / "tiny.onnx").string();
  const auto ins = json_of("inspect --json --model " + tiny);
  ASSERT_FALSE(ins.is_null());
  EXPECT_EQ(ins.at("size").get<int>(), 32);
  EXPECT_EQ(ins.at("layers")[0].at("input_shape"), nlohmann::json::array({3, 32, 32}));
  const auto mn = json_of("inspect --json --model " + (kData / "mobilenet_v2.onnx").string());
  ASSERT_FALSE(mn.is_null());
  EXPECT_EQ(mn.at("size").get<int>(), 96);
  // Asking for the stored size explicitly is fine.
  EXPECT_EQ(json_of("inspect --json --size 32 --model " + tiny).at("size").get<int>(), 32);

  const auto run = json_of("run --json --workers 2 --model " + tiny);
  ASSERT_FALSE(run.is_null());
  EXPECT_EQ(run.at("size").get<int>(), 32);
  EXPECT_TRUE(run.at("match_reference").get<bool>());
  EXPECT_EQ(run.at("size_note").get<std::string>(), "");
  const auto ev = json_of("eval --json --model " + tiny);
  ASSERT_FALSE(ev.is_null());
  EXPECT_EQ(ev.at("size").get<int>(), 32);
}

TEST(ModelSize, AnotherSizeForAFixedModelIsOneLineNamingTheStoredSize) {
  const std::string tiny = (kData / "tiny.onnx").string();  // 32x32 with a linear head
  for (const char* cmd : {"run", "inspect", "eval", "quantize -o /dev/null", "plan --workers 2", "simulate"}) {
    SCOPED_TRACE(cmd);
    const auto r = tinysplit(std::string(cmd) + " --model " + tiny + " --size 112");
    EXPECT_NE(r.code, 0);
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_NE(err.find("32x32"), std::string::npos) << err;
    EXPECT_NE(err.find("112"), std::string::npos) << err;
    // Before any work: no progress, no result, no board spawned.
    EXPECT_LT(r.seconds, 30.0);
  }
}

TEST(ModelSize, TheBundledMobileNetV2DefaultsTo224AndResizes) {
  if (!fs::exists(fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json"))
    GTEST_FAIL() << "models/mobilenetv2 is missing: run scripts/setup.sh first";
  auto as_given = [](const std::string& args) {
    const auto r = ts::testing::tinysplit_as_given(args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  EXPECT_EQ(as_given("inspect --json").at("size").get<int>(), 224);
  EXPECT_EQ(as_given("inspect --json --size 0").at("size").get<int>(), 224);
  EXPECT_EQ(as_given("inspect --json --size 160").at("size").get<int>(), 160);
  const std::string path = (fs::path(TS_SOURCE_DIR) / "models" / "mobilenetv2" / "model.json").string();
  EXPECT_EQ(as_given("inspect --json --model " + path).at("size").get<int>(), 224);
  EXPECT_EQ(as_given("run --json").at("size_note").get<std::string>(), "");
  // At 112 the run says that this is the paper's size and what it costs.
  const auto run = as_given("run --json --size 112");
  ASSERT_FALSE(run.is_null());
  const std::string note = run.at("size_note").get<std::string>();
  EXPECT_NE(note.find("paper"), std::string::npos) << note;
  EXPECT_NE(note.find("224"), std::string::npos) << note;
  EXPECT_NE(note.find("tinysplit eval --size 112 --compare-size 224"), std::string::npos) << note;
  const auto r = ts::testing::tinysplit_as_given("run --size 112");
  EXPECT_NE(r.out.find("note: 112x112 is the paper's input size"), std::string::npos) << r.out;
}

}  // namespace
