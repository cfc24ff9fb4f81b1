// ONNX importer: the models made by scripts/make_onnx_models.py must import,
// validate and compute what torch computed; hand-built models cover the
// attribute corners; bad files fail with one clear line.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "model/float_exec.h"
#include "model/fold.h"
#include "model/graph.h"
#include "model/import_onnx.h"
#include "support/small_graph.h"

namespace ts {

// Readable ops in gtest messages (found by argument-dependent lookup).
void PrintTo(Op op, std::ostream* os) { *os << op_name(op); }

namespace {

const std::string kDataDir = std::string(TS_SOURCE_DIR) + "/tests/data/onnx/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string temp_path(const std::string& name) { return std::string(TS_BINARY_DIR) + "/onnx_import_test_" + name; }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// Expects fn() to throw ts::Error whose one-line message contains every needle.
template <typename F>
void expect_error(F fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& s : needles) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ts::Error: " << e.what();
  }
}

struct Reference {
  nlohmann::json meta;
  std::vector<std::vector<float>> inputs, outputs;
};

Reference load_reference(const std::string& name) {
  Reference r;
  r.meta = nlohmann::json::parse(read_file(kDataDir + name + ".ref.json"));
  const std::string bin = read_file(kDataDir + r.meta["data"].get<std::string>());
  auto count = [](const nlohmann::json& shape) {
    size_t n = 1;
    for (auto& d : shape) n *= d.get<size_t>();
    return n;
  };
  const size_t ni = count(r.meta["input_shape"]), no = count(r.meta["output_shape"]);
  const int cases = r.meta["cases"].get<int>();
  EXPECT_EQ(bin.size(), size_t(cases) * (ni + no) * 4);
  size_t at = 0;
  auto take = [&](size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), bin.data() + at, n * 4);
    at += n * 4;
    return v;
  };
  for (int c = 0; c < cases; ++c) {
    r.inputs.push_back(take(ni));
    r.outputs.push_back(take(no));
  }
  return r;
}

