// The fragment format: layout, round trip from a plan, and a reader that
// returns an error status (never crashes, never reads out of bounds) on
// truncated, bit-flipped, re-checksummed hostile and random input. Run under
// -fsanitize=address,undefined to make "never reads out of bounds" a check.
#include "core/fragment.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <new>
#include <random>

#include "core/crc32.h"
#include "plan/fragment_writer.h"
#include "plan/plan.h"

using namespace ts;
using namespace ts::plan;
using core::FragStatus;
using core::QOp;

namespace {

uint32_t rd32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
void wr32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void fix_crc(std::vector<uint8_t>& f) {
  if (f.size() < 4) return;
  wr32(f.data() + f.size() - 4, crc32(f.data(), f.size() - 4));
}

// A small model with every kind of data a fragment carries: conv and Gemm
// per-channel arrays, AvgPool tables, a LUT, a two-operand Add and a Concat
// whose operands some workers do not read.
QGraph tiny_graph() {
  std::mt19937 rng(3);
  QGraph q;
  auto tensor = [&](int c, int h, int w) {
    QTensor t;
    t.name = "t" + std::to_string(q.tensors.size());
    t.shape = Shape{c, h, w};
    t.zp = int32_t(rng() % 21) - 10;
    q.tensors.push_back(t);
    return int(q.tensors.size()) - 1;
  };
  auto node = [&](QOp op, std::vector<int> ins, int c, int h, int w) {
    QNode n;
    n.name = std::string(core::qop_name(op)) + std::to_string(q.nodes.size());
    n.op = op;
    n.inputs = ins;
    n.output = tensor(c, h, w);
    n.geo.op = op;
    n.geo.n_inputs = uint8_t(ins.size());
    for (size_t k = 0; k < ins.size(); ++k) {
      const Shape& s = q.shape(ins[k]);
      n.geo.in[k] = core::Dims{s.c, s.h, s.w};
      n.geo.in_zp[k] = q.tensors[size_t(ins[k])].zp;
    }
    n.geo.out = core::Dims{c, h, w};
    n.geo.out_zp = q.tensors[size_t(n.output)].zp;
    return n;
  };
  auto per_channel = [&](QNode& n, int cout, int per) {
    n.weights.resize(size_t(cout * per));
    for (auto& v : n.weights) v = int8_t(int(rng() % 255) - 127);
    n.bias.resize(size_t(cout));
    n.mult.resize(size_t(cout));
    n.shift.resize(size_t(cout));
    for (int o = 0; o < cout; ++o) {
      n.bias[size_t(o)] = int32_t(rng() % 2001) - 1000;
      quantize_multiplier(0.004, &n.mult[size_t(o)], &n.shift[size_t(o)]);
    }
  };
  q.input = tensor(3, 9, 8);
  QNode c = node(QOp::Conv, {q.input}, 6, 5, 4);  // 3x3 s2 pad 1
  c.geo.kh = c.geo.kw = 3;
  c.geo.sh = c.geo.sw = 2;
  c.geo.pad_t = c.geo.pad_l = c.geo.pad_b = c.geo.pad_r = 1;
  per_channel(c, 6, 27);
  const int t1 = c.output;
  q.nodes.push_back(c);
  QNode l = node(QOp::Lut, {t1}, 6, 5, 4);
  l.lut.resize(256);
  for (auto& v : l.lut) v = int8_t(int(rng() % 256) - 128);
  const int t2 = l.output;
  q.nodes.push_back(l);
  QNode a = node(QOp::Add, {t1, t2}, 6, 5, 4);
  a.geo.left_shift = 20;
  quantize_multiplier(0.5, &a.geo.in_mult[0], &a.geo.in_shift[0]);
  quantize_multiplier(0.25, &a.geo.in_mult[1], &a.geo.in_shift[1]);
  quantize_multiplier(1.0 / (1 << 19), &a.geo.out_mult, &a.geo.out_shift);
  const int t3 = a.output;
  q.nodes.push_back(a);
  QNode p = node(QOp::AvgPool, {t3}, 6, 3, 2);  // 2x2 s2 pad bottom/right 1
  p.geo.kh = p.geo.kw = 2;
  p.geo.sh = p.geo.sw = 2;
  p.geo.pad_b = p.geo.pad_r = 1;
  p.mult.resize(4);
  p.shift.resize(4);
  for (int k = 1; k <= 4; ++k) quantize_multiplier(1.0 / k, &p.mult[size_t(k - 1)], &p.shift[size_t(k - 1)]);
  const int t4 = p.output;
  q.nodes.push_back(p);
  QNode m = node(QOp::MaxPool, {t3}, 6, 3, 2);
  m.geo.kh = m.geo.kw = 2;
  m.geo.sh = m.geo.sw = 2;
  m.geo.pad_b = m.geo.pad_r = 1;
  q.tensors[size_t(m.output)].zp = q.tensors[size_t(t3)].zp;
  m.geo.out_zp = q.tensors[size_t(t3)].zp;
  const int t5 = m.output;
  q.nodes.push_back(m);
  QNode cat = node(QOp::Concat, {t4, t5}, 12, 3, 2);
  quantize_multiplier(0.8, &cat.geo.in_mult[0], &cat.geo.in_shift[0]);
  quantize_multiplier(0.9, &cat.geo.in_mult[1], &cat.geo.in_shift[1]);
  const int t6 = cat.output;
  q.nodes.push_back(cat);
  QNode g = node(QOp::GlobalAvgPool, {t6}, 12, 1, 1);
  quantize_multiplier(1.0 / 6, &g.geo.out_mult, &g.geo.out_shift);
  const int t7 = g.output;
  q.nodes.push_back(g);
  QNode fc = node(QOp::Gemm, {t7}, 5, 1, 1);
  per_channel(fc, 5, 12);
  q.nodes.push_back(fc);
  q.output = fc.output;
  q.link();
  return q;
}

Plan tiny_plan(const QGraph& q, int n) {
  std::vector<double> shares;
  for (int i = 0; i < n; ++i) shares.push_back(1.0 + i);
  return plan_with_shares(q, default_testbed(n), shares, NeuronStrategy());
}

// Opens a fragment held in a heap block of exactly its size (so ASan sees
// any over-read), and if it is accepted, decodes every entry and runs the
// kernels on windows sized from the boxes. Returns the open() status.
FragStatus exercise(const std::vector<uint8_t>& bytes, std::mt19937& rng) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  core::FragmentReader rd;
  const FragStatus st = rd.open(bytes.empty() ? nullptr : copy.get(), bytes.size());
  if (st != FragStatus::Ok) return st;
  for (uint32_t i = 0; i < rd.layer_count() + 2; ++i) {
    core::FragLayer fl;
    if (rd.layer(i, &fl) != FragStatus::Ok) continue;
    if (fl.run_begin == fl.run_end) continue;
    std::vector<std::vector<int8_t>> bufs(size_t(fl.desc.n_inputs));
    core::View v[core::kMaxInputs];
    for (int k = 0; k < fl.desc.n_inputs; ++k) {
      bufs[size_t(k)].resize(size_t(fl.box[k].elems(fl.desc.in[k].w)));
      for (auto& x : bufs[size_t(k)]) x = int8_t(rng());
      v[k] = core::View{bufs[size_t(k)].empty() ? nullptr : bufs[size_t(k)].data(), fl.box[k].c0,
                        fl.box[k].c1 - fl.box[k].c0, fl.box[k].h0, fl.box[k].h1 - fl.box[k].h0};
      for (uint32_t r = 0; r < fl.n_runs[k] + 1; ++r) (void)fl.run(k, r);
    }
    std::vector<int8_t> out(size_t(fl.run_end - fl.run_begin));
    (void)core::compute_range(fl.desc, v, fl.run_begin, fl.run_end, out.data(), fl.oc_count);
  }
  return st;
}

}  // namespace

