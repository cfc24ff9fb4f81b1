// Streamed chains: which layers chain, and their line buffers (streams.h).
#include "plan/streams.h"

#include <algorithm>
#include <iterator>

#include "core/crc32.h"
#include "core/stream.h"
#include "plan/fuse.h"
#include "plan/names.h"
#include "model/bytes.h"
#include "util/error.h"

namespace ts::plan::streams {

Streaming parse(const std::string& s) {
  for (size_t i = 0; i < std::size(kStreamings); ++i)
    if (s == kStreamings[i].name) return Streaming(i);
  throw Error("--stream: expected " + join_names(kStreamings, " or ") + ", got '" + s + "'");
}

const char* name(Streaming s) { return kStreamings[size_t(s)].name; }

bool whole_rows(const core::Dims& d, const LayerShare& ls, int32_t* c0, int32_t* c1, int32_t* y0, int32_t* y1) {
  if (ls.regions.size() != 1) return false;
  const core::Region& g = ls.regions[0];
  const int64_t hw = int64_t(d.h) * d.w;
  if (g.kind == core::RegionKind::Box) {
    if (g.v[4] != 0 || g.v[5] != d.w) return false;
    *c0 = g.v[0]; *c1 = g.v[1]; *y0 = g.v[2]; *y1 = g.v[3];
    return true;
  }
  if (hw <= 0 || g.v[0] % hw || g.v[1] % hw) return false;
  *c0 = int32_t(g.v[0] / hw); *c1 = int32_t(g.v[1] / hw); *y0 = 0; *y1 = d.h;
  return true;
}

namespace {

// Every channel, whole rows.
bool all_channel_rows(const core::Dims& d, const LayerShare& ls) {
  int32_t c0, c1, y0, y1;
  return !ls.psum.on && whole_rows(d, ls, &c0, &c1, &y0, &y1) && c0 == 0 && c1 == d.c;
}

// Whether node n streams into node n + 1.
bool links(const QGraph& q, const Plan& p, int n) {
  if (size_t(n) + 1 >= q.nodes.size() || fuse::sole_reader(q, n) != n + 1) return false;
  const QNode& r = q.nodes[size_t(n) + 1];
  if (r.inputs.size() != 1 || r.inputs[0] != q.nodes[size_t(n)].output) return false;
  if (r.op != core::QOp::Conv && r.op != core::QOp::AvgPool && r.op != core::QOp::MaxPool && r.op != core::QOp::Lut &&
      r.op != core::QOp::ChannelLut)
    return false;
  const core::Dims a = q.desc(n).out, b = q.desc(n + 1).out;
  bool any = false;
  for (const WorkerPlan& wp : p.workers) {
    const LayerShare& x = wp.layers[size_t(n)];
    const LayerShare& y = wp.layers[size_t(n) + 1];
    if (x.active() != y.active()) return false;
    if (!x.active()) continue;
    if (!all_channel_rows(a, x) || !all_channel_rows(b, y)) return false;
    any = true;
  }
  return any;
}

}  // namespace

std::vector<Chain> chains(const QGraph& q, const Plan& p) {
  std::vector<Chain> out;
  const int n = int(q.nodes.size());
  for (int i = 0; i + 1 < n;) {
    if (!links(q, p, i)) {
      ++i;
      continue;
    }
    Chain c{i, i + 1};
    while (c.last + 1 < n && c.last - c.first + 1 < core::kMaxChain && links(q, p, c.last)) ++c.last;
    out.push_back(c);
    i = c.last + 1;
  }
  return out;
}

std::vector<Choice> auto_choices(const Plan& p, const Testbed& t) {
  // Over by what is in use (no placement holds it) and over by the
  // placement's top (a buffer placed high marks every layer it spans).
  const size_t n = p.workers.empty() ? 0 : p.workers.front().layers.size();
  std::vector<uint8_t> live(n, 0), top(n, 0);
  for (size_t w = 0; w < p.workers.size() && w < t.boards.size(); ++w)
    for (const LayerShare& ls : p.workers[w].layers) {
      const int64_t room = t.boards[w].ram_bytes - int64_t(core::kWorkerFixedArena);
      live[size_t(ls.node)] |= ls.live_bytes > room;
      top[size_t(ls.node)] |= ls.ram_bytes > room;
    }
  std::vector<std::vector<uint8_t>> sets;
  if (std::count(live.begin(), live.end(), 1) > 0) sets.push_back(live);
  if (top != live) sets.push_back(top);
  sets.emplace_back();  // every chain
  std::vector<Choice> out;
  for (const std::vector<uint8_t>& nodes : sets)
    for (int32_t step : kSteps) out.push_back(Choice{step, nodes});
  return out;
}

uint32_t plan_id(uint32_t id, const Choice& c) {
  if (c.step <= 0) return id;
  ByteWriter b;
  b.u32(id);
  b.u32(uint32_t(c.step));
  for (uint8_t v : c.nodes) b.u8(v);
  return crc32(b.buf.data(), b.buf.size());
}

void mark(const QGraph& q, Plan& p, const Choice& choice,
          const std::function<void(int, const std::vector<core::Region>&, LayerShare&)>& set_share) {
  const int32_t step = choice.step;
  for (const Chain& c : chains(q, p)) {
    bool named = choice.nodes.empty();
    for (int n = c.first; n <= c.last && !named; ++n) named = size_t(n) < choice.nodes.size() && choice.nodes[size_t(n)];
    if (!named) continue;
    for (int n = c.last - 1; n >= c.first; --n) {
      const core::Dims d = q.desc(n).out;
      for (WorkerPlan& wp : p.workers) {
        LayerShare& ls = wp.layers[size_t(n)];
        if (!ls.active()) continue;
        std::vector<core::Region> owned = ls.tiles();
        const std::vector<core::Region> wide = fuse::widened(d, owned, wp.layers[size_t(n) + 1].inputs[0].runs);
        if (!wide.empty()) {
          set_share(n, wide, ls);
          ls.owned = std::move(owned);
        }
        ls.stream_step = step;
      }
    }
  }
}

std::vector<Chain> lay_out(const QGraph& q, WorkerPlan& wp, const std::vector<int>& home) {
  std::vector<Chain> out;
  const int n = int(wp.layers.size());
  for (LayerShare& ls : wp.layers) ls.chained = false;
  for (int a = 0; a < n; ++a) {
    if (wp.layers[size_t(a)].stream_step <= 0) continue;
    // The chain from a: its streamed shares in place, then the one after.
    int b = a;
    while (b < n && wp.layers[size_t(b)].stream_step > 0 && wp.layers[size_t(b)].out_pitch) ++b;
    for (int i = b; i < n && wp.layers[size_t(i)].stream_step > 0; ++i) wp.layers[size_t(i)].stream_step = 0;
    if (b == a || b >= n) {  // none in place: nothing streams
      a = b;
      continue;
    }
    core::ChainLayer L[core::kMaxChain];
    const int len = b - a + 1;
    bool rows_ok = len <= core::kMaxChain;
    for (int i = 0; i < len && rows_ok; ++i) {
      L[i].desc = q.desc(a + i);
      rows_ok = whole_rows(L[i].desc.out, wp.layers[size_t(a + i)], &L[i].c0, &L[i].c1, &L[i].y0, &L[i].y1);
    }
    if (!rows_ok) {  // a share widened past one box of whole rows: it does not stream
      for (int i = a; i < b; ++i) wp.layers[size_t(i)].stream_step = 0;
      a = b;
      continue;
    }
    int32_t rows[core::kMaxChain];
    const int32_t step = wp.layers[size_t(a)].stream_step;
    if (!core::chain_rows(L, len, step, rows))
      throw Error("internal: a streamed chain from layer " + std::to_string(a) + " cannot stream");
    for (int i = 0; i + 1 < len; ++i) {
      LayerShare& ls = wp.layers[size_t(a + i)];
      InputNeed& in = wp.layers[size_t(a + i + 1)].inputs[0];
      ls.stream_step = step;
      in.box.h0 = L[i].y0;
      in.box.h1 = L[i].y0 + rows[i];
      ls.out_pitch = uint32_t(rows[i]) * uint32_t(L[i].desc.out.w);
      in.avail_from = a;
    }
    const LayerShare& last = wp.layers[size_t(b)];
    if (last.out_pitch) {
      InputNeed& in = wp.layers[size_t(last.out_until)].inputs[size_t(home[size_t(b)])];
      in.avail_from = std::min(in.avail_from, a);
    }
    for (int i = a; i <= b; ++i) wp.layers[size_t(i)].chained = true;
    out.push_back(Chain{a, b});
    a = b;
  }
  return out;
}

}  // namespace ts::plan::streams

