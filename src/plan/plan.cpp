// The planner's pipeline (plan.h): shares from the strategy, their exact
// needs (needs.h), routes (route.cpp), the arena plan (arena.cpp), the
// statistics and the plan's identity; make_plan's ratings, storage-aware
// allocation and budgets.
#include "plan/plan.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>

#include "core/crc32.h"
#include "core/op.h"
#include "core/partial.h"
#include "core/worker.h"
#include "model/bytes.h"
#include "plan/fragment_writer.h"
#include "plan/fuse.h"
#include "plan/needs.h"
#include "plan/plan_steps.h"
#include "plan/streams.h"
#include "util/parallel.h"

namespace ts::plan {

using core::InputRun;

int64_t LayerShare::bytes_in() const {
  int64_t s = 0;
  for (const auto& in : inputs) s += in.recv_elems;
  return s + psum.recv_bytes;
}

int64_t LayerShare::bytes_out() const {
  int64_t s = 0;
  for (const auto& sd : sends)
    if (sd.peer == core::kPeerCoordinator) s += sd.count;
  return s;
}

namespace {

// ----------------------------------------------------------------------------
// Plan assembly
// ----------------------------------------------------------------------------

uint32_t hash_plan(uint32_t model_crc, const std::vector<double>& shares, const std::string& strategy,
                   Route route) {
  ByteWriter b;
  b.u32(model_crc);
  // The route joins the strategy name only when it is not the paper's, so a
  // relay plan keeps the identity it always had.
  const std::string name = route == Route::Relay ? strategy : strategy + "/" + route_name(route);
  b.str(name);
  b.u32(uint32_t(shares.size()));
  for (double s : shares) {
    uint64_t v;
    std::memcpy(&v, &s, 8);
    b.u64(v);
  }
  return crc32(b.buf.data(), b.buf.size());
}

// CRC-32 of the model's .tsqm serialisation. That format ends with the CRC
// of everything before it, so the trailer is the hash (a CRC taken over the
// whole file including its own CRC would be the same constant for every
// model).
uint32_t model_crc(const QGraph& q) {
  const std::vector<uint8_t> bytes = serialize_qgraph(q);
  return crc32(bytes.data(), bytes.size() - 4);
}

// A plan with its workers and layers sized and nothing computed yet; refuses
// what the fragment format cannot number and reduce layers it cannot take.
Plan empty_plan(const QGraph& q, const Testbed& t, const std::vector<double>& shares, const SplitStrategy& strategy,
                Route route) {
  const size_t N = shares.size();
  if (N == 0) throw Error("plan: no workers");
  if (t.boards.size() != N)
    throw Error("plan: " + std::to_string(N) + " shares for " + std::to_string(t.boards.size()) + " boards");
  if (N > 65535) throw Error("plan: at most 65535 workers (got " + std::to_string(N) + ")");
  if (q.nodes.size() > 0xFFFF) throw Error("plan: the model has more layers than the fragment format can number");
  Plan p;
  p.strategy = strategy.name();
  p.layer_strategy.resize(q.nodes.size());
  int active = 0;
  for (double s : shares) active += s > 0;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    p.layer_strategy[n] = strategy.layer_name(q, int(n));
    if (p.layer_strategy[n] == "reduce" && core::partial_rows(q.desc(int(n))) && strategy.name() != "reduce-all" &&
        !ReduceStrategy::rows_pay(q.desc(int(n)), active, route == Route::Direct))
      p.layer_strategy[n] = "channel";
  }
  p.route = route;
  p.model_bytes = q.weight_bytes();
  p.ratings = shares;
  p.shares = shares;
  p.workers.resize(N);
  for (size_t w = 0; w < N; ++w) {
    p.workers[w].board = t.boards[w].id;
    p.workers[w].rating = shares[w];
    p.workers[w].share = shares[w];
    p.workers[w].layers.resize(q.nodes.size());
  }
  p.layers.resize(q.nodes.size());
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    if (fused_strategy(p.layer_strategy[n]) && route != Route::Direct)
      throw Error("plan: strategy '" + p.layer_strategy[n] + "' (halos computed again on the board that reads them) needs --route direct; "
                  "on the relay route every output goes through the coordinator");
    if (p.layer_strategy[n] == "reduce") {
      if (!ReduceStrategy::reducible(q, int(n)))
        throw Error("plan: layer '" + q.nodes[n].name + "' cannot be split by its input with partial sums (a Conv 1x1, a Gemm or a GlobalAvgPool can)");
      if (route != Route::Direct)
        throw Error("plan: strategy 'reduce' (partial sums reduced board to board) needs --route direct; the relay route has no path for partial sums");
    }
  }
  return p;
}

// The regions must tile the layer: every output exactly once (`cover`: scratch).
void check_tiling(const std::vector<std::vector<core::Region>>& regions, const QNode& node, const core::Dims& out,
                  const SplitStrategy& strategy, std::vector<uint8_t>& cover) {
  const int64_t total = out.size();
  cover.assign(size_t(total), 0);
  int64_t covered = 0;
  for (const auto& rs : regions)
    for (const core::Region& r : rs) {
      if (!r.valid(out)) throw Error("plan: strategy '" + strategy.name() + "' gave a region outside layer '" + node.name + "'");
      r.segments(out, [&](int32_t b, int32_t e) {
        for (int32_t i = b; i < e; ++i) {
          if (cover[size_t(i)]++) throw Error("plan: strategy '" + strategy.name() + "' regions overlap in layer '" + node.name + "'");
        }
        covered += e - b;
        return true;
      });
    }
  if (covered != total) throw Error("plan: strategy '" + strategy.name() + "' regions do not cover layer '" + node.name + "'");
}