int count_ops(const Graph& g, Op op) {
  return int(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

// ---------------------------------------------------------------- torch models

class TorchModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchModel, MatchesTorch) {
  const std::string name = GetParam();
  const Reference ref = load_reference(name);
  Graph g = import_onnx(kDataDir + name + ".onnx");
  ASSERT_NO_THROW(g.validate());
  EXPECT_EQ(g.source, "onnx:" + kDataDir + name + ".onnx");

  // Shapes: the input as stored, the output flat.
  const auto& is = ref.meta["input_shape"];
  EXPECT_EQ(g.shape(g.input), (Shape{is[1].get<int>(), is[2].get<int>(), is[3].get<int>()}));
  const auto& os = ref.meta["output_shape"];  // [1,N] (classifiers) or [1,C,H,W] (maps)
  const Shape out_shape = os.size() == 4 ? Shape{os[1].get<int>(), os[2].get<int>(), os[3].get<int>()}
                                         : Shape{os[1].get<int>(), 1, 1};
  EXPECT_EQ(g.shape(g.output), out_shape);

  // Layer counts and work as torch counts them.
  const auto& counts = ref.meta["counts"];
  EXPECT_EQ(count_ops(g, Op::Conv), counts["Conv"].get<int>());
  EXPECT_EQ(count_ops(g, Op::Gemm), counts["Gemm"].get<int>());
  int real_bn = 0;  // BatchNorm nodes from BatchNormalization (affine maps from constants have eps 0)
  for (const Node& n : g.nodes) real_bn += n.op == Op::BatchNorm && n.eps > 0.f;
  EXPECT_EQ(real_bn, counts["BatchNorm"].get<int>());
  int64_t macs = 0, params = 0;
  for (const Node& n : g.nodes)
    if (n.op == Op::Conv || n.op == Op::ConvTranspose || n.op == Op::Gemm) {
      macs += node_macs(g, n);
      params += int64_t(n.weights.size() + n.bias.size());
      EXPECT_EQ(node_params(n), int64_t(n.weights.size() + n.bias.size()));
    }
  EXPECT_EQ(macs, ref.meta["conv_linear_macs"].get<int64_t>());
  EXPECT_EQ(params, ref.meta["conv_linear_params"].get<int64_t>());

  // Edges: every tensor's consumers are exactly the nodes that read it.
  std::vector<std::vector<int>> readers(g.tensors.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int t : g.nodes[i].inputs) readers[size_t(t)].push_back(int(i));
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    EXPECT_EQ(g.tensors[t].consumers, readers[t]) << g.tensors[t].name;
    if (int(t) != g.output) {
      EXPECT_FALSE(readers[t].empty()) << "dead tensor " << g.tensors[t].name;
    }
  }
  // Every Add joins two paths that fork from one tensor read by two nodes.
  for (const Node& n : g.nodes)
    if (n.op == Op::Add) {
      ASSERT_EQ(n.inputs.size(), 2u);
      auto ancestors = [&](int t) {
        std::vector<char> seen(g.tensors.size(), 0);
        std::vector<int> stack{t};
        while (!stack.empty()) {
          const int u = stack.back();
          stack.pop_back();
          if (seen[size_t(u)]) continue;
          seen[size_t(u)] = 1;
          const int p = g.tensors[size_t(u)].producer;
          if (p >= 0)
            for (int v : g.nodes[size_t(p)].inputs) stack.push_back(v);
        }
        return seen;
      };
      const auto a = ancestors(n.inputs[0]), b = ancestors(n.inputs[1]);
      bool fork = false;
      for (size_t t = 0; t < a.size(); ++t) fork = fork || (a[t] && b[t] && g.tensors[t].consumers.size() >= 2);
      EXPECT_TRUE(fork) << n.name;
    }

  // Numbers: max |float - torch| <= 1e-4 * max(1, max |torch|).
  for (size_t c = 0; c < ref.inputs.size(); ++c) {
    std::vector<std::vector<float>> all;
    const std::vector<float> y = run_float(g, ref.inputs[c], &all);
    ASSERT_EQ(y.size(), ref.outputs[c].size());
    float big = 0.f, diff = 0.f;
    for (size_t i = 0; i < y.size(); ++i) {
      big = std::max(big, std::fabs(ref.outputs[c][i]));
      diff = std::max(diff, std::fabs(y[i] - ref.outputs[c][i]));
    }
    EXPECT_LE(diff, 1e-4f * std::max(1.f, big)) << name << " case " << c;
    std::printf("[ %-18s ] case %zu: max |float - torch| = %.3g, max |torch| = %.3g\n", name.c_str(), c, double(diff),
                double(big));
    size_t argmax_y = size_t(std::max_element(y.begin(), y.end()) - y.begin());
    size_t argmax_r = size_t(std::max_element(ref.outputs[c].begin(), ref.outputs[c].end()) - ref.outputs[c].begin());
    EXPECT_EQ(argmax_y, argmax_r);
    for (size_t t = 0; t < all.size(); ++t)
      EXPECT_EQ(int64_t(all[t].size()), g.shape(int(t)).size()) << g.tensors[t].name;
    if (ref.meta["softmax_output"].get<bool>()) {
      EXPECT_EQ(g.nodes.back().op, Op::Softmax);
      double s = 0;
      for (float v : y) s += v;
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
}

// The imported graph is what the fold pass expects: after folding BatchNorm,
// activations and pads, the float result still matches torch.
TEST_P(TorchModel, MatchesTorchAfterFold) {
  const std::string name = GetParam();
  const Reference ref = load_reference(name);
  const Graph g = import_onnx(kDataDir + name + ".onnx");
  FoldStats st;
  const Graph f = fold(g, &st);
  EXPECT_EQ(count_ops(f, Op::BatchNorm), 0);
  // Every BatchNorm went one way (a hardswish's "+ 3" is one each).
  EXPECT_EQ(st.batchnorm_folded + st.batchnorm_as_conv + st.affines_composed + st.affines_into_activation +
                st.hardswish_found,
            count_ops(g, Op::BatchNorm));
  for (size_t c = 0; c < ref.inputs.size(); ++c) {
    const std::vector<float> y = run_float(f, ref.inputs[c]);
    ASSERT_EQ(y.size(), ref.outputs[c].size());
    float big = 0.f, diff = 0.f;
    for (size_t i = 0; i < y.size(); ++i) {
      big = std::max(big, std::fabs(ref.outputs[c][i]));
      diff = std::max(diff, std::fabs(y[i] - ref.outputs[c][i]));
    }
    EXPECT_LE(diff, 1e-4f * std::max(1.f, big)) << name << " case " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchModel,
                         ::testing::Values("mobilenet_v2", "mobilenet_v3_small", "squeezenet_mini", "resnet_small",
                                           "mnasnet", "tiny", "tiny_opset10", "shufflenet_v2", "slices",
                                           "slices_opset11", "activations", "shuffle", "unet_small", "transpose",
                                           "lcnet", "rsefpn"));

TEST(OnnxImport, ResidualEdgesInResNet) {
  Graph g = import_onnx(kDataDir + "resnet_small.onnx");
  int residual = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != Op::Add) continue;
    ASSERT_EQ(n.inputs.size(), 2u);
    for (int t : n.inputs) {
      const auto& cons = g.tensors[size_t(t)].consumers;
      EXPECT_NE(std::find(cons.begin(), cons.end(), int(i)), cons.end());
      if (cons.size() == 2) ++residual;
    }
  }
  // 5 blocks: the first two have identity shortcuts, so their Add reads the
  // block input that the block's first conv reads too.
  EXPECT_EQ(count_ops(g, Op::Add), 5);
  EXPECT_EQ(residual, 2);
  // The other three project the shortcut with a strided 1x1 conv that shares
  // its input with the block's first 3x3 conv.
  int projections = 0;
  for (const Node& n : g.nodes)
    if (n.op == Op::Conv && n.kh == 1 && n.sh == 2) {
      const auto& cons = g.tensors[size_t(n.inputs[0])].consumers;
      ASSERT_EQ(cons.size(), 2u);
      const Node& other = g.nodes[size_t(cons[0]) == size_t(&n - g.nodes.data()) ? size_t(cons[1]) : size_t(cons[0])];
      EXPECT_EQ(other.op, Op::Conv);
      EXPECT_EQ(other.kh, 3);
      ++projections;
    }
  EXPECT_EQ(projections, 3);
  EXPECT_EQ(count_ops(g, Op::MaxPool), 1);
  for (const Node& n : g.nodes)
    if (n.op == Op::MaxPool) {
      EXPECT_EQ(n.kh, 3);
      EXPECT_EQ(n.sh, 2);
      EXPECT_EQ(n.pad_t, 1);
      EXPECT_EQ(n.pad_r, 1);
    }
}

TEST(OnnxImport, TinyNetCorners) {
  for (const char* file : {"tiny.onnx", "tiny_opset10.onnx"}) {
    SCOPED_TRACE(file);
    Graph g = import_onnx(kDataDir + file);
    bool dilated = false, grouped = false, depthwise = false, asym_pad = false, avg_excl = false, avg_pad = false,
         gemm_bias_from_add = false, relu6 = false, hswish = false, se_mul = false, gap = false, flatten = false;
    for (const Node& n : g.nodes) {
      if (n.op == Op::Conv && n.dh == 2 && n.dw == 2 && n.pad_t == 2) dilated = true;
      if (n.op == Op::Conv && n.groups == 4) grouped = true;
      if (n.op == Op::Conv && n.groups == 24) depthwise = true;
      if (n.op == Op::Pad && n.pad_t == 0 && n.pad_l == 0 && n.pad_b == 1 && n.pad_r == 1) asym_pad = true;
      if (n.op == Op::AvgPool && !n.count_include_pad && n.pad_t == 1 && n.sh == 1) avg_excl = true;
      // count_include_pad=True is exported by torch as Pad + AveragePool without pads.
      if (n.op == Op::AvgPool && n.sh == 2 && g.nodes[size_t(g.tensors[size_t(n.inputs[0])].producer)].op == Op::Pad)
        avg_pad = true;
      if (n.op == Op::Gemm && n.weights.size() == 512u * 32u && n.bias.size() == 32u) gemm_bias_from_add = true;
      if (n.op == Op::Clip && n.lo == 0.f && n.hi == 6.f) relu6 = true;  // Relu + Clip(max 6) merged
      if (n.op == Op::HardSwish) hswish = true;  // exported as x * HardSigmoid(x) before opset 14
      if (n.op == Op::Mul) {
        EXPECT_NE(g.shape(n.inputs[1]), g.shape(n.inputs[0])) << "unfused hardswish";
      }
      if (n.op == Op::Mul && g.shape(n.inputs[1]) == Shape{48, 1, 1}) se_mul = true;
      if (n.op == Op::GlobalAvgPool) gap = true;
      if (n.op == Op::Flatten) flatten = true;
    }
    EXPECT_TRUE(dilated);
    EXPECT_TRUE(grouped);
    EXPECT_TRUE(depthwise);
    EXPECT_TRUE(asym_pad);
    EXPECT_TRUE(avg_excl);
    EXPECT_TRUE(avg_pad);
    EXPECT_TRUE(gemm_bias_from_add);
    EXPECT_TRUE(relu6);
    ASSERT_GE(g.nodes.size(), 3u);  // conv1, bn1, then one Clip(0, 6) with no Relu before it
    EXPECT_EQ(g.nodes[0].op, Op::Conv);
    EXPECT_EQ(g.nodes[1].op, Op::BatchNorm);
    EXPECT_EQ(g.nodes[2].op, Op::Clip);
    EXPECT_TRUE(hswish);
    EXPECT_TRUE(se_mul);
    EXPECT_TRUE(gap);
    EXPECT_TRUE(flatten);
    // x * 0.5 + 0.25 became two affine BatchNorm nodes (eps 0).
    int affine = 0;
    for (const Node& n : g.nodes)
      if (n.op == Op::BatchNorm && n.eps == 0.f) {
        ++affine;
        EXPECT_TRUE((n.gamma[0] == 0.5f && n.beta[0] == 0.f) || (n.gamma[0] == 1.f && n.beta[0] == 0.25f));
      }
    EXPECT_EQ(affine, 2);
    EXPECT_EQ(g.nodes.back().op, Op::Softmax);
  }
}

TEST(OnnxImport, MobileNetV3Ops) {
  Graph g = import_onnx(kDataDir + "mobilenet_v3_small.onnx");
  EXPECT_GT(count_ops(g, Op::HardSwish), 0);
  EXPECT_GT(count_ops(g, Op::HardSigmoid), 0);
  int se = 0;
  for (const Node& n : g.nodes)
    if (n.op == Op::Mul && g.shape(n.inputs[1]).h == 1 && g.shape(n.inputs[0]).h > 1) ++se;
  EXPECT_EQ(se, 9);  // squeeze-excitation blocks scale per channel
  for (const Node& n : g.nodes)
    if (n.op == Op::BatchNorm) {
      EXPECT_FLOAT_EQ(n.eps, 0.001f);
    }
}

// PP-OCRv4's backbone as the lcnet test model has it: every hardswish
// written out (x * Clip(x + 3, 0, 6) / 6) between scalar affines after the
// convolutions, a residual Add followed by five affines, a per-channel
// BatchNorm after the last activation. Folded, each activation is one
// HardSwish with the affines after it in its post-affine (one table), the
// affines before it in the convolution, the five after the Add one depthwise
// 1x1 layer; the float result still matches torch (MatchesTorchAfterFold).
TEST(OnnxImport, WrittenOutHardswishAndAffinesFoldToOneLayer) {
  const Graph g = import_onnx(kDataDir + "lcnet.onnx");
  FoldStats st;
  const Graph f = fold(g, &st);
  EXPECT_EQ(st.hardswish_found, 9);
  EXPECT_EQ(count_ops(f, Op::HardSwish), 9);
  EXPECT_EQ(count_ops(f, Op::Clip), 0);
  EXPECT_EQ(count_ops(f, Op::Mul), 1);  // the squeeze-excite's scale
  EXPECT_EQ(st.batchnorm_as_conv, 1);   // after the residual Add
  EXPECT_EQ(int(f.nodes.size()), 27);  // from 102 imported
  int per_channel = 0;
  for (const Node& n : f.nodes)
    if (n.op == Op::HardSwish) {
      EXPECT_EQ(n.post_s.size(), size_t(f.shape(n.output).c)) << n.name;
      per_channel += per_channel_table(n);
    }
  EXPECT_EQ(per_channel, 1);  // the last, with the BatchNorm after it
  for (const Node& n : f.nodes)
    if (n.op == Op::Conv && n.groups == f.shape(n.output).c && n.kh == 1) {
      EXPECT_EQ(f.nodes[size_t(f.tensors[n.inputs[0]].producer)].op, Op::Add) << n.name;
    }
}

// PP-OCRv4's neck as the rsefpn test model has it: eight RSE layers, each a
// convolution y and y + y * HardSigmoid(SE(y)). Folded, each is y times the
// gate plus one: the HardSigmoid's post-affine adds 1, the Add goes; the
// three top-down Adds (two maps, no gate) stay, each reading its coarser
// level upsampled (the nearest Resize before it folded in). The float result
// still matches torch (MatchesTorchAfterFold).
TEST(OnnxImport, ResidualGateFoldsIntoTheGatesMul) {
  const Graph g = import_onnx(kDataDir + "rsefpn.onnx");
  FoldStats st;
  const Graph f = fold(g, &st);
  EXPECT_EQ(st.residual_gates, 8);
  EXPECT_EQ(count_ops(g, Op::Add), 11);
  EXPECT_EQ(count_ops(f, Op::Add), 3);
  EXPECT_EQ(count_ops(f, Op::Mul), 8);
  EXPECT_EQ(st.upsamples_into_add, 3);
  EXPECT_EQ(int(f.nodes.size()),
            int(g.nodes.size()) - 8 - count_ops(g, Op::BatchNorm) - st.activations_fused - st.upsamples_into_add);
  for (const Node& n : f.nodes) {
    if (n.op != Op::HardSigmoid) continue;
    ASSERT_EQ(n.post_t.size(), size_t(f.shape(n.output).c)) << n.name;
    for (size_t c = 0; c < n.post_t.size(); ++c) {
      EXPECT_EQ(n.post_s[c], 1.f);
      EXPECT_EQ(n.post_t[c], 1.f);
    }
    const auto& users = f.tensors[n.output].consumers;
    ASSERT_EQ(users.size(), 1u);
    EXPECT_EQ(f.nodes[size_t(users[0])].op, Op::Mul);
  }
}

// Activation bytes alive, summed over the nodes, when f's nodes run in the
// order given (a tensor from its producer to its last reader),
// and the most at once.
std::pair<int64_t, int64_t> live_bytes(const Graph& f, const std::vector<int>& order) {
  std::vector<int> left(f.tensors.size(), 0);
  for (const Node& n : f.nodes)
    for (int t : n.inputs) ++left[size_t(t)];
  int64_t live = f.shape(f.input).size(), sum = 0, peak = live;
  for (int i : order) {
    live += f.shape(f.nodes[size_t(i)].output).size();
    peak = std::max(peak, live);
    sum += live;
    for (int t : f.nodes[size_t(i)].inputs)
      if (--left[size_t(t)] == 0 && t != f.output) live -= f.shape(t).size();
  }
  return {sum, peak};
}

// The folded rsefpn runs each level's 3x3 RSE layer (which makes a quarter
// of its level's channels) as soon as the top-down path has read the level,
// not after the larger levels: fewer bytes held layer after layer, never
// more at once, than the nodes in the imported order; MobileNetV2 (a chain)
// keeps its order.
TEST(OnnxImport, FoldRunsWhatFreesMoreThanItMakesEarly) {
  const Graph g = import_onnx(kDataDir + "rsefpn.onnx");
  FoldStats st;
  const Graph f = fold(g, &st);
  EXPECT_GT(st.reordered, 0);
  std::map<std::string, int> imported;
  for (size_t i = 0; i < g.nodes.size(); ++i) imported[g.nodes[i].name] = int(i);
  std::vector<int> now(f.nodes.size()), before(f.nodes.size());
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    now[i] = int(i);
    ASSERT_TRUE(imported.count(f.nodes[i].name)) << f.nodes[i].name;
    before[i] = int(i);
  }
  std::sort(before.begin(), before.end(),
            [&](int a, int b) { return imported[f.nodes[size_t(a)].name] < imported[f.nodes[size_t(b)].name]; });
  EXPECT_NE(now, before);
  const auto mine = live_bytes(f, now), theirs = live_bytes(f, before);
  EXPECT_LT(mine.first, theirs.first);
  EXPECT_LE(mine.second, theirs.second);
  FoldStats chain;
  (void)fold(import_onnx(kDataDir + "mobilenet_v2.onnx"), &chain);
  EXPECT_EQ(chain.reordered, 0);
}

