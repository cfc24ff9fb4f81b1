// `selftest`: the kernel suite on the target. Each layer is computed whole
// and then as `split` boards would compute it (equal runs of output neurons,
// each from a copy of only its input window), and the two must agree. The
// output checksum is printed for the host test to compare with the host's,
// and the instructions spent (exact under QEMU -icount shift=0: one tick of
// the 25 MHz timer is 40 instructions) give instructions per MAC and K1.
#include "board.h"
#include "core/layer.h"
#include "firmware.h"
#include "kernel_suite.h"
#include "semihost.h"

using namespace ts;

namespace {

// x / y with three decimals, as "I.FFF".
void fixed3(char* buf, size_t cap, uint64_t x, uint64_t y) {
  const uint64_t v = y ? (x * 1000u + y / 2u) / y : 0;
  ts_format(buf, cap, "%llu.%03llu", (unsigned long long)(v / 1000u), (unsigned long long)(v % 1000u));
}

}  // namespace

int fw_selftest(int split) {
  int failures = 0;
  ts_log("selftest: %d kernels, whole layer vs %d split runs; instructions = 25 MHz ticks x 40 "
         "(exact with -icount shift=0)\n",
         suite::kCount, split);
  for (int i = 0; i < suite::kCount; ++i) {
    suite::Bump ram{__arena_start, size_t(__arena_end - __arena_start), 0};
    suite::Bump flash{__store_start, size_t(__store_end - __store_start), 0};
    suite::Layer lay;
    if (!suite::build(i, ram, flash, &lay)) {
      ts_log("kernel %s: does not fit the board's RAM/flash\n", suite::kSpecs[i].name);
      failures++;
      continue;
    }
    const core::LayerDesc& L = lay.desc;
    int8_t* whole = static_cast<int8_t*>(ram.take(size_t(lay.n_out)));
    int8_t* parts = static_cast<int8_t*>(ram.take(size_t(lay.n_out)));
    if (!whole || !parts) {
      ts_log("kernel %s: outputs do not fit the arena\n", suite::kSpecs[i].name);
      failures++;
      continue;
    }
    const core::View all{lay.input, 0, L.in[0].c, 0, L.in[0].h};
    const uint64_t t0 = board_ticks();
    const core::KernelStatus st = core::compute_range(L, &all, 0, lay.n_out, whole, lay.oc_count);
    const uint64_t ticks = board_ticks() - t0;
    uint64_t split_ticks = 0;
    bool ok = st == core::KernelStatus::Ok;
    for (int r = 0; r < split && ok; ++r) {
      int32_t b = 0, e = 0;
      suite::share(lay.n_out, split, r, &b, &e);
      if (e <= b) continue;
      const core::Box box = core::input_box(L, 0, b, e);
      const size_t mark = ram.used;
      int8_t* win = static_cast<int8_t*>(ram.take(size_t(box.elems(L.in[0].w))));
      if (!win) {
        ok = false;
        break;
      }
      const core::View v = suite::window(lay.input, L.in[0], box, win);
      const uint64_t s0 = board_ticks();
      ok = core::compute_range(L, &v, b, e, parts + b, lay.oc_count) == core::KernelStatus::Ok;
      split_ticks += board_ticks() - s0;
      ram.used = mark;
    }
    const uint32_t crc = crc32(whole, size_t(lay.n_out));
    const uint32_t crc_split = crc32(parts, size_t(lay.n_out));
    if (!ok || crc != crc_split) failures++;
    const uint64_t instr = ticks * BOARD_NS_PER_TICK;
    char ipm[24], k1[24];
    fixed3(ipm, sizeof ipm, instr, lay.macs);
    // K1: KB (1000 B) of output per million cycles, at 1 cycle per instruction.
    fixed3(k1, sizeof k1, uint64_t(lay.n_out) * 1000u, instr);
    ts_log("kernel %s kind=%s outputs=%ld macs=%llu crc=%08x split_crc=%08x instructions=%llu "
           "split_instructions=%llu instr_per_mac=%s k1_kb_per_mcycle=%s %s\n",
           suite::kSpecs[i].name, suite::kSpecs[i].kind, (long)lay.n_out, (unsigned long long)lay.macs,
           (unsigned)crc, (unsigned)crc_split, (unsigned long long)instr,
           (unsigned long long)(split_ticks * BOARD_NS_PER_TICK), ipm, k1, ok && crc == crc_split ? "ok" : "MISMATCH");
  }
  ts_log("selftest stack: %u of %u bytes used\n", (unsigned)board_stack_used(), (unsigned)board_stack_size());
  ts_log("selftest: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