// A partial share of a reduced layer (core/partial.h): input channels
// [ci0, ci1), whole planes, with the weights of those channels for every
// output channel and the requantisation data of the own block; or input rows
// [ci0, ci1) of every channel (no data). Its one region is whole output
// channels, the block it requantises.
void partial_share(const QGraph&, const QNode& node, const core::LayerDesc& d, const std::pair<int32_t, int32_t>& block,
                   LayerShare& ls) {
  PartialShare& ps = ls.psum;
  ps.on = true;
  ps.ci0 = block.first;
  ps.ci1 = block.second;
  const bool rows = core::partial_rows(d);
  if (rows) {
    const int64_t P = core::partial_positions(d);
    ls.oc_base = int32_t(ls.regions[0].v[0] / P);
    ls.oc_count = int32_t((ls.regions[0].v[1] - ls.regions[0].v[0]) / P);
  }
  ls.data_bytes = core::partial_weights(d, ps.ci0, ps.ci1) +
                  (rows ? 0 : int64_t(ls.oc_count) * 4 * ((node.bias.empty() ? 0 : 1) + 2));
  ls.macs = core::partial_macs(d, ps.ci0, ps.ci1);
  InputNeed& in = ls.inputs[0];
  in.tensor = node.inputs[0];
  in.runs.clear();
  in.box = core::partial_window(d, ps.ci0, ps.ci1);
  in.elems = in.box.elems(d.in[0].w);
  if (in.box.empty()) return;
  const int64_t W = d.in[0].w, hw_in = int64_t(d.in[0].h) * W;
  // The window's runs: one per channel, or one when they join (whole planes).
  for (int64_t c = in.box.c0; c < in.box.c1; ++c) {
    const uint32_t at = uint32_t(c * hw_in + in.box.h0 * W), n = uint32_t((in.box.h1 - in.box.h0) * W);
    if (!in.runs.empty() && in.runs.back().offset + in.runs.back().count == at)
      in.runs.back().count += n;
    else
      in.runs.push_back(InputRun{at, n});
  }
}

// Operand k of a share: the exact runs its regions read (needs.h) and the
// window (box) that holds them.
void operand_needs(NodeNeeds& needs, const core::LayerDesc& d, int k, LayerShare& ls, std::vector<InputRun>& tmp) {
  InputNeed& in = ls.inputs[size_t(k)];
  in.runs.clear();
  in.box = core::Box{};
  // Segments of a box often need exactly the runs the segment before them
  // needed (a 1x1 convolution's output channels all read the same rows of
  // every input channel): adding them again would only give the sort below
  // duplicates to merge (up to 409,600 runs per layer at 112, most of the
  // planning time). [pb, pe) is the last segment whose runs were added.
  int64_t pb = 0, pe = 0;
  for (const core::Region& r : ls.regions)
    r.segments(d.out, [&](int32_t b, int32_t e) {
      if (!needs.same_needs(k, pb, pe, b, e)) {
        needs.operand(k, b, e, &tmp);
        in.runs.insert(in.runs.end(), tmp.begin(), tmp.end());
        pb = b;
        pe = e;
      }
      const core::Box s = core::input_box(d, k, b, e);
      if (!s.empty()) {
        if (in.box.empty()) {
          in.box = s;
        } else {
          in.box.c0 = std::min(in.box.c0, s.c0);
          in.box.c1 = std::max(in.box.c1, s.c1);
          in.box.h0 = std::min(in.box.h0, s.h0);
          in.box.h1 = std::max(in.box.h1, s.h1);
        }
      }
      return true;
    });
  if (ls.regions.size() > 1 || ls.regions[0].kind == core::RegionKind::Box) {
    // Several segments: sort and merge their runs.
    std::vector<InputRun>& v = in.runs;
    const auto by_offset = [](const InputRun& a, const InputRun& b) { return a.offset < b.offset; };
    if (!std::is_sorted(v.begin(), v.end(), by_offset)) std::sort(v.begin(), v.end(), by_offset);
    size_t kept = 0;  // merged in place: v[0, kept) are the runs so far
    for (const InputRun& r : v) {
      InputRun& last = v[kept - (kept > 0)];
      if (kept > 0 && int64_t(last.offset) + last.count >= r.offset) {
        const int64_t e = std::max<int64_t>(int64_t(last.offset) + last.count, int64_t(r.offset) + r.count);
        last.count = uint32_t(e - last.offset);
      } else {
        v[kept++] = r;
      }
    }
    v.resize(kept);
  }
  in.elems = 0;
  for (const InputRun& r : in.runs) in.elems += r.count;
}

// Worker w's share of node n: its regions, the per-channel data it holds
// (the op's, core/op.h), its MACs and its needs.
void set_share(const QGraph& q, const Plan& p, int n, NodeNeeds& needs, const std::vector<core::Region>& regions,
               const std::pair<int32_t, int32_t>* block, LayerShare& ls) {
  const QNode& node = q.nodes[size_t(n)];
  const core::LayerDesc& d = needs.desc();
  const int64_t hw = int64_t(d.out.h) * d.out.w;
  ls.node = n;
  ls.regions = regions;
  ls.out_elems = 0;
  for (const core::Region& r : ls.regions) ls.out_elems += r.elems();
  ls.run = ls.regions.size() == 1 && ls.regions[0].kind == core::RegionKind::Run ? Run{ls.regions[0].v[0], ls.regions[0].v[1]}
                                                                               : Run{};
  if (!ls.active()) return;
  int64_t ch0 = std::numeric_limits<int64_t>::max(), ch1 = -1;
  for (const core::Region& r : ls.regions) {
    if (r.kind == core::RegionKind::Box) {
      ch0 = std::min<int64_t>(ch0, r.v[0]);
      ch1 = std::max<int64_t>(ch1, r.v[1] - 1);
    } else {
      ch0 = std::min<int64_t>(ch0, r.v[0] / hw);
      ch1 = std::max<int64_t>(ch1, (r.v[1] - 1) / hw);
    }
  }
  if (core::op_def(node.op)->per_channel_data) {
    ls.oc_base = int32_t(ch0);
    ls.oc_count = int32_t(ch1 - ch0 + 1);
  }
  ls.data_bytes = int64_t(ls.oc_count) * node.bytes_per_channel() + node.shared_bytes();
  ls.macs = 0;
  for (const core::Region& r : ls.regions)
    r.segments(d.out, [&](int32_t b, int32_t e) {
      ls.macs += int64_t(core::range_macs(d, b, e));
      return true;
    });
  ls.inputs.resize(node.inputs.size());
  if (block) return partial_share(q, node, d, *block, ls);
  std::vector<InputRun> tmp;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    ls.inputs[k].tensor = node.inputs[k];
    operand_needs(needs, d, int(k), ls, tmp);
  }
}

