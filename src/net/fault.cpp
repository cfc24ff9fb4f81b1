#include "net/fault.h"

#include "util/error.h"

namespace ts::net {

namespace {

std::string known_kinds() {
  std::string s;
  for (const auto& k : kFaultKinds) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

// Field `i` (0 = the kind) of a colon-separated spec, for error lines.
std::string field(const std::string& text, int i) {
  size_t at = 0;
  for (int k = 0; k < i; ++k) {
    at = text.find(':', at);
    if (at == std::string::npos) return "";
    ++at;
  }
  const size_t end = text.find(':', at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// parse_fault_fields with its failures as one line each. `shape` says what
// the spec should look like; `names` names the numbers.
void fields_or_throw(const std::string& text, FaultKind* kind, int32_t* nums, int max_nums, int* n,
                     const std::string& shape, const char* const* names) {
  int bad = 0;
  switch (parse_fault_fields(text.c_str(), kind, nums, max_nums, n, &bad)) {
    case FaultField::Ok: return;
    case FaultField::Shape: throw Error("--inject-fault '" + text + "': expected " + shape + " (KIND: " + known_kinds() + ")");
    case FaultField::Kind:
      throw Error("--inject-fault '" + text + "': unknown fault '" + field(text, 0) + "' (known: " + known_kinds() + ")");
    case FaultField::Number:
      throw Error("--inject-fault '" + text + "': " + names[bad - 1] + " must be a number 0..65535, got '" +
                  field(text, bad) + "'");
  }
}

}  // namespace

FaultSpec parse_fault_spec(const std::string& text) {
  static const char* const kNames[] = {"BOARD", "LAYER"};
  FaultSpec f;
  int32_t nums[2] = {-1, -1};
  int n = 0;
  const bool flip = text.rfind("flip", 0) == 0 && (text.size() == 4 || text[4] == ':');
  try {
    fields_or_throw(text, &f.kind, nums, 2, &n, "KIND:BOARD or KIND:BOARD:LAYER", kNames);
    if (flip && n != 2) throw Error("");
  } catch (const Error& e) {
    // flip has a layer always, and its own line.
    if (flip)
      throw Error("--inject-fault: expected flip:BOARD:LAYER with two numbers (board and layer from 0), got '" + text +
                  "'");
    throw;
  }
  f.board = nums[0];
  f.layer = n == 2 ? nums[1] : -1;
  return f;
}

BoardFault parse_board_fault(const std::string& text) {
  static const char* const kNames[] = {"LAYER"};
  BoardFault f;
  int32_t layer = -1;
  int n = 0;
  fields_or_throw(text, &f.kind, &layer, 1, &n, "KIND:LAYER", kNames);
  f.layer = layer;
  return f;
}

std::string board_fault_arg(const BoardFault& f) { return std::string(fault_kind_name(f.kind)) + ":" + std::to_string(f.layer); }

}  // namespace ts::net
