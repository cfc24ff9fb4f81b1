// Writes a worker's fragment (core/fragment.h) from a Plan.
//
// The byte layout (format version 2) is declared once, in core/fragment.h
// (namespace frag): this writer and the board's reader use the same names.
// docs/planner.md has the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace ts::plan {

using core::kFragHeaderBytes;
using core::kFragLayerBytes;

// Exact size of worker w's fragment (what write_fragment returns).
int64_t fragment_bytes(const QGraph& q, const Plan& p, int worker);

// The fragment of plan worker w (0 <= w < p.n_workers()). Deterministic: the
// same plan gives the same bytes. Throws ts::Error if a value does not fit
// the format (more than 65535 workers, a tensor over 2^31 elements).
std::vector<uint8_t> write_fragment(const QGraph& q, const Plan& p, int worker);

// Writes DIR/worker-<board id>.tsfg for every worker (creating DIR) and
// returns the paths. Throws ts::Error naming the file on failure.
std::vector<std::string> write_fragments(const QGraph& q, const Plan& p, const std::string& dir);

}  // namespace ts::plan
