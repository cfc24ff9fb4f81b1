// Writes the seed corpora under fuzz/corpus/<target>/ from real inputs made
// by the project's own code: the tiny model (tiny_model.h) through import,
// quantisation, planning and the fragment writer; frames as the encoder
// writes them; a small ONNX model; testbeds; tiny images in several formats.
// Run by scripts/fuzz.sh --seeds (the committed corpora come from it).
//   make_seeds <corpus dir>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include "core/auth.h"
#include "core/crc32.h"
#include "core/sha256.h"
#include "core/wire.h"
#include "plan/fragment_writer.h"
#include "tiny_model.h"

using namespace ts;
namespace fs = std::filesystem;
using wire::MsgType;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
}
std::string str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

std::string frame(MsgType t, uint32_t seq, uint16_t layer, uint32_t offset, const std::string& payload,
                  uint16_t flags = wire::kFlagLast, uint16_t src = wire::kCoordinatorId) {
  wire::FrameHeader h;
  h.type = t;
  h.src = src;
  h.seq = seq;
  h.layer = layer;
  h.offset = offset;
  h.flags = flags;
  h.deployment = 0x1234;
  uint8_t buf[wire::kMaxFrameBuf];
  const size_t n = wire::encode_frame(h, reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), buf, sizeof buf);
  return std::string(reinterpret_cast<char*>(buf), n);
}
// A frame tagged by `mac` (core/auth.h), as an authenticated session sends it.
std::string tagged(auth::FrameMac& mac, MsgType t, uint32_t seq, uint16_t layer, uint32_t offset,
                   const std::string& payload, uint16_t flags = wire::kFlagLast) {
  std::string f = frame(t, seq, layer, offset, payload, uint16_t(flags | wire::kFlagMac));
  auto* p = reinterpret_cast<uint8_t*>(f.data());
  mac.seal(p, f.size() - wire::kTagSize, p + f.size() - wire::kTagSize);
  return f;
}
template <typename P>
std::string payload(const P& p) {
  uint8_t buf[wire::kMaxPayload];
  return std::string(reinterpret_cast<char*>(buf), p.encode(buf, sizeof buf));
}

