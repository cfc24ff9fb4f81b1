// ONNX -> float IR, the public entry point. See import_onnx.h for what is
// accepted. The work is done in three steps, each in its own file:
//   onnx_decode      protobuf -> a neutral model (nodes, attributes, initialisers,
//                    the image input); every attribute and type check
//   onnx_const_fold  constant subgraphs (shape arithmetic) evaluated at import
//   onnx_lower       ONNX ops -> IR nodes, small rewrites, dead nodes dropped
#include "model/import_onnx.h"

#include <fstream>
#include <sstream>

#include "model/onnx_decode.h"
#include "model/onnx_lower.h"
#include "util/input_file.h"

namespace ts {

Graph import_onnx_bytes(const std::string& bytes, const std::string& name, int input_size) {
  if (input_size < 0) throw Error(name + ": input size must not be negative");
  if (bytes.empty()) throw Error(name + ": the file is empty");
  auto proto = onnx_import::parse_model(bytes, name);
  try {
    return onnx_import::lower(onnx_import::decode(std::move(proto), name, input_size), name);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(name + ": out of memory while importing (the model declares huge tensors)");
  } catch (const std::exception& e) {
    throw Error(name + ": malformed model (" + e.what() + ")");
  }
}

std::vector<int64_t> onnx_input_dims(const std::string& path) {
  const std::string bytes = read_input_file(path, "model file", kMaxModelFileBytes);
  return onnx_import::declared_input_dims(*onnx_import::parse_model(bytes, path));
}

Graph import_onnx(const std::string& path, int input_size) {
  return import_onnx_bytes(read_input_file(path, "model file", kMaxModelFileBytes), path, input_size);
}

}  // namespace ts