// x + x * g by hand: folded when the gate g is a per-channel activation read
// only by the Mul (same float result), left alone when the gate has another
// reader, when the Add adds another map, or when the gate is not per channel.
Graph gate_graph(int variant) {
  Graph g;
  g.input = g.add_tensor("x", {3, 4, 4});
  auto node = [&](Op op, std::vector<int> in, Shape out, const char* name) {
    return ts::testing::add_op(g, op, std::move(in), out, name, [](Node& n) {
      if (n.op == Op::HardSigmoid) n.alpha = 0.2f, n.beta_hs = 0.5f;
    });
  };
  const int x = node(Op::Relu, {g.input}, {3, 4, 4}, "x0");
  const int pooled = variant == 3 ? x : node(Op::GlobalAvgPool, {x}, {3, 1, 1}, "gap");
  const Shape gs = variant == 3 ? Shape{3, 4, 4} : Shape{3, 1, 1};
  const int gate = node(Op::HardSigmoid, {pooled}, gs, "gate");
  const int m = node(Op::Mul, {x, gate}, {3, 4, 4}, "mul");
  const int other = variant == 2 ? node(Op::Relu, {g.input}, {3, 4, 4}, "other") : x;
  int y = node(Op::Add, {m, other}, {3, 4, 4}, "add");
  if (variant == 1) y = node(Op::Mul, {y, gate}, {3, 4, 4}, "again");
  g.output = y;
  g.validate();
  return g;
}

