// The three steps of the ONNX importer one by one (onnx_decode, onnx_const_fold,
// onnx_lower), on hand-built inputs. tests/onnx_import_test.cpp checks the
// whole importer on real models; these pin the units that it is made of.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/graph.h"
#include "model/onnx_const_fold.h"
#include "model/onnx_decode.h"
#include "model/onnx_lower.h"

namespace ts::onnx_import {
namespace {

OnnxNode node(const std::string& op, std::vector<std::string> in = {}, std::vector<Attr> attrs = {}) {
  OnnxNode n;
  n.op = op;
  n.name = op + "_node";
  n.inputs = std::move(in);
  n.outputs = {op + "_out"};
  n.attrs = std::move(attrs);
  return n;
}

Attr int_attr(const std::string& name, int64_t v) {
  Attr a;
  a.name = name;
  a.type = Attr::Type::Int;
  a.has_i = true;
  a.i = v;
  return a;
}

Attr ints_attr(const std::string& name, std::vector<int64_t> v) {
  Attr a;
  a.name = name;
  a.type = Attr::Type::Ints;
  a.ints = std::move(v);
  return a;
}

Const ints(Dims dims, std::vector<double> v) { return Const{true, std::move(dims), std::move(v)}; }

// Operands for fold_constant / reshaped_dims: the given constants, in order.
ConstInput operands(std::vector<const Const*> in) {
  return [in](int i) -> const Const* { return i < int(in.size()) ? in[size_t(i)] : nullptr; };
}

std::string fail_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Fail& e) {
    return e.what();
  }
  return "(no error)";
}

// ---------------------------------------------------------------- constant folding

// How torch exports x.view(x.size(0), -1): the Reshape target is computed
// from the shape of the tensor, then applied to it.
TEST(OnnxConstFold, ShapeGatherUnsqueezeConcatGivesTheReshapeTarget) {
  const Dims x = {1, 3, 4, 5};
  const Const shape = shape_of(node("Shape", {"x"}), x);
  EXPECT_TRUE(shape.is_int);
  EXPECT_EQ(shape.dims, (Dims{4}));
  EXPECT_EQ(shape.v, (std::vector<double>{1, 3, 4, 5}));

  const Const idx = ints({}, {-4});  // negative: counts from the end
  auto batch = fold_constant(node("Gather", {"s", "i"}, {int_attr("axis", 0)}), operands({&shape, &idx}), 13);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->dims, (Dims{}));
  EXPECT_EQ(batch->v, (std::vector<double>{1}));

  const Const axes = ints({1}, {0});
  auto batch1 = fold_constant(node("Unsqueeze", {"b", "a"}), operands({&*batch, &axes}), 13);
  ASSERT_TRUE(batch1);
  EXPECT_EQ(batch1->dims, (Dims{1}));

  const Const minus1 = ints({1}, {-1});
  auto target = fold_constant(node("Concat", {"b1", "m"}, {int_attr("axis", 0)}), operands({&*batch1, &minus1}), 13);
  ASSERT_TRUE(target);
  EXPECT_TRUE(target->is_int);
  EXPECT_EQ(target->dims, (Dims{2}));
  EXPECT_EQ(target->v, (std::vector<double>{1, -1}));

  // The same target reshapes a computed tensor and a constant alike.
  const OnnxNode reshape = node("Reshape", {"x", "t"});
  EXPECT_EQ(reshaped_dims(reshape, 13, x, operands({nullptr, &*target}), false), (Dims{1, 60}));
  Const data{false, {2, 3}, {1, 2, 3, 4, 5, 6}};
  auto r = fold_constant(reshape, operands({&data, &*target}), 13);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->dims, (Dims{1, 6}));
  EXPECT_EQ(r->v, data.v);
  EXPECT_FALSE(r->is_int);
}