TEST(Fragment, HeaderLayout) {
  const QGraph q = tiny_graph();
  const Plan p = tiny_plan(q, 3);
  for (int w = 0; w < 3; ++w) {
    const auto f = write_fragment(q, p, w);
    ASSERT_EQ(int64_t(f.size()), fragment_bytes(q, p, w));
    ASSERT_EQ(int64_t(f.size()), p.workers[size_t(w)].flash_bytes);
    EXPECT_EQ(std::memcmp(f.data(), "TSFG", 4), 0);
    EXPECT_EQ(f[4] | f[5] << 8, core::kFragVersion);
    EXPECT_EQ(f[6] | f[7] << 8, w);
    EXPECT_EQ(f[8] | f[9] << 8, 3);
    EXPECT_EQ(rd32(f.data() + 12), p.plan_id);
    EXPECT_EQ(rd32(f.data() + 16), q.nodes.size());
    EXPECT_EQ(rd32(f.data() + 20), f.size());
    EXPECT_EQ(rd32(f.data() + 24), uint32_t(p.workers[size_t(w)].peak_ram_bytes));
    EXPECT_EQ(rd32(f.data() + 28), kFragLayerBytes);
    EXPECT_EQ(rd32(f.data() + f.size() - 4), crc32(f.data(), f.size() - 4));
    EXPECT_EQ(f.size() % 4, 0u);
    // Fixed part: header, one entry per layer, CRC.
    EXPECT_GE(int64_t(f.size()), fragment_overhead_bytes(q));
  }
}