TEST(OnnxImport, ResidualGateFoldsOnlyAPerChannelGateOfTheSameMap) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> in(48);
  for (float& v : in) v = u(rng);
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    const Graph g = gate_graph(variant);
    FoldStats st;
    const Graph f = fold(g, &st);
    EXPECT_EQ(st.residual_gates, variant == 0 ? 1 : 0);
    EXPECT_EQ(count_ops(f, Op::Add), variant == 0 ? 0 : 1);
    ts::testing::expect_same_function(g, f, in, 1e-5f);
  }
}

TEST(OnnxImport, InputSizeOverride) {
  // MobileNetV2 ends in a global pool, so it takes other sizes.
  Graph g = import_onnx(kDataDir + "mobilenet_v2.onnx", 64);
  EXPECT_EQ(g.shape(g.input), (Shape{3, 64, 64}));
  EXPECT_EQ(g.shape(g.output), (Shape{10, 1, 1}));
  std::vector<float> x(size_t(g.shape(g.input).size()), 0.1f);
  const auto y = run_float(g, x);
  EXPECT_EQ(y.size(), 10u);
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  // Same size as stored: same graph.
  Graph same = import_onnx(kDataDir + "mobilenet_v2.onnx", 96);
  EXPECT_EQ(same.nodes.size(), import_onnx(kDataDir + "mobilenet_v2.onnx").nodes.size());

  // The tiny net flattens a fixed-size map into a matrix product: 40x40 cannot work.
  expect_error([] { import_onnx(kDataDir + "tiny.onnx", 40); }, {"tiny.onnx", "input size 40x40", "32x32", "MatMul"});
  expect_error([] { import_onnx(kDataDir + "tiny_opset10.onnx", 40); }, {"input size 40x40"});
  // Far too small for the first convolutions.
  expect_error([] { import_onnx(kDataDir + "squeezenet_mini.onnx", 2); }, {"too small", "input size 2x2"});
}

// ---------------------------------------------------------------- bad files

TEST(OnnxImport, MissingFile) {
  expect_error([] { import_onnx(kDataDir + "no_such_model.onnx"); }, {"no_such_model.onnx", "cannot open"});
}

TEST(OnnxImport, TruncatedFile) {
  const std::string full = read_file(kDataDir + "tiny.onnx");
  for (size_t len : {full.size() / 2, full.size() - 1, size_t(100), size_t(7)}) {
    const std::string path = temp_path("truncated.onnx");
    write_file(path, full.substr(0, len));
    expect_error([&] { import_onnx(path); }, {path});
    std::remove(path.c_str());
  }
  const std::string path = temp_path("truncated.onnx");
  write_file(path, full.substr(0, full.size() / 2));
  expect_error([&] { import_onnx(path); }, {"truncated"});
  std::remove(path.c_str());
}

TEST(OnnxImport, RandomBytesAndEmptyFile) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bytes(size_t(1 + rng() % 4000), '\0');
    for (char& c : bytes) c = char(rng());
    const std::string path = temp_path("random.onnx");
    write_file(path, bytes);
    expect_error([&] { import_onnx(path); }, {path});
    std::remove(path.c_str());
  }
  const std::string path = temp_path("empty.onnx");
  write_file(path, "");
  expect_error([&] { import_onnx(path); }, {"empty"});
  std::remove(path.c_str());
}

TEST(OnnxImport, CorruptedBytesAreRefusedOrStillValid) {
  // Flip bytes all over a real model: every result is a ts::Error with one
  // line naming the file, or a graph that validates and runs (the damage hit
  // weights or names) to an output of the model's shape.
  const std::string full = read_file(kDataDir + "tiny.onnx");
  const Graph good = import_onnx_bytes(full, "tiny.onnx");
  const int64_t out_size = good.shape(good.output).size();
  std::mt19937 rng(11);
  int errors = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::string bytes = full;
    for (int k = 0; k < 4; ++k) bytes[rng() % bytes.size()] = char(rng());
    try {
      Graph g = import_onnx_bytes(bytes, "flipped.onnx");
      g.validate();
      std::vector<float> x(size_t(g.shape(g.input).size()), 0.25f);
      EXPECT_EQ(int64_t(run_float(g, x).size()), g.shape(g.output).size()) << "trial " << trial;
      EXPECT_EQ(g.shape(g.output).size(), out_size) << "trial " << trial;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("flipped.onnx"), std::string::npos) << "trial " << trial << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << "trial " << trial << ": " << m;
      ++errors;
    }
  }
  std::printf("corrupted models rejected: %d of 60\n", errors);
  EXPECT_GT(errors, 5);
}

