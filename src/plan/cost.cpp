// `auto`'s choice of a strategy per block (cost.h), priced as the cost
// model's estimate prices a plan (traffic.h, estimate.cpp).
#include "plan/cost.h"
#include "plan/ratings.h"
#include "util/parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>

#include "core/op.h"
#include "plan/board_kind.h"
#include "plan/frames.h"
#include "plan/fuse.h"
#include "plan/link_count.h"
#include "plan/plan.h"
#include "plan/plan_steps.h"
#include "plan/traffic.h"

namespace ts::plan {

using namespace price;

std::vector<int> graph_blocks(const QGraph& q) {
  const int N = int(q.nodes.size());
  // cut[i]: a block may start at node i.
  std::vector<uint8_t> cut(size_t(N) + 1, 1);
  for (int n = 0; n < N; ++n)
    for (int tensor : q.nodes[size_t(n)].inputs) {
      const int m = q.tensors[size_t(tensor)].producer;
      if (m < 0) continue;
      // An edge m -> n crosses every cut i with m < i <= n; allowed only at i = m + 1.
      for (int i = m + 2; i <= n; ++i) cut[size_t(i)] = 0;
    }
  std::vector<int> block(size_t(N), 0);
  int b = 0;
  for (int n = 0; n < N; ++n) {
    if (n > 0 && cut[size_t(n)]) ++b;
    block[size_t(n)] = b;
  }
  return block;
}

namespace {

// `auto`'s candidates: the strategies with a letter in plan/strategy.h's
// kStrategies, numbered in its order.
constexpr int kS = num_layer_choices();
// The seconds of a transfer priced only as far as showing that it needs more
// links than a board holds (Chooser::stop_at_over_links).
constexpr double kUnpriced = std::numeric_limits<double>::infinity();
// `reduce` (input channels, partial sums board to board) is a candidate on
// the direct route only; elsewhere its plan is the channel plan, never allowed.
constexpr int kChannel = layer_choice("channel");
constexpr int kWhole = layer_choice("whole");
constexpr int kReduce = layer_choice("reduce");
constexpr int kFused = layer_choice("fused");
constexpr int kFusedRows = layer_choice("fused-rows");
static_assert(kChannel >= 0 && kWhole >= 0 && kReduce >= 0 && kFused >= 0 && kFusedRows >= 0,
              "auto weighs channel, whole, reduce, fused and fused-rows");

// The plan a candidate is priced with: `reduce`, `fused` and `fused-rows`
// are direct-route strategies; on the relay route they are the channel,
// spatial and rows splits (and never allowed).
const char* candidate_name(int s, Route route) {
  if (route != Route::Direct && s == kReduce) return "channel";
  if (route != Route::Direct && s == kFused) return "spatial";
  if (route != Route::Direct && s == kFusedRows) return "rows";
  return layer_choice_info(s).name;
}

// Wire bytes of one producer's pieces for one board, gathered into frames in
// the order the route pass sends them: by length, then offset (pieces of
// one length come in offset order, so often sorted already).
double gathered_bytes(std::vector<Piece>& pieces) {
  const auto by_length = [](const Piece& a, const Piece& b) {
    return a.count != b.count ? a.count < b.count : a.offset < b.offset;
  };
  if (!std::is_sorted(pieces.begin(), pieces.end(), by_length)) std::sort(pieces.begin(), pieces.end(), by_length);
  return double(count_gathered(pieces.data(), pieces.size()).wire_bytes);
}

// Pieces a board receives, binned by producer board; only the bins in use
// are visited (a board of a large swarm hears from a few).
class PieceBins {
 public:
  explicit PieceBins(size_t boards) : bins_(boards) {}
  void add(int32_t f, Piece p) {
    std::vector<Piece>& b = bins_[size_t(f)];
    if (b.empty()) used_.push_back(size_t(f));
    b.push_back(p);
  }
  // The producers with pieces, in board order.
  const std::vector<size_t>& used() {
    std::sort(used_.begin(), used_.end());
    return used_;
  }
  std::vector<Piece>& of(size_t f) { return bins_[f]; }
  void clear() {
    for (size_t f : used_) bins_[f].clear();
    used_.clear();
  }

 private:
  std::vector<std::vector<Piece>> bins_;
  std::vector<size_t> used_;
};

class Chooser {
 public:
  Chooser(const QGraph& q, const Testbed& t, const std::vector<double>& shares, Route route, const CostModel& m)
      : q_(q), t_(t), route_(route), m_(m), N_(shares.size()) {
    for (const Board& b : t.boards) {
      holds_.push_back(board_links(b));
      proto_.push_back(m.type_protocol(board_type(b)));
      any_proto_ = any_proto_ || !proto_.back().zero();
    }
    // The candidates' plans are independent of each other: made side by
    // side on the machine's cores (the first failure in candidate order is
    // the one thrown, as one after the other). A candidate whose plan is
    // another's on this route (reduce and fused on the relay) is priced as
    // that one: same_[s] is the first of them.
    std::vector<size_t> distinct;
    for (int s = 0; s < kS; ++s) {
      same_[size_t(s)] = s;
      for (int o = 0; o < s; ++o)
        if (std::string_view(candidate_name(o, route)) == candidate_name(s, route)) {
          same_[size_t(s)] = o;
          break;
        }
      if (same_[size_t(s)] == s) distinct.push_back(size_t(s));
    }
    std::vector<std::unique_ptr<SplitStrategy>> made;
    std::vector<const SplitStrategy*> strategies;
    for (size_t s : distinct) {
      made.push_back(make_strategy(candidate_name(int(s), route)));
      strategies.push_back(made.back().get());
    }
    const std::vector<size_t> firsts = split_firsts(strategies);
    for (size_t i = 0; i < distinct.size(); ++i) split_first_[distinct[i]] = int(distinct[firsts[i]]);
    std::vector<Plan> plans = plans_for_pricing(q, t, shares, strategies, route);
    for (size_t i = 0; i < distinct.size(); ++i) plans_[distinct[i]] = std::move(plans[i]);
    owners_.resize(kS);
    for (auto& o : owners_) o.resize(q.nodes.size());
    costs_.resize(q.nodes.size() * size_t(kS));
    alike_.assign(q.nodes.size() * size_t(kS), -1);
  }

