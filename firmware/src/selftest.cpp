// `selftest`: the kernel suite on the target. Each layer is computed whole
// and then as `split` boards would compute it (equal runs of output neurons,
// each from a copy of only its input window), and the two must agree. The
// output checksum is printed for the host test to compare with the host's,
// and the instructions spent (exact under QEMU -icount shift=0: one tick of
// the 25 MHz timer is 40 instructions) give instructions per MAC and K1.
#include <string.h>

#include "board.h"
#include "core/kernel_table.h"
#include "core/layer.h"
#include "firmware.h"
#include "kernel_suite.h"
#include "semihost.h"

using namespace ts;

namespace {

// The suite's flash-resident data goes through the board's erase/program
// (board.h): sectors are gathered in RAM and written only when they differ
// from what the flash holds (a second selftest on a real board rewrites
// nothing). Writes come in increasing order within each array.
uint8_t g_sector_buf[4096] __attribute__((aligned(8)));
uint8_t* g_sector = nullptr;  // flash sector being gathered
bool g_flash_ok = true;

bool sector_flush() {
  if (!g_sector) return true;
  bool ok = true;
  if (memcmp(g_sector, g_sector_buf, sizeof g_sector_buf) != 0)
    ok = board_flash_erase(g_sector) && board_flash_program(g_sector, g_sector_buf, sizeof g_sector_buf) &&
         memcmp(g_sector, g_sector_buf, sizeof g_sector_buf) == 0;
  g_sector = nullptr;
  g_flash_ok = g_flash_ok && ok;
  return ok;
}

bool flash_put(void* dst, const void* src, size_t n) {
  uint8_t* d = static_cast<uint8_t*>(dst);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  while (n > 0) {
    uint8_t* sector = reinterpret_cast<uint8_t*>(uintptr_t(d) & ~uintptr_t(4095));
    if (sector != g_sector) {
      if (!sector_flush()) return false;
      memcpy(g_sector_buf, sector, sizeof g_sector_buf);
      g_sector = sector;
    }
    const size_t at = size_t(d - sector), k = n < sizeof g_sector_buf - at ? n : sizeof g_sector_buf - at;
    memcpy(g_sector_buf + at, s, k);
    d += k;
    s += k;
    n -= k;
  }
  return true;
}

// x / y with three decimals, as "I.FFF".
void fixed3(char* buf, size_t cap, uint64_t x, uint64_t y) {
  const uint64_t v = y ? (x * 1000u + y / 2u) / y : 0;
  ts_format(buf, cap, "%llu.%03llu", (unsigned long long)(v / 1000u), (unsigned long long)(v % 1000u));
}

}  // namespace

