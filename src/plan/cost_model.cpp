// The cost model's prices: the measured cycles per MAC of a board kind
// (data/costs/<kind>.json), the host's calibration, --op-cycles, and the
// seconds per MAC of a layer on a board (cost.h). The estimates built on them
// are in estimate.cpp (traffic.h), `auto`'s choice in cost.cpp.
#include "plan/cost.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/op.h"
#include "plan/board_kind.h"
#include "plan/plan.h"
#include "plan/ratings.h"
#include "util/input_file.h"
#include "util/paths.h"

namespace ts::plan {

using core::QOp;
namespace {

bool is_depthwise(const core::LayerDesc& d) { return d.op == QOp::Conv && d.groups > 1 && d.groups == d.in[0].c; }

// The explicit entry for d, 0 if none.
double explicit_cpm(const CostModel& m, const core::LayerDesc& d) {
  if (is_depthwise(d) && m.depthwise_cycles_per_mac > 0) return m.depthwise_cycles_per_mac;
  return size_t(d.op) < m.op_cycles_per_mac.size() ? m.op_cycles_per_mac[size_t(d.op)] : 0;
}

}  // namespace

const MeasuredCosts* measured_costs(const std::string& dir, const std::string& type) {
  // Keyed by what the caller gives: the planner asks per board and layer,
  // and finding the project home takes system calls.
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<MeasuredCosts>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({dir, type});
  if (it == cache.end()) {
    const std::string path = (dir.empty() ? project_home() + "/data/costs" : dir) + "/" + type + ".json";
    std::unique_ptr<MeasuredCosts> c;
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) c = std::make_unique<MeasuredCosts>(load_measured_costs(path));
    it = cache.emplace(std::make_pair(dir, type), std::move(c)).first;
  }
  return it->second.get();
}

namespace {

// Sets the figure of a kind name (conv, pointwise, depthwise, linear, or
// an op name); false if the name is none of them.
bool set_kind(MeasuredCosts* c, const std::string& key, double v) {
  if (key == "conv") c->conv = v;
  else if (key == "pointwise") c->pointwise = v;
  else if (key == "depthwise") c->depthwise = v;
  else if (key == "linear") c->op[size_t(QOp::Gemm)] = v;
  else {
    bool found = false;
    for (int k = 1; k <= core::kNumOps; ++k)
      if (key == core::qop_name(QOp(k))) c->op[size_t(k)] = v, found = true;
    return found;
  }
  return true;
}

}  // namespace

double MeasuredCosts::of(const core::LayerDesc& d) const {
  if (d.op == QOp::Conv) {
    if (is_depthwise(d)) return depthwise;
    return d.kh == 1 && d.kw == 1 ? pointwise : conv;
  }
  const double own = size_t(d.op) < op.size() ? op[size_t(d.op)] : 0;
  // Ops a cost file predates: ConvTranspose at a convolution's price per
  // MAC, Resize at MaxPool's (both only move or blend values).
  if (!(own > 0) && d.op == QOp::ConvTranspose) return conv;
  if (!(own > 0) && d.op == QOp::Resize) return op[size_t(QOp::MaxPool)];
  return own;
}

namespace {

// A cost file's "protocol_instructions" object (scripts/board_costs.sh), in
// cycles at `cpi` cycles per instruction.
core::ProtocolCost parse_protocol(const nlohmann::json& j, double cpi, const std::string& path) {
  if (!j.is_object()) throw Error("cost file " + path + ": \"protocol_instructions\" must be an object");
  core::ProtocolCost c;
  for (const auto& [key, val] : j.items()) {
    double* slot = nullptr;
    for (const core::ProtocolPrice& p : core::kProtocolPrices)
      if (key == p.name) slot = &(c.*p.price);
    if (!slot) continue;  // the fit's other figures (residuals, counts) are for the reader
    if (!val.is_number() || !(val.get<double>() >= 0) || !std::isfinite(val.get<double>()))
      throw Error("cost file " + path + ": protocol_instructions \"" + key + "\" must be a number >= 0");
    *slot = val.get<double>() * cpi;
  }
  return c;
}

}  // namespace