  // The candidate that splits as s does and is priced before it (plans_for_pricing
  // made s's shares from its): s itself if none. Candidates echoing another
  // are priced after the others (BlockProgramme::price_blocks), so that they
  // can take its figures (node_s).
  int split_first(int s) const { return split_first_[size_t(same_[size_t(s)])]; }

  const Plan& plan(int s) const { return plans_[size_t(same_[size_t(s)])]; }
  // While set (direct route): a transfer is priced only as far as it takes
  // to show that it needs more links on some board than the board holds; its
  // seconds are then kUnpriced, and it is priced in full once this is unset.
  // Set between pricing passes, never during one.
  void stop_at_over_links(bool stop) { stop_over_ = stop; }
  // The candidate whose plan candidate s is priced with (itself, or the
  // first with the same plan on this route).
  int same(int s) const { return same_[size_t(s)]; }
  // Frees the owner maps of nodes from `node` on (blocks are priced last
  // to first, and a block's operands from outside it come from the node
  // before it).
  void forget_owners_from(int node) {
    for (auto& per_node : owners_)
      for (size_t m = size_t(std::max(node, 0)); m < per_node.size(); ++m) per_node[m].reset();
  }

  // Seconds of node n under strategy s, its operands made under the
  // strategies prod(k) (-1 for operands from the coordinator). Each part
  // is priced once and kept (the same (n, s) is asked for under every
  // strategy of the block before; only operands from outside the block
  // differ), and summed in one order, so the figure is the same whoever
  // asks first.
  //
  // Calls for different strategies s may run side by side once the block's
  // owner maps are made (prepare_block): each touches only its own (n, s)
  // entries and candidate caches.
  //
  // need[w] (one entry per board) is raised to the links the node's
  // transfers each need on board w (direct route only).
  template <class ProdStrategy>
  double node_s(int n, int s, ProdStrategy&& prod, PeerMost* need) {
    s = same_[size_t(s)];
    NodeCost& c = node_cost(n, s);
    if (route_ == Route::Relay) return c.compute;
    const QNode& node = q_.nodes[size_t(n)];
    double total = c.compute;
    raise_needs(c.partial_sums_links, need);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const bool from_coordinator = q_.tensors[size_t(node.inputs[k])].producer < 0;
      const int p = from_coordinator ? 0 : same_[size_t(prod(int(k)))];
      const size_t at = k * size_t(kS) + size_t(p);
      double& v = c.operand[at];
      if (std::isnan(v) || (v == kUnpriced && !stop_over_))
        if (!echo(n, s, k, p, &v, &c.operand_links[at])) v = operand_s(n, s, k, p, &c.operand_links[at]);
      raise_needs(c.operand_links[at], need);
      total += v;
    }
    total += c.partial_sums;
    if (node.output == q_.output) total += c.result;
    return total;
  }

  // RAM: true if strategy s keeps every board of node n within its budget.
  bool fits_ram(int n, int s) const {
    for (size_t w = 0; w < N_; ++w)
      if (int64_t(core::kWorkerFixedArena) + plan(s).workers[w].layers[size_t(n)].ram_bytes >
          t_.boards[w].ram_bytes)
        return false;
    return true;
  }
  int64_t ram_over(int n, int s) const {
    int64_t over = 0;
    for (size_t w = 0; w < N_; ++w)
      over = std::max(over, int64_t(core::kWorkerFixedArena) + plan(s).workers[w].layers[size_t(n)].ram_bytes -
                                t_.boards[w].ram_bytes);
    return over;
  }
  int64_t data(int n, int s, size_t w) const { return plan(s).workers[w].layers[size_t(n)].data_bytes; }

  // Makes the owner maps nodes first..last read their operands from, under
  // every candidate (side by side), so that node_s can then be asked for
  // several strategies at once.
  void prepare_block(int first, int last) {
    if (route_ == Route::Relay) return;
    std::vector<std::pair<int, int>> need;  // (candidate, producer node)
    for (int n = first; n <= last; ++n)
      for (int32_t tensor : q_.nodes[size_t(n)].inputs) {
        const int m = q_.tensors[size_t(tensor)].producer;
        if (m < 0) continue;
        for (int s = 0; s < kS; ++s) {
          auto& mine = owners_[size_t(s)][size_t(m)];
          if (same_[size_t(s)] != s || mine) continue;
          // A candidate before it that splits m alike (spatial and fused
          // where m is not widened, spatial and channel on small maps) has
          // the same map.
          for (int o = 0; o < s && !mine; ++o)
            if (same_[size_t(o)] == o && owners_[size_t(o)][size_t(m)] && splits_alike(o, s, m))
              mine = owners_[size_t(o)][size_t(m)];
          if (mine) continue;
          mine = std::make_shared<steps::Owners>();
          need.emplace_back(s, m);
        }
      }
    for_each_on_every_core(need.size(), [&](size_t i) {
      owners_[size_t(need[i].first)][size_t(need[i].second)]->build(q_, plans_[size_t(need[i].first)], need[i].second);
    });
  }

