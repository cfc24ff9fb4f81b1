// `selftest` on a Teensy 4.1: the checks a user runs first on a new board,
// each printing what it found and ok/FAILED:
//   clock    the core clock measured against the 24 MHz crystal (PIT)
//   kernels  the shared kernel suite (src/kernel_suite.h): output checksums
//            against the host build's (computed at build time), whole vs
//            split runs, DWT cycles per MAC
//   flash    erase / program / read back of the scratch sector, with times
//   ethernet PHY id on MDIO, link (waits 5 s), one broadcast frame sent
#include <string.h>

#include "board.h"
#include "enet_core.h"
#include "firmware.h"
#include "kernel_crcs.h"
#include "semihost.h"
#include "teensy41.h"

extern "C" {
uint32_t teensy_enet_hw_init(void);
int teensy_enet_wait_link(uint32_t ms);
int teensy_enet_send_raw(const uint8_t* frame, uint32_t len);
}
extern uint8_t __scratch_sector[];

namespace {

bool check_clock() {
  const uint32_t khz = teensy_measure_core_khz();
  const bool ok = khz > 597000u && khz < 603000u;
  ts_log("selftest clock: core %u.%03u MHz against the 24 MHz crystal (want 600): %s\n", (unsigned)(khz / 1000u),
         (unsigned)(khz % 1000u), ok ? "ok" : "FAILED");
  const uint32_t ccr = REG32(SCB_CCR);
  ts_log("selftest caches: I-cache %s, D-cache %s\n", (ccr & SCB_CCR_IC) ? "on" : "OFF", (ccr & SCB_CCR_DC) ? "on" : "OFF");
  return ok;
}

bool check_flash() {
  static uint8_t pattern[4096];
  uint32_t x = 0x12345678u ^ uint32_t(board_ticks());
  for (uint32_t i = 0; i < sizeof pattern; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    pattern[i] = uint8_t(x);
  }
  const uint64_t t0 = board_ticks();
  const bool erased = board_flash_erase(__scratch_sector) != 0;
  const uint64_t t1 = board_ticks();
  const bool programmed = erased && board_flash_program(__scratch_sector, pattern, sizeof pattern) != 0;
  const uint64_t t2 = board_ticks();
  const bool same = programmed && memcmp(__scratch_sector, pattern, sizeof pattern) == 0;
  ts_log("selftest flash: sector %08x erase %s in %u us, program 4 KB %s in %u us, read back %s: %s\n",
         (unsigned)(uintptr_t)__scratch_sector, erased ? "ok" : "FAILED", (unsigned)((t1 - t0) / 600u),
         programmed ? "ok" : "FAILED", (unsigned)((t2 - t1) / 600u), same ? "equal" : "DIFFERENT",
         same ? "ok" : "FAILED");
  return same;
}

bool check_ethernet() {
  const uint32_t id = teensy_enet_hw_init();
  if (id == 0) {
    ts_log("selftest ethernet: no PHY answers on MDIO (address 0): FAILED\n");
    return false;
  }
  // DP83825I: PHYIDR1 0x2000 (TI), PHYIDR2 0xA14x.
  const bool dp83825 = (id >> 16) == 0x2000u && (id & 0xFFF0u) == 0xA140u;
  ts_log("selftest ethernet: PHY id %04x:%04x (%s)\n", (unsigned)(id >> 16), (unsigned)(id & 0xFFFFu),
         dp83825 ? "DP83825I" : "not the expected DP83825I");
  if (!teensy_enet_wait_link(5000)) {
    ts_log("selftest ethernet: no link after 5 s (cable, switch, power?): FAILED\n");
    return false;
  }
  // A broadcast frame with the local experimental EtherType 0x88B5.
  uint8_t frame[60];
  memset(frame, 0, sizeof frame);
  memset(frame, 0xFF, 6);
  teensy_fuse_mac(frame + 6);
  frame[12] = 0x88;
  frame[13] = 0xB5;
  memcpy(frame + 14, "tinysplit selftest", 18);
  const bool sent = teensy_enet_send_raw(frame, sizeof frame) != 0;
  ts_log("selftest ethernet: link up, test frame %s: %s\n", sent ? "sent" : "NOT sent", sent ? "ok" : "FAILED");
  return dp83825 && sent;
}

}  // namespace

int teensy_selftest() {
  const bool clock = check_clock();
  const bool kernels = fw_selftest(3, kHostKernelCrcs) == 0;
  const bool flash = check_flash();
  const bool eth = check_ethernet();
  ts_log("selftest summary: clock %s, kernels %s, flash %s, ethernet %s\n", clock ? "ok" : "FAILED",
         kernels ? "ok" : "FAILED", flash ? "ok" : "FAILED", eth ? "ok" : "FAILED");
  const bool all = clock && kernels && flash && eth;
  ts_log("selftest overall: %s\n", all ? "ok" : "FAILED");
  return all ? 0 : 1;
}