TEST(OnnxConstFold, ShapeSliceAndSize) {
  const Dims x = {1, 8, 6, 6};
  const Const hw = shape_of(node("Shape", {"x"}, {int_attr("start", -2)}), x);  // opset 15 start/end
  EXPECT_EQ(hw.v, (std::vector<double>{6, 6}));
  EXPECT_EQ(shape_of(node("Size", {"x"}), x).v, (std::vector<double>{288}));
  // Slice(shape, [1], [3]) -> [8, 6]
  const Const shape = shape_of(node("Shape", {"x"}), x), s = ints({1}, {1}), e = ints({1}, {3});
  auto sl = fold_constant(node("Slice", {"shape", "s", "e"}), operands({&shape, &s, &e}), 13);
  ASSERT_TRUE(sl);
  EXPECT_EQ(sl->v, (std::vector<double>{8, 6}));
}

TEST(OnnxConstFold, ArithmeticBroadcastsAndKeepsIntegers) {
  const Const a = ints({2, 1}, {7, -7}), b = ints({3}, {2, 3, 4});
  auto q = fold_constant(node("Div", {"a", "b"}), operands({&a, &b}), 13);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->is_int);
  EXPECT_EQ(q->dims, (Dims{2, 3}));
  EXPECT_EQ(q->v, (std::vector<double>{3, 2, 1, -3, -2, -1}));  // integer division truncates
  const Const zero = ints({}, {0});
  EXPECT_EQ(fail_text([&] { fold_constant(node("Div", {"a", "z"}), operands({&a, &zero}), 13); }),
            "integer division by zero");
  // Float results are rounded to float32, as a float32 runtime would.
  const Const third{false, {}, {1.0}}, three{false, {}, {3.0}};
  auto f = fold_constant(node("Div", {"a", "b"}), operands({&third, &three}), 13);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->v[0], double(1.0f / 3.0f));
  // Ops that are not folded are left to the lowering.
  EXPECT_FALSE(fold_constant(node("Conv", {"a", "b"}), operands({&a, &b}), 13));
  EXPECT_EQ(fail_text([&] { fold_constant(node("Gather", {"", "b"}), operands({nullptr, &b}), 13); }),
            "input 0 is missing");
}

// Flatten/Reshape/Squeeze/Unsqueeze share one rule; where constants and
// computed tensors differ, that is kept as the importer always had it.
TEST(OnnxConstFold, ReshapeLikeRulesForConstantsAndComputedTensors) {
  const Dims x = {1, 4, 1, 1};
  EXPECT_EQ(reshaped_dims(node("Flatten", {"x"}), 13, x, operands({}), false), (Dims{1, 4}));
  EXPECT_EQ(reshaped_dims(node("Flatten", {"x"}, {int_attr("axis", 0)}), 13, x, operands({}), false), (Dims{1, 4}));
  EXPECT_EQ(reshaped_dims(node("Flatten", {"x"}, {int_attr("axis", -1)}), 13, x, operands({}), false), (Dims{4, 1}));

  // Squeeze: axes from input 1 (opset 13) or the attribute (before); none = every 1.
  const Const axes = ints({2}, {2, 3});
  EXPECT_EQ(reshaped_dims(node("Squeeze", {"x", "a"}), 13, x, operands({nullptr, &axes}), false), (Dims{1, 4}));
  EXPECT_EQ(reshaped_dims(node("Squeeze", {"x"}, {ints_attr("axes", {-1})}), 11, x, operands({}), true),
            (Dims{1, 4, 1}));
  EXPECT_EQ(reshaped_dims(node("Squeeze", {"x"}), 13, x, operands({}), false), (Dims{4}));
  const Const bad = ints({1}, {1});
  EXPECT_EQ(fail_text([&] { reshaped_dims(node("Squeeze", {"x", "a"}), 13, x, operands({nullptr, &bad}), false); }),
            "cannot squeeze axis 1 of [1,4,1,1]");
  EXPECT_EQ(fail_text([&] { reshaped_dims(node("Squeeze", {"x", "a"}), 13, x, operands({nullptr, &bad}), true); }),
            "cannot squeeze a dimension that is not 1");

  // Unsqueeze: a computed tensor must say where; a constant without axes is unchanged.
  const Dims v = {4};
  const Const front = ints({1}, {0});
  EXPECT_EQ(reshaped_dims(node("Unsqueeze", {"v", "a"}), 13, v, operands({nullptr, &front}), false), (Dims{1, 4}));
  EXPECT_EQ(reshaped_dims(node("Unsqueeze", {"v"}, {ints_attr("axes", {-1})}), 11, v, operands({}), false),
            (Dims{4, 1}));
  EXPECT_EQ(fail_text([&] { reshaped_dims(node("Unsqueeze", {"v"}), 13, v, operands({}), false); }),
            "Unsqueeze needs axes");
  EXPECT_EQ(reshaped_dims(node("Unsqueeze", {"v"}), 13, v, operands({}), true), v);

  // Reshape targets: 0 copies, -1 infers, and impossible targets are refused.
  EXPECT_EQ(reshape_target({2, 3, 4}, {0, -1}, false), (Dims{2, 12}));
  EXPECT_EQ(fail_text([] { reshape_target({2, 3, 4}, {0, -1}, true); }), "cannot reshape [2,3,4] to [0,-1]");
  EXPECT_EQ(fail_text([] { reshape_target({2, 3, 4}, {-1, -1}, false); }), "Reshape target [-1,-1] has two -1 entries");
  EXPECT_EQ(fail_text([] { reshape_target({2, 3, 4}, {5, -1}, false); }), "cannot reshape [2,3,4] to [5,-1]");
}