 private:
  const std::vector<LayerTraffic>& traffic(int s) {
    auto& slot = traffic_[size_t(s)];
    if (slot.empty()) slot = plan_traffic(q_, plans_[size_t(s)]);
    return slot;
  }
  // The parts of node n's seconds under strategy s that do not depend on
  // its operands' strategies (on the relay route: all of it), and its
  // operands' transfer seconds by operand and producing strategy (NaN: not
  // priced yet).
  struct NodeCost {
    bool made = false;
    double compute = 0, partial_sums = 0, result = 0;
    LinkNeeds partial_sums_links;      // the links the partial sums need
    std::vector<double> operand;
    std::vector<LinkNeeds> operand_links;  // by operand and producing strategy, as `operand`
  };
  NodeCost& node_cost(int n, int s) {
    NodeCost& c = costs_[size_t(n) * size_t(kS) + size_t(s)];
    if (c.made) return c;
    c.made = true;
    const Plan& pc = plans_[size_t(s)];
    if (route_ == Route::Relay) {
      c.compute = layer_s(q_, pc, t_, m_, n, traffic(s)[size_t(n)]);
      return c;
    }
    c.compute = compute_s(q_, pc, t_, m_, n);
    c.operand.assign(q_.nodes[size_t(n)].inputs.size() * size_t(kS), std::numeric_limits<double>::quiet_NaN());
    c.operand_links.assign(c.operand.size(), LinkNeeds{});
    // Partial sums to the owners of the output blocks (reduced layers).
    Traffic ps(N_);
    PeerCount links(N_);
    std::vector<uint32_t> peers;
    for (size_t w = 0; w < N_; ++w) {
      const LayerShare& ls = pc.workers[w].layers[size_t(n)];
      add_partial_sums(ls, int(w), &ps);
      peers.clear();
      for (const core::Send& sd : ls.psum.sends)
        if (sd.peer != core::kPeerCoordinator && size_t(sd.peer) != w) peers.push_back(sd.peer);
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      links.sends(w, peers.size());
      for (uint32_t v : peers) links.hears(v, 1);
    }
    c.partial_sums = step_s(ps, t_, m_);
    c.partial_sums_links = links.needs();
    // The graph's output goes to the coordinator.
    if (q_.nodes[size_t(n)].output == q_.output) c.result = step_s(traffic(s)[size_t(n)].result, t_, m_);
    return c;
  }
  // Operand k of node n under s, made under p, priced as its split-first
  // candidate o priced it (o's figure and links into *v, *links): when n is
  // split alike under both (the same runs are read), the operand comes from
  // the same owner map, and neither reader keeps what it computed itself
  // (fused halos). False if that does not hold or o has not priced it.
  bool echo(int n, int s, size_t k, int p, double* v, LinkNeeds* links) {
    const int o = split_first_[size_t(s)];
    if (o == s) return false;
    int8_t& alike = alike_[size_t(n) * size_t(kS) + size_t(s)];
    if (alike < 0) alike = splits_alike(o, s, n) ? 1 : 0;
    if (!alike) return false;
    const int m = q_.tensors[size_t(q_.nodes[size_t(n)].inputs[k])].producer;
    int po = p;
    if (m >= 0) {
      if (s == p && computed(p, m).any()) return false;
      po = p == s ? o : p;
      if (po == o && fuse::any_widened(plans_[size_t(o)], m)) return false;
      if (!owners_[size_t(po)][size_t(m)] || owners_[size_t(po)][size_t(m)] != owners_[size_t(p)][size_t(m)]) return false;
    }
    const NodeCost& e = costs_[size_t(n) * size_t(kS) + size_t(o)];
    if (!e.made || e.operand.empty()) return false;
    const size_t at = k * size_t(kS) + size_t(po);
    const double ev = e.operand[at];
    if (std::isnan(ev) || (ev == kUnpriced && !stop_over_)) return false;
    *v = ev;
    *links = e.operand_links[at];
    return true;
  }