void wire_seeds() {
  wire::HelloPayload hello;
  hello.board_id = 2;
  hello.clock_mhz = 600;
  hello.rx_window = 8;
  hello.ram_bytes = 512 * 1024;
  hello.flash_bytes = 8u << 20;
  wire::CommitPayload commit;
  commit.fragment_size = 4096;
  commit.fragment_crc = 0xDEADBEEF;
  sha256("fragment", 8, commit.digest);
  wire::AckPayload ack;
  ack.ack_seq = 3;
  wire::DonePayload done;
  done.request_seq = 4;
  done.elapsed_us = 100;
  done.peak_ram_bytes = 2048;
  done.outputs = 64;
  done.output_digest = 0x0123456789ABCDEFull;
  const auto err = wire::ErrorPayload::make(wire::ErrorCode::NotReady, 5, "inputs missing");
  put("wire", "hello", frame(MsgType::Hello, 1, 0, 0, payload(hello), wire::kFlagLast, 2));
  put("wire", "commit", frame(MsgType::Commit, 2, 0, 0, payload(commit)));
  put("wire", "ack", frame(MsgType::Ack, 0, 0, 0, payload(ack), 0));
  put("wire", "done", frame(MsgType::Done, 3, 7, 0, payload(done), wire::kFlagLast, 0));
  put("wire", "error", frame(MsgType::Error, 4, 7, 0, payload(err), wire::kFlagLast, 0));
  // Authenticated: a 32-byte HELLO, then AUTH and frames with tags.
  hello.auth = true;
  for (size_t i = 0; i < sizeof hello.nonce; ++i) hello.nonce[i] = uint8_t(0xA0 + i);
  put("wire", "hello_auth", frame(MsgType::Hello, 1, 0, 0, payload(hello), wire::kFlagLast, 2));
  const uint8_t key[auth::kKeyBytes] = {1, 2, 3};
  wire::AuthPayload a;
  for (size_t i = 0; i < sizeof a.nonce; ++i) a.nonce[i] = uint8_t(i);
  auth::SessionKeys k;
  const std::string hp = payload(hello);
  auth::derive_session(key, a.nonce, reinterpret_cast<const uint8_t*>(hp.data()), hp.size(), &k);
  auth::FrameMac mac;
  mac.start(k.c2b);
  const std::string auth_frame = tagged(mac, MsgType::Auth, 1, 0, 0, payload(a));
  put("wire", "auth", auth_frame);
  put("wire", "stream_tagged", auth_frame + tagged(mac, MsgType::Input, 2, 3, 17, std::string(40, '\x05'), 0) +
                                   tagged(mac, MsgType::Run, 3, 3, 0, "") + tagged(mac, MsgType::Ack, 0, 0, 0, payload(ack), 0));
  // INPUTS: plain, and coded with each coding (wire.h "Coded INPUTS").
  std::string values;
  for (int i = 0; i < 48; ++i) values += char(i % 3 ? 0x80 : 0x80 + i);
  const auto block = [&](const core::CodeParams* cp) {
    wire::InputBlock b;
    b.first = 100;
    b.len = 16;
    b.count = 3;
    b.stride = 28;
    std::string data = values;
    if (cp) {
      uint8_t buf[256];
      core::CodeWriter w(buf, sizeof buf, *cp);
      w.put(reinterpret_cast<const uint8_t*>(values.data()), values.size());
      b.coded = uint16_t(w.finish());
      b.mode = cp->mode();
      b.fill = cp->fill;
      data.assign(reinterpret_cast<const char*>(buf), b.coded);
    }
    uint8_t head[wire::kCodedBlockHeader];
    const size_t n = wire::encode_input_block_header(b, head, sizeof head);
    return std::string(reinterpret_cast<const char*>(head), n) + data;
  };
  const core::CodeParams rice = core::code_params_for(-128, -128), mask = core::code_params_for(-128, -128, true);
  put("wire", "inputs", frame(MsgType::Inputs, 1, 3, 0, block(nullptr)));
  put("wire", "inputs_rice", frame(MsgType::Inputs, 1, 3, 0, block(&rice), wire::kFlagLast | wire::kFlagCoded));
  put("wire", "inputs_mask", frame(MsgType::Inputs, 1, 3, 0, block(&mask), wire::kFlagLast | wire::kFlagCoded));
  put("wire", "stream", frame(MsgType::Input, 1, 3, 17, std::string(40, '\x05'), 0) +
                            frame(MsgType::Input, 2, 3, 57, std::string(9, '\x06')) +
                            frame(MsgType::Run, 3, 3, 0, "", wire::kFlagLast | wire::kFlagAckReq) +
                            frame(MsgType::Bye, 4, 0, 0, ""));
}

// One worker-harness record (see fuzz_worker.cpp).
std::string record(MsgType t, uint8_t flags, uint16_t layer, uint32_t offset, const std::string& payload) {
  std::string r;
  r += char(uint8_t(t) - 1);
  r += char(flags);
  r += char(layer & 0xFF);
  r += char(layer >> 8);
  for (int i = 0; i < 4; ++i) r += char((offset >> (8 * i)) & 0xFF);
  r += char(payload.size() & 0xFF);
  r += char(payload.size() >> 8);
  return r + payload;
}

