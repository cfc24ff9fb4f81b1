// Machine- and human-readable reports of simulated runs.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario.h"

namespace ts::sim {

// The timing model, every field written out.
nlohmann::json to_json(const TimingModel& m);

// One simulated worker count: workers, fits_budget, latency_s {total,
// compute, communication}, wire_bytes, payload_bytes, frames, peak RAM
// figures, per_layer; per_board (with per-layer peak RAM, compute and finish
// times) when `per_board` and the record still holds board details.
nlohmann::json to_json(const RunRecord& r, bool per_board);

// One line per record: workers, latency split, bytes, peak RAM, budget.
void print_summary(std::FILE* out, const std::vector<const RunRecord*>& runs);

// Per-layer and per-board tables of one record.
void print_details(std::FILE* out, const RunRecord& r);

}  // namespace ts::sim
