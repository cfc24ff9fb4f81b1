#include "plan/testbed.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "model/json_bounded.h"
#include "plan/board_kind.h"
#include "util/endpoint.h"
#include "util/atomic_file.h"
#include "util/input_file.h"

namespace ts::plan {
namespace {

using nlohmann::json;

// Every error of this file is "<source>: <what>" on one line.
[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(source + ": " + what);
}

std::string board_ctx(const std::string& source, size_t index) {
  return source + ": board " + std::to_string(index);
}

// Shortens a JSON value for an error message, so a huge object in the wrong
// place does not blow the one-line promise.
std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Text from the file for an error message: control characters escaped (a
// newline in a key or a value must not break the one-line error), shortened.
std::string printable(const std::string& text) {
  std::string s = json(text).dump(-1, ' ', false, json::error_handler_t::replace);
  s = s.substr(1, s.size() - 2);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A key from the file, quoted (see printable).
std::string show_key(const std::string& key) { return "'" + printable(key) + "'"; }

std::string show(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// "local", "qemu" or "host:port" (util/endpoint.h).
bool valid_address(const std::string& a) {
  Endpoint e;
  return a == "local" || a == "qemu" || parse_endpoint(a, &e);
}

// ---- typed field readers: each names the key and the offending value -----

int read_id(const json& v, const std::string& ctx) {
  if (!v.is_number_integer())
    fail(ctx, "'id' must be a whole number (got " + show(v) + ")");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int>::max())
                             : (v.get<int64_t>() < 0 ||
                                v.get<int64_t>() > std::numeric_limits<int>::max()))
    fail(ctx, "'id' must be between 0 and " +
                  std::to_string(std::numeric_limits<int>::max()) + " (got " + show(v) + ")");
  return v.get<int>();
}

double read_number(const json& v, const char* key, const std::string& ctx) {
  if (!v.is_number())
    fail(ctx, std::string("'") + key + "' must be a number (got " + show(v) + ")");
  return v.get<double>();
}

std::string read_string(const json& v, const char* key, const std::string& ctx) {
  if (!v.is_string())
    fail(ctx, std::string("'") + key + "' must be a string (got " + show(v) + ")");
  return v.get<std::string>();
}

// A size is either a whole number of bytes or a size string ("512K").
int64_t read_bytes(const json& v, const char* key, const std::string& ctx) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(ctx, std::string("'") + key + "' is too large (got " + show(v) + ")");
    return int64_t(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    try {
      return parse_bytes(v.get<std::string>());
    } catch (const Error& e) {
      fail(ctx, std::string("'") + key + "': " + e.what());
    }
  }
  fail(ctx, std::string("'") + key +
                "' must be a whole number of bytes or a size string like \"512K\" (got " +
                show(v) + ")");
}

Board board_from_json(const json& obj, const std::string& ctx) {
  if (!obj.is_object()) fail(ctx, "must be an object (got " + show(obj) + ")");
  if (!obj.contains("id")) fail(ctx, "missing required key 'id'");

  Board b;  // every optional key keeps its Teensy 4.1 default
  for (const auto& [key, v] : obj.items()) {
    if (key == "id") b.id = read_id(v, ctx);
    else if (key == "address") b.address = read_string(v, "address", ctx);
    else if (key == "kind") b.kind = read_string(v, "kind", ctx);
    else if (key == "clock_mhz") b.clock_mhz = read_number(v, "clock_mhz", ctx);
    else if (key == "ram_bytes") b.ram_bytes = read_bytes(v, "ram_bytes", ctx);
    else if (key == "flash_bytes") b.flash_bytes = read_bytes(v, "flash_bytes", ctx);
    else if (key == "delay_s_per_kb") b.delay_s_per_kb = read_number(v, "delay_s_per_kb", ctx);
    else if (key == "bandwidth_kbps") b.bandwidth_kbps = read_number(v, "bandwidth_kbps", ctx);
    else if (key == "links") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxBoardLinks)
        fail(ctx, "'links' must be a whole number from 1 to " + std::to_string(kMaxBoardLinks) + " (got " + show(v) +
                      ")");
      b.links = int(v.get<int64_t>());
    } else
      fail(ctx, "unknown key " + show_key(key) +
                    " (known: id, address, kind, clock_mhz, ram_bytes, flash_bytes, "
                    "delay_s_per_kb, bandwidth_kbps, links)");
  }
  return b;
}