  // Seconds of operand k of node n under strategy s, made under strategy
  // `prod` (ignored when the coordinator sends it).
  // *need: the links this transfer needs (PeerCount).
  double operand_s(int n, int s, size_t k, int prod, LinkNeeds* need) {
    const Plan& pc = plans_[size_t(s)];
    const QNode& node = q_.nodes[size_t(n)];
    const int mnode = q_.tensors[size_t(node.inputs[k])].producer;
    Traffic tr(N_);
    PieceBins from_board(N_);
    // Wire bytes from each producer board for the input runs last priced
    // (-1: none): boards that need the same runs (an all-gather: every
    // board the whole tensor) receive the same pieces from every board but
    // themselves, and are priced once.
    // Every figure here is a whole number of bytes, so sums are exact in
    // any order: a producer's bytes to a group of such boards are added
    // once, times the group's size (flush).
    std::vector<double> bytes_from(N_, -1.0);
    std::vector<size_t> producers, group;  // f with bytes_from[f] >= 0; the boards of the priced runs
    std::vector<uint8_t> in_group(N_, 0);
    double bytes_all = 0;
    PeerCount links(N_, stop_over_ ? &holds_ : nullptr);
    // The boards' CPU for the pieces (TransferCpu: the plans priced here have
    // no send records or received runs): the pieces and elements each
    // producer sends a board of the group (as bytes_from), all of them.
    TransferCpu cpu(t_, any_proto_ ? &proto_ : nullptr);
    std::vector<Tally> from(cpu.on() ? N_ : 0);
    Tally all;
    const auto flush = [&] {
      for (size_t f : producers) {
        const size_t to = group.size() - (in_group[f] ? 1 : 0);
        tr.out[f] += bytes_from[f] * double(to);
        links.sends(f, to);
        if (cpu.on()) cpu.sends(f, from[f], to);
      }
      for (size_t w : group) in_group[w] = 0;
      group.clear();
    };
    const std::vector<core::InputRun>* priced = nullptr;
    const auto same_runs = [](const std::vector<core::InputRun>& a, const std::vector<core::InputRun>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i].offset != b[i].offset || a[i].count != b[i].count) return false;
      return true;
    };
    // A fused reader of a fused layer: what each board computed itself of
    // it (its widened share) stays on the board.
    const Computed* mine = mnode >= 0 && s == prod ? &computed(prod, mnode) : nullptr;
    if (mine && !mine->any()) mine = nullptr;
    HaloHiding hiding(*this, s, prod, mnode);
    for (size_t w = 0; w < N_; ++w) {
      const LayerShare& ls = pc.workers[w].layers[size_t(n)];
      if (!ls.active()) continue;
      if (mnode < 0) {
        for (const core::InputRun& r : ls.inputs[k].runs) tr.add(-1, int(w), double(count_message(r.count).wire_bytes));
        continue;
      }
      if (links.over()) break;
      if (mine) {
        received_beside(ls.inputs[k].runs, owners(prod, mnode), *mine, int(w), from_board, &tr, &links);
        for (size_t f : from_board.used())
          if (cpu.on() && f != w) {
            const Tally t = Tally::of(from_board.of(f));
            cpu.sends(f, t, 1);
            cpu.receives(w, t);
          }
        hiding.sent(from_board, w);
        continue;
      }
      const std::vector<core::InputRun>& runs = ls.inputs[k].runs;
      if (!priced || !same_runs(*priced, runs)) {
        flush();
        // What a board needing these runs receives, from each producer
        // board, in the order the route pass emits the sends: gathered
        // into frames per producer.
        from_board.clear();
        const steps::Owners& own = owners(prod, mnode);
        size_t at = 0;
        for (const core::InputRun& r : runs)
          own.walk(r.offset, r.count, at, [&](const steps::Owners::Segment& sg, int64_t i, int64_t stop) {
            from_board.add(sg.worker, Piece{uint32_t(i), uint32_t(stop - i)});
          });
        for (size_t f : producers) bytes_from[f] = -1.0;
        producers.clear();
        bytes_all = 0;
        all = Tally{};
        for (size_t f : from_board.used()) {
          bytes_from[f] = gathered_bytes(from_board.of(f));
          producers.push_back(f);
          bytes_all += bytes_from[f];
          if (!cpu.on()) continue;
          from[f] = Tally::of(from_board.of(f));
          all.add(from[f]);
        }
        hiding.sent(from_board, w);
        priced = &runs;
      }
      // From every producer but itself.
      tr.in[w] += bytes_all - (bytes_from[w] >= 0 ? bytes_from[w] : 0.0);
      if (cpu.on()) cpu.receives(w, bytes_from[w] >= 0 ? all.minus(from[w]) : all);
      links.hears(w, producers.size() - (bytes_from[w] >= 0 ? 1 : 0));
      group.push_back(w);
      in_group[w] = 1;
    }
    flush();
    *need = links.needs();
    if (links.over() && stop_over_) return kUnpriced;
    return std::max(0.0, step_s(tr, t_, m_) - hiding.hidden_s()) + cpu.slowest_s();
  }

  // Halos first (core/halo_first.h) on one operand transfer of a layer and
  // its producer under the same candidate: the rows each producer board
  // sends (its pieces to other boards) marked over its band; the inputs'
  // time is shortened by the shortest second part among the boards that
  // send (as the plan's estimate, plan/estimate.cpp, on the whole plan).
  class HaloHiding {
   public:
    HaloHiding(const Chooser& ch, int s, int prod, int mnode) : ch_(ch), mnode_(mnode) {
      if (ch.route_ != Route::Direct || mnode < 0 || s != prod) return;
      d_ = ch.q_.desc(mnode);
      const Plan& pp = ch.plan(prod);
      plan_ = &pp;
      for (size_t f = 0; f < ch.N_; ++f) {
        const LayerShare& ls = pp.workers[f].layers[size_t(mnode)];
        core::HaloBand band;
        if (!ls.active() || ls.psum.on ||
            !core::share_band(d_.out, uint32_t(ls.regions.size()), [&](uint32_t i) { return ls.regions[i]; }, &band))
          continue;
        core::HaloRows r;
        if (!r.begin(d_.out, band)) continue;
        if (rows_.empty()) rows_.resize(ch.N_), ok_.assign(ch.N_, 0);
        rows_[f] = r;
        ok_[f] = 1;
      }
      if (!rows_.empty()) sends_.assign(ch.N_, 0);
    }
    // from_board holds what board w receives, by producer.
    void sent(PieceBins& from_board, size_t w) {
      if (rows_.empty()) return;
      for (size_t f : from_board.used()) {
        if (f == w) continue;
        sends_[f] = 1;
        if (!ok_[f]) continue;
        core::Send sd;
        sd.peer = uint16_t(w);
        for (const Piece& pc : from_board.of(f)) {
          sd.offset = pc.offset;
          sd.count = pc.count;
          rows_[f].add(sd);
        }
      }
    }
    double hidden_s() const {
      double least = std::numeric_limits<double>::infinity();
      for (size_t f = 0; f < sends_.size(); ++f) {
        if (!sends_[f]) continue;
        double rest = 0;
        if (ok_[f]) {
          rest = halo_second_s(d_, plan_->workers[f].layers[size_t(mnode_)], rows_[f].split(),
                               ch_.m_.seconds_per_mac(d_, ch_.t_.boards[f]));
        }
        least = std::min(least, rest);
      }
      return least == std::numeric_limits<double>::infinity() ? 0.0 : least;
    }

   private:
    const Chooser& ch_;
    int mnode_;
    const Plan* plan_ = nullptr;
    core::LayerDesc d_;
    std::vector<core::HaloRows> rows_;  // per producer board with a band (ok_); empty: nothing to hide
    std::vector<uint8_t> ok_, sends_;
  };
  // Board w's receipts of `runs` but for what it computes itself (`mine`),
  // gathered into frames per producer as the route pass sends them.
  static void received_beside(const std::vector<core::InputRun>& runs, const steps::Owners& own, const Computed& mine,
                              int w, PieceBins& from_board, Traffic* tr, PeerCount* links) {
    from_board.clear();
    size_t at = 0;
    for (const core::InputRun& r : runs)
      mine.split(
          w, r.offset, r.count, [](int64_t, int64_t) {},
          [&](int64_t b, int64_t e) {
            own.walk(b, e - b, at, [&](const steps::Owners::Segment& sg, int64_t i, int64_t stop) {
              from_board.add(sg.worker, Piece{uint32_t(i), uint32_t(stop - i)});
            });
          });
    for (size_t f : from_board.used())
      if (int(f) != w) {
        tr->add(int(f), w, gathered_bytes(from_board.of(f)));
        links->sends(f, 1);
        links->hears(size_t(w), 1);
      }
  }
  const Computed& computed(int s, int m) {
    if (computed_for_[size_t(s)] != m) {
      computed_[size_t(s)].build(q_, plans_[size_t(s)], m);
      computed_for_[size_t(s)] = m;
    }
    return computed_[size_t(s)];
  }

  std::vector<NodeCost> costs_;             // by node and (distinct) strategy
  std::array<Computed, kS> computed_;       // per candidate, of one node (computed_for_)
  std::array<int, kS> computed_for_ = [] {  // -1: none yet
    std::array<int, kS> a{};
    a.fill(-1);
    return a;
  }();
  std::array<int, kS> split_first_{};  // split_first, by distinct candidate
  std::vector<int8_t> alike_;          // per node and candidate: split as its split-first (-1: not known yet)
  std::array<int, kS> same_{};  // the candidate whose plan candidate s's is
  std::vector<int> holds_;      // per board: board_links
  std::vector<core::ProtocolCost> proto_;  // per board: its type's protocol prices (CostModel::type_protocol)
  bool any_proto_ = false;                 // some board's are not zero
  bool stop_over_ = false;      // stop_at_over_links

  // Made by prepare_block (the pricing of a block only reads them).
  const steps::Owners& owners(int s, int m) const { return *owners_[size_t(s)][size_t(m)]; }
  bool splits_alike(int a, int b, int m) const { return steps::splits_alike(plans_[size_t(a)], plans_[size_t(b)], size_t(m)); }

  const QGraph& q_;
  const Testbed& t_;
  Route route_;
  const CostModel& m_;
  size_t N_;
  std::array<Plan, kS> plans_;
  std::array<std::vector<LayerTraffic>, kS> traffic_;  // made when first asked
  std::vector<std::vector<std::shared_ptr<steps::Owners>>> owners_;  // shared by candidates that split alike
};