// Fused layers (fuse.h): each worker's share of a fused layer read only by
// a fused layer also covers what its reader's share needs, and `owned` keeps
// the tiling. One level: a reader that was widened itself (layers are taken
// last to first) is left to receive its halo, or every layer of a chain
// would recompute a halo that grows by the kernel's reach at each step. A
// layer whose halo would outgrow some worker's share stays as split.
void fuse_layers(const QGraph& q, Plan& p) {
  const size_t N = size_t(p.n_workers());
  for (size_t n = q.nodes.size(); n-- > 0;) {
    const int c = fused_strategy(p.layer_strategy[n]) ? fuse::sole_reader(q, int(n)) : -1;
    if (c < 0 || !fused_strategy(p.layer_strategy[size_t(c)]) || fuse::any_widened(p, c)) continue;
    const core::Dims d = q.desc(int(n)).out;
    std::vector<std::vector<core::Region>> wide(N);
    std::vector<int64_t> own(N), all(N);
    bool grows = false;
    for (size_t w = 0; w < N; ++w) {
      const LayerShare& ls = p.workers[w].layers[n];
      const LayerShare& reader = p.workers[w].layers[size_t(c)];
      own[w] = all[w] = ls.out_elems;
      if (!reader.active()) continue;
      std::vector<InputRun> need;
      for (size_t k = 0; k < reader.inputs.size(); ++k)
        if (q.nodes[size_t(c)].inputs[k] == q.nodes[n].output)
          need.insert(need.end(), reader.inputs[k].runs.begin(), reader.inputs[k].runs.end());
      wide[w] = fuse::widened(d, ls.regions, need);
      if (wide[w].empty()) continue;
      all[w] = 0;
      for (const core::Region& r : wide[w]) all[w] += r.elems();
      grows = true;
    }
    if (!grows || !fuse::worth_it(own, all)) continue;
    NodeNeeds needs(q, int(n));
    for (size_t w = 0; w < N; ++w) {
      if (wide[w].empty()) continue;
      LayerShare& ls = p.workers[w].layers[n];
      std::vector<core::Region> owned = std::move(ls.regions);
      set_share(q, p, int(n), needs, wide[w], nullptr, ls);
      ls.owned = std::move(owned);
    }
  }
}

// Per layer and per worker: traffic, RAM, MACs, data, Kc; distinct inputs
// and fan-out.
void gather_stats(const QGraph& q, Plan& p, Route route, bool distinct_inputs) {
  const size_t N = size_t(p.n_workers());
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const core::LayerDesc& d = q.desc(int(n));
    LayerStats& st = p.layers[n];
    st.node = int(n);
    st.name = q.nodes[n].name;
    for (size_t w = 0; w < N; ++w) {
      const LayerShare& ls = p.workers[w].layers[n];
      if (!ls.active()) continue;
      bool full = false;
      for (size_t k = 0; k < ls.inputs.size(); ++k)
        if (ls.inputs[k].elems == d.in[k].size()) full = true;
      st.workers_active++;
      st.full_input_workers += full ? 1 : 0;
      st.bytes_in += ls.bytes_in();
      st.bytes_out += ls.bytes_out();
      st.max_worker_ram_bytes = std::max(st.max_worker_ram_bytes, ls.ram_bytes);
      st.max_worker_bytes_moved = std::max(st.max_worker_bytes_moved, ls.bytes_in() + ls.bytes_out());
      if (!ls.owned.empty()) {
        int64_t own_macs = 0;
        for (const core::Region& r : ls.owned) {
          st.recomputed -= r.elems();
          r.segments(d.out, [&](int32_t b, int32_t e) {
            own_macs += int64_t(core::range_macs(d, b, e));
            return true;
          });
        }
        st.recomputed += ls.out_elems;
        p.workers[w].recomputed_macs += ls.macs - own_macs;
      }
      WorkerPlan& wp = p.workers[w];
      wp.macs += ls.macs;
      wp.bytes_in += ls.bytes_in();
      wp.bytes_out += ls.bytes_out();
      wp.data_bytes += ls.data_bytes;
    }
    st.bytes_moved = st.bytes_in + st.bytes_out;
    p.total_wire_bytes += st.bytes_moved;
  }
  for (size_t w = 0; w < N; ++w) {
    WorkerPlan& wp = p.workers[w];
    if (route == Route::Direct) {
      // What the board moves (received + sent to anyone) per byte it computes.
      int64_t produced = 0, sent = 0;
      for (const LayerShare& ls : wp.layers) {
        produced += ls.out_elems;
        for (const core::Send& sd : ls.sends) sent += sd.count;
        for (const core::Send& sd : ls.psum.sends) sent += sd.count;
      }
      wp.kc = produced > 0 ? double(wp.bytes_in + sent) / double(produced) : 0.0;
      continue;
    }
    wp.kc = wp.bytes_out > 0 ? double(wp.bytes_in + wp.bytes_out) / double(wp.bytes_out) : 0.0;
  }
  if (!distinct_inputs) return;
  std::vector<int32_t> diff;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) {
      const steps::SweepResult r = steps::count_operand(q, p, int(n), int(k), diff);
      p.layers[n].unique_in += r.unique;
      p.layers[n].max_fanout = std::max(p.layers[n].max_fanout, r.max_fanout);
    }
  }
}

