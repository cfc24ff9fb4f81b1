// Float reference executor over the IR (batch 1, NCHW, float32).
//
// Straightforward and meant to be obviously right; loops are ordered so that
// the innermost one runs over contiguous output pixels (a 1x1 convolution is a
// plain matrix product). Every Op of graph.h is implemented, and each node's
// fused activation (Node::act) is applied after the op.
#pragma once

#include <vector>

#include "model/graph.h"

namespace ts {

// Runs g on one input of g.shape(g.input) in CHW order. Returns the output
// tensor (probabilities if the graph ends in Softmax). If all_tensors is not
// null it receives every tensor's value, indexed like g.tensors. Throws Error
// if the input has the wrong size or a node is malformed.
std::vector<float> run_float(const Graph& g, const std::vector<float>& input_chw,
                             std::vector<std::vector<float>>* all_tensors = nullptr);

// Evaluates a single node given its input values (indexed like n.inputs).
// Used by run_float; exposed for tests and for passes that need one layer.
// One element of an activation with no closed int8 form (LeakyRelu, Tanh,
// PRelu): the float value the executor computes and the quantiser's tables
// are built from. `channel` picks PRelu's slope.
float unary_value(const Node& n, float x, int channel);

std::vector<float> eval_node(const Graph& g, const Node& n, const std::vector<const std::vector<float>*>& inputs);

}  // namespace ts