void model_seeds() {
  const fuzz::TinyTfjs t = fuzz::tiny_tfjs();
  put("tfjs", "tiny", t.json + std::string(1, '\0') + t.weights);
  const QGraph q = fuzz::tiny_qgraph();
  put("tsqm", "tiny.tsqm", str(serialize_qgraph(q)));
  const plan::Plan p = fuzz::tiny_plan(q);
  const auto f0 = plan::write_fragment(q, p, 0), f1 = plan::write_fragment(q, p, 1);
  put("fragment", "board0", str(f0));
  put("fragment", "board1", str(f1));

  // Worker sessions against board 0's fragment: a whole inference (every
  // layer's inputs then RUN), a cached COMMIT, a probe, a reset mid-layer.
  std::string all;
  for (size_t i = 0; i < q.nodes.size(); ++i) {
    all += std::string{char(0xFE), char(i)};
    all += record(MsgType::Run, 1, uint16_t(i), 0, "");
  }
  put("worker", "inference", all);
  wire::CommitPayload c;
  c.fragment_size = uint32_t(f0.size());
  c.fragment_crc = crc32(f0.data(), f0.size());
  sha256(f0.data(), f0.size(), c.digest);
  put("worker", "cached_commit", record(MsgType::Commit, 1, 0, 0, payload(c)));
  put("worker", "probe", record(MsgType::Probe, 1, 9, 77, std::string(64, 'p')));
  put("worker", "reset", std::string{char(0xFE), 0} + record(MsgType::Reset, 1, 0, 0, "") +
                             record(MsgType::Run, 1, 0, 0, ""));
  put("worker", "store", record(MsgType::Store, 0, 0, 0, str(f0).substr(0, 200)) +
                             record(MsgType::Commit, 1, 0, 0, payload(c)));
  // A patch of board 0's fragment into board 1's: its header's bytes copied
  // from f0, the rest new, then COMMIT of f1 (the copies give another digest:
  // refused, said so).
  {
    uint8_t d0[32];
    sha256(f0.data(), f0.size(), d0);
    std::string pp(reinterpret_cast<const char*>(d0), wire::kPatchBaseBytes);
    uint8_t op[wire::kPatchOpHeader];
    wire::PatchOp cp;
    cp.copy = true;
    cp.len = 64;
    wire::encode_patch_op(cp, op, sizeof op);
    pp += std::string(reinterpret_cast<const char*>(op), sizeof op);
    wire::PatchOp lit;
    lit.len = 200;
    wire::encode_patch_op(lit, op, sizeof op);
    pp += std::string(reinterpret_cast<const char*>(op), sizeof op) + str(f1).substr(64, 200);
    wire::CommitPayload c1;
    c1.fragment_size = uint32_t(f1.size());
    c1.fragment_crc = crc32(f1.data(), f1.size());
    sha256(f1.data(), f1.size(), c1.digest);
    put("worker", "patch", record(MsgType::Patch, 0, 0, 0, pp) + record(MsgType::Commit, 1, 0, 0, payload(c1)));
    put("wire", "patch", frame(MsgType::Patch, 1, 0, 0, pp));
  }
  // A resumed inference: RESUME at layer 2, then every layer's inputs from
  // the reference and RUN from there on.
  {
    std::string resumed = record(MsgType::Resume, 1, 2, 0, "");
    for (size_t i = 2; i < q.nodes.size(); ++i) {
      resumed += std::string{char(0xFE), char(i)};
      resumed += record(MsgType::Run, 1, uint16_t(i), 0, "");
    }
    put("worker", "resume", resumed);
  }
  // The same board holding a key: every record runs in an authenticated
  // session (0xFD first, see fuzz_worker.cpp); one record with a bad tag.
  put("worker", "auth_inference", std::string(1, char(0xFD)) + all);
  put("worker", "auth_cached_commit", std::string(1, char(0xFD)) + record(MsgType::Commit, 1, 0, 0, payload(c)));
  put("worker", "auth_bad_tag", std::string(1, char(0xFD)) + record(MsgType::Probe, 1 | 32, 9, 77, std::string(64, 'p')) +
                                    record(MsgType::Probe, 1, 9, 77, std::string(16, 'q')));
}

// A small ONNX graph under construction: x [1,3,8,8] float in, "y" out.
struct OnnxSeed {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit OnnxSeed(const std::string& name) {
    m.set_ir_version(7);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(13);
    g = m.mutable_graph();
    g->set_name(name);
    auto* vi = g->add_input();
    vi->set_name("x");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 3, 8, 8}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void init(const std::string& name, std::vector<int64_t> dims, std::vector<float> values = {}) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) { t->add_dims(d); n *= d; }
    for (int64_t i = 0; i < n; ++i)
      t->add_float_data(values.empty() ? float((i * 7) % 11) / 11.f - 0.4f : values[size_t(i)]);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out);
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void text(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  void write(const std::string& file) {
    g->add_output()->set_name("y");
    put("onnx", file, m.SerializeAsString());
  }
};

