// Which layers' outputs cross board links coded (core/act_code.h, wire.h
// "Coded INPUTS"), with which coding, and what that is estimated to save:
// the planner's side of the activation coder. The boards code and decode;
// the plan only marks the layers (core::kEntryCoded, kEntryMasked) and
// prices their transfers.
//
// Per layer, Auto takes the coding whose transfer is estimated fastest, if
// at most kCodeMargin of the plain one: a coded transfer takes, per value,
// the longer of its coded bytes on the link (the estimated size per value:
// model/pipeline.h activation_code_ratios, on one reference input) and the
// CPU of one end (half the cost files' code and decode cycles per value;
// the boards code a frame while the link sends the one before, and decode
// one while the next arrives), on the slowest board of the testbed. Only
// the direct route codes: the coordinator's frames stay plain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/cost.h"
#include "plan/testbed.h"

namespace ts::plan {

enum class Coding { Off, Auto, Rice, Mask };
// "off", "auto", "rice", "mask"; throws ts::Error naming the value otherwise.
Coding parse_coding(const std::string& s);
const char* coding_name(Coding c);

// How one layer's outputs go board to board.
enum class Codec : uint8_t { Plain, Rice, Mask };

// A coded transfer must be estimated at most this fraction of the plain one
// for Auto to code it.
constexpr double kCodeMargin = 0.9;

// Board CPU to code one value and decode it again when the board's type has
// no measured figure (cost file keys rice_cycles_per_value and
// mask_cycles_per_value; the defaults are the Cortex-M7's, measured under
// QEMU by scripts/qemu_route_bench.sh --code-cost); on host boards
// (processes here), in seconds.
constexpr double kDefaultRiceCyclesPerValue = 134.7;
constexpr double kDefaultMaskCyclesPerValue = 60.3;
constexpr double kHostRiceSPerValue = 14e-9;
constexpr double kHostMaskSPerValue = 3e-9;

// Seconds for board b to code and decode one value with codec c.
double code_seconds_per_value(const Board& b, const CostModel& m, Codec c);

// The estimated coded bytes per value of every node's outputs, per coding
// (<= 0: no estimate), and the input they were estimated on.
struct CodeEstimate {
  std::vector<double> rice, mask;
  std::string source;
  bool empty() const { return rice.empty() && mask.empty(); }
};

// Per node (n_nodes): the codec and its estimated bytes per value (1 for
// Plain, and for a forced coding without an estimate), and what a value's
// transfer costs in plain bytes' link time: the longer of the coded bytes
// and one end's CPU (what the cost model prices).
struct CodedLayers {
  std::vector<Codec> codec;
  std::vector<double> ratio, price;
  Codec at(size_t n) const { return n < codec.size() ? codec[n] : Codec::Plain; }
  // Node n's estimated coded bytes per value and its price; 0 where it goes plain.
  double coded(size_t n) const { return at(n) != Codec::Plain ? ratio[n] : 0.0; }
  double priced(size_t n) const { return at(n) != Codec::Plain ? price[n] : 0.0; }
  // How many layers take codec c.
  int layers(Codec c) const;
};
CodedLayers coded_layers(size_t n_nodes, const Testbed& t, const CostModel& m, Coding c, const CodeEstimate& e);

struct PlanOptions;
// With coding not off and no estimate yet: estimates the model's coded
// sizes (opt->code) on its reference input.
void estimate_code_ratios(const QGraph& q, PlanOptions* opt);

}  // namespace ts::plan