// ---------------------------------------------------------------- hand-built models

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;

  explicit Builder(int opset, std::vector<int64_t> in = {1, 1, 4, 4}, const std::string& in_name = "x") {
    m.set_ir_version(7);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
    auto* vi = g->add_input();
    vi->set_name(in_name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : in) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void init(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  void init_i64(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, const std::string& out,
                        const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + out : name);
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
  static void i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void f(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void s(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  void output(const std::string& name) {
    auto* o = g->add_output();
    o->set_name(name);
  }
  std::string bytes() const { return m.SerializeAsString(); }
  Graph import(int input_size = 0) const { return import_onnx_bytes(bytes(), "built.onnx", input_size); }
};

TEST(OnnxImport, UnsupportedOp) {
  Builder b(13, {1, 3, 8, 8});
  b.node("LSTM", {"x"}, "y", "lstm_1");
  b.output("y");
  const std::string path = temp_path("lstm.onnx");
  write_file(path, b.bytes());
  expect_error([&] { import_onnx(path); }, {path, "unsupported op 'LSTM'", "'lstm_1'"});
  std::remove(path.c_str());

  Builder c(13, {1, 3, 8, 8});
  c.node("Relu", {"x"}, "r");
  c.node("Elu", {"r"}, "y", "elu");
  c.output("y");
  expect_error([&] { c.import(); }, {"Elu", "elu"});

  Builder d(13, {1, 3, 8, 8});
  auto* n = d.node("FusedConv", {"x"}, "y", "fc");
  n->set_domain("com.microsoft");
  d.output("y");
  expect_error([&] { d.import(); }, {"com.microsoft.FusedConv", "fc"});
}

TEST(OnnxImport, ModelLevelErrors) {
  {  // two image inputs
    Builder b(13);
    auto* vi = b.g->add_input();
    vi->set_name("x2");
    b.node("Add", {"x", "x2"}, "y");
    b.output("y");
    expect_error([&] { b.import(); }, {"2 inputs", "'x'", "'x2'"});
  }
  {  // input used before it is defined
    Builder b(13);
    b.node("Relu", {"nowhere"}, "y", "r");
    b.output("y");
    expect_error([&] { b.import(); }, {"'r'", "'nowhere'"});
  }
  {  // conv weights that are computed, not constant
    Builder b(13, {1, 1, 4, 4});
    b.node("Conv", {"x", "x"}, "y", "c");
    b.output("y");
    expect_error([&] { b.import(); }, {"'c'", "Conv", "must be a constant"});
  }
  {  // wrong weight shape for the input channels
    Builder b(13, {1, 3, 4, 4});
    b.init("w", {2, 2, 1, 1}, {1, 1, 1, 1});
    b.node("Conv", {"x", "w"}, "y", "c");
    b.output("y");
    expect_error([&] { b.import(); }, {"'c'", "do not fit input [1,3,4,4]"});
  }
  {  // raw data shorter than the shape needs
    Builder b(13, {1, 1, 4, 4});
    auto* t = b.g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 1, 3, 3}) t->add_dims(d);
    t->set_raw_data(std::string(20, '\0'));
    b.node("Conv", {"x", "w"}, "y");
    b.output("y");
    expect_error([&] { b.import(); }, {"initializer 'w'", "20 bytes"});
  }
  {  // no opset
    Builder b(13);
    b.m.clear_opset_import();
    b.node("Relu", {"x"}, "y");
    b.output("y");
    expect_error([&] { b.import(); }, {"opset", "built.onnx"});
  }
  {  // dynamic spatial size needs an input size
    Builder b(13);
    auto* dim = b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2);
    dim->clear_dim_value();
    dim->set_dim_param("height");
    b.node("Relu", {"x"}, "y");
    b.output("y");
    expect_error([&] { b.import(); }, {"input size"});
    Graph g = b.import(6);
    EXPECT_EQ(g.shape(g.input), (Shape{1, 6, 6}));
  }
  {  // broadcasting Add of two computed tensors
    Builder b(13, {1, 2, 4, 4});
    b.node("GlobalAveragePool", {"x"}, "p");
    b.node("Add", {"x", "p"}, "y", "badd");
    b.output("y");
    expect_error([&] { b.import(); }, {"'badd'", "[1,2,4,4]", "[1,2,1,1]"});
  }
  {  // a reshape that is not a flatten
    Builder b(13, {1, 2, 4, 4});
    b.init_i64("shape", {4}, {1, 8, 2, 2});
    b.node("Reshape", {"x", "shape"}, "y", "rs");
    b.output("y");
    expect_error([&] { b.import(); }, {"'rs'", "[1,8,2,2]"});
  }
}