void onnx_seed() {
  OnnxSeed s("tiny");
  s.init("w1", {4, 3, 3, 3});
  s.init("b1", {4});
  auto* c1 = s.node("Conv", {"x", "w1", "b1"}, "c1");
  s.ints(c1, "pads", {1, 1, 1, 1});
  s.ints(c1, "strides", {2, 2});
  s.node("Relu", {"c1"}, "r1");
  s.init("w2", {4, 1, 3, 3});
  auto* c2 = s.node("Conv", {"r1", "w2"}, "c2");
  s.ints(c2, "pads", {1, 1, 1, 1});
  s.integer(c2, "group", 4);
  s.node("Add", {"c2", "r1"}, "a1");
  auto* mp = s.node("MaxPool", {"a1"}, "m1");
  s.ints(mp, "kernel_shape", {2, 2});
  s.ints(mp, "strides", {2, 2});
  s.node("GlobalAveragePool", {"m1"}, "g1");
  s.node("Flatten", {"g1"}, "f1");
  s.init("w3", {3, 4});
  s.init("b3", {3});
  auto* gm = s.node("Gemm", {"f1", "w3", "b3"}, "y");
  s.integer(gm, "transB", 1);
  s.write("tiny.onnx");
}

// The upsampling ops: nearest Resize by scales, a grouped ConvTranspose with
// output_padding, bilinear Resize by sizes (half_pixel), down again.
void onnx_upsample_seed() {
  OnnxSeed s("upsample");
  s.init("w1", {4, 3, 3, 3});
  auto* c1 = s.node("Conv", {"x", "w1"}, "c1");
  s.ints(c1, "pads", {1, 1, 1, 1});
  s.ints(c1, "strides", {2, 2});
  s.init("scales", {4}, {1, 1, 2, 2});
  auto* r1 = s.node("Resize", {"c1", "", "scales"}, "r1");
  s.text(r1, "mode", "nearest");
  s.text(r1, "coordinate_transformation_mode", "asymmetric");
  s.text(r1, "nearest_mode", "floor");
  s.init("wt", {4, 2, 3, 3});
  auto* t1 = s.node("ConvTranspose", {"r1", "wt"}, "t1");
  s.ints(t1, "strides", {2, 2});
  s.ints(t1, "pads", {1, 1, 1, 1});
  s.ints(t1, "output_padding", {1, 1});
  s.integer(t1, "group", 2);
  auto* sz = s.g->add_initializer();
  sz->set_name("sizes");
  sz->set_data_type(onnx::TensorProto::INT64);
  sz->add_dims(4);
  for (int64_t v : {1, 4, 6, 6}) sz->add_int64_data(v);
  auto* r2 = s.node("Resize", {"t1", "", "", "sizes"}, "r2");
  s.text(r2, "mode", "linear");
  s.node("GlobalAveragePool", {"r2"}, "g1");
  s.node("Flatten", {"g1"}, "y");
  s.write("upsample.onnx");
}

// General transposes between convolutions: H and W swapped, C and H
// swapped (a 3-D perm that moves two axes), then back to [1,C,H,W] order.
void onnx_transpose_seed() {
  OnnxSeed s("transpose");
  s.init("w1", {4, 3, 3, 3});
  auto* c1 = s.node("Conv", {"x", "w1"}, "c1");
  s.ints(c1, "pads", {1, 1, 1, 1});
  s.ints(s.node("Transpose", {"c1"}, "t1"), "perm", {0, 1, 3, 2});
  s.ints(s.node("Transpose", {"t1"}, "t2"), "perm", {0, 2, 1, 3});
  s.init("w2", {4, 8, 1, 3});
  auto* c2 = s.node("Conv", {"t2", "w2"}, "c2");
  s.ints(c2, "pads", {0, 1, 0, 1});
  s.ints(s.node("Transpose", {"c2"}, "t3"), "perm", {0, 3, 1, 2});
  s.node("GlobalAveragePool", {"t3"}, "g1");
  s.node("Flatten", {"g1"}, "f1");
  s.init("w3", {3, 8});
  auto* gm = s.node("Gemm", {"f1", "w3"}, "y");
  s.integer(gm, "transB", 1);
  s.write("transpose.onnx");
}