TEST(Fragment, RoundTripsEveryField) {
  const QGraph q = tiny_graph();
  for (int N : {1, 2, 5, 40}) {
    const Plan p = tiny_plan(q, N);
    for (int w = 0; w < N; ++w) {
      const auto f = write_fragment(q, p, w);
      core::FragmentReader rd;
      ASSERT_EQ(rd.open(f.data(), f.size()), FragStatus::Ok);
      EXPECT_EQ(rd.header().worker, w);
      EXPECT_EQ(rd.header().n_workers, N);
      EXPECT_EQ(rd.header().total_bytes, f.size());
      const WorkerPlan& wp = p.workers[size_t(w)];
      for (uint32_t i = 0; i < rd.layer_count(); ++i) {
        core::FragLayer fl;
        ASSERT_EQ(rd.layer(i, &fl), FragStatus::Ok);
        const QNode& n = q.nodes[i];
        const LayerShare& ls = wp.layers[i];
        const core::LayerDesc& a = fl.desc;
        const core::LayerDesc& b = n.geo;
        EXPECT_EQ(fl.node, i);
        EXPECT_EQ(fl.run_begin, ls.run.begin);
        EXPECT_EQ(fl.run_end, ls.run.end);
        EXPECT_EQ(a.oc_base, ls.oc_base);
        EXPECT_EQ(fl.oc_count, ls.oc_count);
        EXPECT_EQ(fl.ram_bytes, uint32_t(ls.ram_bytes));
        EXPECT_EQ(a.op, b.op);
        EXPECT_EQ(a.n_inputs, b.n_inputs);
        EXPECT_EQ(a.count_include_pad, b.count_include_pad);
        const int32_t sa[] = {a.out.c, a.out.h, a.out.w, a.out_zp, a.act_min, a.act_max, a.kh, a.kw, a.sh, a.sw,
                              a.dh, a.dw, a.pad_t, a.pad_l, a.pad_b, a.pad_r, a.groups, a.left_shift, a.out_mult,
                              a.out_shift};
        const int32_t sb[] = {b.out.c, b.out.h, b.out.w, b.out_zp, b.act_min, b.act_max, b.kh, b.kw, b.sh, b.sw,
                              b.dh, b.dw, b.pad_t, b.pad_l, b.pad_b, b.pad_r, b.groups, b.left_shift, b.out_mult,
                              b.out_shift};
        for (int k = 0; k < 20; ++k) EXPECT_EQ(sa[k], sb[k]) << "scalar " << k << " of " << n.name;
        for (int k = 0; k < b.n_inputs; ++k) {
          EXPECT_EQ(a.in[k].c, b.in[k].c);
          EXPECT_EQ(a.in[k].h, b.in[k].h);
          EXPECT_EQ(a.in[k].w, b.in[k].w);
          EXPECT_EQ(a.in_zp[k], b.in_zp[k]);
          EXPECT_EQ(a.in_mult[k], b.in_mult[k]);
          EXPECT_EQ(a.in_shift[k], b.in_shift[k]);
        }
        if (ls.run.empty()) {
          EXPECT_EQ(a.weights, nullptr);
          EXPECT_EQ(a.lut, nullptr);
          for (int k = 0; k < b.n_inputs; ++k) EXPECT_EQ(fl.n_runs[k], 0u);
          continue;
        }
        if (n.op == QOp::Conv || n.op == QOp::Gemm) {
          const size_t per = n.weights.size() / size_t(n.channels_with_data());
          ASSERT_NE(a.weights, nullptr);
          for (int32_t o = 0; o < fl.oc_count; ++o) {
            const size_t g = size_t(a.oc_base + o);
            EXPECT_EQ(std::memcmp(a.weights + size_t(o) * per, n.weights.data() + g * per, per), 0);
            EXPECT_EQ(a.bias[o], n.bias[g]);
            EXPECT_EQ(a.mult[o], n.mult[g]);
            EXPECT_EQ(a.shift[o], n.shift[g]);
          }
        }
        if (n.op == QOp::AvgPool) {
          for (size_t k = 0; k < n.mult.size(); ++k) {
            EXPECT_EQ(a.mult[k], n.mult[k]);
            EXPECT_EQ(a.shift[k], n.shift[k]);
          }
        }
        if (n.op == QOp::Lut) {
          EXPECT_EQ(std::memcmp(a.lut, n.lut.data(), 256), 0);
        }
        for (int k = 0; k < b.n_inputs; ++k) {
          const InputNeed& in = ls.inputs[size_t(k)];
          EXPECT_EQ(fl.box[k].c0, in.box.c0);
          EXPECT_EQ(fl.box[k].c1, in.box.c1);
          EXPECT_EQ(fl.box[k].h0, in.box.h0);
          EXPECT_EQ(fl.box[k].h1, in.box.h1);
          EXPECT_EQ(fl.expected[k], uint64_t(in.elems));
          ASSERT_EQ(fl.n_runs[k], in.runs.size());
          for (uint32_t r = 0; r < fl.n_runs[k]; ++r) {
            EXPECT_EQ(fl.run(k, r).offset, in.runs[r].offset);
            EXPECT_EQ(fl.run(k, r).count, in.runs[r].count);
          }
          EXPECT_EQ(fl.run(k, fl.n_runs[k]).count, 0u);  // past the end: empty
        }
      }
    }
  }
}

