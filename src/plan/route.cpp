// The route pass and the routing map (alg. 3): for every worker's share,
// where each input run comes from (the coordinator, another worker, or this
// worker's own output of an earlier layer) and where each output segment
// goes; partial sums of reduced layers; the sweeps over the workers' needs
// that count distinct inputs and fan-out and list the routing map.
#include <algorithm>

#include "core/partial.h"
#include "plan/frames.h"
#include "plan/fuse.h"
#include "plan/plan_steps.h"

namespace ts::plan {

using core::InputRun;

namespace {

struct ProducerRun {
  int64_t begin, end;
  int worker;  // -1: coordinator
};

std::vector<ProducerRun> producer_runs(const QGraph& q, const Plan& p, int tensor) {
  std::vector<ProducerRun> out;
  const int64_t size = q.shape(tensor).size();
  const int prod = q.tensors[size_t(tensor)].producer;
  if (prod < 0) {
    out.push_back({0, size, -1});
    return out;
  }
  const core::Dims d = q.desc(prod).out;
  for (int w = 0; w < p.n_workers(); ++w)
    for (const core::Region& r : p.workers[size_t(w)].layers[size_t(prod)].tiles())
      r.segments(d, [&](int32_t b, int32_t e) {
        out.push_back({b, e, w});
        return true;
      });
  std::sort(out.begin(), out.end(), [](const ProducerRun& a, const ProducerRun& b) { return a.begin < b.begin; });
  // Merge neighbours of the same producer.
  std::vector<ProducerRun> merged;
  for (const ProducerRun& r : out) {
    if (!merged.empty() && merged.back().worker == r.worker && merged.back().end == r.begin) merged.back().end = r.end;
    else merged.push_back(r);
  }
  return merged;
}

// Alg. 3 for operand k of node n: sweeps the workers' needs over the tensor
// and emits every maximal segment with one producer and one destination set.
void route_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<RouteRun>* routes) {
  struct Event {
    uint32_t worker;
    int32_t delta;
  };
  const int tensor = q.nodes[size_t(n)].inputs[size_t(k)];
  const int64_t size = q.shape(tensor).size();
  // Counting sort of run boundaries by position (positions are < size + 1);
  // inserting workers in order keeps each position's events in worker order.
  std::vector<uint32_t> first(size_t(size) + 2, 0);
  size_t n_ev = 0;
  for (const WorkerPlan& wp : p.workers) {
    const LayerShare& ls = wp.layers[size_t(n)];
    if (ls.inputs.empty()) continue;
    for (const InputRun& r : ls.inputs[size_t(k)].runs) {
      first[size_t(r.offset) + 1]++;
      first[size_t(r.offset) + r.count + 1]++;
      n_ev += 2;
    }
  }
  for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
  std::vector<Event> ev(n_ev);
  {
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (int w = 0; w < p.n_workers(); ++w) {
      const LayerShare& ls = p.workers[size_t(w)].layers[size_t(n)];
      if (ls.inputs.empty()) continue;
      for (const InputRun& r : ls.inputs[size_t(k)].runs) {
        ev[fill[r.offset]++] = Event{uint32_t(w), +1};
        ev[fill[size_t(r.offset) + r.count]++] = Event{uint32_t(w), -1};
      }
    }
  }
  const std::vector<ProducerRun> prod = producer_runs(q, p, tensor);
  std::vector<int> active;
  size_t pi = 0;
  const size_t first_route = routes->size();
  int64_t x = 0;
  while (x < size) {
    for (uint32_t e = first[size_t(x)]; e < first[size_t(x) + 1]; ++e) {
      const int w = int(ev[e].worker);
      auto it = std::lower_bound(active.begin(), active.end(), w);
      if (ev[e].delta > 0)
        active.insert(it, w);
      else if (it != active.end() && *it == w)
        active.erase(it);
    }
    while (pi + 1 < prod.size() && prod[pi].end <= x) ++pi;
    // Next position where something changes: an event or a producer edge.
    int64_t next = size;
    if (pi < prod.size() && prod[pi].end > x) next = std::min(next, prod[pi].end);
    for (int64_t y = x + 1; y < next; ++y)
      if (first[size_t(y) + 1] > first[size_t(y)]) {
        next = y;
        break;
      }
    const int producer = pi < prod.size() ? prod[pi].worker : -1;
    RouteRun* last = routes->size() > first_route ? &routes->back() : nullptr;
    if (last && last->producer == producer && last->dests == active && last->offset + last->count == x)
      last->count += next - x;
    else
      routes->push_back(RouteRun{tensor, n, k, x, next - x, producer, active});
    x = next;
  }
}


void add_run(std::vector<InputRun>* v, int64_t off, int64_t n, bool merge) {
  if (merge && !v->empty() && int64_t(v->back().offset) + v->back().count == off) {
    v->back().count = uint32_t(v->back().count + n);
    return;
  }
  v->push_back(InputRun{uint32_t(off), uint32_t(n)});
}

// Every output segment of a share goes to the coordinator (relay, and the
// graph's output in direct mode).
void send_all_to_coordinator(const core::Dims& d, LayerShare& ls) {
  uint32_t pos = 0;
  for (const core::Region& r : ls.regions)
    r.segments(d, [&](int32_t b, int32_t e) {
      core::Send s;
      s.peer = core::kPeerCoordinator;
      s.layer = uint16_t(ls.node);
      s.offset = uint32_t(b);
      s.count = uint32_t(e - b);
      s.pos = pos;
      ls.sends.push_back(s);
      pos += uint32_t(e - b);
      return true;
    });
}

// Partial sums of reduced layers (direct route): every worker with input
// channels sends each other owner the sums of that owner's output block,
// straight to it, in one send (the worker cuts it into frames).
void route_partials(const QGraph& q, Plan& p) {
  const size_t N = size_t(p.n_workers());
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    if (p.layer_strategy[n] != "reduce") continue;
    const core::LayerDesc& d = q.desc(int(n));
    const int64_t P = core::partial_positions(d);
    for (size_t w = 0; w < N; ++w) {
      p.workers[w].layers[n].psum.sends.clear();
      p.workers[w].layers[n].psum.recv_bytes = 0;
    }
    for (size_t r = 0; r < N; ++r) {
      LayerShare& owner = p.workers[r].layers[n];
      if (!owner.active()) continue;
      const int64_t o0 = owner.regions[0].v[0] / P, o1 = owner.regions[0].v[1] / P;
      for (size_t w = 0; w < N; ++w) {
        LayerShare& from = p.workers[w].layers[n];
        if (w == r || !from.active() || from.psum.ci1 <= from.psum.ci0) continue;
        core::Send s;
        s.peer = uint16_t(r);
        s.layer = uint16_t(n);
        s.operand = uint8_t(core::kPsumOperand);
        s.offset = 0;
        s.count = uint32_t((o1 - o0) * P * 4);
        s.pos = uint32_t(o0 * P * 4);
        from.psum.sends.push_back(s);
        owner.psum.recv_bytes += s.count;
      }
    }
  }
}