// The candidates block [first, last] may take: every board of the block
// within its RAM, direct-only strategies on the direct route only, and
// `reduce` only where it also moves fewer bytes than every other candidate
// that fits: partial sums can shorten the slowest link while adding bytes in
// total (all-to-all sums instead of a narrow gather), and the wire bytes are
// a goal of their own (issue 10's bars). If none is left, the one least over
// its RAM (the final budget check will name the board).
std::array<bool, kS> block_candidates(const Chooser& ch, int first, int last, Route route) {
  std::array<bool, kS> allowed{};
  int64_t best_over = std::numeric_limits<int64_t>::max();
  int least_over = 0;
  for (int s = 0; s < kS; ++s) {
    bool ok = true;
    int64_t over = 0;
    for (int n = first; n <= last; ++n) {
      ok = ok && ch.fits_ram(n, s);
      over = std::max(over, ch.ram_over(n, s));
    }
    allowed[size_t(s)] = ok && (route == Route::Direct || !direct_only(layer_choice_info(s).name));
    if (over < best_over) {
      best_over = over;
      least_over = s;
    }
  }
  const auto bytes_moved = [&](int s) {
    int64_t v = 0;
    for (int n = first; n <= last; ++n) v += ch.plan(s).layers[size_t(n)].bytes_moved;
    return v;
  };
  if (allowed[kReduce]) {
    int64_t best = std::numeric_limits<int64_t>::max();
    for (int s = 0; s < kS; ++s)
      // Against the other splits: `whole` (one board) moves few bytes
      // because it splits nothing, and is priced by time like any other.
      if (s != kReduce && s != kWhole && allowed[size_t(s)]) best = std::min(best, bytes_moved(s));
    if (bytes_moved(kReduce) >= best) allowed[kReduce] = false;
  }
  bool any = false;
  for (int s = 0; s < kS; ++s) any = any || allowed[size_t(s)];
  if (!any) allowed[size_t(layer_choice(candidate_name(least_over, route)))] = true;
  return allowed;
}

}  // namespace

namespace {

// Plans `auto` asks for within the boards' links before it gives up.
constexpr int kLinkAttempts = 10;

// Per board, the boards it hears from and sends to in the plan of the
// picks (one per block).
std::vector<std::array<int, 2>> peers_of(const QGraph& q, const Testbed& t, const std::vector<double>& shares,
                                         Route route, const std::vector<int>& block_of, const std::vector<int>& pick) {
  std::vector<std::string> per_node(q.nodes.size());
  for (size_t n = 0; n < per_node.size(); ++n) per_node[n] = layer_choice_info(pick[size_t(block_of[n])]).name;
  return direct_peers_of(q, t, shares, MixedStrategy(per_node), route);
}

}  // namespace

