// Fused tiles: the widened share's geometry and the lookup of what a worker
// computed itself (fuse.h).
#include "plan/fuse.h"

#include <algorithm>

#include "plan/plan.h"

namespace ts::plan {

namespace fuse {

int sole_reader(const QGraph& q, int n) {
  const int t = q.nodes[size_t(n)].output;
  if (t == q.output) return -1;
  const std::vector<int>& c = q.tensors[size_t(t)].consumers;
  if (c.empty()) return -1;
  for (int r : c)
    if (r != c.front()) return -1;
  return c.front();
}

namespace {

// A plane run [a, b) of channels [c0, c1) as at most three boxes: a partial
// first row, whole rows, a partial last row.
void add_boxes(const core::Dims& d, int32_t c0, int32_t c1, int32_t a, int32_t b, std::vector<core::Region>* out) {
  int32_t ya = a / d.w;
  const int32_t xa = a % d.w, yb = b / d.w, xb = b % d.w;
  if (ya == yb) {
    out->push_back(core::Region::box(c0, c1, ya, ya + 1, xa, xb));
    return;
  }
  if (xa > 0) {
    out->push_back(core::Region::box(c0, c1, ya, ya + 1, xa, d.w));
    ++ya;
  }
  if (yb > ya) out->push_back(core::Region::box(c0, c1, ya, yb, 0, d.w));
  if (xb > 0) out->push_back(core::Region::box(c0, c1, yb, yb + 1, 0, xb));
}

}  // namespace

std::vector<core::Region> widened(const core::Dims& d, const std::vector<core::Region>& owned,
                                  const std::vector<core::InputRun>& need) {
  const int64_t hw = int64_t(d.h) * d.w;
  // Per channel, its pieces of the union: (channel, begin, end) in plane positions.
  struct Piece {
    int32_t c, a, b;
  };
  std::vector<Piece> pieces;
  const auto add = [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t c = b / hw, stop = std::min(e, (c + 1) * hw);
      pieces.push_back(Piece{int32_t(c), int32_t(b - c * hw), int32_t(stop - c * hw)});
      b = stop;
    }
  };
  for (const core::Region& r : owned)
    r.segments(d, [&](int32_t b, int32_t e) {
      add(b, e);
      return true;
    });
  const long owned_pieces = long(pieces.size());
  for (const core::InputRun& r : need) add(r.offset, int64_t(r.offset) + r.count);
  std::vector<Piece> merged;
  const auto before = [](const Piece& x, const Piece& y) { return x.c != y.c ? x.c < y.c : x.a < y.a; };
  const auto sort_merge = [&] {
    // The owned pieces and the needed ones each come in order (regions'
    // segments and runs by offset): merged, unless one is not.
    const auto mid = pieces.begin() + owned_pieces;
    if (std::is_sorted(pieces.begin(), mid, before) && std::is_sorted(mid, pieces.end(), before))
      std::inplace_merge(pieces.begin(), mid, pieces.end(), before);
    else
      std::sort(pieces.begin(), pieces.end(), before);
    merged.clear();
    for (const Piece& p : pieces) {
      if (!merged.empty() && merged.back().c == p.c && merged.back().b >= p.a) merged.back().b = std::max(merged.back().b, p.b);
      else merged.push_back(p);
    }
  };
  sort_merge();
  int64_t owned_elems = 0, union_elems = 0;
  for (const core::Region& r : owned) owned_elems += r.elems();
  for (const Piece& p : merged) union_elems += p.b - p.a;
  if (union_elems == owned_elems) return {};  // the reader needs nothing of the neighbours' bands
  // A share of whole rows is widened to whole rows: a few more outputs
  // computed, and the band and its halo stay one box, which the board
  // computes in place into its reader's window (a partial row would cost a
  // copy of the whole band, and RAM for it).
  bool rows = true;
  for (const core::Region& r : owned) rows = rows && r.kind == core::RegionKind::Box && r.v[4] == 0 && r.v[5] == d.w;
  if (rows) {
    for (Piece& p : pieces) {
      p.a = p.a / d.w * d.w;
      p.b = (p.b + d.w - 1) / d.w * d.w;
    }
    sort_merge();
  }
  // Group channels in a row with the same pieces.
  std::vector<core::Region> out;
  size_t i = 0;
  while (i < merged.size()) {
    size_t j = i;
    while (j < merged.size() && merged[j].c == merged[i].c) ++j;  // [i, j): channel merged[i].c
    const size_t k = j - i;
    int32_t c1 = merged[i].c + 1;
    size_t next = j;
    while (next + k <= merged.size() && merged[next].c == c1) {
      bool same = true;
      for (size_t x = 0; x < k && same; ++x)
        same = merged[next + x].c == c1 && merged[next + x].a == merged[i + x].a && merged[next + x].b == merged[i + x].b;
      if (!same || (next + k < merged.size() && merged[next + k].c == c1)) break;
      next += k;
      ++c1;
    }
    for (size_t x = i; x < j; ++x) add_boxes(d, merged[i].c, c1, merged[x].a, merged[x].b, &out);
    i = next;
  }
  return out;
}

bool any_widened(const Plan& p, int n) {
  for (const WorkerPlan& wp : p.workers)
    if (!wp.layers[size_t(n)].owned.empty()) return true;
  return false;
}

bool worth_it(const std::vector<int64_t>& owned_elems, const std::vector<int64_t>& widened_elems) {
  for (size_t w = 0; w < owned_elems.size(); ++w)
    if (widened_elems[w] - owned_elems[w] > owned_elems[w]) return false;
  return true;
}

}  // namespace fuse

void region_segments(const core::Dims& d, const std::vector<core::Region>& regions, std::vector<Computed::Segment>* out) {
  out->clear();
  int64_t pos = 0;
  for (const core::Region& r : regions)
    r.segments(d, [&](int32_t b, int32_t e) {
      out->push_back(Computed::Segment{b, e, pos});
      pos += e - b;
      return true;
    });
  std::sort(out->begin(), out->end(), [](const Computed::Segment& a, const Computed::Segment& b) { return a.begin < b.begin; });
}

void Computed::build(const QGraph& q, const Plan& p, int node) {
  any_ = fuse::any_widened(p, node);
  if (!any_) return;  // every worker computes what it owns: the owners say it all
  const core::Dims d = q.desc(node).out;
  segs_.resize(size_t(p.n_workers()));
  for (int w = 0; w < p.n_workers(); ++w)
    region_segments(d, p.workers[size_t(w)].layers[size_t(node)].regions, &segs_[size_t(w)]);
}

}  // namespace ts::plan