// What build_plan makes: everything (Full), what pricing reads (Priced,
// plan_for_pricing), the shares and the sends board to board (Linked,
// direct_peers_of), or the shares and what each receives and sends to the
// coordinator (Traffic, the rating pass).
enum class Detail : uint8_t { Full, Priced, Linked, Traffic };

// Step 1 of build_plan: every worker's share of every layer and its needs.
// The tiling of a priced or linked plan is not checked here: a plan made
// from the strategy is (Detail::Full), before anything is deployed or
// simulated.
Plan shares_and_needs(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, Route route, Detail detail) {
  Plan p = empty_plan(q, t, shares, strategy, route);
  const size_t N = shares.size();
  std::vector<uint8_t> cover;
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    if (q.shape(node.output).size() > int64_t(std::numeric_limits<int32_t>::max()))
      throw Error("plan: layer '" + node.name + "' has more than 2^31 outputs");
    const std::vector<std::vector<core::Region>> regions = strategy.split_regions(q, int(n), shares);
    if (regions.size() != N) throw Error("plan: strategy '" + strategy.name() + "' returned the wrong number of shares");
    NodeNeeds needs(q, int(n));
    if (detail == Detail::Full) check_tiling(regions, node, needs.desc().out, strategy, cover);
    std::vector<std::pair<int32_t, int32_t>> blocks;
    if (p.layer_strategy[n] == "reduce") blocks = ReduceStrategy::input_blocks(q, int(n), shares);
    for (size_t w = 0; w < N; ++w)
      set_share(q, p, int(n), needs, regions[w], blocks.empty() ? nullptr : &blocks[w], p.workers[w].layers[n]);
  }
  return p;
}

// Step 2 of build_plan on the shares of step 1: fused shares widened, then
// the route pass (`alike`: steps::route_plan).
void route_step(const QGraph& q, Plan& p, Route route, Detail detail, const Plan* alike = nullptr,
                const streams::Choice& stream = streams::Choice()) {
  if (route == Route::Direct) fuse_layers(q, p);
  if (route == Route::Direct && stream.step > 0) {
    std::unique_ptr<NodeNeeds> needs;  // of node `at`, the one being widened (mark goes node by node)
    int at = -1;
    streams::mark(q, p, stream, [&](int n, const std::vector<core::Region>& wide, LayerShare& ls) {
      if (at != n) needs = std::make_unique<NodeNeeds>(q, at = n);
      set_share(q, p, n, *needs, wide, nullptr, ls);
    });
  }
  steps::route_plan(q, p, route, detail == Detail::Full || detail == Detail::Linked, alike);
}

// Steps 3-4 of build_plan: the arena plan, statistics, fragment sizes, the
// routing map if asked, the plan id. A plan that only counts links or
// measures traffic (Linked, Traffic) has all it needs before.
void finish_plan(const QGraph& q, Plan& p, const SplitStrategy& strategy, bool routing, uint32_t mcrc, Route route,
                 Detail detail) {
  if (detail == Detail::Linked || detail == Detail::Traffic) return;
  const bool full = detail == Detail::Full;
  const size_t N = size_t(p.n_workers());
  for (size_t w = 0; w < N; ++w) steps::layout_worker(q, p.workers[w]);
  gather_stats(q, p, route, full);
  if (full)
    for (size_t w = 0; w < N; ++w) p.workers[w].flash_bytes = fragment_bytes(q, p, int(w));
  if (routing) p.routes = build_routing(q, p);
  p.signature = strategy.signature();
  p.model_crc = mcrc;
  p.plan_id = hash_plan(mcrc, p.shares, p.signature, route);
}

Plan build_plan(const QGraph& q, const Testbed& t, const std::vector<double>& shares, const SplitStrategy& strategy,
                bool routing, uint32_t mcrc, Route route, Detail detail = Detail::Full,
                const streams::Choice& stream = streams::Choice()) {
  Plan p = shares_and_needs(q, t, shares, strategy, route, detail);
  route_step(q, p, route, detail, nullptr, stream);
  finish_plan(q, p, strategy, routing, mcrc, route, detail);
  p.plan_id = streams::plan_id(p.plan_id, stream);
  return p;
}

}  // namespace

namespace {

// Marks the layers whose outputs go coded (plan/coding.h) and counts the
// bytes before and after; a plan that codes anything gets an identity of
// its own (its fragments differ from the plain plan's by kEntryCoded).
void set_coding(const QGraph& q, const Testbed& t, const PlanOptions& opt, Plan& p) {
  p.plain_bytes = p.coded_bytes = p.total_wire_bytes;
  if (p.route != Route::Direct) return;
  p.coding = coded_layers(q.nodes.size(), t, opt.cost, opt.coding, opt.code);
  double saved = 0;
  bool any = false;
  for (const WorkerPlan& wp : p.workers)
    for (const LayerShare& ls : wp.layers) {
      const double r = p.coding.coded(size_t(ls.node));
      if (r <= 0) continue;
      for (const core::Send& sd : ls.sends)
        if (sd.peer != core::kPeerCoordinator) saved += double(sd.count) * (1.0 - r), any = true;
    }
  p.coded_bytes = p.plain_bytes - int64_t(saved + 0.5);
  if (!any) return;
  ByteWriter b;
  b.u32(p.plan_id);
  for (Codec c : p.coding.codec) b.u8(uint8_t(c));
  p.plan_id = crc32(b.buf.data(), b.buf.size());
}

}  // namespace

uint32_t plan_hash(const QGraph& q, const std::vector<double>& shares, const std::string& strategy, Route route) {
  return hash_plan(model_crc(q), shares, strategy, route);
}

int64_t fragment_overhead_bytes(const QGraph& q) {
  return int64_t(kFragHeaderBytes) + int64_t(q.nodes.size()) * kFragLayerBytes + 4;
}

Plan plan_with_shares(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, bool routing, Route route) {
  return build_plan(q, t, shares, strategy, routing, model_crc(q), route);
}