namespace {

// The block programme of `auto`: per block b, candidate s and candidate sp
// of the block before, the block's seconds (cost) and the links its
// transfers need (need); the candidates each block may take (allowed); the
// cheapest choice, one candidate per block (pick, est_s).
class BlockProgramme {
 public:
  BlockProgramme(const QGraph& q, const Testbed& t, Route route, const std::vector<int>& block_of)
      : q_(q), t_(t), route_(route), N_(t.boards.size()), block_of_(block_of) {
    const int nodes = int(q.nodes.size());
    B_ = nodes ? block_of.back() + 1 : 0;
    first_.assign(size_t(B_), -1);
    last_.assign(size_t(B_), -1);
    for (int n = 0; n < nodes; ++n) {
      const int b = block_of[size_t(n)];
      if (first_[size_t(b)] < 0) first_[size_t(b)] = n;
      last_[size_t(b)] = n;
    }
    cost_.resize(size_t(B_));
    need_.resize(size_t(B_));
    allowed_.resize(size_t(B_));
    viable_.resize(size_t(B_));
    pick_.assign(size_t(B_), 0);
    room_.assign(N_, {kMaxBoardLinks, kMaxBoardLinks});
    for (const Board& b : t.boards) holds_.push_back(board_links(b));
  }

  int blocks() const { return B_; }
  const std::vector<int>& pick() const { return pick_; }
  double est_s() const { return est_s_; }

  // Prices every block under every candidate, after every candidate, last
  // block first. On the direct route with boards that may need more links
  // than they hold, stops at a block none of whose choices keeps every board
  // within its links (then no plan of the candidates does: false, and
  // out_of_links() says why) if asked to.
  bool price(Chooser& ch, bool stop_out_of_links) {
    distinct_.clear();  // the candidates with plans of their own (sp = 0 first)
    for (int s = 0; s < kS; ++s)
      if (ch.same(s) == s) distinct_.push_back(s);
    const bool check = stop_out_of_links && route_ == Route::Direct && may_go_over_links(t_);
    // A block priced while `check` leaves out the seconds of transfers over
    // a board's links: those choices can only be taken (link_bound, the
    // relay fallback's cheapest plan) once priced in full, below.
    ch.stop_at_over_links(check);
    for (int b = B_ - 1; b >= 0; --b) {
      allowed_[size_t(b)] = block_candidates(ch, first_[size_t(b)], last_[size_t(b)], route_);
      price_blocks(ch, b, distinct_);
      if (check && !some_choice_within_links(b)) return false;
    }
    if (!check) return true;
    ch.stop_at_over_links(false);
    for (int b = B_ - 1; b >= 0; --b) {
      std::vector<int> redo;
      for (int s : distinct_)
        for (int sp : distinct_)
          if (cost_[size_t(b)][size_t(sp)][size_t(s)] == kUnpriced) {
            redo.push_back(s);
            break;
          }
      if (!redo.empty()) price_blocks(ch, b, redo);
    }
    return true;
  }
  // The block from which on no choice keeps within the links (price).
  int out_of_links() const { return out_of_links_; }

  // The cheapest choice (pick, est_s). With `links`, no transfer is taken
  // that needs more links on a board than it holds, or that has a board w
  // hear from more than room[w][0] boards or send to more than room[w][1];
  // false (the picks left as they were) if then no choice is left.
  bool solve(bool links) {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::array<double, kS>> best(static_cast<size_t>(B_));
    std::vector<std::array<int, kS>> from(static_cast<size_t>(B_));
    for (int b = 0; b < B_; ++b)
      for (int s = 0; s < kS; ++s) {
        best[size_t(b)][size_t(s)] = inf;
        from[size_t(b)][size_t(s)] = 0;
        if (!allowed_[size_t(b)][size_t(s)]) continue;
        if (b == 0) {
          if (!links || fits(need_[0][0][size_t(s)])) best[0][size_t(s)] = cost_[0][0][size_t(s)];
          continue;
        }
        for (int sp = 0; sp < kS; ++sp) {
          if (links && !fits(need_[size_t(b)][size_t(sp)][size_t(s)])) continue;
          const double v = best[size_t(b) - 1][size_t(sp)] + cost_[size_t(b)][size_t(sp)][size_t(s)];
          if (v < best[size_t(b)][size_t(s)]) {
            best[size_t(b)][size_t(s)] = v;
            from[size_t(b)][size_t(s)] = sp;
          }
        }
      }
    int s = 0;
    for (int k = 1; k < kS; ++k)
      if (best[size_t(B_) - 1][size_t(k)] < best[size_t(B_) - 1][size_t(s)]) s = k;
    if (best[size_t(B_) - 1][size_t(s)] == inf) return false;
    est_s_ = best[size_t(B_) - 1][size_t(s)];
    for (int b = B_ - 1; b >= 0; --b) {
      pick_[size_t(b)] = s;
      s = from[size_t(b)][size_t(s)];
    }
    return true;
  }

  // On the direct route, the cheapest choice none of whose transfers alone
  // needs more links on a board than it holds. Its transfers together can
  // still need more on a board: then the transfers that send from it to as
  // many boards as the whole plan does are left out (or, if that leaves no
  // other plan, those that have it hear from as many), and the plan is
  // asked again, a few times. True if such a choice was found (pick); else
  // the cheapest choice (make_plan then takes the relay route). make_plan
  // checks the links of the plan it makes in any case.
  bool choose_within_links(const std::vector<double>& shares) {
    bool links = route_ == Route::Direct && may_go_over_links(t_) && B_ > 0;
    for (int attempt = 0; links; ++attempt) {
      if (attempt == kLinkAttempts || !solve(true)) {
        links = false;
        break;
      }
      if (!cut_links(peers_of(q_, t_, shares, route_, block_of_, pick_), &links)) break;
    }
    if (B_ > 0 && !links) solve(false);
    return links;
  }