// layer() and layer_checked() fill the caller's FragLayer in place: whatever
// entry it held before, the result is the entry's fresh decode, byte for
// byte (both built in zeroed storage, so their padding agrees).
TEST(Fragment, DecodesInPlaceOverAnyEarlierEntry) {
  const QGraph q = tiny_graph();
  struct Slot {
    alignas(core::FragLayer) unsigned char bytes[sizeof(core::FragLayer)];
    core::FragLayer* make() {
      std::memset(bytes, 0, sizeof bytes);
      return new (bytes) core::FragLayer();
    }
  };
  for (int N : {1, 2, 5}) {
    const Plan p = tiny_plan(q, N);
    for (int w = 0; w < N; ++w) {
      const auto f = write_fragment(q, p, w);
      core::FragmentReader rd;
      ASSERT_EQ(rd.open(f.data(), f.size()), FragStatus::Ok);
      for (uint32_t j = 0; j < rd.layer_count(); ++j) {
        Slot fresh, reused;
        core::FragLayer* want = fresh.make();
        ASSERT_EQ(rd.layer(j, want), FragStatus::Ok);
        for (uint32_t i = 0; i < rd.layer_count(); ++i) {
          core::FragLayer* got = reused.make();
          ASSERT_EQ(rd.layer(i, got), FragStatus::Ok);
          ASSERT_EQ(rd.layer(j, got), FragStatus::Ok);
          EXPECT_EQ(std::memcmp(got, want, sizeof(core::FragLayer)), 0) << "board " << w << " layer " << j << " over " << i;
          ASSERT_EQ(rd.layer_checked(i, got), FragStatus::Ok);
          ASSERT_EQ(rd.layer_checked(j, got), FragStatus::Ok);
          EXPECT_EQ(std::memcmp(got, want, sizeof(core::FragLayer)), 0) << "checked, board " << w << " layer " << j;
        }
      }
    }
  }
}