// ---------------------------------------------------------------- decoding

TEST(OnnxDecode, AttributeGettersCheckTypes) {
  Attr f;
  f.name = "axis";
  f.type = Attr::Type::Float;
  f.has_f = true;
  f.f = 0.5f;
  Attr legacy;  // old exporters leave the type unset and fill one field
  legacy.name = "group";
  legacy.has_i = true;
  legacy.i = 4;
  const OnnxNode n = node("Conv", {}, {f, legacy, int_attr("count", 3)});
  EXPECT_EQ(fail_text([&] { n.attr_i("axis", 0); }), "attribute 'axis' should be an integer");
  EXPECT_EQ(fail_text([&] { n.attr_s("axis", ""); }), "attribute 'axis' should be a string");
  EXPECT_EQ(fail_text([&] { n.attr_ints("axis"); }), "attribute 'axis' should be a list of integers");
  EXPECT_EQ(n.attr_f("axis", 0.f), 0.5f);
  EXPECT_EQ(n.attr_f("count", 0.f), 3.f);  // an integer is a valid float
  EXPECT_EQ(n.attr_i("group", 1), 4);
  EXPECT_EQ(n.attr_i("missing", 7), 7);
  EXPECT_TRUE(n.attr_ints("missing").empty());
  OnnxNode unnamed = node("Relu");
  unnamed.name.clear();
  unnamed.index = 5;
  EXPECT_EQ(unnamed.label(), "#5 (output 'Relu_out')");
}

TEST(OnnxDecode, TensorsFromRawBytesAndTypedFields) {
  onnx::TensorProto h;  // float16 raw: 1, -2, +inf
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(3);
  const uint16_t bits[3] = {0x3C00, 0xC000, 0x7C00};
  h.set_raw_data(std::string(reinterpret_cast<const char*>(bits), sizeof bits));
  ConstPtr c = decode_tensor(h, "h");
  EXPECT_FALSE(c->is_int);
  ASSERT_EQ(c->v.size(), 3u);
  EXPECT_EQ(c->v[0], 1.0);
  EXPECT_EQ(c->v[1], -2.0);
  EXPECT_TRUE(std::isinf(c->v[2]));

  onnx::TensorProto i;  // int64 raw
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_dims(2);
  const int64_t iv[2] = {-5, int64_t(1) << 40};
  i.set_raw_data(std::string(reinterpret_cast<const char*>(iv), sizeof iv));
  c = decode_tensor(i, "i");
  EXPECT_TRUE(c->is_int);
  EXPECT_EQ(c->v, (std::vector<double>{-5, double(int64_t(1) << 40)}));

  i.set_raw_data(std::string(12, '\0'));
  EXPECT_EQ(fail_text([&] { decode_tensor(i, "initializer 'i'"); }),
            "initializer 'i' has 12 bytes of data, its shape needs 16");
  onnx::TensorProto f;  // typed field with the wrong count
  f.set_data_type(onnx::TensorProto::FLOAT);
  f.add_dims(2);
  f.add_float_data(1.f);
  EXPECT_EQ(fail_text([&] { decode_tensor(f, "w"); }), "w has 1 values, its shape needs 2");
  f.set_data_type(onnx::TensorProto::STRING);
  EXPECT_EQ(fail_text([&] { decode_tensor(f, "w"); }), "w has unsupported element type 8");
}

