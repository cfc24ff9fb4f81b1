// Erase and program of the Teensy 4.1's QSPI NOR flash (board.h) through
// FlexSPI IP commands, while the program runs from ITCM (all code and
// constants live there after startup; the MPU marks the flash region
// read-only and never-execute, so nothing fetches from it meanwhile).
//
// Each operation: write enable, the command (4 KB sector erase 0x20, or
// page program 0x02 of at most one 256-byte page, data through the IP TX
// FIFO), then read status (0x05) until the busy bit clears. Afterwards the
// FlexSPI's AHB read buffers are reset and the data cache lines of the range
// invalidated, so that reads through the memory map see the new contents;
// the result is read back and compared.
#include <string.h>

#include "board.h"
#include "teensy41.h"

#define LUT_INSTR(op, pads, arg) ((uint32_t)(((op) << 10) | ((pads) << 8) | (arg)))
#define LUT_WORD(i0, i1) ((i0) | ((i1) << 16))
#define PAGE 256u
#define SECTOR 4096u

extern uint8_t __store_start[], __scratch_sector[];

static int g_lut_ready;

// Loads the sequences used here into the controller's LUT (the boot ROM
// loaded the configuration block's copy; this does not depend on it).
// Sequence 0 (the read used for memory-mapped access) is left alone.
static void lut_load(void) {
  static const uint32_t seqs[][2] = {
      {FLEXSPI_SEQ_STATUS, LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x05), LUT_INSTR(FLEXSPI_OP_READ, 0, 1))},
      {FLEXSPI_SEQ_WREN, LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x06), 0)},
      {FLEXSPI_SEQ_ERASE4K, LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x20), LUT_INSTR(FLEXSPI_OP_RADDR, 0, 24))},
      {FLEXSPI_SEQ_PROGRAM, LUT_WORD(LUT_INSTR(FLEXSPI_OP_CMD, 0, 0x02), LUT_INSTR(FLEXSPI_OP_RADDR, 0, 24))},
  };
  REG32(FLEXSPI_LUTKEY) = FLEXSPI_LUT_KEY;
  REG32(FLEXSPI_LUTCR) = 2u;  // unlock
  for (unsigned i = 0; i < sizeof seqs / sizeof seqs[0]; ++i) {
    const uint32_t at = FLEXSPI_LUT + 16u * seqs[i][0];
    REG32(at) = seqs[i][1];
    REG32(at + 4u) = seqs[i][0] == FLEXSPI_SEQ_PROGRAM ? LUT_WORD(LUT_INSTR(FLEXSPI_OP_WRITE, 0, 4), 0) : 0u;
    REG32(at + 8u) = 0;
    REG32(at + 12u) = 0;
  }
  REG32(FLEXSPI_LUTKEY) = FLEXSPI_LUT_KEY;
  REG32(FLEXSPI_LUTCR) = 1u;  // lock
  g_lut_ready = 1;
}

static int wait_idle(void) {
  for (uint32_t i = 0; i < 10000000u; ++i)
    if ((REG32(FLEXSPI_STS0) & 3u) == 3u) return 1;  // sequence and arbiter idle
  return 0;
}