TEST(Fragment, WritesFilesPerBoard) {
  const QGraph q = tiny_graph();
  Testbed t = default_testbed(2);
  t.boards[0].id = 4;
  t.boards[1].id = 11;
  const Plan p = plan_with_shares(q, t, {1, 1}, NeuronStrategy());
  const std::string dir = std::string(TS_BINARY_DIR) + "/fragment_test_out";
  const auto paths = write_fragments(q, p, dir);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_NE(paths[0].find("worker-4.tsfg"), std::string::npos);
  EXPECT_NE(paths[1].find("worker-11.tsfg"), std::string::npos);
  std::FILE* f = std::fopen(paths[1].c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> got(size_t(p.workers[1].flash_bytes) + 10);
  got.resize(std::fread(got.data(), 1, got.size(), f));
  std::fclose(f);
  EXPECT_EQ(got, write_fragment(q, p, 1));
}

TEST(Fragment, SimpleRejections) {
  const QGraph q = tiny_graph();
  const Plan p = tiny_plan(q, 2);
  const auto good = write_fragment(q, p, 0);
  core::FragmentReader rd;
  EXPECT_EQ(rd.open(nullptr, 0), FragStatus::TooShort);
  EXPECT_EQ(rd.open(good.data(), 20), FragStatus::TooShort);
  auto bad = good;
  bad[0] ^= 1;
  EXPECT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadMagic);
  bad = good;
  bad[4] = 1;  // format version 1 (before regions and sends) is no longer read
  EXPECT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadVersion);
  bad = good;
  bad[100] ^= 0x10;
  EXPECT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadChecksum);
  EXPECT_EQ(rd.open(good.data(), good.size() - 1), FragStatus::BadSize);
  // Misaligned in memory: int32 arrays could not be read in place.
  std::vector<uint8_t> shifted(good.size() + 4);
  std::memcpy(shifted.data() + 1, good.data(), good.size());
  EXPECT_EQ(rd.open(shifted.data() + 1, good.size()), FragStatus::BadSize);
  // Inside a larger flash region: fine, total_bytes says where it ends.
  std::vector<uint8_t> region(good);
  region.resize(good.size() + 100, 0xFF);
  EXPECT_EQ(rd.open(region.data(), region.size()), FragStatus::Ok);
  core::FragLayer fl;
  EXPECT_EQ(rd.layer(rd.layer_count(), &fl), FragStatus::BadLayer);
  core::FragmentReader fresh;
  EXPECT_EQ(fresh.layer(0, &fl), FragStatus::BadLayer);
  // A structural defect under a valid CRC is a BadLayer.
  bad = good;
  wr32(bad.data() + kFragHeaderBytes + 8, 0x7FFFFFFF);  // run_begin of entry 0
  fix_crc(bad);
  EXPECT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadLayer);
  for (auto s : {FragStatus::Ok, FragStatus::TooShort, FragStatus::BadMagic, FragStatus::BadVersion,
                 FragStatus::BadSize, FragStatus::BadChecksum, FragStatus::BadLayer})
    EXPECT_GT(std::strlen(core::frag_status_name(s)), 0u);
}

