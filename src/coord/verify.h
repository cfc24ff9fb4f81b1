// Every layer verified, on every run (docs/execution.md): each board reports
// in every DONE a digest of the outputs it computed for that layer
// (core/digest.h); the coordinator compares them with the same digests of the
// single-process int8 reference (run_int8_all), so a wrong value in any
// intermediate layer is named with its board and layer, whatever the route
// (with --route direct the coordinator never sees those tensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coord/coordinator.h"
#include "model/qgraph.h"
#include "plan/plan.h"

namespace ts::coord {

// What a board's DONE must report for one layer.
struct ExpectedDigest {
  uint32_t outputs = 0;  // 0: the board computes nothing of the layer
  uint64_t digest = 0;
};

// Per node, per board: the digests of the reference's outputs over each
// board's regions (in fragment order, each region in flat C-H-W order, as the
// board's output buffer holds them). `tensors` is run_int8_all's result.
std::vector<std::vector<ExpectedDigest>> reference_digests(const QGraph& q, const plan::Plan& p,
                                                           const std::vector<std::vector<int8_t>>& tensors);

struct Verification {
  int layers = 0;           // layers of the plan
  int verified_layers = 0;  // layers whose every board reported the reference's digest
  std::vector<char> layer_ok;  // per node: every board matched
  // The first difference (lowest layer, then lowest board), if any.
  int board = -1, node = -1;
  ExpectedDigest got, want;
  bool ok() const { return board < 0; }
};

// Layers before r.resumed_from count as verified: they were checked (by
// verified_prefix) before the failover the inference resumed after.
Verification verify_layers(const std::vector<std::vector<ExpectedDigest>>& expected, const InferenceResult& r);

// The first layer from `from` on for which some board's DONE (boards: per
// plan worker, Coordinator::last_progress) is missing or differs from the
// reference: the layers before it were finished and verified on every board
// (layers before `from` were, earlier). expected.size() if all were. The plan
// worker whose report ended the prefix goes to *held_by (-1 if none did).
int verified_prefix(const std::vector<std::vector<ExpectedDigest>>& expected, const std::vector<BoardRunStats>& boards,
                    int from, int* held_by = nullptr);

// One line for a failed verification, e.g. "board 1 (127.0.0.1:4000):
// outputs differ from the int8 reference at layer 20 'block_2_add' (digest
// 0x..., expected 0x...)".
std::string describe_mismatch(const QGraph& q, const Verification& v, const std::string& board_address);

}  // namespace ts::coord