int fw_selftest(int split, const uint32_t* expected_crcs) {
  int failures = 0;
  // The other kernel table, computed on the same inputs for comparison: the
  // portable one when the DSP table is active (the default), else the DSP one.
  const core::KernelTable& active = core::kernels();
  const core::KernelTable* other = core::find_kernels(&active == &core::portable_kernels() ? "dsp" : "portable");
  ts_log("selftest: %d kernels, whole layer vs %d split runs, kernels %s (compared with %s); %s\n", suite::kCount,
         split, active.name, other ? other->name : "none", BOARD_TIMING_NOTE);
  for (int i = 0; i < suite::kCount; ++i) {
    suite::Bump ram{__arena_start, size_t(__arena_end - __arena_start), 0};
    suite::Bump flash{__store_start, size_t(__store_end - __store_start), 0};
    suite::Layer lay;
    const bool built = suite::build(i, ram, flash, &lay, flash_put);
    if (!sector_flush() || !built) {
      ts_log("kernel %s: does not fit the board's RAM/flash%s\n", suite::kSpecs[i].name,
             g_flash_ok ? "" : " (flash erase/program failed)");
      failures++;
      continue;
    }
    const core::LayerDesc& L = lay.desc;
    int8_t* whole = static_cast<int8_t*>(ram.take(size_t(lay.n_out)));
    int8_t* parts = static_cast<int8_t*>(ram.take(size_t(lay.n_out)));
    int8_t* cmp = static_cast<int8_t*>(ram.take(size_t(lay.n_out)));
    if (!whole || !parts || !cmp) {
      ts_log("kernel %s: outputs do not fit the arena\n", suite::kSpecs[i].name);
      failures++;
      continue;
    }
    core::View all[2];
    suite::views(lay, all);
    const uint64_t t0 = board_ticks();
    const core::KernelStatus st = core::compute_range(L, all, 0, lay.n_out, whole, lay.oc_count);
    const uint64_t ticks = board_ticks() - t0;
    uint64_t split_ticks = 0;
    bool ok = st == core::KernelStatus::Ok;
    for (int r = 0; r < split && ok; ++r) {
      int32_t b = 0, e = 0;
      suite::share(lay.n_out, split, r, &b, &e);
      if (e <= b) continue;
      const size_t mark = ram.used;
      core::View v[2];
      for (int k = 0; k < L.n_inputs && ok; ++k) {
        const core::Box box = core::input_box(L, k, b, e);
        int8_t* win = static_cast<int8_t*>(ram.take(size_t(box.elems(L.in[k].w))));
        if (!win) {
          ok = false;
          break;
        }
        v[k] = suite::window(k ? lay.input2 : lay.input, L.in[k], box, win);
      }
      if (!ok) break;
      const uint64_t s0 = board_ticks();
      ok = core::compute_range(L, v, b, e, parts + b, lay.oc_count) == core::KernelStatus::Ok;
      split_ticks += board_ticks() - s0;
      ram.used = mark;
    }
    uint64_t other_ticks = 0;
    if (other && ok) {
      core::set_kernels(other);
      const uint64_t c0 = board_ticks();
      ok = core::compute_range(L, all, 0, lay.n_out, cmp, lay.oc_count) == core::KernelStatus::Ok;
      other_ticks = board_ticks() - c0;
      core::set_kernels(&active);
    }
    const uint32_t crc = crc32(whole, size_t(lay.n_out));
    const uint32_t crc_split = crc32(parts, size_t(lay.n_out));
    const uint32_t crc_other = other ? crc32(cmp, size_t(lay.n_out)) : crc;
    const bool host_ok = !expected_crcs || crc == expected_crcs[i];
    const bool same = crc == crc_split && (!other || memcmp(whole, cmp, size_t(lay.n_out)) == 0);
    if (!ok || !same || !host_ok) failures++;
    const uint64_t instr = ticks * BOARD_NS_PER_TICK;
    const uint64_t other_instr = other_ticks * BOARD_NS_PER_TICK;
    char ipm[24], k1[24], oipm[24];
    fixed3(ipm, sizeof ipm, instr, lay.macs);
    fixed3(oipm, sizeof oipm, other_instr, lay.macs);
    // K1: KB (1000 B) of output per million cycles, at 1 cycle per instruction.
    fixed3(k1, sizeof k1, uint64_t(lay.n_out) * 1000u, instr);
    ts_log("kernel %s kind=%s outputs=%ld macs=%llu crc=%08x split_crc=%08x instructions=%llu "
           "split_instructions=%llu instr_per_mac=%s k1_kb_per_mcycle=%s kernels=%s %s%s\n",
           suite::kSpecs[i].name, suite::kSpecs[i].kind, (long)lay.n_out, (unsigned long long)lay.macs,
           (unsigned)crc, (unsigned)crc_split, (unsigned long long)instr,
           (unsigned long long)(split_ticks * BOARD_NS_PER_TICK), ipm, k1, active.name, ok && same ? "ok" : "MISMATCH",
           !expected_crcs ? "" : host_ok ? " (equals the host build)" : " (DIFFERS from the host build)");
    if (other)
      ts_log("compare %s kind=%s kernels=%s crc=%08x instructions=%llu instr_per_mac=%s %s\n", suite::kSpecs[i].name,
             suite::kSpecs[i].kind, other->name, (unsigned)crc_other, (unsigned long long)other_instr, oipm,
             crc_other == crc ? "same" : "DIFFERENT");
  }
  {
    // The frame/fragment CRC-32 (src/core/crc32.cpp) over 64 KiB of the arena.
    const size_t n = 65536;
    uint8_t* buf = __arena_start;
    suite::Rng rng{12345u};
    for (size_t k = 0; k < n; ++k) buf[k] = uint8_t(rng.next() >> 24);
    const uint64_t c0 = board_ticks();
    const uint32_t c = crc32(buf, n);
    const uint64_t instr = (board_ticks() - c0) * BOARD_NS_PER_TICK;
    char ipb[24];
    fixed3(ipb, sizeof ipb, instr, n);
    ts_log("crc32 bytes=%u crc=%08x instructions=%llu instr_per_byte=%s\n", (unsigned)n, (unsigned)c,
           (unsigned long long)instr, ipb);
  }
  ts_log("selftest stack: %u of %u bytes used\n", (unsigned)board_stack_used(), (unsigned)board_stack_size());
  ts_log("selftest: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
