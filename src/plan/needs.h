// Exact input needs (the receptive fields of the paper's alg. 2): which
// elements of each operand a run of output neurons reads, as sorted, merged
// runs of flat C-H-W indices. Internal to the planner (plan.cpp builds every
// share's needs with it; exact_input_runs in plan.h is its public face).
//
// The op says which elements its outputs read as a pattern (core/op.h
// Access, one per operand, declared in the op's file); this file enumerates
// each pattern and never looks at the op.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/fragment.h"
#include "core/op.h"
#include "model/qgraph.h"

namespace ts::plan {

class WindowField;

// All receptive-field state of one node, shared by its workers.
class NodeNeeds {
 public:
  NodeNeeds(const QGraph& q, int node);
  ~NodeNeeds();

  // The runs of operand k that outputs [begin, end) read, into *out.
  void operand(int k, int64_t begin, int64_t end, std::vector<core::InputRun>* out);

  // True when outputs [b1, e1) need exactly the input runs of operand k that
  // outputs [b0, e0) need, known without computing them: a window's outputs
  // inside one channel each, in the same group and at the same positions of
  // the plane (the output channels of a 1x1 convolution all read the same
  // rows of every input channel), or any two ranges reading the whole operand.
  bool same_needs(int k, int64_t b0, int64_t e0, int64_t b1, int64_t e1) const;

  const core::LayerDesc& desc() const { return d_; }

 private:
  core::LayerDesc d_;
  std::vector<core::Access> access_;             // per operand
  std::vector<std::unique_ptr<WindowField>> field_;  // per windowed operand
};

}  // namespace ts::plan
