// Test support: `tinysplit run --json ARGS` parsed (an empty object if it
// failed, which the test is told of), and the bit-exactness every run test
// checks (the int8 reference's digests matched on every layer).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "shell.h"

namespace ts::testing {

inline nlohmann::json run_json(const std::string& args) {
  const auto r = tinysplit("run --json " + args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  if (r.code != 0 || r.out.empty()) return nlohmann::json::object();
  return nlohmann::json::parse(r.out);
}

inline void expect_exact(const nlohmann::json& j, const std::string& what) {
  ASSERT_TRUE(j.contains("match_reference")) << what;
  EXPECT_TRUE(j.at("match_reference").get<bool>()) << what;
  EXPECT_EQ(j.at("verified_layers").get<int>(), j.at("layers").get<int>()) << what;
}

}  // namespace ts::testing