TEST(OnnxImport, AutoPad) {
  struct Case {
    const char* mode;
    int stride, pt, pb, out;
  };
  // 4x4 input, 3x3 kernel.
  for (Case c : {Case{"SAME_UPPER", 2, 0, 1, 2}, Case{"SAME_LOWER", 2, 1, 0, 2}, Case{"SAME_UPPER", 1, 1, 1, 4},
                 Case{"VALID", 1, 0, 0, 2}}) {
    SCOPED_TRACE(std::string(c.mode) + " stride " + std::to_string(c.stride));
    Builder b(13, {1, 1, 4, 4});
    b.init("w", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
    auto* n = b.node("Conv", {"x", "w"}, "y");
    Builder::s(n, "auto_pad", c.mode);
    Builder::ints(n, "strides", {c.stride, c.stride});
    b.output("y");
    Graph g = b.import();
    ASSERT_EQ(g.nodes.size(), 1u);
    const Node& cv = g.nodes[0];
    EXPECT_EQ(cv.pad_t, c.pt);
    EXPECT_EQ(cv.pad_l, c.pt);
    EXPECT_EQ(cv.pad_b, c.pb);
    EXPECT_EQ(cv.pad_r, c.pb);
    EXPECT_EQ(g.shape(g.output), (Shape{1, c.out, c.out}));
  }
  // The same for a pool.
  Builder b(13, {1, 1, 5, 5});
  auto* n = b.node("MaxPool", {"x"}, "y");
  Builder::ints(n, "kernel_shape", {2, 2});
  Builder::ints(n, "strides", {2, 2});
  Builder::s(n, "auto_pad", "SAME_LOWER");
  b.output("y");
  Graph g = b.import();
  EXPECT_EQ(g.shape(g.output), (Shape{1, 3, 3}));
  EXPECT_EQ(g.nodes[0].pad_t, 1);
  EXPECT_EQ(g.nodes[0].pad_b, 0);
}

TEST(OnnxImport, OldOpsetAttributesAndPoolCorners) {
  // opset 9: Clip bounds and Pad pads as attributes; Dropout disappears;
  // AveragePool count_include_pad=1; MaxPool ceil_mode; Softmax axis 1.
  Builder b(10, {1, 2, 5, 5});
  auto* p = b.node("Pad", {"x"}, "p", "pad");
  Builder::ints(p, "pads", {0, 0, 1, 0, 0, 0, 0, 2});
  auto* c = b.node("Clip", {"p"}, "c", "clip");
  Builder::f(c, "min", -1.f);
  Builder::f(c, "max", 2.f);
  b.node("Dropout", {"c"}, "d", "drop");
  auto* a = b.node("AveragePool", {"d"}, "a", "avg");
  Builder::ints(a, "kernel_shape", {3, 3});
  Builder::ints(a, "pads", {1, 1, 1, 1});
  Builder::i(a, "count_include_pad", 1);
  auto* mp = b.node("MaxPool", {"a"}, "m", "max");
  Builder::ints(mp, "kernel_shape", {2, 2});
  Builder::ints(mp, "strides", {2, 2});
  Builder::i(mp, "ceil_mode", 1);
  b.node("GlobalMaxPool", {"m"}, "gm", "gmax");
  b.node("Flatten", {"gm"}, "f", "flat");
  auto* s = b.node("Softmax", {"f"}, "y", "soft");
  Builder::i(s, "axis", 1);
  b.output("y");
  Graph g = b.import();
  std::vector<Op> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  // Flatten of a [1,2,1,1] tensor keeps the IR shape (2,1,1): nothing to do.
  EXPECT_EQ(ops, (std::vector<Op>{Op::Pad, Op::Clip, Op::AvgPool, Op::MaxPool, Op::MaxPool, Op::Softmax}));
  EXPECT_EQ(g.nodes[0].pad_t, 1);
  EXPECT_EQ(g.nodes[0].pad_r, 2);
  EXPECT_EQ(g.shape(g.nodes[0].output), (Shape{2, 6, 7}));
  EXPECT_EQ(g.nodes[1].lo, -1.f);
  EXPECT_EQ(g.nodes[1].hi, 2.f);
  EXPECT_TRUE(g.nodes[2].count_include_pad);
  // ceil mode on 6x7 with 2x2/2: 3x4 outputs, one extra padding column at the end.
  EXPECT_EQ(g.shape(g.nodes[3].output), (Shape{2, 3, 4}));
  EXPECT_EQ(g.nodes[3].pad_r, 1);
  EXPECT_EQ(g.nodes[3].pad_b, 0);
  EXPECT_EQ(g.nodes[4].kh, 3);
  EXPECT_EQ(g.nodes[4].kw, 4);
  // Numbers: a global max of a clipped map, softmax over 2 channels.
  std::vector<float> x(50);
  for (size_t i = 0; i < 50; ++i) x[i] = i < 25 ? 0.1f * float(i) : -0.5f;
  std::vector<std::vector<float>> all;
  auto y = run_float(g, x, &all);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0] + y[1], 1.f, 1e-6f);
  EXPECT_GT(y[0], y[1]);
  const auto& clipped = all[size_t(g.nodes[1].output)];
  EXPECT_EQ(*std::max_element(clipped.begin(), clipped.end()), 2.f);
}

TEST(OnnxImport, OpsetElevenClipInputsAndConstantArithmetic) {
  // Clip with min only (a Relu), Clip(0,6) from Constant nodes, ReduceMean
  // keepdims=0 -> Gemm with transB=0, alpha and beta; Sub and Div by constants.
  Builder b(13, {1, 2, 3, 3});
  auto* k0 = b.node("Constant", {}, "zero", "k0");
  {
    auto* a = k0->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(0.f);
  }
  auto* k6 = b.node("Constant", {}, "six", "k6");
  Builder::f(k6, "value_float", 6.f);
  b.node("Clip", {"x", "zero"}, "r", "relu_as_clip");
  b.node("Clip", {"r", "zero", "six"}, "c", "relu6");
  b.init("sub", {1, 2, 1, 1}, {1.f, -1.f});
  b.node("Sub", {"c", "sub"}, "s", "sub");
  b.init("div", {}, {4.f});
  b.node("Div", {"s", "div"}, "d", "div");
  auto* rm = b.node("ReduceMean", {"d"}, "m", "mean");
  Builder::ints(rm, "axes", {-1, -2});
  Builder::i(rm, "keepdims", 0);
  b.init("W", {2, 3}, {1, 2, 3, 4, 5, 6});  // [in=2][out=3], transB=0
  b.init("C", {3}, {1, 1, 1});
  auto* gm = b.node("Gemm", {"m", "W", "C"}, "y", "fc");
  Builder::f(gm, "alpha", 2.f);
  Builder::f(gm, "beta", 0.5f);
  b.output("y");
  Graph g = b.import();
  std::vector<Op> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  // Relu then Clip(0, 6) on its output: one Clip.
  EXPECT_EQ(ops, (std::vector<Op>{Op::Clip, Op::BatchNorm, Op::BatchNorm, Op::GlobalAvgPool, Op::Gemm}));
  EXPECT_EQ(g.nodes[0].lo, 0.f);
  EXPECT_EQ(g.nodes[0].hi, 6.f);
  const Node& fc = g.nodes.back();
  EXPECT_EQ(fc.weights, (std::vector<float>{2, 8, 4, 10, 6, 12}));  // [out][in] * alpha
  EXPECT_EQ(fc.bias, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  // Values: channel 0 all 2 -> relu6 2 -> -1 -> /4 ; channel 1 all 8 -> 6 -> +1 -> /4.
  std::vector<float> x(18);
  for (size_t i = 0; i < 18; ++i) x[i] = i < 9 ? 2.f : 8.f;
  auto y = run_float(g, x);
  const float m0 = (2.f - 1.f) / 4.f, m1 = (6.f + 1.f) / 4.f;
  ASSERT_EQ(y.size(), 3u);
  EXPECT_NEAR(y[0], 2 * (1 * m0 + 4 * m1) + 0.5f, 1e-6f);
  EXPECT_NEAR(y[1], 2 * (2 * m0 + 5 * m1) + 0.5f, 1e-6f);
  EXPECT_NEAR(y[2], 2 * (3 * m0 + 6 * m1) + 0.5f, 1e-6f);
}

TEST(OnnxImport, ShapeArithmeticFolds) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])) after a Conv, then
  // MatMul + Add; plus Squeeze/Unsqueeze of a pooled tensor and Cast/Slice
  // of shape values, all resolved at import time.
  Builder b(13, {1, 2, 4, 4});
  b.init("w", {3, 2, 1, 1}, {1, 0, 0, 1, 1, 1});
  b.node("Conv", {"x", "w"}, "c", "conv");
  b.node("Shape", {"c"}, "shp", "shape");
  b.init_i64("zero", {}, {0});
  auto* ga = b.node("Gather", {"shp", "zero"}, "n", "gather");
  Builder::i(ga, "axis", 0);
  b.init_i64("ax0", {1}, {0});
  b.node("Unsqueeze", {"n", "ax0"}, "n1", "unsq");
  b.init_i64("minus1", {1}, {-1});
  auto* cc = b.node("Concat", {"n1", "minus1"}, "tgt", "cat");
  Builder::i(cc, "axis", 0);
  auto* cast = b.node("Cast", {"tgt"}, "tgt2", "cast");
  Builder::i(cast, "to", onnx::TensorProto::INT64);
  b.node("Reshape", {"c", "tgt2"}, "flat", "reshape");
  std::vector<float> w(48 * 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) - 3.f;
  b.init("mw", {48, 2}, w);
  b.node("MatMul", {"flat", "mw"}, "mm", "matmul");
  b.init("mb", {2}, {0.5f, -0.5f});
  b.node("Add", {"mm", "mb"}, "y", "bias");
  b.output("y");
  Graph g = b.import();
  std::vector<Op> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<Op>{Op::Conv, Op::Flatten, Op::Gemm}));
  EXPECT_EQ(g.nodes[2].bias, (std::vector<float>{0.5f, -0.5f}));
  std::vector<float> x(32);
  for (size_t i = 0; i < 32; ++i) x[i] = float(i % 5) * 0.25f;
  auto y = run_float(g, x);
  // Naive: conv channels = x0, x1, x0 + x1, flattened CHW, then matmul.
  std::vector<float> flat;
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 16; ++p)
      flat.push_back(c == 0 ? x[size_t(p)] : c == 1 ? x[size_t(16 + p)] : x[size_t(p)] + x[size_t(16 + p)]);
  for (int o = 0; o < 2; ++o) {
    double s = o == 0 ? 0.5 : -0.5;
    for (int i = 0; i < 48; ++i) s += double(flat[size_t(i)]) * w[size_t(i * 2 + o)];
    EXPECT_NEAR(y[size_t(o)], s, 1e-5);
  }
}

