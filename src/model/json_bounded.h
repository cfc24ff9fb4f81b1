// JSON from outside (testbeds, TF.js model.json) parsed with a nesting limit.
//
// nlohmann's parser is iterative, but printing a value (dump) and some
// accessors recurse once per level: a file of a few hundred thousand '['
// would overflow the stack in an error message. Documents we read nest a few
// levels deep, so anything deeper than kMaxJsonDepth is refused while parsing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/graph.h"  // ts::Error

namespace ts {

constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws ts::Error "<what>: <invalid> (<parser message>)"
// (one line) on invalid JSON, or "<what>: JSON nested deeper than N levels".
inline nlohmann::json parse_json_bounded(const std::string& text, const std::string& what,
                                         const std::string& invalid = "invalid JSON",
                                         int max_depth = kMaxJsonDepth) {
  using json = nlohmann::json;
  bool too_deep = false;
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json&) {
    if ((ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start) && depth >= max_depth)
      too_deep = true;
    return !too_deep;
  };
  json doc;
  try {
    doc = json::parse(text, cb);
  } catch (const json::exception& e) {
    if (!too_deep) throw Error(what + ": " + invalid + " (" + std::string(e.what()).substr(0, 160) + ")");
  }
  if (too_deep) throw Error(what + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
  return doc;
}

}  // namespace ts