Plan plan_for_pricing(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                      const SplitStrategy& strategy, Route route) {
  return build_plan(q, t, shares, strategy, false, 0, route, Detail::Priced);
}

std::vector<size_t> split_firsts(const std::vector<const SplitStrategy*>& strategies) {
  std::vector<size_t> first(strategies.size());
  for (size_t i = 0; i < strategies.size(); ++i) {
    first[i] = i;
    for (size_t o = 0; o < i; ++o)
      if (strategies[o]->split_name() == strategies[i]->split_name()) {
        first[i] = o;
        break;
      }
  }
  return first;
}

std::vector<Plan> plans_for_pricing(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                                    const std::vector<const SplitStrategy*>& strategies, Route route) {
  const size_t S = strategies.size();
  const std::vector<size_t> first = split_firsts(strategies);
  std::vector<size_t> firsts;
  for (size_t i = 0; i < S; ++i)
    if (first[i] == i) firsts.push_back(i);
  std::vector<Plan> out(S);
  for_each_on_every_core(firsts.size(), [&](size_t j) {
    const size_t i = firsts[j];
    out[i] = shares_and_needs(q, t, shares, *strategies[i], route, Detail::Priced);
  });
  for (size_t i = 0; i < S; ++i) {
    if (first[i] == i) continue;
    // The shares of the first, as this strategy names its layers (empty_plan).
    Plan p = empty_plan(q, t, shares, *strategies[i], route);
    for (size_t w = 0; w < p.workers.size(); ++w) p.workers[w].layers = out[first[i]].workers[w].layers;
    out[i] = std::move(p);
  }
  // The first of each split routed, then the others, as it where they split
  // alike; then the rest of every plan.
  for_each_on_every_core(firsts.size(), [&](size_t j) { route_step(q, out[firsts[j]], route, Detail::Priced); });
  std::vector<size_t> others;
  for (size_t i = 0; i < S; ++i)
    if (first[i] != i) others.push_back(i);
  for_each_on_every_core(others.size(), [&](size_t j) {
    const size_t i = others[j];
    route_step(q, out[i], route, Detail::Priced, &out[first[i]]);
  });
  for_each_on_every_core(S, [&](size_t i) { finish_plan(q, out[i], *strategies[i], false, 0, route, Detail::Priced); });
  return out;
}

std::vector<std::array<int, 2>> direct_peers_of(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                                                const SplitStrategy& strategy, Route route) {
  return direct_peers(build_plan(q, t, shares, strategy, false, 0, route, Detail::Linked));
}

void check_budgets(const QGraph& q, const Plan& p, const Testbed& t) {
  for (int w = 0; w < p.n_workers(); ++w) {
    const WorkerPlan& wp = p.workers[size_t(w)];
    const Board& b = t.boards.at(size_t(w));
    if (wp.peak_ram_bytes > b.ram_bytes) {
      const std::string layer = wp.peak_layer >= 0 ? q.nodes[size_t(wp.peak_layer)].name : "(none)";
      throw RamBudgetError("board " + std::to_string(b.id) + ": layer '" + layer + "' needs " +
                  std::to_string(wp.peak_ram_bytes) + " bytes of RAM (" +
                  std::to_string(wp.peak_ram_bytes - int64_t(core::kWorkerFixedArena)) + " inputs+output + " +
                  std::to_string(core::kWorkerFixedArena) + " fixed), budget is " + std::to_string(b.ram_bytes) +
                  " bytes");
    }
    if (wp.flash_bytes > b.flash_bytes)
      throw Error("board " + std::to_string(b.id) + ": fragment needs " + std::to_string(wp.flash_bytes) +
                  " bytes of flash, budget is " + std::to_string(b.flash_bytes) + " bytes");
  }
  const LinkLoad l = links_over_limit(p, t);
  if (l.board >= 0)
    throw Error("board " + std::to_string(t.boards.at(size_t(l.board)).id) + ": the direct route needs " +
                std::to_string(l.links) +
                " links on it (coordinator, boards it sends to, boards that send to it), the board holds at most " +
                std::to_string(l.limit) + " (testbed key \"links\")");
}

std::vector<std::array<int, 2>> direct_peers(const Plan& p) {
  const size_t N = size_t(p.n_workers());
  std::vector<std::array<int, 2>> out(N, {0, 0});
  if (p.route != Route::Direct) return out;
  std::vector<std::vector<uint8_t>> talks(N, std::vector<uint8_t>(N, 0));  // [from][to]
  for (size_t w = 0; w < N; ++w)
    for (const LayerShare& ls : p.workers[w].layers)
      for (const auto* v : {&ls.sends, &ls.psum.sends})
        for (const core::Send& s : *v)
          if (s.peer != core::kPeerCoordinator && size_t(s.peer) < N) talks[w][s.peer] = 1;
  for (size_t w = 0; w < N; ++w)
    for (size_t v = 0; v < N; ++v) {
      out[w][0] += talks[v][w];
      out[w][1] += talks[w][v];
    }
  return out;
}

std::vector<int> direct_links(const Plan& p) {
  std::vector<int> out;
  for (const auto& io : direct_peers(p)) out.push_back(p.route == Route::Direct ? 1 + io[0] + io[1] : 0);
  return out;
}

LinkLoad links_over_limit(const Plan& p, const Testbed& t) {
  const std::vector<int> links = direct_links(p);
  for (size_t w = 0; w < links.size(); ++w) {
    const int limit = board_links(t.boards.at(w));
    if (links[w] > limit) return {int(w), links[w], limit};
  }
  return {};
}

namespace {

// 1 for each board that takes a share, 0 for those PlanOptions::boards_used
// leaves idle.
std::vector<double> boards_taking_shares(const Testbed& t, const PlanOptions& opt) {
  const size_t N = t.boards.size();
  std::vector<double> used(N, 1.0);
  if (opt.boards_used <= 0 || size_t(opt.boards_used) >= N) return used;
  const std::vector<double> speed = compute_ratings(t, Allocation::Rating, opt.k1);
  std::vector<size_t> order(N);
  for (size_t w = 0; w < N; ++w) order[w] = w;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return speed[a] > speed[b]; });
  for (size_t i = size_t(opt.boards_used); i < N; ++i) used[order[i]] = 0.0;
  return used;
}