// The ops of ShuffleNet and of dense heads: Split on channels, LeakyRelu,
// Concat, the channel shuffle (Reshape 5-D, Transpose, Reshape), a strided
// spatial Slice, PRelu per channel, Tanh.
void onnx_shuffle_seed() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("shuffle_ops");
  auto* vi = g->add_input();
  vi->set_name("x");
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 3, 8, 8}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  auto init = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) { t->add_dims(d); n *= d; }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(float((i * 5) % 13) / 13.f - 0.45f);
  };
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  };
  auto node = [&](const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out[0]);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  };
  auto attr_i = [](onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  init("w1", {8, 3, 3, 3});
  auto* c1 = node("Conv", {"x", "w1"}, {"c1"});
  auto* pads = c1->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  ints("halves", {4, 4});
  attr_i(node("Split", {"c1", "halves"}, {"a", "b"}), "axis", 1);
  auto* lr = node("LeakyRelu", {"b"}, {"lb"});
  auto* al = lr->add_attribute();
  al->set_name("alpha");
  al->set_type(onnx::AttributeProto::FLOAT);
  al->set_f(0.1f);
  attr_i(node("Concat", {"a", "lb"}, {"cat"}), "axis", 1);
  ints("shape5", {1, 2, 4, 8, 8});
  node("Reshape", {"cat", "shape5"}, {"v5"});
  auto* tr = node("Transpose", {"v5"}, {"t5"});
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : {0, 2, 1, 3, 4}) perm->add_ints(v);
  ints("shape4", {1, 8, 8, 8});
  node("Reshape", {"t5", "shape4"}, {"sh"});
  ints("starts", {1, 0});
  ints("ends", {8, 8});
  ints("axes", {2, 3});
  ints("steps", {2, 2});
  node("Slice", {"sh", "starts", "ends", "axes", "steps"}, {"sl"});
  init("slope", {8, 1, 1});
  node("PRelu", {"sl", "slope"}, {"pr"});
  node("Tanh", {"pr"}, {"th"});
  node("GlobalAveragePool", {"th"}, {"gp"});
  node("Flatten", {"gp"}, {"f1"});
  init("w3", {3, 8});
  init("b3", {3});
  attr_i(node("Gemm", {"f1", "w3", "b3"}, {"y"}), "transB", 1);
  g->add_output()->set_name("y");
  put("onnx", "shuffle_ops.onnx", m.SerializeAsString());
}

void testbed_seeds() {
  put("testbed", "list", R"([{"id": 0, "address": "local", "clock_mhz": 600, "ram_bytes": "512K", "flash_bytes": "8M"},
 {"id": 1, "address": "192.168.1.21:5000", "clock_mhz": 396, "delay_s_per_kb": 0.001, "bandwidth_kbps": 1200}])");
  put("testbed", "object", R"({"boards": [{"id": 3, "address": "[::1]:7000", "ram_bytes": 1048576}, {"id": 4, "address": "qemu"}]})");
}

void image_seeds() {
  const int w = 5, h = 4;
  std::vector<uint8_t> px(size_t(w) * h * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 13);
  auto sink = [](void* ctx, void* data, int size) { static_cast<std::string*>(ctx)->append(static_cast<char*>(data), size_t(size)); };
  std::string png, bmp, tga, jpg;
  stbi_write_png_to_func(sink, &png, w, h, 3, px.data(), w * 3);
  stbi_write_bmp_to_func(sink, &bmp, w, h, 3, px.data());
  stbi_write_tga_to_func(sink, &tga, w, h, 3, px.data());
  stbi_write_jpg_to_func(sink, &jpg, w, h, 3, px.data(), 80);
  put("image", "tiny.png", png);
  put("image", "tiny.bmp", bmp);
  put("image", "tiny.tga", tga);
  put("image", "tiny.jpg", jpg);
  // PNM is not compiled in (stb 2.27 bugs): its seed is a refusal case.
  put("image", "refused.ppm", "P6\n2 2\n255\n" + std::string(12, char(0x40)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <corpus dir>\n");
    return 2;
  }
  root = argv[1];
  try {
    wire_seeds();
    model_seeds();
    onnx_seed();
    onnx_shuffle_seed();
    onnx_upsample_seed();
    onnx_transpose_seed();
    testbed_seeds();
    image_seeds();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