// The order a board sends one layer's outputs in, group by group (a group:
// consecutive sends to one peer, layer and operand; the worker gathers a
// group into INPUTS frames, core/worker_sender.cpp):
//  - within a group, equal lengths together in offset order: a halo of a
//    band of plane positions is a partial row, whole rows and a partial row
//    in every channel, and sorted this way each kind becomes one strided
//    block per frame instead of one 12-byte block header per channel and
//    row piece (the receiver places blocks by offset: the order is free);
//  - the groups by consumer layer, then by peer from the board after
//    `self` on around the swarm (w + 1, w + 2, ...), then operand: in an
//    all-gather each board then sends to a different board at a time,
//    where in board order every board would send to board 0 first, then to
//    board 1, each of them taking in the whole swarm's frames on its one
//    link while the other links idle.
void order_sends(size_t self, size_t n_boards, std::vector<core::Send>* sends) {
  std::vector<core::Send>& v = *sends;
  struct Group {
    uint64_t key;
    size_t first, n;
  };
  std::vector<Group> groups;
  for_each_send_run(v, [&](size_t first, size_t n) {
    const core::Send& s = v[first];
    const uint64_t turn = s.peer == core::kPeerCoordinator ? n_boards : (s.peer + n_boards - self - 1) % n_boards;
    groups.push_back(Group{uint64_t(s.layer) << 40 | turn << 8 | s.operand, first, n});
  });
  for (const Group& g : groups)
    std::stable_sort(v.begin() + long(g.first), v.begin() + long(g.first + g.n),
                     [](const core::Send& a, const core::Send& b) {
                       return a.count != b.count ? a.count < b.count : a.offset < b.offset;
                     });
  if (groups.size() < 2) return;
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.key < b.key; });
  std::vector<core::Send> out;
  out.reserve(v.size());
  for (const Group& g : groups) out.insert(out.end(), v.begin() + long(g.first), v.begin() + long(g.first + g.n));
  v = std::move(out);
}

}  // namespace