// out_of_links: if given, `auto` on the direct route may give up as soon as
// no choice of its candidates keeps every board within its links; then it
// says why there and the plan returned is empty.
Plan plan_on_route(const QGraph& q, const Testbed& t, const PlanOptions& opt, std::string* out_of_links = nullptr) {
  if (t.boards.empty()) throw Error("plan: the testbed has no boards");
  validate_testbed(t, "testbed");
  if (q.nodes.empty()) throw Error("plan: the model has no layers");
  const size_t N = t.boards.size();
  const uint32_t mcrc = model_crc(q);
  const bool is_auto = opt.strategy == "auto";
  // For `auto`, the rating pass below splits evenly by spatial bands (the
  // usual winner); the strategies themselves are chosen once the ratings are known.
  std::unique_ptr<SplitStrategy> strategy = make_strategy(is_auto ? "spatial" : opt.strategy);

  // 1. Ratings (0 for the boards left idle, PlanOptions::boards_used).
  const std::vector<double> used = boards_taking_shares(t, opt);
  std::vector<double> ratings;
  if (opt.alloc == Allocation::Rating) {
    // Kc from the plan itself: split evenly once, measure each worker's
    // traffic per byte of output, then rate with eq. 5.
    const Plan pre = build_plan(q, t, used, *strategy, false, mcrc, opt.route, Detail::Traffic);
    // Per byte of output *computed*: in the relay every output goes out, so
    // this is the paper's figure; with the direct route most outputs stay on
    // the board, and dividing by the few that leave it would make Kc huge.
    std::vector<double> kc(N, kDefaultKc);
    for (size_t w = 0; w < N; ++w) {
      int64_t computed = 0, moved = 0;
      for (const LayerShare& ls : pre.workers[w].layers) {
        computed += ls.out_elems;
        moved += ls.bytes_in() + ls.bytes_out();
      }
      if (computed > 0 && moved > 0) kc[w] = kc_from_traffic(double(moved), double(computed));
    }
    ratings = compute_ratings(t, Allocation::Rating, opt.k1, kc, k1_scales(q, t, opt.cost));
  } else {
    ratings = compute_ratings(t, opt.alloc, opt.k1);
  }
  for (size_t w = 0; w < N; ++w) ratings[w] *= used[w];
  bool link_bound = false;
  if (is_auto) {
    const AutoChoice choice = choose_strategies(q, t, ratings, opt.route, opt.cost, out_of_links != nullptr);
    if (!choice.out_of_links.empty()) {
      *out_of_links = choice.out_of_links;
      return Plan{};
    }
    link_bound = choice.link_bound;
    strategy = std::make_unique<MixedStrategy>(choice.per_node);
  }

  // 2-3. Storage-aware allocation against flash, refined by real fragment sizes.
  const int64_t model_bytes = std::max<int64_t>(1, q.weight_bytes());
  const int64_t overhead = fragment_overhead_bytes(q);
  std::vector<int64_t> storage(N);
  int64_t flash_total = 0, storage_total = 0;
  for (size_t w = 0; w < N; ++w) {
    storage[w] = std::max<int64_t>(0, t.boards[w].flash_bytes - overhead);
    flash_total += t.boards[w].flash_bytes;
    storage_total += storage[w];
  }
  if (storage_total < model_bytes)
    throw Error("plan: the model needs " + std::to_string(model_bytes) + " bytes of flash for its data but the boards have " +
                std::to_string(storage_total) + " available (" + std::to_string(flash_total) + " bytes of flash minus " +
                std::to_string(overhead) + " bytes of fragment overhead per board)");
  // Eq. 6-7 on whole fragments: each candidate split is measured with the
  // fragment writer's size (WorkerPlan::flash_bytes = fragment_bytes()).
  Plan p;
  std::vector<int64_t> flash(N);
  for (size_t w = 0; w < N; ++w) flash[w] = t.boards[w].flash_bytes;
  // Streamed chains (plan/streams.h): always, never, or when a board's RAM
  // holds the plan only so (the first step that fits).
  const bool direct = opt.route == Route::Direct;
  streams::Choice stream;
  if (direct && opt.stream == Streaming::On) stream.step = streams::kSteps[0];
  FittedStorage fit;
  const auto fit_plan = [&] {
    fit = fit_storage(ratings, flash, model_bytes, overhead, [&](const std::vector<double>& shares) {
      p = build_plan(q, t, shares, *strategy, false, mcrc, opt.route, Detail::Full, stream);
      std::vector<int64_t> sizes(N);
      for (size_t w = 0; w < N; ++w) sizes[w] = p.workers[w].flash_bytes;
      return sizes;
    });
    if (p.shares != fit.alloc.ratings)
      p = build_plan(q, t, fit.alloc.ratings, *strategy, false, mcrc, opt.route, Detail::Full, stream);
  };
  const auto over_ram = [&] {
    for (size_t w = 0; w < N; ++w)
      if (p.workers[w].peak_ram_bytes > t.boards[w].ram_bytes) return true;
    return false;
  };
  fit_plan();
  if (direct && opt.stream == Streaming::Auto && over_ram())
    for (const streams::Choice& c : streams::auto_choices(p, t)) {
      stream = c;
      fit_plan();
      if (!over_ram()) break;
    }
  p.alloc = opt.alloc;
  p.link_bound = link_bound;
  p.flash_rounds = fit.measurements - 1;
  p.ratings = ratings;
  for (size_t w = 0; w < N; ++w) p.workers[w].rating = ratings[w];

  set_coding(q, t, opt, p);
  p.est_layer_s = estimate_layer_seconds(q, p, t, opt.cost);
  p.est_latency_s = 0;
  for (double v : p.est_layer_s) p.est_latency_s += v;

  // 4. Budgets, then the routing map of the accepted plan.
  if (opt.check_budgets) check_budgets(q, p, t);
  if (opt.routing) p.routes = build_routing(q, p);
  return p;
}

}  // namespace