// The board's kind exists and agrees with its address: a kind that cannot
// be started here needs host:port; "qemu" is the QEMU Cortex-M7 kind's.
void check_kind(const Board& b, const std::string& ctx) {
  if (b.kind.empty()) return;
  const BoardKind* k = find_board_kind(b.kind);
  if (!k) fail(ctx, "unknown 'kind' \"" + printable(b.kind) + "\" (known: " + board_kind_names() + ")");
  if (b.address == "local" && k->start == BoardStart::None)
    fail(ctx, "a board of kind " + b.kind + " cannot be started here: give its \"address\" (host:port)");
  if (b.address == "qemu" && k->start != BoardStart::Qemu)
    fail(ctx, "'address' \"qemu\" is a qemu-m7 board, not kind " + b.kind);
}

}  // namespace

std::string board_budget_error(int64_t ram, int64_t flash, double clock, const BudgetNames& n) {
  auto bytes = [](const char* name, int64_t v) {
    return std::string(name) + " must be between 1 byte and 2 GiB (got " + std::to_string(v) + ")";
  };
  if (ram <= 0 || ram > kMaxBoardBytes) return bytes(n.ram, ram);
  if (flash <= 0 || flash > kMaxBoardBytes) return bytes(n.flash, flash);
  if (!(std::isfinite(clock) && clock >= kMinBoardClockMhz && clock <= kMaxBoardClockMhz))
    return std::string(n.clock) + " must be between 1 and 65535 MHz (got " + show(clock) + ")";
  return "";
}

namespace {

// Range checks for one board; shared by loading and validate_testbed.
void check_board(const Board& b, const std::string& ctx) {
  if (b.id < 0) fail(ctx, "'id' must be >= 0 (got " + std::to_string(b.id) + ")");
  if (!valid_address(b.address))
    fail(ctx, "'address' must be \"local\", \"qemu\" or \"host:port\" (got \"" + printable(b.address) +
                  "\")");
  check_kind(b, ctx);
  const std::string budget = board_budget_error(b.ram_bytes, b.flash_bytes, b.clock_mhz, kBudgetFields);
  if (!budget.empty()) fail(ctx, budget);
  if (!(std::isfinite(b.delay_s_per_kb) && b.delay_s_per_kb >= 0))
    fail(ctx, "'delay_s_per_kb' must be >= 0 (got " + show(b.delay_s_per_kb) + ")");
  if (!(std::isfinite(b.bandwidth_kbps) && b.bandwidth_kbps > 0))
    fail(ctx, "'bandwidth_kbps' must be > 0 (got " + show(b.bandwidth_kbps) + ")");
  if (b.links < 0 || b.links > kMaxBoardLinks)
    fail(ctx, "'links' must be from 1 to " + std::to_string(kMaxBoardLinks) + " (got " + std::to_string(b.links) + ")");
}

}  // namespace

int board_links(const Board& b) {
  return b.links > 0 ? b.links : kind_of(b).links;
}

void validate_testbed(const Testbed& t, const std::string& source) {
  if (t.boards.empty()) fail(source, "testbed has no boards");
  if (t.boards.size() > size_t(kMaxBoards))
    fail(source, "lists " + std::to_string(t.boards.size()) + " boards; at most " + std::to_string(kMaxBoards) +
                     " are planned (the limit keeps planning within about 1 GB and 20 s)");
  std::map<int, size_t> first_index_of_id;
  for (size_t i = 0; i < t.boards.size(); ++i) {
    const Board& b = t.boards[i];
    check_board(b, board_ctx(source, i));
    auto [it, inserted] = first_index_of_id.emplace(b.id, i);
    if (!inserted)
      fail(board_ctx(source, i), "duplicate id " + std::to_string(b.id) + " (also board " +
                                     std::to_string(it->second) + ")");
  }
}

Testbed testbed_from_json(const json& doc, const std::string& source) {
  const json* list = &doc;
  if (doc.is_object()) {
    for (const auto& [key, v] : doc.items())
      if (key != "boards" && key != "key_file" && key != "host_cores")
        fail(source, "unknown top-level key " + show_key(key) + " (known: boards, key_file, host_cores)");
    if (!doc.contains("boards")) fail(source, "missing key 'boards'");
    list = &doc["boards"];
  }
  std::string key_file;
  if (doc.is_object() && doc.contains("key_file")) {
    key_file = read_string(doc["key_file"], "key_file", source);
    if (key_file.empty()) fail(source, "'key_file' must not be empty");
  }
  int host_cores = 0;
  if (doc.is_object() && doc.contains("host_cores")) {
    const json& h = doc["host_cores"];
    if (!h.is_number_integer() || h.get<int64_t>() < 1 || h.get<int64_t>() > 4096)
      fail(source, "'host_cores' must be a whole number of cores from 1 to 4096 (got " + show(h) + ")");
    host_cores = int(h.get<int64_t>());
  }
  if (!list->is_array())
    fail(source, "expected a list of boards or {\"boards\": [...]} (got " + show(*list) + ")");

  Testbed t;
  for (size_t i = 0; i < list->size(); ++i)
    t.boards.push_back(board_from_json((*list)[i], board_ctx(source, i)));
  t.key_file = key_file;
  t.host_cores = host_cores;
  validate_testbed(t, source);
  return t;
}