namespace steps {

// The owned segments of a widened share (fuse.h), each cut where the
// computed regions' segments end and placed where they hold it.
void Owners::add_owned(const core::Dims& d, const LayerShare& ls, int32_t w) {
  region_segments(d, ls.regions, &computed_);
  region_segments(d, ls.owned, &owned_);
  size_t ci = 0;
  for (const Computed::Segment& o : owned_) {
    for (int64_t b = o.begin; b < o.end;) {
      while (ci < computed_.size() && computed_[ci].end <= b) ++ci;
      if (ci == computed_.size() || computed_[ci].begin > b)
        throw Error("plan: a worker owns outputs of layer " + std::to_string(ls.node) + " that it does not compute");
      const Computed::Segment& c = computed_[ci];
      const int64_t e = std::min(o.end, c.end);
      tmp_.push_back(Segment{b, e, w, c.pos + (b - c.begin)});
      b = e;
    }
  }
}

void Owners::build(const QGraph& q, const Plan& p, int node) {
  const core::Dims d = q.desc(node).out;
  tmp_.clear();
  for (int w = 0; w < p.n_workers(); ++w) {
    const LayerShare& ls = p.workers[size_t(w)].layers[size_t(node)];
    if (!ls.owned.empty()) {
      add_owned(d, ls, w);
      continue;
    }
    int64_t at = 0;
    for (const core::Region& r : ls.regions)
      r.segments(d, [&](int32_t b, int32_t e) {
        tmp_.push_back(Segment{b, e, w, at});
        at += e - b;
        return true;
      });
  }
  // Into offset order: a counting sort by channel (boxes give a segment per
  // channel and worker, each worker's in channel order), then each channel's
  // few segments in place.
  const int64_t plane = std::max<int64_t>(1, int64_t(d.h) * d.w);
  const size_t C = size_t(std::max<int64_t>(1, (d.size() + plane - 1) / plane));
  first_.assign(C + 1, 0);
  for (const Segment& sg : tmp_) first_[size_t(sg.begin / plane) + 1]++;
  for (size_t c = 0; c < C; ++c) first_[c + 1] += first_[c];
  segs_.resize(tmp_.size());
  for (const Segment& sg : tmp_) segs_[first_[size_t(sg.begin / plane)]++] = sg;
  const auto by_begin = [](const Segment& a, const Segment& b) { return a.begin < b.begin; };
  for (size_t c = 0, b = 0; c < C; b = first_[c++])
    if (!std::is_sorted(segs_.begin() + long(b), segs_.begin() + long(first_[c]), by_begin))
      std::sort(segs_.begin() + long(b), segs_.begin() + long(first_[c]), by_begin);
  // Buckets of 2^shift_ elements, about one per segment.
  const int64_t size = std::max<int64_t>(1, d.size());
  shift_ = 0;
  while ((size >> shift_) > int64_t(segs_.size()) && shift_ < 62) ++shift_;
  const size_t nb = size_t(((size - 1) >> shift_) + 1);
  bucket_.resize(nb);
  size_t i = 0;
  for (size_t j = 0; j < nb; ++j) {
    while (i < segs_.size() && segs_[i].end <= (int64_t(j) << shift_)) ++i;
    bucket_[j] = uint32_t(i);
  }
}

size_t Owners::find(int64_t off) const {
  const size_t j = off < 0 ? 0 : size_t(off >> shift_);
  if (j >= bucket_.size()) return segs_.size();
  // Segments are disjoint and in order: the one holding off (if any) ends
  // past bucket j's start and begins before bucket j + 1's first segment ends.
  const size_t lo = bucket_[j];
  const size_t hi = std::min(segs_.size(), (j + 1 < bucket_.size() ? size_t(bucket_[j + 1]) : segs_.size()) + 1);
  const auto it = std::upper_bound(segs_.begin() + long(lo), segs_.begin() + long(hi), off,
                                   [](int64_t v, const Segment& s) { return v < s.begin; });
  return it == segs_.begin() + long(lo) ? lo : size_t(it - segs_.begin()) - 1;
}

// Distinct elements of operand k of node n needed by anyone, and the most
// workers any one element goes to: a difference array over the tensor.
SweepResult count_operand(const QGraph& q, const Plan& p, int n, int k, std::vector<int32_t>& diff) {
  const int tensor = q.nodes[size_t(n)].inputs[size_t(k)];
  const int64_t size = q.shape(tensor).size();
  diff.assign(size_t(size) + 1, 0);
  for (const WorkerPlan& wp : p.workers) {
    const LayerShare& ls = wp.layers[size_t(n)];
    if (ls.inputs.empty()) continue;
    for (const InputRun& r : ls.inputs[size_t(k)].runs) {
      diff[r.offset]++;
      diff[size_t(r.offset) + r.count]--;
    }
  }
  SweepResult res;
  int32_t active = 0;
  for (int64_t i = 0; i < size; ++i) {
    active += diff[size_t(i)];
    if (active > 0) ++res.unique;
    res.max_fanout = std::max(res.max_fanout, int(active));
  }
  return res;
}

// The route pass: where every input comes from and where every output goes.
bool splits_alike(const Plan& a, const Plan& b, size_t n) {
  const auto same = [](const std::vector<core::Region>& x, const std::vector<core::Region>& y) {
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](const core::Region& r, const core::Region& u) {
             return r.kind == u.kind && std::equal(r.v, r.v + 6, u.v);
           });
  };
  for (size_t w = 0; w < a.workers.size(); ++w) {
    const LayerShare &x = a.workers[w].layers[n], &y = b.workers[w].layers[n];
    if (!same(x.regions, y.regions) || !same(x.owned, y.owned)) return false;
  }
  return true;
}

