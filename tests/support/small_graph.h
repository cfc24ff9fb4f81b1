// Test support: float graphs built by hand, node by node (the fold's cases),
// and the check that two graphs compute the same function.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "model/float_exec.h"
#include "model/graph.h"

namespace ts::testing {

// Appends a node of `op` reading tensors `in` and writing a new tensor of
// shape `out` named after it; `set` fills the op's fields. Returns the tensor.
inline int add_op(Graph& g, Op op, std::vector<int> in, Shape out, const std::string& name,
                  const std::function<void(Node&)>& set = {}) {
  Node n;
  n.op = op;
  n.name = name;
  n.inputs = std::move(in);
  n.output = g.add_tensor(name + "_out", out);
  if (set) set(n);
  g.add_node(n);
  return n.output;
}

// Graphs a and b give the same outputs on `input` (within `tol`; 0: equal).
inline void expect_same_function(const Graph& a, const Graph& b, const std::vector<float>& input, float tol = 0.f) {
  const std::vector<float> x = run_float(a, input), y = run_float(b, input);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << i;
}

}  // namespace ts::testing