Testbed parse_testbed(const std::string& text, const std::string& source) {
  // Bounded nesting: error messages print values, which recurses per level.
  return testbed_from_json(parse_json_bounded(text, source), source);
}

void check_spawn_limit(const Testbed& t, const std::string& source) {
  size_t local = 0;
  for (const Board& b : t.boards) local += started_here(b);
  if (local > size_t(kMaxSpawnedBoards))
    fail(source, "lists " + std::to_string(local) + " local/qemu boards; at most " +
                     std::to_string(kMaxSpawnedBoards) + " board processes are started on one machine");
}

void check_board_addresses(const Testbed& t, const std::string& source) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < t.boards.size(); ++i) {
    const std::string& a = t.boards[i].address;
    if (a == "local" || a == "qemu") continue;  // each one a board of its own
    std::string key = a;
    for (char& c : key) c = char(std::tolower(static_cast<unsigned char>(c)));
    auto [it, inserted] = first.emplace(key, i);
    if (!inserted)
      fail(board_ctx(source, i), "address " + printable(a) + " is also board " + std::to_string(it->second) +
                                     "'s; one board serves one place in a testbed");
  }
}

Testbed load_testbed(const std::string& path) {
  Testbed t = parse_testbed(read_input_file(path, "testbed file", kMaxTextFileBytes), path);
  if (!t.key_file.empty() && std::filesystem::path(t.key_file).is_relative())
    t.key_file = (std::filesystem::path(path).parent_path() / t.key_file).string();
  return t;
}

json to_json(const Testbed& t) {
  json boards = json::array();
  for (const Board& b : t.boards) {
    boards.push_back({{"id", b.id},
                      {"address", b.address},
                      {"clock_mhz", b.clock_mhz},
                      {"ram_bytes", b.ram_bytes},
                      {"flash_bytes", b.flash_bytes},
                      {"delay_s_per_kb", b.delay_s_per_kb},
                      {"bandwidth_kbps", b.bandwidth_kbps}});
    if (!b.kind.empty()) boards.back()["kind"] = b.kind;
    if (b.links > 0) boards.back()["links"] = b.links;
  }
  json j{{"boards", boards}};
  if (!t.key_file.empty()) j["key_file"] = t.key_file;
  if (t.host_cores > 0) j["host_cores"] = t.host_cores;
  return j;
}

void save_testbed(const Testbed& t, const std::string& path) {
  write_file_atomic(path, to_json(t).dump(2) + "\n");
}

Testbed default_testbed(int n, const std::string& address, int64_t ram_bytes,
                        int64_t flash_bytes, double clock_mhz) {
  if (n <= 0) throw Error("default testbed: board count must be > 0 (got " + std::to_string(n) + ")");
  Testbed t;
  t.boards.reserve(size_t(n));
  for (int i = 0; i < n; ++i) {
    Board b;
    b.id = i;
    b.address = address;
    b.ram_bytes = ram_bytes;
    b.flash_bytes = flash_bytes;
    b.clock_mhz = clock_mhz;
    t.boards.push_back(b);
  }
  validate_testbed(t, "default testbed");
  return t;
}

int64_t parse_bytes(const std::string& text) {
  auto bad = [&](const std::string& why) -> Error {
    return Error("bad size '" + printable(text) + "': " + why +
                 " (expected e.g. 1048576, 512K, 8M, 1G)");
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) throw bad("must start with a whole number");

  // Binary multipliers: memory budgets are quoted that way ("512K" of RAM).
  std::string suffix = text.substr(digits);
  for (char& ch : suffix) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  int64_t unit = 1;
  if (suffix.empty() || suffix == "B") unit = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") unit = int64_t(1) << 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") unit = int64_t(1) << 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") unit = int64_t(1) << 30;
  else throw bad("unknown suffix '" + printable(text.substr(digits)) + "'");

  // Accumulate with an explicit overflow check rather than trusting stoll.
  const int64_t max = std::numeric_limits<int64_t>::max();
  int64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    int d = text[i] - '0';
    if (value > (max - d) / 10) throw bad("too large");
    value = value * 10 + d;
  }
  if (value > max / unit) throw bad("too large");
  return value * unit;
}

std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string format_bytes(int64_t bytes) {
  static const struct { int64_t unit; const char* suffix; } units[] = {
      {int64_t(1) << 30, "G"}, {int64_t(1) << 20, "M"}, {int64_t(1) << 10, "K"}};
  if (bytes > 0)
    for (const auto& u : units)
      if (bytes % u.unit == 0) return std::to_string(bytes / u.unit) + u.suffix;
  return std::to_string(bytes);
}

}  // namespace ts::plan