// ONNX's own operator test cases (Debian package libonnx-testdata) through
// the whole importer: the expected outputs there were computed by ONNX's
// reference implementation, so they check auto_pad, ceil_mode and
// count_include_pad semantics independently. Further graph inputs (conv
// weights) are turned into initializers first.
std::string testdata_root() {
  if (const char* e = std::getenv("TS_ONNX_TESTDATA")) return e;
  return "/usr/share/libonnx-testdata/data";
}

std::vector<float> tensor_floats(const onnx::TensorProto& t) {
  if (t.float_data_size()) return std::vector<float>(t.float_data().begin(), t.float_data().end());
  std::vector<float> v(t.raw_data().size() / 4);
  std::memcpy(v.data(), t.raw_data().data(), v.size() * 4);
  return v;
}

onnx::TensorProto read_tensor(const std::string& path) {
  onnx::TensorProto t;
  EXPECT_TRUE(t.ParseFromString(read_file(path))) << path;
  return t;
}

// Imports <case>/model.onnx with inputs 1.. made constant; returns the graph
// and fills x / y from test_data_set_0.
Graph import_testdata_case(const std::string& name, std::vector<float>& x, std::vector<float>& y) {
  const std::string dir = testdata_root() + "/" + name;
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(read_file(dir + "/model.onnx"))) << name;
  auto* g = m.mutable_graph();
  for (int i = 1; i < g->input_size(); ++i) {
    onnx::TensorProto t = read_tensor(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    t.set_name(g->input(i).name());
    *g->add_initializer() = t;
  }
  x = tensor_floats(read_tensor(dir + "/test_data_set_0/input_0.pb"));
  y = tensor_floats(read_tensor(dir + "/test_data_set_0/output_0.pb"));
  return import_onnx_bytes(m.SerializeAsString(), name);
}