onnx::ModelProto image_model(int64_t h) {
  onnx::ModelProto m;
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto* vi = g->add_input();
  vi->set_name("x");
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t(1), int64_t(3), h, h}) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (d > 0) dim->set_dim_value(d);
  }
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

TEST(OnnxDecode, ImageInputAndInputSize) {
  auto parse = [](const onnx::ModelProto& m) { return parse_model(m.SerializeAsString(), "m.onnx"); };
  const Model a = decode(parse(image_model(8)), "m.onnx", 0);
  EXPECT_EQ(a.opset, 13);
  EXPECT_EQ(a.input, "x");
  EXPECT_EQ(a.input_dims, (Dims{1, 3, 8, 8}));
  EXPECT_EQ(a.size_note, "");
  ASSERT_EQ(a.nodes.size(), 1u);
  EXPECT_EQ(a.nodes[0].op, "Relu");
  EXPECT_EQ(a.outputs, (std::vector<std::string>{"y"}));

  const Model b = decode(parse(image_model(-1)), "m.onnx", 16);
  EXPECT_EQ(b.input_dims, (Dims{1, 3, 16, 16}));
  EXPECT_EQ(b.size_note, " (input size 16x16 instead of the stored ?x?)");
  EXPECT_EQ(decode(parse(image_model(16)), "m.onnx", 16).size_note, "");
  try {
    decode(parse(image_model(-1)), "m.onnx", 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "m.onnx: input 'x' has no fixed height and width; give an input size");
  }
}

// ---------------------------------------------------------------- lowering

// A decoded model built by hand: x [1,2,4,4] -> nodes -> the last node's output.
Model hand_model(std::vector<OnnxNode> nodes) {
  Model m;
  m.opset = 13;
  m.input = "x";
  m.input_dims = {1, 2, 4, 4};
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].index = int(i);
  m.outputs = {nodes.back().outputs[0]};
  m.nodes = std::move(nodes);
  return m;
}

TEST(OnnxLower, SqueezeAfterPoolIsFreeAndFlattenOfAMapIsANode) {
  OnnxNode pool = node("GlobalAveragePool", {"x"});
  OnnxNode sq = node("Squeeze", {"GlobalAveragePool_out", "axes"});
  Model m = hand_model({pool, sq});
  m.initializers.emplace_back("axes", std::make_shared<Const>(ints({2}, {2, 3})));
  Graph g = lower(m, "hand");
  ASSERT_EQ(g.nodes.size(), 1u);  // [1,2,1,1] -> [1,2] keeps the IR shape: no node
  EXPECT_EQ(g.nodes[0].op, Op::GlobalAvgPool);
  EXPECT_EQ(g.shape(g.output), (Shape{2, 1, 1}));

  Graph f = lower(hand_model({node("Flatten", {"x"})}), "hand");
  ASSERT_EQ(f.nodes.size(), 1u);
  EXPECT_EQ(f.nodes[0].op, Op::Flatten);
  EXPECT_EQ(f.shape(f.output), (Shape{32, 1, 1}));
}

TEST(OnnxLower, ErrorsNameTheNodeAndTheInputSize) {
  Model m = hand_model({node("Unsqueeze", {"x"})});
  m.size_note = " (input size 4x4 instead of the stored 8x8)";
  try {
    lower(m, "hand.onnx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "hand.onnx: node 'Unsqueeze_node' (Unsqueeze): Unsqueeze needs axes (input size 4x4 instead of the "
                 "stored 8x8)");
  }
  try {
    lower(hand_model({node("Erf", {"x"})}), "hand.onnx");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "hand.onnx: unsupported op 'Erf' at node 'Erf_node'");
  }
}

}  // namespace
}  // namespace ts::onnx_import