// One IP command: sequence `seq` at flash offset `addr` with `size` data
// bytes out of `tx` (or into `rx`). Returns 1 on success.
static int ip_command(uint32_t seq, uint32_t addr, const uint8_t* tx, uint8_t* rx, uint32_t size) {
  if (!wait_idle()) return 0;
  REG32(FLEXSPI_INTR) = 0xFFFFFFFFu;  // clear flags
  REG32(FLEXSPI_IPTXFCR) = 1u;        // clear FIFOs, watermark 8 bytes
  REG32(FLEXSPI_IPRXFCR) = 1u;
  REG32(FLEXSPI_IPCR0) = addr;
  REG32(FLEXSPI_IPCR1) = (seq << 16) | (size & 0xFFFFu);
  REG32(FLEXSPI_IPCMD) = 1u;
  for (uint32_t done = 0; tx && done < size; done += 8u) {
    uint32_t w[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
    memcpy(w, tx + done, size - done < 8u ? size - done : 8u);
    uint32_t spin = 0;
    while (!(REG32(FLEXSPI_INTR) & FLEXSPI_INTR_IPTXWE))
      if (++spin > 10000000u || (REG32(FLEXSPI_INTR) & FLEXSPI_INTR_IPCMDERR)) return 0;
    REG32(FLEXSPI_TFDR) = w[0];
    REG32(FLEXSPI_TFDR + 4u) = w[1];
    REG32(FLEXSPI_INTR) = FLEXSPI_INTR_IPTXWE;  // hand the 8 bytes over
  }
  uint32_t spin = 0;
  while (!(REG32(FLEXSPI_INTR) & FLEXSPI_INTR_IPCMDDONE))
    if (++spin > 10000000u) return 0;
  const uint32_t intr = REG32(FLEXSPI_INTR);
  if (intr & (FLEXSPI_INTR_IPCMDERR | FLEXSPI_INTR_IPCMDGE)) return 0;
  if (rx) {
    const uint32_t w = REG32(FLEXSPI_RFDR);
    memcpy(rx, &w, size < 4u ? size : 4u);
    REG32(FLEXSPI_IPRXFCR) = 1u;
  }
  REG32(FLEXSPI_INTR) = FLEXSPI_INTR_IPCMDDONE;
  return 1;
}

// Polls the status register until the flash is no longer busy.
static int wait_ready(uint32_t timeout_us) {
  const uint32_t t0 = board_us();
  for (;;) {
    uint8_t st = 0xFF;
    if (!ip_command(FLEXSPI_SEQ_STATUS, 0, 0, &st, 1)) return 0;
    if (!(st & 1u)) return 1;
    if (board_us() - t0 > timeout_us) return 0;
  }
}

// After a change: drop what the FlexSPI AHB buffers and the data cache may
// hold of [p, p + len).
static void refresh(const uint8_t* p, uint32_t len) {
  REG32(FLEXSPI_MCR0) |= 1u;  // SWRESET (the configuration registers and LUT stay)
  while (REG32(FLEXSPI_MCR0) & 1u) {
  }
  __asm__ volatile("dsb" ::: "memory");
  for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)31u; a < (uintptr_t)p + len; a += 32u) REG32(SCB_DCIMVAC) = a;
  __asm__ volatile("dsb\n isb" ::: "memory");
}

// Only the store, the settings and the scratch sector may change: never the
// program image, never the reserved top 256 KB.
static int writable(const uint8_t* p, uint32_t len) {
  const uintptr_t a = (uintptr_t)p;
  return a >= (uintptr_t)__store_start && a + len <= (uintptr_t)__scratch_sector + SECTOR && a + len >= a;
}

int board_flash_erase(uint8_t* sector) {
  if (((uintptr_t)sector & (SECTOR - 1u)) || !writable(sector, SECTOR)) return 0;
  if (!g_lut_ready) lut_load();
  const uint32_t addr = (uint32_t)(uintptr_t)sector - TEENSY_FLASH_BASE;
  const int ok = ip_command(FLEXSPI_SEQ_WREN, addr, 0, 0, 0) && ip_command(FLEXSPI_SEQ_ERASE4K, addr, 0, 0, 0) &&
                 wait_ready(500000u);  // W25Q64JV: 45 ms typical, 400 ms at most
  refresh(sector, SECTOR);
  if (!ok) return 0;
  for (uint32_t i = 0; i < SECTOR; i += 4)
    if (*(const volatile uint32_t*)(sector + i) != 0xFFFFFFFFu) return 0;
  return 1;
}

int board_flash_program(uint8_t* dst, const uint8_t* src, uint32_t len) {
  if (len == 0) return 1;
  if (!writable(dst, len)) return 0;
  if (!g_lut_ready) lut_load();
  int ok = 1;
  for (uint32_t done = 0; ok && done < len;) {
    const uint32_t addr = (uint32_t)(uintptr_t)(dst + done) - TEENSY_FLASH_BASE;
    const uint32_t room = PAGE - (addr % PAGE), n = len - done < room ? len - done : room;
    ok = ip_command(FLEXSPI_SEQ_WREN, addr, 0, 0, 0) && ip_command(FLEXSPI_SEQ_PROGRAM, addr, src + done, 0, n) &&
         wait_ready(10000u);  // 0.4 ms typical, 3 ms at most
    done += n;
  }
  refresh(dst, len);
  return ok && memcmp(dst, src, len) == 0;
}