namespace ts::plan::streams {

Summary summary(const Plan& p) {
  Summary s;
  const int n = p.workers.empty() ? 0 : int(p.workers.front().layers.size());
  for (int i = 0; i < n; ++i) {
    const int32_t step = stream_step(p, i);
    if (step <= 0) continue;
    ++s.layers;
    s.chains += i == 0 || stream_step(p, i - 1) <= 0;
    s.step = std::max(s.step, step);
  }
  return s;
}

std::string summary_line(const Plan& p, Streaming mode) {
  const Summary s = summary(p);
  if (s.layers == 0) return "";
  return "streamed (--stream " + std::string(name(mode)) + "): " + std::to_string(s.layers) + " layers in " +
         std::to_string(s.chains) + " chains computed row by row, " + std::to_string(s.step) +
         " rows of each chain's last layer per pass, line buffers in RAM\n";
}

}  // namespace ts::plan::streams

namespace ts::plan {

int chain_start(const Plan& p, int n) {
  while (n > 0 && stream_step(p, n - 1) > 0) --n;
  return n;
}

int resume_start(const Plan& p, int n) {
  for (;;) {
    int m = chain_start(p, n);
    for (const WorkerPlan& wp : p.workers)
      for (size_t v = size_t(m); v < wp.layers.size(); ++v)
        for (const InputNeed& in : wp.layers[v].inputs)
          if (in.view_from >= 0 && in.view_from < m) m = in.view_from;
    if (m == n) return n;
    n = m;
  }
}

int32_t stream_step(const Plan& p, int n) {
  int32_t s = 0;
  for (const WorkerPlan& wp : p.workers) s = std::max(s, wp.layers[size_t(n)].stream_step);
  return s;
}

}  // namespace ts::plan