MeasuredCosts load_measured_costs(const std::string& path) {
  const std::string text = read_input_file(path, "cost file", kMaxTextFileBytes);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error("cost file " + path + ": not JSON (" + e.what() + ")");
  }
  MeasuredCosts c;
  double scale = 1.0;
  const nlohmann::json* table = nullptr;
  if (j.is_object() && j.contains("cycles_per_mac") && j["cycles_per_mac"].is_object()) {
    table = &j["cycles_per_mac"];
  } else if (j.is_object() && j.contains("instructions_per_mac") && j["instructions_per_mac"].is_object()) {
    table = &j["instructions_per_mac"];
    if (j.contains("cycles_per_instruction")) {
      if (!j["cycles_per_instruction"].is_number() || !(j["cycles_per_instruction"].get<double>() > 0))
        throw Error("cost file " + path + ": cycles_per_instruction must be a positive number");
      scale = j["cycles_per_instruction"].get<double>();
    }
  } else {
    throw Error("cost file " + path + ": no \"cycles_per_mac\" or \"instructions_per_mac\" object");
  }
  for (const auto& [key, val] : table->items()) {
    if (!val.is_number() || !(val.get<double>() > 0) || !std::isfinite(val.get<double>()))
      throw Error("cost file " + path + ": \"" + key + "\" must be a positive number");
    const double v = val.get<double>() * scale;
    if (!set_kind(&c, key, v)) throw Error("cost file " + path + ": unknown kind \"" + key + "\"");
  }
  if (j.contains("source") && j["source"].is_string()) c.source = j["source"].get<std::string>();
  if (j.contains("protocol_instructions")) c.protocol = parse_protocol(j["protocol_instructions"], scale, path);
  for (const char* key : {"rice_cycles_per_value", "mask_cycles_per_value"}) {
    if (!j.contains(key)) continue;
    const nlohmann::json& v = j[key];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      throw Error("cost file " + path + ": \"" + key + "\" must be a positive number");
    (key[0] == 'r' ? c.rice_cycles_per_value : c.mask_cycles_per_value) = v.get<double>();
  }
  return c;
}