  // Whether the links ruled out the cheapest choice (the picks kept).
  bool link_bound() {
    const std::vector<int> within = pick_;
    const double est = est_s_;
    solve(false);
    const bool bound = pick_ != within;
    pick_ = within;
    est_s_ = est;
    return bound;
  }

  // Flash: while a board's data would overflow, takes away the choice that
  // costs least per byte saved on that board. *links: whether the picks
  // keep within the links (false once they cannot).
  void fit_flash(const Chooser& ch, bool* links) {
    for (int round = 0; round < 3 * B_; ++round) {
      const int over_w = board_over_flash(ch);
      if (over_w < 0) return;
      const int best_b = cheapest_flash_cut(ch, over_w);
      if (best_b < 0) return;  // nothing saves flash: make_plan's check names the board
      allowed_[size_t(best_b)][size_t(pick_[size_t(best_b)])] = false;
      if (!(*links && solve(true))) {
        *links = false;
        solve(false);
      }
    }
  }

 private:
  // Block b under each of the distinct candidates `which`, on a core of its
  // own (Chooser::node_s), after a block under each distinct sp; a candidate
  // priced as another (Chooser::same) takes that one's figures.
  void price_blocks(Chooser& ch, int b, const std::vector<int>& which) {
    ch.prepare_block(first_[size_t(b)], last_[size_t(b)]);
    std::vector<int> first, echoing;  // candidates that echo another, after the others
    for (int s : which) (ch.split_first(s) == ch.same(s) ? first : echoing).push_back(s);
    for_each_on_every_core(first.size(), [&](size_t i) { price_block(ch, b, first[i]); });
    for_each_on_every_core(echoing.size(), [&](size_t i) { price_block(ch, b, echoing[i]); });
    for (int sp = 0; sp < kS; ++sp)
      for (int s = 0; s < kS; ++s) {
        cost_[size_t(b)][size_t(sp)][size_t(s)] = cost_[size_t(b)][size_t(ch.same(sp))][size_t(ch.same(s))];
        if (ch.same(sp) != sp || ch.same(s) != s)
          need_[size_t(b)][size_t(sp)][size_t(s)] = need_[size_t(b)][size_t(ch.same(sp))][size_t(ch.same(s))];
      }
    ch.forget_owners_from(first_[size_t(b)]);
  }
  // Block b under candidate s after every distinct sp.
  void price_block(Chooser& ch, int b, int s) {
    PeerMost most(route_ == Route::Direct ? N_ : 0, {0, 0});
    for (int sp : distinct_) {
      LinkNeeds& nd = need_[size_t(b)][size_t(sp)][size_t(s)];
      nd.clear();
      if (b == 0 && sp > 0) {  // the first block has no block before it
        cost_[size_t(b)][size_t(sp)][size_t(s)] = cost_[size_t(b)][0][size_t(s)];
        nd = need_[size_t(b)][0][size_t(s)];
        continue;
      }
      double c = 0;
      for (int n = first_[size_t(b)]; n <= last_[size_t(b)]; ++n)
        c += ch.node_s(
            n, s,
            [&](int k) {
              const int mnode = q_.tensors[size_t(q_.nodes[size_t(n)].inputs[size_t(k)])].producer;
              return mnode < first_[size_t(b)] ? sp : s;
            },
            &most);
      cost_[size_t(b)][size_t(sp)][size_t(s)] = c;
      for (size_t w = 0; w < most.size(); ++w)
        if (most[w][0] + most[w][1] > 0) {
          nd.push_back({uint32_t(w), most[w][0], most[w][1]});
          most[w] = {0, 0};
        }
    }
  }

  // Whether block b has an allowed candidate s that keeps every board
  // within its links after some candidate, and that the blocks after it can
  // follow within them (viable_); if not, out_of_links() is b.
  bool some_choice_within_links(int b) {
    bool any = false;
    for (int s = 0; s < kS; ++s) {
      bool& v = viable_[size_t(b)][size_t(s)];
      v = allowed_[size_t(b)][size_t(s)];
      if (v && b + 1 < B_) {
        v = false;
        for (int sn = 0; sn < kS && !v; ++sn)
          v = viable_[size_t(b) + 1][size_t(sn)] && fits(need_[size_t(b) + 1][size_t(s)][size_t(sn)]);
      }
      if (v) {
        v = false;
        for (int sp = 0; sp < (b == 0 ? 1 : kS) && !v; ++sp) v = fits(need_[size_t(b)][size_t(sp)][size_t(s)]);
      }
      any = any || v;
    }
    if (!any) out_of_links_ = b;
    return any;
  }

  bool fits(const LinkNeeds& n) const {
    for (const LinkNeed& l : n)
      if (1 + int64_t(l.in) + l.out > holds_[l.board] || l.in > room_[l.board][0] || l.out > room_[l.board][1])
        return false;
    return true;
  }