TEST(Fragment, EveryTruncationIsRejected) {
  const QGraph q = tiny_graph();
  const Plan p = tiny_plan(q, 3);
  std::mt19937 rng(1);
  for (int w = 0; w < 3; ++w) {
    const auto good = write_fragment(q, p, w);
    for (size_t len = 0; len < good.size(); ++len) {
      const std::vector<uint8_t> cut(good.begin(), good.begin() + long(len));
      ASSERT_NE(exercise(cut, rng), FragStatus::Ok) << "length " << len;
    }
  }
}

TEST(Fragment, EveryBitFlipIsRejected) {
  const QGraph q = tiny_graph();
  const Plan p = tiny_plan(q, 2);
  std::mt19937 rng(2);
  const auto good = write_fragment(q, p, 1);
  for (size_t i = 0; i < good.size() * 8; ++i) {
    auto bad = good;
    bad[i / 8] ^= uint8_t(1u << (i % 8));
    ASSERT_NE(exercise(bad, rng), FragStatus::Ok) << "bit " << i;
  }
}

// Hostile input: the CRC is recomputed after the damage, so the structural
// checks are what stands between the bytes and the kernels.
TEST(Fragment, RechecksummedMutationsNeverCrash) {
  const QGraph q = tiny_graph();
  std::mt19937 rng(4);
  int accepted = 0, total = 0;
  for (int N : {1, 3, 7}) {
    const Plan p = tiny_plan(q, N);
    for (int w = 0; w < N; ++w) {
      const auto good = write_fragment(q, p, w);
      // Every 32-bit field set to interesting values (one plan is enough).
      for (size_t at = 0; N == 3 && at + 4 <= good.size() - 4; at += 4)
        for (uint32_t v : {0u, 1u, 3u, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, uint32_t(good.size()),
                           uint32_t(good.size() + 8), 0x10000u, 255u, 256u}) {
          auto bad = good;
          wr32(bad.data() + at, v);
          fix_crc(bad);
          accepted += exercise(bad, rng) == FragStatus::Ok;
          ++total;
        }
      // Random multi-byte damage.
      for (int it = 0; it < 1500; ++it) {
        auto bad = good;
        const int n = 1 + int(rng() % 6);
        for (int k = 0; k < n; ++k) bad[rng() % (bad.size() - 4)] = uint8_t(rng());
        fix_crc(bad);
        accepted += exercise(bad, rng) == FragStatus::Ok;
        ++total;
      }
    }
  }
  std::printf("[ info ] %d of %d re-checksummed mutations still parse (harmless field changes)\n", accepted, total);
  EXPECT_LT(accepted, total);
}

TEST(Fragment, RandomBytesAreRefused) {
  std::mt19937 rng(9);
  int plausible = 0;
  std::map<FragStatus, int> why;
  for (int it = 0; it < 20000; ++it) {
    std::vector<uint8_t> b(size_t(rng() % 2048));
    for (auto& x : b) x = uint8_t(rng());
    if (b.size() >= 32 && rng() % 2) {
      // A plausible header so the checks go deeper.
      wr32(b.data(), core::kFragMagic);
      b[4] = uint8_t(core::kFragVersion);
      b[5] = 0;
      wr32(b.data() + 20, uint32_t(b.size() & ~size_t(3)));
      wr32(b.data() + 28, kFragLayerBytes);
      b[10] = b[11] = 0;
      wr32(b.data() + 16, rng() % 4);
      b.resize(b.size() & ~size_t(3));
      fix_crc(b);
      ++plausible;
    }
    // Random entries behind a plausible header and a valid CRC are still
    // random: every buffer is refused, with a status saying why.
    const FragStatus st = exercise(b, rng);
    EXPECT_NE(st, FragStatus::Ok) << "random buffer " << it << " (" << b.size() << " bytes) was accepted";
    ++why[st];
  }
  EXPECT_GT(plausible, 5000);
  // The plausible headers get past the magic, version, size and CRC checks
  // to the entries (BadLayer), so those checks are what refused them.
  EXPECT_GT(why[FragStatus::BadLayer], 1000);
  EXPECT_GT(why[FragStatus::BadMagic], 1000);
}

