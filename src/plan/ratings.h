// Capability ratings: the paper's time model (eq. 1-2) and rating (eq. 5).
//
// Units (1 KB = 1000 bytes, see testbed.h):
//   f   clock, MHz = million cycles per second
//   W   workload, million cycles (Mcycles)
//   K1  KB of layer output produced per Mcycle of work (paper tab. 1 measured
//       0.127..0.228 on a Teensy 4.1, depending on workload and clock)
//   Kc  dimensionless: KB moved over the link per KB of output (inputs sent
//       in plus outputs sent back, divided by the output)
//   d   link delay, s per KB moved
//   B   link bandwidth, KB/s
//   R   rating: KB of output a board produces in one second
//
// Time for a workload W (eq. 1, 2):
//   t(W) = W/f + (d + 1/B) * K1*Kc*W
// Setting t = 1 s, the output produced in that second is K1*W, which gives
// eq. 5:
//   R = f*K1 / ((d + 1/B) * f*K1*Kc + 1)
#pragma once

#include <string>
#include <vector>

#include "plan/testbed.h"

namespace ts::plan {

// Default K1: near the top of the paper's measured range (0.127..0.228
// KB/Mcycle, tab. 1). Ratings only matter relative to each other, and a
// single K1 shared by all boards scales every compute term alike, so its
// exact value only shifts the balance between compute and link terms.
inline constexpr double kDefaultK1 = 0.2;

// The board type K1 was measured on (the paper's Teensy 4.1: a Cortex-M7).
// K1 is output per Mcycle, so a board type whose kernels take fewer cycles
// per MAC produces more output per Mcycle: the planner scales K1 by this
// type's cycles per MAC over the board's (cost.h k1_scales), which leaves
// the M7 boards' ratings as they were and gives an M55 or an M4 the share
// its measured prices say.
inline constexpr const char* kK1BoardType = "cortex-m7";

// Default Kc, used until the planner measures it from a split: each KB of
// output costs about one KB of inputs sent to the board plus the KB of output
// sent back to the coordinator (every activation goes through the
// coordinator, §6.2). kc_from_traffic gives the measured value.
inline constexpr double kDefaultKc = 2.0;

// The per-board numbers eq. 1 and eq. 5 need.
struct RatingInputs {
  double clock_mhz = kTeensyClockMhz;               // f
  double k1 = kDefaultK1;                           // K1
  double kc = kDefaultKc;                           // Kc
  double delay_s_per_kb = kDefaultDelaySPerKB;      // d
  double bandwidth_kbps = kDefaultBandwidthKBps;    // B
};

RatingInputs rating_inputs(const Board& b, double k1 = kDefaultK1, double kc = kDefaultKc);

// Eq. 5. Throws ts::Error unless f > 0, K1 > 0, Kc >= 0, d >= 0, B > 0
// (all finite).
double rating_eq5(double f_mhz, double k1, double kc, double d_s_per_kb, double b_kbps);
double rating_eq5(const RatingInputs& in);

// Eq. 2: KB moved over the link for a workload of W Mcycles.
double traffic_kb_eq2(double work_mcycles, double k1, double kc);

// Eq. 1: seconds for a workload of W Mcycles (W >= 0).
double time_eq1(double work_mcycles, const RatingInputs& in);

// Eq. 1 split into its two terms, for reports and the simulator.
struct TimeTerms {
  double compute_s = 0;  // W / f
  double comm_s = 0;     // (d + 1/B) * K1*Kc*W
  double total() const { return compute_s + comm_s; }
};
TimeTerms time_terms_eq1(double work_mcycles, const RatingInputs& in);

// Kc measured from a split: bytes moved to and from a board divided by the
// bytes of output it produced. Throws if output_bytes <= 0 or moved < 0.
double kc_from_traffic(double bytes_moved, double output_bytes);

// How work is shared between boards (the paper's two baselines and its
// rating).
enum class Allocation { Even, Frequency, Rating };

// "even" | "frequency" | "rating"; anything else throws ts::Error naming the
// string and the accepted values.
Allocation parse_allocation(const std::string& name);
const char* to_string(Allocation a);

// One weight per board, in testbed order:
//   Even      1 for every board
//   Frequency the board's clock in MHz (proportional to clock)
//   Rating    eq. 5 with the board's f, d, B, the given K1 and its Kc
// kc holds one value per board, or a single value for every board, or is
// empty for kDefaultKc. k1_scale (Rating only): one factor per board on K1
// (k1_scales in cost.h), empty = 1 for all. Throws ts::Error on a bad
// testbed or bad K1/Kc.
std::vector<double> compute_ratings(const Testbed& t, Allocation how, double k1 = kDefaultK1,
                                    const std::vector<double>& kc = {},
                                    const std::vector<double>& k1_scale = {});

}  // namespace ts::plan