static_assert(kHostBoardLinks == core::kMaxLinks, "a host board holds core::kMaxLinks links");

namespace {

// p, a plan on t's first boards alone, as the plan on all of t with the
// others idle: what plan_on_route makes with PlanOptions::boards_used set to
// p's board count when those are the boards it picks. An idle board takes no
// share, sends and receives nothing, and holds a fragment without layers;
// the fragments, the plan id, the coding and the estimate are made again for
// the whole testbed.
Plan widened(const QGraph& q, Plan p, const Testbed& t, const PlanOptions& opt) {
  const size_t k = p.workers.size(), N = t.boards.size();
  p.ratings.resize(N, 0.0);
  p.shares.resize(N, 0.0);
  p.workers.resize(N);
  for (size_t w = k; w < N; ++w) {
    WorkerPlan& wp = p.workers[w];
    wp.board = t.boards[w].id;
    wp.layers.resize(q.nodes.size());
    for (size_t n = 0; n < wp.layers.size(); ++n) wp.layers[n].node = wp.layers[n].out_until = int(n);
    steps::layout_worker(q, wp);
  }
  p.plan_id = hash_plan(p.model_crc, p.shares, p.signature, p.route);
  // A fragment's size does not depend on the board count or the plan id
  // (fixed-size fields): the first boards' sizes stand.
  for (size_t w = k; w < N; ++w) p.workers[w].flash_bytes = fragment_bytes(q, p, int(w));
  set_coding(q, t, opt, p);
  p.est_layer_s = estimate_layer_seconds(q, p, t, opt.cost);
  p.est_latency_s = 0;
  for (double v : p.est_layer_s) p.est_latency_s += v;
  return p;
}

// The direct plan on the k boards that boards_taking_shares picks, the others
// idle; planned on those boards alone (and kept in opt.first_boards) when
// they are the first k.
Plan plan_on_fewer(const QGraph& q, const Testbed& t, PlanOptions opt, int k) {
  opt.boards_used = k;
  const std::vector<double> used = boards_taking_shares(t, opt);
  for (int w = 0; w < k; ++w)
    if (used[size_t(w)] == 0) return plan_on_route(q, t, opt);
  Testbed first = t;
  first.boards.resize(size_t(k));
  opt.boards_used = 0;
  std::shared_ptr<const Plan> p = opt.first_boards ? opt.first_boards->find(first.boards) : nullptr;
  if (!p) {
    p = std::make_shared<const Plan>(plan_on_route(q, first, opt));
    if (opt.first_boards) opt.first_boards->keep(first.boards, p);
  }
  return widened(q, *p, t, opt);
}

// The most boards that every direct plan keeps within their links: each
// hears from and sends to every other, plus the coordinator.
int boards_within_links(const Testbed& t) {
  int least = std::numeric_limits<int>::max();
  for (const Board& b : t.boards) least = std::min(least, board_links(b));
  return (least - 1) / 2 + 1;
}

// Boards are left idle only for a plan estimated at most this fraction of the
// best plan on all of them: the estimate is a model, and a board left idle
// is one the user gave.
constexpr double kIdleMargin = 0.9;

// Weighs the direct plans past the boards' links: `within`, the direct plan
// on all the boards within their links, slower than the choice the links
// ruled out (null if there is none: why), against the relay route on all the
// boards and the direct route on fewer (as many as every direct plan keeps
// within their links, or a power of two above or below that whose plan
// does; the others left idle; kIdleMargin), and takes the one the
// cost model estimates fastest of those that fit the boards' budgets
// (`within`'s budgets are checked once it is taken, as before). The relay
// route is planned only if relay_floor_s leaves it a chance.
Plan weigh_routes(const QGraph& q, const Testbed& t, const PlanOptions& opt, std::unique_ptr<Plan> within,
                  const std::string& why) {
  const size_t N = t.boards.size();
  PlanOptions o = opt;
  o.check_budgets = o.routing = false;
  const auto try_plan = [&](const std::function<Plan()>& make, std::exception_ptr* error) -> std::unique_ptr<Plan> {
    try {
      auto p = std::make_unique<Plan>(make());
      if (p->route == Route::Direct && links_over_limit(*p, t).board >= 0) return nullptr;
      if (opt.check_budgets) check_budgets(q, *p, t);
      return p;
    } catch (const Error&) {
      if (error) *error = std::current_exception();
      return nullptr;
    }
  };
  const auto est = [](const std::unique_ptr<Plan>& p) {
    return p ? p->est_latency_s : std::numeric_limits<double>::infinity();
  };
  // On fewer boards: as many as every direct plan keeps within the links
  // (each sends to every other), then the powers of two above that, whose
  // plans keep within them if `auto` finds strategies that do (bands talk to
  // their neighbours only), while each is within the links and faster than
  // the best so far: more boards past that only add talk (and planning them
  // costs seconds at hundreds of boards). Until one fits, more are tried.
  // And the powers of two below, downwards while each is faster by the idle
  // margin (only when none above was): every board pays its CPU outside the
  // kernels per layer and per piece whatever its share, so past some count
  // more boards only add that and their talk; but each step leaves more of
  // the user's boards idle, on the word of an estimate.
  const int within_k = boards_within_links(t);
  int k = within_k;
  std::unique_ptr<Plan> some;
  if (k >= 1 && size_t(k) < N) some = try_plan([&] { return plan_on_fewer(q, t, o, k); }, nullptr);
  const auto search = [&](int m, bool up) {
    for (; m >= 1 && size_t(m) < N; m = up ? m * 2 : m / 2) {
      std::unique_ptr<Plan> other = try_plan([&] { return plan_on_fewer(q, t, o, m); }, nullptr);
      if (est(other) < (up ? 1.0 : kIdleMargin) * est(some)) {
        some = std::move(other);
        k = m;
      } else if (some) {
        break;
      }
    }
  };
  if (k >= 1) search(int(std::bit_ceil(unsigned(k + 1))), true);
  if (some && k == within_k && k >= 2) search(int(std::bit_floor(unsigned(k - 1))), false);
  // The relay route is planned only when it could change the choice below:
  // no plan on it is faster than relay_floor_s, so it is not planned when
  // the direct plan within the links is as fast as that floor (the relay
  // route cannot beat it, and the plan on fewer boards is weighed against
  // it alone), nor when the plan on fewer boards beats the floor by the
  // margin.
  const double relay_floor = relay_floor_s(q, opt.cost);
  std::exception_ptr relay_error;
  std::unique_ptr<Plan> relay;
  const bool relay_planned = !((within && relay_floor >= est(within)) ||
                               est(some) < kIdleMargin * std::min(est(within), relay_floor));
  if (relay_planned) {
    o.route = Route::Relay;
    relay = try_plan([&] { return plan_on_route(q, t, o); }, &relay_error);
  }
  if (!within && !relay && !some) std::rethrow_exception(relay_error);
  const auto secs = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f s", v);
    return std::string(b);
  };
  const std::string all = std::to_string(N);
  std::unique_ptr<Plan> best;
  if (est(some) < kIdleMargin * std::min(est(within), est(relay))) {
    const std::string relay_text =
        !relay_planned ? ", the relay route on all " + all + " at " + secs(relay_floor) + " or more (not planned)"
        : relay        ? ", the relay route on all " + all + " at " + secs(relay->est_latency_s)
                       : "; the relay route does not fit the boards";
    some->route_note = "planned on the direct route on " + std::to_string(k) + " of the " + all +
                       " boards (the others take no share): " +
                       (within ? "within the links of all " + all + " the direct route is estimated at " +
                                     secs(within->est_latency_s)
                               : "on all " + all + ", " + why) +
                       "; this plan is estimated at " + secs(some->est_latency_s) + relay_text;
    best = std::move(some);
  } else if (within && !(est(relay) < est(within))) {
    best = std::move(within);
    if (opt.check_budgets) check_budgets(q, *best, t);
  } else {
    relay->route_note = "planned on the relay route: " +
                        (within ? "within the boards' links the direct route is estimated at " +
                                      secs(within->est_latency_s) + ", the relay route at " + secs(relay->est_latency_s)
                                : why);
    best = std::move(relay);
  }
  if (opt.routing) best->routes = build_routing(q, *best);
  return std::move(*best);
}