// A fragment damaged at a chosen field (its CRC made good again) is refused
// with a reason that names the layer, the field and the value found there,
// and the board's ERROR text for it carries the same.
TEST(Fragment, DamagedFieldIsRefusedNamingLayerAndField) {
  namespace f = core::frag;
  const QGraph q = tiny_graph();
  const Plan p = tiny_plan(q, 3);
  const std::vector<uint8_t> good = write_fragment(q, p, 0);
  {
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(good.data(), good.size()), FragStatus::Ok);
    EXPECT_EQ(rd.refusal().field, nullptr);
  }
  auto entry = [](uint32_t layer) { return size_t(f::kHeaderBytes) + size_t(layer) * f::kEntryBytes; };
  auto scalar = [&](uint32_t layer, int k) { return entry(layer) + f::kScalars + 4 * size_t(k); };  // kScalarOrder
  auto slot = [&](uint32_t layer, int k) { return entry(layer) + f::kSlots + size_t(k) * f::kSlotBytes; };
  ASSERT_GT(rd32(good.data() + entry(0) + f::kSends + 4), 0u) << "worker 0 sends outputs of layer 0";
  const size_t first_send = rd32(good.data() + entry(0) + f::kSends);
  struct Damage {
    const char* what;
    size_t at;       // byte offset of the field
    int bytes;       // 1 or 4
    int64_t value;   // written there
    uint32_t layer;  // expected in the refusal
    const char* field;
  };
  const Damage cases[] = {
      {"unknown op", entry(0) + f::kOp, 1, 99, 0, "op"},
      {"oc_count past the Conv's channels", entry(0) + f::kOcCount, 4, 100, 0, "oc_count"},
      {"a send to no board", first_send, 4, 7, 0, "send.peer"},  // u16 peer, u16 layer 0
      {"act_min of the Lut", scalar(1, 4), 4, 200, 1, "act_min"},
      {"a growing rescale of the Add", slot(2, 1) + f::kInShift, 4, 5, 2, "in_shift[1]"},
      {"AvgPool table size", entry(3) + f::kArrays + 16 + 4, 4, 3, 3, "mult"},
      {"Concat operand height", slot(5, 1) + f::kInDims + 4, 4, 2, 5, "in[1].h"},
      {"GlobalAvgPool inputs", entry(6) + f::kNInputs, 1, 0, 6, "n_inputs"},
  };
  for (const Damage& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<uint8_t> bad = good;
    if (c.bytes == 1) bad[c.at] = uint8_t(c.value);
    else wr32(bad.data() + c.at, uint32_t(c.value));
    fix_crc(bad);
    core::FragmentReader rd;
    ASSERT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadLayer);
    const core::FragRefusal& why = rd.refusal();
    ASSERT_NE(why.field, nullptr);
    EXPECT_EQ(why.layer, int64_t(c.layer));
    EXPECT_STREQ(why.field, c.field);
    EXPECT_EQ(why.value, c.value);
    char text[65];
    core::fragment_invalid_text(FragStatus::BadLayer, why, text, sizeof text);
    const std::string line = text;
    EXPECT_EQ(line.rfind("fragment invalid: layer " + std::to_string(c.layer) + " " + c.field + " = " +
                             std::to_string(c.value), 0),
              0u)
        << line;
  }
  // A header field: no layer, the field named.
  std::vector<uint8_t> bad = good;
  bad[f::kWorker] = 9;
  fix_crc(bad);
  core::FragmentReader rd;
  ASSERT_EQ(rd.open(bad.data(), bad.size()), FragStatus::BadLayer);
  EXPECT_EQ(rd.refusal().layer, -1);
  ASSERT_NE(rd.refusal().field, nullptr);
  EXPECT_STREQ(rd.refusal().field, "worker");
  char line[80];
  core::format_refusal(rd.refusal(), line, sizeof line);
  EXPECT_STREQ(line, "worker = 9");
}
