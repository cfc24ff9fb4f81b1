// Streamed chains on the plan's side (core/stream.h; docs/planner.md,
// "Streamed chains"): where RAM binds, consecutive layers each read only by
// the next are computed row by row on each board, every layer but the last
// into a line buffer of a few rows. Pure planning: which layers chain, how
// many rows each line buffer holds, and which arena buffers a chain keeps
// in use together.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/testbed.h"

namespace ts::plan::streams {

// Rows of the chain's last layer made per pass, tried in this order until
// the boards' RAM holds the plan (fewer rows: smaller line buffers, more
// kernel calls).
constexpr int32_t kSteps[] = {4, 2, 1};

// --stream: kStreamings' names (plan/names.h); an unknown name is refused
// with one line.
Streaming parse(const std::string& s);
const char* name(Streaming s);

// What a plan streams: its streamed layers (any board's), the chains they
// make (each with the layer after its last streamed one) and the rows per
// pass; and one line saying so for the text reports ("" if none).
struct Summary {
  int layers = 0, chains = 0;
  int32_t step = 0;
};
Summary summary(const Plan& p);
std::string summary_line(const Plan& p, Streaming mode);

// Nodes [first, last] computed together.
struct Chain {
  int first = 0, last = 0;
};

// The chains of plan p as split (before routing): maximal runs of nodes,
// each but the last read only by the next, which reads nothing else and is
// a Conv or a pool; every worker's shares of them whole rows of every
// channel (one full-width box), or none. At most core::kMaxChain nodes.
std::vector<Chain> chains(const QGraph& q, const Plan& p);

// What to stream: `step` rows of each chain's last layer per pass (0: no
// chain streams); `nodes` empty: every chain, else only the chains that
// hold a node marked there.
struct Choice {
  int32_t step = 0;
  std::vector<uint8_t> nodes;
};

// `--stream auto` for a plan p (made without streams) over some board's
// RAM: the choices to try in order until one fits. First the chains that
// hold a layer whose buffers in use add up to more than some board's
// budget (LayerShare::live_bytes), then those whose placement's top is
// over it, then every chain; each at kSteps' rows per pass in turn.
std::vector<Choice> auto_choices(const Plan& p, const Testbed& t);

// A streamed plan's identity: its fragments differ from the plan without
// streams (`id` unchanged when c streams nothing).
uint32_t plan_id(uint32_t id, const Choice& c);

// Marks the chains of p that `c` names to stream c.step rows of their last
// layer per pass,
// each chain's layers but the last widened, last to first, to what the next
// layer's share reads (set_share(n, regions, share) gives a share new
// regions; LayerShare::owned keeps the tiling): a board's chain then reads
// nothing from its neighbours past its first layer's inputs.
void mark(const QGraph& q, Plan& p, const Choice& c,
          const std::function<void(int, const std::vector<core::Region>&, LayerShare&)>& set_share);

// Worker wp's streamed shares (stream_step > 0), after the in-place pass
// (`home`: per node, the operand of its out_until's window it is computed
// into, or -1): each line buffer's rows (core::chain_rows) become its
// reader's window and the share's channel pitch. The line buffers, and the
// window the chain's last layer is computed into if any, are in use from
// the chain's first layer on (their avail_from, which the board's arena
// check reads). A share that did not end in place streams no more (its
// chain ends before it). Returns the chains of this worker.
std::vector<Chain> lay_out(const QGraph& q, WorkerPlan& wp, const std::vector<int>& home);

// The share as channels [c0, c1) x rows [y0, y1) at full width, if it is
// one region so (core::FragLayer::whole_rows, on the plan's side).
bool whole_rows(const core::Dims& d, const LayerShare& ls, int32_t* c0, int32_t* c1, int32_t* y0, int32_t* y1);

}  // namespace ts::plan::streams
