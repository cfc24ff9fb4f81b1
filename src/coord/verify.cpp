#include "coord/verify.h"

#include <algorithm>

#include <cinttypes>
#include <cstdio>

#include "core/digest.h"
#include "plan/streams.h"
#include "util/error.h"

namespace ts::coord {

std::vector<std::vector<ExpectedDigest>> reference_digests(const QGraph& q, const plan::Plan& p,
                                                           const std::vector<std::vector<int8_t>>& tensors) {
  std::vector<std::vector<ExpectedDigest>> out(q.nodes.size(), std::vector<ExpectedDigest>(size_t(p.n_workers())));
  for (size_t node = 0; node < q.nodes.size(); ++node) {
    const std::vector<int8_t>& t = tensors.at(size_t(q.nodes[node].output));
    const core::Dims d = q.desc(int(node)).out;
    for (int w = 0; w < p.n_workers(); ++w) {
      const plan::LayerShare& s = p.workers[size_t(w)].layers[node];
      if (!s.active()) continue;
      core::Digest64 h;
      int32_t c0, c1, y0, y1;
      if (s.stream_step > 0 && plan::streams::whole_rows(d, s, &c0, &c1, &y0, &y1)) {
        // Streamed (core/stream.h): row by row, each row of every channel.
        for (int32_t y = y0; y < y1; ++y)
          for (int32_t c = c0; c < c1; ++c) h.update(t.data() + (int64_t(c) * d.h + y) * d.w, size_t(d.w));
      } else {
        for (const core::Region& g : s.regions)
          g.segments(d, [&](int32_t b, int32_t e) {
            if (b < 0 || e < b || size_t(e) > t.size()) throw Error("internal: a region lies outside its layer's tensor");
            h.update(t.data() + b, size_t(e - b));
            return true;
          });
      }
      if (h.bytes() != uint64_t(s.out_elems)) throw Error("internal: a share's regions do not add up to its outputs");
      out[node][size_t(w)] = ExpectedDigest{uint32_t(s.out_elems), h.finish()};
    }
  }
  return out;
}

Verification verify_layers(const std::vector<std::vector<ExpectedDigest>>& expected, const InferenceResult& r) {
  Verification v;
  v.layers = int(expected.size());
  v.layer_ok.assign(expected.size(), 0);
  for (size_t node = 0; node < expected.size(); ++node) {
    if (int(node) < r.resumed_from) {
      // Checked before the failover the inference resumed after
      // (verified_prefix), on the boards of the plan then.
      ++v.verified_layers;
      v.layer_ok[node] = 1;
      continue;
    }
    bool all = true;
    for (size_t w = 0; w < expected[node].size(); ++w) {
      const ExpectedDigest& want = expected[node][w];
      if (want.outputs == 0) continue;
      ExpectedDigest got;
      if (w < r.boards.size() && node < r.boards[w].layer_digest.size())
        got = ExpectedDigest{r.boards[w].layer_outputs[node], r.boards[w].layer_digest[node]};
      if (got.outputs == want.outputs && got.digest == want.digest) continue;
      all = false;
      if (v.ok()) {
        v.board = int(w);
        v.node = int(node);
        v.got = got;
        v.want = want;
      }
    }
    v.verified_layers += all;
    v.layer_ok[node] = all;
  }
  return v;
}

int verified_prefix(const std::vector<std::vector<ExpectedDigest>>& expected, const std::vector<BoardRunStats>& boards,
                    int from, int* held_by) {
  if (held_by) *held_by = -1;
  for (size_t node = size_t(std::max(0, from)); node < expected.size(); ++node)
    for (size_t w = 0; w < expected[node].size(); ++w) {
      const ExpectedDigest& want = expected[node][w];
      if (want.outputs == 0) continue;
      const bool reported = w < boards.size() && node < boards[w].layer_digest.size();
      if (reported && boards[w].layer_outputs[node] == want.outputs && boards[w].layer_digest[node] == want.digest)
        continue;
      if (held_by) *held_by = int(w);
      return int(node);
    }
  return int(expected.size());
}

std::string describe_mismatch(const QGraph& q, const Verification& v, const std::string& board_address) {
  if (v.ok()) return "";
  const std::string layer = "layer " + std::to_string(v.node) + " '" + q.nodes.at(size_t(v.node)).name + "'";
  std::string m = "board " + std::to_string(v.board) + " (" + board_address + "): ";
  char buf[96];
  if (v.got.outputs != v.want.outputs) {
    std::snprintf(buf, sizeof buf, "reported %u outputs, its share has %u", unsigned(v.got.outputs),
                  unsigned(v.want.outputs));
    return m + buf + ", at " + layer;
  }
  std::snprintf(buf, sizeof buf, " (digest %016" PRIx64 ", expected %016" PRIx64 ")", v.got.digest, v.want.digest);
  return m + "outputs differ from the int8 reference at " + layer + buf;
}

}  // namespace ts::coord