TEST(OnnxImport, OnnxTestdataCasesMatch) {
  if (!std::ifstream(testdata_root() + "/node/test_conv_with_autopad_same/model.onnx"))
    FAIL() << "libonnx-testdata not installed (scripts/setup.sh installs it)";
  const char* cases[] = {
      "node/test_averagepool_2d_ceil", "node/test_averagepool_2d_default", "node/test_averagepool_2d_pads",
      "node/test_averagepool_2d_pads_count_include_pad", "node/test_averagepool_2d_precomputed_pads",
      "node/test_averagepool_2d_precomputed_pads_count_include_pad",
      "node/test_averagepool_2d_precomputed_same_upper", "node/test_averagepool_2d_precomputed_strides",
      "node/test_averagepool_2d_same_lower", "node/test_averagepool_2d_same_upper",
      "node/test_averagepool_2d_strides", "node/test_basic_conv_with_padding", "node/test_basic_conv_without_padding",
      "node/test_conv_with_autopad_same", "node/test_conv_with_strides_and_asymmetric_padding",
      "node/test_conv_with_strides_no_padding", "node/test_conv_with_strides_padding", "node/test_globalaveragepool",
      "node/test_globalaveragepool_precomputed", "node/test_globalmaxpool", "node/test_globalmaxpool_precomputed",
      "node/test_maxpool_2d_ceil", "node/test_maxpool_2d_default", "node/test_maxpool_2d_pads",
      "node/test_maxpool_2d_precomputed_pads", "node/test_maxpool_2d_precomputed_same_upper",
      "node/test_maxpool_2d_precomputed_strides", "node/test_maxpool_2d_same_lower", "node/test_maxpool_2d_same_upper",
      "node/test_maxpool_2d_strides", "pytorch-converted/test_MaxPool2d", "pytorch-operator/test_operator_flatten"};
  for (const char* name : cases) {
    SCOPED_TRACE(name);
    std::vector<float> x, want;
    Graph g = import_testdata_case(name, x, want);
    const std::vector<float> got = run_float(g, x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << "at " << i;
  }
}

TEST(OnnxImport, OnnxTestdataUnsupportedCasesFailClearly) {
  if (!std::ifstream(testdata_root() + "/node/test_conv_with_autopad_same/model.onnx"))
    FAIL() << "libonnx-testdata not installed (scripts/setup.sh installs it)";
  const std::pair<const char*, const char*> cases[] = {
      {"node/test_constant_pad", "only zero padding"},
      {"node/test_maxpool_2d_dilations", "dilated pooling"},
      {"node/test_maxpool_with_argmax_2d_precomputed_pads", "2 outputs"},
      {"node/test_squeeze", "only flattening"},
      {"pytorch-operator/test_operator_pad", "reflect"},
      {"pytorch-operator/test_operator_reduced_mean", "axes [2]"},
      {"node/test_lrn", "only batch 1"}};
  for (const auto& [name, why] : cases) {
    SCOPED_TRACE(name);
    std::vector<float> x, y;
    expect_error([&] { import_testdata_case(name, x, y); }, {name, why});
  }
}

TEST(OnnxImport, DeadBranchesAreDropped) {
  Builder b(13, {1, 1, 4, 4});
  b.node("Relu", {"x"}, "r", "used");
  b.node("Sigmoid", {"x"}, "unused_out", "unused");
  b.node("Identity", {"r"}, "y", "id");
  b.output("y");
  Graph g = b.import();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "used");
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// Issue 23: ShuffleNetV2's channel shuffles are Shuffle nodes (no Transpose
// survives), its chunks Slice nodes on channels; the test models' Slice,
// Split, LeakyRelu, PRelu and Tanh reach the IR.
TEST(OnnxImport, ShuffleNetShufflesAndSlices) {
  const Graph g = import_onnx(kDataDir + "shufflenet_v2.onnx");
  EXPECT_EQ(count_ops(g, Op::Shuffle), 16);  // one per unit: 4 + 8 + 4
  EXPECT_EQ(count_ops(g, Op::Slice), 2 * 13);  // both halves of every stride-1 unit
  for (const Node& n : g.nodes)
    if (n.op == Op::Shuffle) EXPECT_EQ(n.groups, 2) << n.name;
  const Graph s = import_onnx(kDataDir + "slices.onnx");
  EXPECT_GE(count_ops(s, Op::Slice), 6);
  bool rows = false, cols = false, crop = false;  // x[..., 1::2, ::2] and [..., 2:6, 1:7]
  for (const Node& n : s.nodes) {
    if (n.op != Op::Slice) continue;
    rows = rows || (n.sh == 2 && n.pad_t == 1);
    cols = cols || (n.sw == 2 && n.pad_l == 0);
    crop = crop || (n.pad_t == 2 && n.slice_h == 4) || (n.pad_l == 1 && n.slice_w == 6);
  }
  EXPECT_TRUE(rows);
  EXPECT_TRUE(cols);
  EXPECT_TRUE(crop);
  const Graph a = import_onnx(kDataDir + "activations.onnx");
  EXPECT_EQ(count_ops(a, Op::LeakyRelu), 1);
  EXPECT_EQ(count_ops(a, Op::PRelu), 2);
  EXPECT_EQ(count_ops(a, Op::Tanh), 1);
}

// Refusals name the node, the op and what is unsupported.
TEST(OnnxImport, TransposeSliceSplitRefusalsAreClear) {
  {
    Builder b(13, {1, 2, 4, 6});
    Builder::ints(b.node("Transpose", {"x"}, "y", "batch_out"), "perm", {1, 0, 2, 3});
    b.output("y");
    expect_error([&] { b.import(); }, {"'batch_out'", "(Transpose)", "perm [1,0,2,3]", "moves the batch axis"});
  }
  {
    Builder b(13, {1, 2, 4, 6});
    Builder::ints(b.node("Transpose", {"x"}, "y", "twice"), "perm", {0, 1, 1, 3});
    b.output("y");
    expect_error([&] { b.import(); }, {"'twice'", "(Transpose)", "perm [0,1,1,3]", "not a permutation"});
  }
  {
    Builder b(13, {1, 2, 4, 6});
    b.init_i64("st", {1}, {-1});
    b.init_i64("en", {1}, {-5});
    b.init_i64("ax", {1}, {2});
    b.init_i64("sp", {1}, {-1});
    b.node("Slice", {"x", "st", "en", "ax", "sp"}, "y", "flip");
    b.output("y");
    expect_error([&] { b.import(); }, {"'flip'", "(Slice)", "negative step"});
  }
  {
    Builder b(13, {1, 2, 4, 6});
    b.init_i64("st", {1}, {0});
    b.init_i64("en", {1}, {1});
    b.init_i64("ax", {1}, {0});
    b.node("Slice", {"x", "st", "en", "ax"}, "y", "batch");
    b.init_i64("st2", {1}, {3});
    b.init_i64("en2", {1}, {3});
    b.init_i64("ax2", {1}, {3});
    b.node("Slice", {"y", "st2", "en2", "ax2"}, "z", "empty");
    b.output("z");
    expect_error([&] { b.import(); }, {"'empty'", "(Slice)", "empty"});
  }
  {
    Builder b(13, {1, 6, 4, 4});
    b.init_i64("parts", {2}, {2, 3});
    auto* n = b.node("Split", {"x", "parts"}, "a", "bad_split");
    n->add_output("b");
    Builder::i(n, "axis", 1);
    b.output("a");
    expect_error([&] { b.import(); }, {"'bad_split'", "(Split)", "split lengths [2,3]"});
  }
  {
    Builder b(13, {1, 6, 4, 4});
    b.init_i64("s5", {5}, {1, 2, 3, 4, 4});
    b.node("Reshape", {"x", "s5"}, "v", "view5");
    Builder::ints(b.node("Transpose", {"v"}, "t", "odd_perm"), "perm", {0, 1, 2, 4, 3});
    b.output("t");
    expect_error([&] { b.import(); }, {"'odd_perm'", "(Transpose)", "perm [0,1,2,4,3]", "channel shuffle"});
  }
}

// Split along the rows with the lengths from the 'split' input: each part is
// a Slice with its start; the float executor adds them as torch would.
TEST(OnnxImport, SplitSpatiallyIsSlices) {
  Builder b(13, {1, 2, 6, 3});
  b.init_i64("parts", {2}, {3, 3});
  auto* n = b.node("Split", {"x", "parts"}, "p0", "rows");
  n->add_output("p1");
  Builder::i(n, "axis", 2);
  b.node("Add", {"p0", "p1"}, "y", "join");
  b.output("y");
  const Graph g = b.import();
  ASSERT_EQ(count_ops(g, Op::Slice), 2);
  for (const Node& s : g.nodes)
    if (s.op == Op::Slice) EXPECT_TRUE((s.pad_t == 0 || s.pad_t == 3) && s.slice_h == 3 && s.slice_c == 2) << s.name;
  std::vector<float> x(36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i * i % 17);
  const std::vector<float> y = run_float(g, x);
  ASSERT_EQ(y.size(), 18u);
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(y[size_t((c * 3 + r) * 3 + k)], x[size_t((c * 6 + r) * 3 + k)] + x[size_t((c * 6 + r + 3) * 3 + k)]);
}

}  // namespace
}  // namespace ts
