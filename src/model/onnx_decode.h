// ONNX import, step 1 of 3: decoding (see import_onnx.h for the whole).
//
// Turns the bytes of an ONNX ModelProto into a small neutral structure: the
// opset, the initialisers as constant tensors, the one image input, and the
// nodes with their attributes. Every attribute access and type check lives
// here; the later steps (onnx_const_fold.h, onnx_lower.h) never see protobuf.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace ts::onnx_import {

using Dims = std::vector<int64_t>;

// A problem found while handling one node; the caller adds file and node.
struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int64_t kMaxElems = int64_t(1) << 30;  // per tensor, a sanity bound
constexpr int64_t kMaxDim = int64_t(1) << 24;

std::string dims_str(const Dims& d);
// Element count; throws Fail on a negative or huge shape.
int64_t numel(const Dims& d);
// Clamps a double holding an integer (shape arithmetic) into int64 range.
int64_t to_i64(double v);

// A constant tensor. Values are kept as doubles (exact for float32 and for
// the integer sizes that shape arithmetic produces).
struct Const {
  bool is_int = false;
  Dims dims;
  std::vector<double> v;
};
using ConstPtr = std::shared_ptr<const Const>;

std::vector<float> to_floats(const Const& c);
std::vector<int64_t> to_ints(const Const& c);

// How Cast treats an ONNX element type code (TensorProto.DataType): round to
// float32 (FLOAT, FLOAT16), keep (DOUBLE), 0/1 (BOOL), truncate (integers).
enum class ElemKind { Float, Double, Bool, Int, Other };
ElemKind elem_kind(int64_t type);
constexpr int64_t kOnnxFloat = 1;  // TensorProto.FLOAT

// Decodes a TensorProto; `what` names it in errors.
ConstPtr decode_tensor(const ::onnx::TensorProto& t, const std::string& what);

// One node attribute, all fields as stored. Read it through OnnxNode's typed
// getters, which check the type; the Constant ops read the fields directly.
struct Attr {
  enum class Type { Undefined, Float, Int, String, Ints, Other };
  std::string name;
  Type type = Type::Undefined;
  bool has_i = false, has_f = false, has_s = false;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  const ::onnx::TensorProto* t = nullptr;  // owned by Model::proto

  // The tensor field, decoded on use (its errors belong to the node using it).
  ConstPtr tensor(const std::string& what) const { return decode_tensor(*t, what); }
};

struct OnnxNode {
  int index = 0;  // position in the graph
  std::string name, op, domain;
  std::vector<std::string> inputs, outputs;  // "" for an absent optional one
  std::vector<Attr> attrs;

  // The node's name, or its position and first output when it has none.
  std::string label() const;
  const Attr* attr(const char* name) const;  // nullptr if absent
  int64_t attr_i(const char* name, int64_t def) const;
  float attr_f(const char* name, float def) const;  // an integer is accepted too
  std::string attr_s(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name) const;  // empty if absent
};

struct Model {
  int opset = 0;  // of the default (ai.onnx) domain
  std::vector<std::pair<std::string, ConstPtr>> initializers;  // in file order
  std::string input;      // name of the one image input
  Dims input_dims;        // [1,C,H,W], with the requested input size applied
  std::string size_note;  // added to errors when the input size was changed, else ""
  std::vector<OnnxNode> nodes;
  std::vector<std::string> outputs;  // graph output names (exactly one)
  std::shared_ptr<const ::onnx::ModelProto> proto;  // keeps Attr::t alive
};

// Parses the bytes; throws ts::Error "name: ..." when they are not a model.
std::shared_ptr<const ::onnx::ModelProto> parse_model(const std::string& bytes, const std::string& name);

// Decodes a parsed model and checks what the model as a whole must satisfy
// (opset, initialisers, one float NCHW batch-1 image input of a known size,
// nodes, one output). input_size > 0 replaces the stored height and width.
// Throws ts::Error "name: ...".
Model decode(std::shared_ptr<const ::onnx::ModelProto> proto, const std::string& name, int input_size);

// The dims the graph's first non-initialiser input declares (-1 for a
// symbolic dim), as stored: no input size applied. Empty if none.
std::vector<int64_t> declared_input_dims(const ::onnx::ModelProto& model);

}  // namespace ts::onnx_import