// The direct plan within the links does not fit a board's RAM (`direct`):
// each board keeps the tensors its later layers read from it, where on the
// relay route the coordinator holds them. The relay plan if it fits, else
// the direct plan's refusal.
Plan relay_if_it_fits(const QGraph& q, const Testbed& t, const PlanOptions& opt, const RamBudgetError& direct) {
  PlanOptions o = opt;
  o.route = Route::Relay;
  Plan r;
  try {
    r = plan_on_route(q, t, o);  // its budgets checked (opt.check_budgets)
  } catch (const Error&) {
    throw direct;
  }
  r.route_note = std::string("planned on the relay route: on the direct route ") + direct.what();
  return r;
}

}  // namespace

Plan make_plan(const QGraph& q, const Testbed& t, const PlanOptions& opt) {
  if (opt.route != Route::Direct || !opt.route_fallback) return plan_on_route(q, t, opt);
  PlanOptions direct = opt;
  direct.check_budgets = false;
  direct.routing = false;
  std::string out_of_links;
  Plan p = plan_on_route(q, t, direct, &out_of_links);
  if (!out_of_links.empty()) return weigh_routes(q, t, opt, nullptr, out_of_links);
  const LinkLoad l = links_over_limit(p, t);
  if (l.board < 0) {
    // Within the boards' links `auto` may have had to give up its cheapest
    // choice: then the other routes are weighed too.
    if (p.link_bound) return weigh_routes(q, t, opt, std::make_unique<Plan>(std::move(p)), "");
    if (opt.check_budgets) {
      try {
        check_budgets(q, p, t);
      } catch (const RamBudgetError& e) {
        return relay_if_it_fits(q, t, opt, e);
      }
    }
    if (opt.routing) p.routes = build_routing(q, p);
    return p;
  }
  if (direct_only(opt.strategy))
    throw Error("plan: strategy '" + opt.strategy + "' needs the direct route, which needs " + std::to_string(l.links) +
                " links on board " + std::to_string(t.boards.at(size_t(l.board)).id) + "; it holds at most " +
                std::to_string(l.limit) + " (testbed key \"links\"); use fewer boards or another strategy");
  return weigh_routes(q, t, opt, nullptr,
                      "the direct route needs " + std::to_string(l.links) + " links on board " +
                          std::to_string(t.boards.at(size_t(l.board)).id) + ", which holds at most " +
                          std::to_string(l.limit));
}

std::shared_ptr<const Plan> FirstBoardsMemo::find(const std::vector<Board>& boards) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [b, p] : kept_)
    if (b == boards) return p;
  return nullptr;
}

void FirstBoardsMemo::keep(const std::vector<Board>& boards, std::shared_ptr<const Plan> p) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& kept : kept_)
    if (kept.first == boards) return;
  kept_.emplace_back(boards, std::move(p));
}

int64_t WorkerPlan::computing_ram_bytes(size_t node) const {
  const LayerShare& ls = layers[node];
  return ls.active() ? int64_t(core::kWorkerFixedArena) + ls.ram_bytes : 0;
}

int64_t WorkerPlan::computing_peak_ram_bytes() const {
  int64_t peak = 0;
  for (size_t n = 0; n < layers.size(); ++n) peak = std::max(peak, computing_ram_bytes(n));
  return peak;
}

}  // namespace ts::plan
