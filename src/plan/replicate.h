// Throughput: how to use N boards when images come one after another.
//
// With `--objective throughput` the boards need not all work on one image.
// They can form groups: each group holds the whole model (split over its
// boards, or on one board when one board can hold it: `replicate`) and
// takes every G-th image, so G groups run G images side by side; inside a
// group, images are pipelined (a board takes the next image's layers as soon
// as it is done with the previous one's). choose_groups() tries every group
// size that gives a different number of groups (g = floor(N / k) for k =
// 1..N), plans one group (make_plan: RAM and flash are hard limits, a group
// that does not fit is not a candidate) and estimates its steady-state
// rate from the plan with the cost model: a board's busy time per image is
// the larger of its compute and the time its link needs for the wire bytes
// it receives or sends; the slowest board sets the group's interval, and
// the coordinator's link (every image's input and output) caps the total.
// With `--objective latency` the answer is one group of all N boards.
//
// Boards are grouped in testbed order, g consecutive boards per group; the
// N mod g boards left over stay idle (reported).
#pragma once

#include <string>
#include <vector>

#include "model/qgraph.h"
#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::plan {

enum class Objective : uint8_t { Latency, Throughput };
const char* objective_name(Objective o);
// "latency" | "throughput"; anything else throws ts::Error (one line).
Objective parse_objective(const std::string& s);

// Per board, the cost model's busy time for one image of plan p: its
// compute plus nothing else if the link keeps up, else the link's time for
// max(wire bytes in, wire bytes out) (frames as the workers send them).
std::vector<double> estimate_board_busy_seconds(const QGraph& q, const Plan& p, const Testbed& t, const CostModel& m);

struct GroupCandidate {
  int group_boards = 0;       // boards per group
  int groups = 0;             // groups running side by side
  bool fits = false;          // one group's plan within RAM and flash
  std::string why_not;        // the planner's one line when it does not fit
  double est_latency_s = 0;   // one image through one group (cost model)
  double est_interval_s = 0;  // steady-state seconds between images of one group
  double est_images_per_s = 0;  // all groups, capped by the coordinator's link
};

struct GroupChoice {
  Objective objective = Objective::Latency;
  int group_boards = 0, groups = 0, idle_boards = 0;
  std::string mode;           // "split" (one group of all boards), "replicate" (one board per group), "groups"
  double est_images_per_s = 0;
  std::vector<GroupCandidate> candidates;  // throughput: every size tried
};

// The testbed of group `index` when groups have g boards (boards g*index ..).
Testbed group_testbed(const Testbed& t, int g, int index);

// Whether every board has the same clock, RAM, flash and link (then every
// group of g boards is the same and one plan stands for all).
bool identical_boards(const Testbed& t);

// Wire bytes of one image's input and output over the coordinator's link.
double coordinator_bytes_per_image(const Plan& p);

// Chooses the grouping for the objective (see above). opt is how each group
// is planned (strategy, route, cost model). Throws ts::Error (one line) when
// no grouping fits, naming why the whole testbed does not.
GroupChoice choose_groups(const QGraph& q, const Testbed& t, const PlanOptions& opt, Objective objective);

}  // namespace ts::plan