HostCosts parse_host_costs(const std::string& text, const std::string& source) {
  auto fail = [&](const std::string& what) { return Error("host cost file " + source + ": " + what); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw fail(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) throw fail("expected a JSON object");
  if (j.contains("target") && j["target"] != "host") throw fail("\"target\" must be \"host\"");
  HostCosts h;
  auto number = [&](const char* key, bool positive) {
    if (!j.contains(key)) throw fail(std::string("missing \"") + key + "\"");
    const nlohmann::json& v = j[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || (positive ? !(v.get<double>() > 0) : v.get<double>() < 0))
      throw fail(std::string("\"") + key + "\" must be a " + (positive ? "positive" : "non-negative") + " number");
    return v.get<double>();
  };
  if (!j.contains("seconds_per_mac") || !j["seconds_per_mac"].is_object())
    throw fail("missing the \"seconds_per_mac\" object");
  for (const auto& [key, val] : j["seconds_per_mac"].items()) {
    if (!val.is_number() || !std::isfinite(val.get<double>()) || !(val.get<double>() > 0))
      throw fail("seconds_per_mac \"" + key + "\" must be a positive number");
    // Seconds per MAC of a real kernel are far below a microsecond: a bigger
    // figure is a unit mistake (ns or ms written as seconds).
    if (val.get<double>() > 1e-6) throw fail("seconds_per_mac \"" + key + "\" is over 1e-6 s (seconds per MAC expected)");
    if (key == "default") h.default_s_per_mac = val.get<double>();
    else if (!set_kind(&h.per_mac, key, val.get<double>())) throw fail("unknown kind \"" + key + "\" in seconds_per_mac");
  }
  if (!(h.default_s_per_mac > 0)) throw fail("seconds_per_mac needs a \"default\" figure");
  h.exchange_s = number("exchange_s", false);
  if (h.exchange_s > 1.0) throw fail("\"exchange_s\" is over 1 s (seconds per exchange expected)");
  h.s_per_byte = number("seconds_per_byte", false);
  if (h.s_per_byte > 1e-3) throw fail("\"seconds_per_byte\" is over 1e-3 s (seconds per byte expected)");
  if (j.contains("source") && j["source"].is_string()) h.source = j["source"].get<std::string>();
  return h;
}

HostCosts load_host_costs(const std::string& path) {
  return parse_host_costs(read_input_file(path, "host cost file", kMaxTextFileBytes), path);
}

std::string host_costs_path(const std::string& dir) { return (dir.empty() ? project_home() + "/data/costs" : dir) + "/host.json"; }

bool host_testbed(const Testbed& t) {
  if (t.boards.empty()) return false;
  for (const Board& b : t.boards)
    if (!kind_of(b).host_speed) return false;
  return true;
}

CostModel host_cost_model(const HostCosts& h) {
  CostModel m;
  m.host = true;
  m.host_costs = h;
  m.frame_latency_s = h.exchange_s;
  m.coord_bandwidth_kbps = 0;  // the coordinator's link is priced per byte like the others
  m.cores = int(std::thread::hardware_concurrency());
  return m;
}

double CostModel::seconds_per_mac(const core::LayerDesc& d, const Board& b) const {
  if (host) {
    const double v = host_costs.per_mac.of(d);
    return v > 0 ? v : host_costs.default_s_per_mac;
  }
  return cycles_per_mac(d, b) / (b.clock_mhz * 1e6);
}

std::string board_type(const Board& b) {
  // A board that takes another type's time (a host process standing in for
  // a Teensy 4.1) is priced as that type.
  const BoardKind& k = kind_of(b);
  if (!*k.costs && *k.emulates)
    if (const BoardKind* e = find_board_kind(k.emulates)) return e->costs;
  return k.costs;
}

double CostModel::cycles_per_mac(const core::LayerDesc& d) const {
  const double c = explicit_cpm(*this, d);
  return c > 0 ? c : default_cycles_per_mac;
}

double CostModel::cycles_per_mac(const core::LayerDesc& d, const Board& b) const {
  return type_cycles_per_mac(d, board_type(b));
}

double CostModel::type_cycles_per_mac(const core::LayerDesc& d, const std::string& type) const {
  if (const double c = explicit_cpm(*this, d); c > 0) return c;
  if (!type.empty() && costs_dir != "none")
    if (const MeasuredCosts* mc = measured_costs(costs_dir, type))
      if (const double c = mc->of(d); c > 0) return c;
  return default_cycles_per_mac;
}

core::ProtocolCost CostModel::type_protocol(const std::string& type) const {
  if (!protocol_cpu || host || type.empty() || costs_dir == "none") return core::ProtocolCost();
  const MeasuredCosts* mc = measured_costs(costs_dir, type);
  return mc ? mc->protocol : core::ProtocolCost();
}

double CostModel::protocol_s(const LayerShare& ls, const Board& b) const {
  if (!protocol_cpu || host || !ls.active()) return 0;
  const core::ProtocolCost c = type_protocol(board_type(b));
  return c.zero() ? 0 : c.instructions(layer_work(ls)) / (b.clock_mhz * 1e6);
}

double model_cycles_per_mac(const QGraph& q, const CostModel& m, const std::string& type) {
  double cycles = 0, macs = 0;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const double k = double(q.nodes[n].macs);
    if (k > 0) cycles += k * m.type_cycles_per_mac(q.desc(int(n)), type), macs += k;
  }
  return macs > 0 ? cycles / macs : 0;
}

std::vector<double> k1_scales(const QGraph& q, const Testbed& t, const CostModel& m) {
  std::vector<double> s(t.boards.size(), 1.0);
  if (m.host) return s;
  const double ref = model_cycles_per_mac(q, m, kK1BoardType);
  std::map<std::string, double> of_type;  // a few types, many boards
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string type = board_type(t.boards[i]);
    if (type.empty() || type == kK1BoardType) continue;
    auto [it, fresh] = of_type.try_emplace(type, 0.0);
    if (fresh) it->second = model_cycles_per_mac(q, m, type);
    if (ref > 0 && it->second > 0) s[i] = ref / it->second;
  }
  return s;
}

void parse_op_cycles(const std::string& spec, CostModel* m) {
  size_t pos = 0;
  while (pos <= spec.size() && !spec.empty()) {
    const size_t comma = spec.find(',', pos);
    const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw Error("op cycles: '" + item + "' is not op=cycles");
    const std::string op = item.substr(0, eq), val = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(val.c_str(), &end);
    if (val.empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
      throw Error("op cycles: '" + item + "' needs a positive number of cycles per MAC");
    if (op == "default") {
      m->default_cycles_per_mac = v;
      continue;
    }
    if (op == "depthwise") {
      m->depthwise_cycles_per_mac = v;
      continue;
    }
    bool found = false;
    for (int k = 1; k <= core::kNumOps; ++k)
      if (op == core::qop_name(QOp(k))) {
        m->op_cycles_per_mac[size_t(k)] = v;
        found = true;
      }
    if (!found) throw Error("op cycles: unknown op '" + op + "' (expected an op name, depthwise or default)");
  }
}

}  // namespace ts::plan
