// The names the command line takes for the planner's choices, each with its
// help, in one place: routes and cost models here, split strategies in
// plan/strategy.h (kStrategies). `run`, `plan` and `simulate` build their
// option help, their checks and their error lines from these tables.
#pragma once

#include <iterator>
#include <string>

namespace ts::plan {

// One name an option takes, with the phrase its --help gives it.
struct Choice {
  const char* name;
  const char* help;
};

// The routes (plan.h Route), in the enum's order: route_name and
// parse_route read this table.
inline constexpr Choice kRoutes[] = {
    {"relay", "every activation through the coordinator, the paper"},
    {"direct", "boards send to boards"},
};

// The planner's prices (plan/cost.h), for `plan`, `run` and `simulate`;
// the first is the default.
inline constexpr Choice kCodings[] = {
    {"auto", "activations board to board coded where the cost model says it pays, mask or rice"},
    {"mask", "every layer's activations board to board coded: a bit per value at the zero point, few CPU cycles"},
    {"rice", "every layer's activations board to board coded: adaptive Rice codes, smaller, tens of cycles a value"},
    {"off", "every frame plain"},
};

// Streamed chains (plan/streams.h), in the order of plan.h's Streaming.
inline constexpr Choice kStreamings[] = {
    {"off", "every layer computed whole"},
    {"auto", "chains of layers computed row by row where a board's RAM holds the plan only so"},
    {"on", "every chain of layers that can stream computed row by row (direct route)"},
};

// The boards' CPU outside their kernels (core/layer_work.h, CostModel::protocol_cpu).
inline constexpr Choice kProtocolCpu[] = {
    {"on", "each board's CPU outside its kernels at its type's measured prices per layer, piece and byte"},
    {"off", "none: boards spend nothing beside their kernels (the ideal board)"},
};

inline constexpr Choice kCostModels[] = {
    {"teensy", "the Teensy 4.1 figures, what local boards stand in for"},
    {"host", "the measured prices of boards run as processes on this machine, data/costs/host.json"},
};
// "a, b, c" (last = ", ") or "a, b or c" (last = " or "): for error lines.
template <class Range>
std::string join_names(const Range& choices, const char* last = ", ") {
  std::string s;
  const size_t n = std::size(choices);
  size_t i = 0;
  for (const auto& c : choices) {
    if (i > 0) s += i + 1 == n ? last : ", ";
    s += c.name;
    ++i;
  }
  return s;
}

// "a (help) | b (help)": for --help.
template <class Range>
std::string names_help(const Range& choices) {
  std::string s;
  for (const auto& c : choices) s += std::string(s.empty() ? "" : " | ") + c.name + " (" + c.help + ")";
  return s;
}

// Whether `name` is one of the choices.
template <class Range>
bool has_name(const Range& choices, const std::string& name) {
  for (const auto& c : choices)
    if (name == c.name) return true;
  return false;
}

}  // namespace ts::plan