void route_plan(const QGraph& q, Plan& p, Route route, bool peer_sends, const Plan* alike) {
  const size_t N = size_t(p.n_workers());
  for (size_t w = 0; w < N; ++w)
    for (LayerShare& ls : p.workers[w].layers) {
      ls.sends.clear();
      ls.run_trigger = route == Route::Relay && ls.active();
      ls.out_until = ls.node;
      for (InputNeed& in : ls.inputs) {
        in.recv.clear();
        in.coord_runs.clear();
        in.local.clear();
        in.local_layer = -1;
        in.recv_elems = 0;
        in.avail_from = ls.node;
      }
    }
  if (route == Route::Relay) {
    for (size_t w = 0; w < N; ++w)
      for (LayerShare& ls : p.workers[w].layers) {
        if (!ls.active()) continue;
        for (InputNeed& in : ls.inputs) {
          in.recv = in.runs;
          in.coord_runs = in.runs;
          in.recv_elems = in.elems;
        }
        send_all_to_coordinator(q.desc(ls.node).out, ls);
      }
    return;
  }
  // Direct: split every needed run by who computes it.
  std::vector<uint8_t> same;  // per node: split as in `alike`
  if (alike && !peer_sends && alike->n_workers() == p.n_workers())
    for (size_t n = 0; n < q.nodes.size(); ++n) same.push_back(splits_alike(p, *alike, n));
  int cached = -1;
  Owners own;
  Computed mine;  // of a layer some worker widened (fused)
  for (size_t n = 0; n < q.nodes.size(); ++n) {
    const QNode& node = q.nodes[n];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int prod = q.tensors[size_t(node.inputs[k])].producer;
      if (!same.empty() && same[n] && (prod < 0 || same[size_t(prod)])) {
        for (size_t w = 0; w < N; ++w) {
          LayerShare& ls = p.workers[w].layers[n];
          if (!ls.active()) continue;
          ls.inputs[k] = alike->workers[w].layers[n].inputs[k];
          if (!ls.inputs[k].local.empty()) {
            LayerShare& src = p.workers[w].layers[size_t(prod)];
            src.out_until = std::max(src.out_until, int(n));
          }
        }
        continue;
      }
      if (prod >= 0 && prod != cached) {
        own.build(q, p, prod);
        mine.build(q, p, prod);
        cached = prod;
      }
      for (size_t w = 0; w < N; ++w) {
        LayerShare& ls = p.workers[w].layers[n];
        if (!ls.active()) continue;
        InputNeed& in = ls.inputs[k];
        size_t at = 0;
        const auto local = [&](int64_t i, int64_t stop) {
          add_run(&in.local, i, stop - i, false);
          in.local_layer = prod;
          LayerShare& src = p.workers[w].layers[size_t(prod)];
          src.out_until = std::max(src.out_until, int(n));
        };
        const auto from_owners = [&](int64_t off, int64_t count) {
          const bool whole = own.walk(off, count, at, [&](const Owners::Segment& sg, int64_t i, int64_t stop) {
            if (size_t(sg.worker) == w) return local(i, stop);
            in.recv_elems += stop - i;
            in.avail_from = prod;
            if (!peer_sends) return;
            add_run(&in.recv, i, stop - i, true);
            core::Send s;
            s.peer = uint16_t(w);
            s.layer = uint16_t(n);
            s.operand = uint8_t(k);
            s.offset = uint32_t(i);
            s.count = uint32_t(stop - i);
            s.pos = uint32_t(sg.pos + (i - sg.begin));
            p.workers[size_t(sg.worker)].layers[size_t(prod)].sends.push_back(s);
          });
          if (!whole) throw Error("plan: an input of layer '" + node.name + "' is computed by no worker");
        };
        for (const InputRun& r : in.runs) {
          if (prod < 0) {
            add_run(&in.recv, r.offset, r.count, true);
            add_run(&in.coord_runs, r.offset, r.count, true);
            in.recv_elems += r.count;
          } else if (mine.any()) {
            mine.split(int(w), r.offset, r.count, local, from_owners);
          } else {
            from_owners(r.offset, r.count);
          }
        }
      }
    }
  }
  for (size_t w = 0; w < N; ++w)
    for (LayerShare& ls : p.workers[w].layers) order_sends(w, N, &ls.sends);
  // The graph's output goes to the coordinator.
  const int last = q.tensors[size_t(q.output)].producer;
  if (last >= 0)
    for (size_t w = 0; w < N; ++w) {
      LayerShare& ls = p.workers[w].layers[size_t(last)];
      if (ls.active()) {
        std::vector<core::Send> keep = std::move(ls.sends);
        ls.sends.clear();
        send_all_to_coordinator(q.desc(last).out, ls);
        ls.sends.insert(ls.sends.end(), keep.begin(), keep.end());
      }
    }
  route_partials(q, p);
}

}  // namespace steps

std::vector<RouteRun> build_routing(const QGraph& q, const Plan& p) {
  std::vector<RouteRun> routes;
  for (size_t n = 0; n < q.nodes.size(); ++n)
    for (size_t k = 0; k < q.nodes[n].inputs.size(); ++k) route_operand(q, p, int(n), int(k), &routes);
  for (const ProducerRun& r : producer_runs(q, p, q.output))
    routes.push_back(RouteRun{q.output, -1, 0, r.begin, r.end - r.begin, r.worker, {}});
  return routes;
}

}  // namespace ts::plan
