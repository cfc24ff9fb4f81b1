#include "net/fault.h"

#include "util/error.h"

namespace ts::net {

namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{FaultKind::Kill, "kill"}, {FaultKind::Stall, "stall"}, {FaultKind::Corrupt, "corrupt"}};

std::string known_kinds() {
  std::string s;
  for (const auto& k : kKinds) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

std::vector<std::string> split_colons(const std::string& text) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t c = text.find(':', at);
    parts.push_back(text.substr(at, c == std::string::npos ? std::string::npos : c - at));
    if (c == std::string::npos) return parts;
    at = c + 1;
  }
}

// A decimal number 0..65535 (boards and layers are 16-bit on the wire).
int parse_index(const std::string& s, const char* what, const std::string& spec) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos || std::stoi(s) > 65535)
    throw Error("--inject-fault '" + spec + "': " + what + " must be a number 0..65535, got '" + s + "'");
  return std::stoi(s);
}

}  // namespace

const char* fault_kind_name(FaultKind k) {
  for (const auto& e : kKinds)
    if (e.kind == k) return e.name;
  return "none";
}

FaultKind parse_fault_kind(const std::string& word, const std::string& spec) {
  for (const auto& e : kKinds)
    if (word == e.name) return e.kind;
  throw Error("--inject-fault '" + spec + "': unknown fault '" + word + "' (known: " + known_kinds() + ")");
}

FaultSpec parse_fault_spec(const std::string& text) {
  const auto parts = split_colons(text);
  if (parts.size() < 2 || parts.size() > 3)
    throw Error("--inject-fault '" + text + "': expected KIND:BOARD or KIND:BOARD:LAYER (KIND: " + known_kinds() + ")");
  FaultSpec f;
  f.kind = parse_fault_kind(parts[0], text);
  f.board = parse_index(parts[1], "BOARD", text);
  if (parts.size() == 3) f.layer = parse_index(parts[2], "LAYER", text);
  return f;
}

FaultSpec parse_board_fault(const std::string& text) {
  const auto parts = split_colons(text);
  if (parts.size() != 2) throw Error("--inject-fault '" + text + "': expected KIND:LAYER (KIND: " + known_kinds() + ")");
  FaultSpec f;
  f.kind = parse_fault_kind(parts[0], text);
  f.layer = parse_index(parts[1], "LAYER", text);
  return f;
}

std::string board_fault_arg(const FaultSpec& f) { return std::string(fault_kind_name(f.kind)) + ":" + std::to_string(f.layer); }

}  // namespace ts::net
