// What a board does for one layer outside its kernel, counted in the pieces
// it handles (docs/simulator.md, "The boards' CPU outside the kernels"):
// the records of its fragment entry it walks and the bytes it moves. The
// board's protocol CPU is priced from these counts (plan::CostModel, the
// simulator, an emulated host board), and a board type's prices per piece
// and per byte are fitted from its firmware's measured instructions per
// layer (scripts/board_costs.sh). One definition for every side: the plan's
// counts (plan::layer_work) equal the fragment's
// (tests/cost_test.cpp, ProtocolCpu.ThePlansCountsAreTheFragmentsCounts).
// Portable C++17, heap-free.
#pragma once

#include <stdint.h>

namespace ts {
namespace core {

struct FragLayer;

struct LayerWork {
  bool active = false;       // the board computes outputs of the layer
  uint32_t local_runs = 0;   // input runs copied from its own earlier outputs
  uint32_t recv_runs = 0;    // input runs it receives (frames' blocks are checked against them)
  uint32_t sends = 0;        // send records of its outputs (partial sums included)
  uint64_t net_bytes = 0;    // bytes received and sent (partial sums included)
  uint64_t local_bytes = 0;  // bytes copied from its own earlier outputs
  uint64_t out_bytes = 0;    // output bytes computed (each is digested)
};

// The prices a board type's protocol CPU is priced by, in the order cost
// files, reports and price_counts list them.
constexpr int kNumProtocolPrices = 7;

// What each price multiplies for one layer's work, in that order: the layer
// itself (1 if the board computes it, else every count is 0), local runs,
// received runs, send records, network bytes, local bytes, output bytes.
inline void price_counts(const LayerWork& w, double out[kNumProtocolPrices]) {
  const double a = w.active ? 1.0 : 0.0;
  out[0] = a;
  out[1] = a * w.local_runs;
  out[2] = a * w.recv_runs;
  out[3] = a * w.sends;
  out[4] = a * double(w.net_bytes);
  out[5] = a * double(w.local_bytes);
  out[6] = a * double(w.out_bytes);
}

// A board type's protocol prices in instructions (the firmware's, outside the
// kernels, network controller copies excluded), per layer it computes, per
// piece and per byte. All zero: no protocol CPU (the ideal board).
struct ProtocolCost {
  double per_layer = 0, per_local_run = 0, per_recv_run = 0, per_send = 0, per_net_byte = 0, per_local_byte = 0,
         per_out_byte = 0;
  bool zero() const;
  // Instructions for one layer's work (0 for a layer the board does not compute).
  double instructions(const LayerWork& w) const;
};

// The prices by name, as cost files and reports spell them
// (data/costs/<type>.json "protocol_instructions", scripts/protocol_fit.py),
// in price_counts' order.
struct ProtocolPrice {
  const char* name;
  double ProtocolCost::*price;
};
constexpr ProtocolPrice kProtocolPrices[kNumProtocolPrices] = {
    {"per_layer", &ProtocolCost::per_layer},         {"per_local_run", &ProtocolCost::per_local_run},
    {"per_recv_run", &ProtocolCost::per_recv_run},   {"per_send", &ProtocolCost::per_send},
    {"per_net_byte", &ProtocolCost::per_net_byte},   {"per_local_byte", &ProtocolCost::per_local_byte},
    {"per_out_byte", &ProtocolCost::per_out_byte}};

inline bool ProtocolCost::zero() const {
  for (const ProtocolPrice& p : kProtocolPrices)
    if (this->*p.price != 0) return false;
  return true;
}

inline double ProtocolCost::instructions(const LayerWork& w) const {
  double c[kNumProtocolPrices];
  price_counts(w, c);
  double sum = 0;
  for (int i = 0; i < kNumProtocolPrices; ++i) sum += this->*kProtocolPrices[i].price * c[i];
  return sum;
}

// The counts of a fragment entry (what the board reads).
LayerWork layer_work(const FragLayer& e);

}  // namespace core
}  // namespace ts