  // After a choice whose plan has each board hear from and send to `peers`:
  // false if every board is within its links; else the room of the boards
  // over is cut (sending first) and the programme solved again, *links
  // false if no cut changes the choice.
  bool cut_links(const std::vector<std::array<int, 2>>& peers, bool* links) {
    const auto before = room_;
    const std::vector<int> was = pick_;
    bool over = false;
    for (int side : {1, 0}) {
      for (size_t w = 0; w < N_; ++w) {
        if (1 + peers[w][0] + peers[w][1] <= holds_[w]) continue;
        over = true;
        room_[w][size_t(side)] = std::min<int64_t>(room_[w][size_t(side)], peers[w][size_t(side)] - 1);
      }
      if (!over) return false;
      // A cut that leaves out no transfer of the plan (many small ones
      // add up on the board) is no cut.
      if (solve(true) && pick_ != was) return true;
      room_ = before;  // no other plan sends less: hear from fewer instead
      pick_ = was;
    }
    *links = false;
    return false;
  }

  // The first board whose data under the picks would overflow its flash
  // (with a margin for the routing runs, regions and alignment), or -1.
  int board_over_flash(const Chooser& ch) const {
    const int64_t overhead = fragment_overhead_bytes(q_);
    for (size_t w = 0; w < N_; ++w) {
      int64_t bytes = overhead;
      for (size_t n = 0; n < q_.nodes.size(); ++n) bytes += ch.data(int(n), pick_[size_t(block_of_[n])], w);
      if (double(bytes) > 0.98 * double(t_.boards[w].flash_bytes)) return int(w);
    }
    return -1;
  }

  // The block whose pick costs least per byte of board w's data saved by
  // another allowed candidate, or -1.
  int cheapest_flash_cut(const Chooser& ch, int w) const {
    const auto data = [&](int b, int s) {
      int64_t d = 0;
      for (int n = first_[size_t(b)]; n <= last_[size_t(b)]; ++n) d += ch.data(n, s, size_t(w));
      return d;
    };
    double best_ratio = std::numeric_limits<double>::infinity();
    int best_b = -1;
    for (int b = 0; b < B_; ++b) {
      const int s = pick_[size_t(b)];
      const int64_t d_now = data(b, s);
      for (int s2 = 0; s2 < kS; ++s2) {
        if (s2 == s || !allowed_[size_t(b)][size_t(s2)]) continue;
        const int64_t d2 = data(b, s2);
        if (d2 >= d_now) continue;
        const int sp = b > 0 ? pick_[size_t(b) - 1] : 0;
        double delta = cost_[size_t(b)][size_t(sp)][size_t(s2)] - cost_[size_t(b)][size_t(sp)][size_t(s)];
        if (b + 1 < B_)
          delta += cost_[size_t(b) + 1][size_t(s2)][size_t(pick_[size_t(b) + 1])] -
                   cost_[size_t(b) + 1][size_t(s)][size_t(pick_[size_t(b) + 1])];
        const double ratio = std::max(0.0, delta) / double(d_now - d2);
        if (ratio < best_ratio) {
          best_ratio = ratio;
          best_b = b;
        }
      }
    }
    return best_b;
  }

  const QGraph& q_;
  const Testbed& t_;
  Route route_;
  size_t N_;
  const std::vector<int>& block_of_;
  int B_ = 0;
  std::vector<int> first_, last_;
  std::vector<std::array<std::array<double, kS>, kS>> cost_;     // [b][sp][s]; sp ignored for b = 0
  std::vector<std::array<std::array<LinkNeeds, kS>, kS>> need_;  // [b][sp][s]: Chooser::node_s
  std::vector<std::array<bool, kS>> allowed_;
  std::vector<int> pick_;
  double est_s_ = 0;
  int out_of_links_ = -1;
  std::vector<int> distinct_;  // the candidates with plans of their own (Chooser::same), 0 first
  std::vector<std::array<bool, kS>> viable_;  // [b][s]: some sp fits, and blocks b+1.. can follow (price)
  std::vector<std::array<int64_t, 2>> room_;  // per board: the most boards a transfer has it hear from, send to
  std::vector<int> holds_;                    // per board: board_links
};

}  // namespace

namespace {

// Why `auto` gave up on the direct route at block b (AutoChoice::out_of_links).
std::string out_of_links_note(const QGraph& q, const Testbed& t, const std::vector<int>& block_of, int b) {
  const size_t first = size_t(std::find(block_of.begin(), block_of.end(), b) - block_of.begin());
  int lo = std::numeric_limits<int>::max(), hi = 0;
  for (const Board& board : t.boards) {
    lo = std::min(lo, board_links(board));
    hi = std::max(hi, board_links(board));
  }
  return "the direct route has no choice of strategies from layer '" + q.nodes.at(first).name +
         "' on that keeps every board within its links (" +
         (lo == hi ? "every board holds at most " + std::to_string(lo)
                   : "the boards hold " + std::to_string(lo) + " to " + std::to_string(hi)) +
         ")";
}

}  // namespace

AutoChoice choose_strategies(const QGraph& q, const Testbed& t, const std::vector<double>& shares, Route route,
                             const CostModel& m, bool stop_out_of_links) {
  if (t.boards.size() != shares.size()) throw Error("auto: one share per board is needed");
  Chooser ch(q, t, shares, route, m);
  AutoChoice res;
  res.block_of = graph_blocks(q);
  BlockProgramme bp(q, t, route, res.block_of);
  if (!bp.price(ch, stop_out_of_links)) {
    res.out_of_links = out_of_links_note(q, t, res.block_of, bp.out_of_links());
    return res;
  }
  bool links = bp.choose_within_links(shares);
  if (links) res.link_bound = bp.link_bound();
  bp.fit_flash(ch, &links);
  if (!links) res.link_bound = false;
  res.est_s = bp.est_s();
  res.per_node.resize(q.nodes.size());
  for (size_t n = 0; n < q.nodes.size(); ++n)
    res.per_node[n] = layer_choice_info(bp.pick()[size_t(res.block_of[n])]).name;
  return res;
}

}  // namespace ts::plan
