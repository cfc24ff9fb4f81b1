// The console on a Teensy 4.1: LPUART6 on pins 0 (RX) and 1 (TX), 115200
// baud 8N1 from the 24 MHz crystal (24 MHz / (26 x 8) = 115385 baud, 0.16 %
// off). Output goes through a 16 KB ring drained by the TX interrupt, so a
// log line costs the worker microseconds, not the ~17 ms the wire needs;
// when the ring is full the writer waits. Input is polled.
// Implements the console half of semihost.h (sh_*); ts_log is in log.c.
#include <stddef.h>

#include "board.h"
#include "semihost.h"
#include "teensy41.h"

#define UART(off) REG32(LPUART6_BASE + (off))
#define RING 16384u

static volatile uint8_t g_ring[RING];
static volatile uint32_t g_head, g_tail;  // head: next write; tail: next send

void sh_init(void) {
  REG32(CCM_CCGR3) |= 3u << 6;  // LPUART6 clock gate
  REG32(IOMUXC_MUX(PAD_AD_B0(2))) = 2;  // LPUART6_TX
  REG32(IOMUXC_MUX(PAD_AD_B0(3))) = 2;  // LPUART6_RX
  REG32(IOMUXC_PAD(PAD_AD_B0(2))) = PAD_DSE(6) | PAD_SPEED(2);
  REG32(IOMUXC_PAD(PAD_AD_B0(3))) = PAD_DSE(6) | PAD_SPEED(2) | PAD_PKE | PAD_PUE | PAD_PUS(3) | PAD_HYS;
  REG32(IOMUXC_LPUART6_TX_SELECT_INPUT) = 1;
  REG32(IOMUXC_LPUART6_RX_SELECT_INPUT) = 1;
  UART(LPUART_GLOBAL) = 2u;  // reset
  UART(LPUART_GLOBAL) = 0;
  UART(LPUART_BAUD) = (25u << 24) | 8u;  // OSR 26, SBR 8
  UART(LPUART_CTRL) = LPUART_CTRL_TE | LPUART_CTRL_RE;
  g_head = g_tail = 0;
  nvic_enable(IRQ_LPUART6);
}

// Sends ring bytes while the transmitter has room; called with the TX
// interrupt or by a waiting writer.
static void drain(void) {
  while (g_tail != g_head && (UART(LPUART_STAT) & LPUART_STAT_TDRE)) {
    UART(LPUART_DATA) = g_ring[g_tail % RING];
    g_tail++;
  }
  if (g_tail == g_head) UART(LPUART_CTRL) &= ~LPUART_CTRL_TIE;
}

void ts_irq_lpuart6(void) { drain(); }

void sh_write(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (s[i] == '\n') sh_write("\r", 1);  // terminals want CR LF
    while (g_head - g_tail >= RING) {  // full: send some ourselves
      uint32_t primask;
      __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
      drain();
      __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
    }
    g_ring[g_head % RING] = (uint8_t)s[i];
    __asm__ volatile("dmb" ::: "memory");
    g_head++;
  }
  UART(LPUART_CTRL) |= LPUART_CTRL_TIE;  // the interrupt takes it from here
}

void console_flush(void) {
  uint32_t primask;
  __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(primask)::"memory");
  while (g_tail != g_head) drain();
  while (!(UART(LPUART_STAT) & LPUART_STAT_TC)) {
  }
  __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
}

int console_getc(void) {
  const uint32_t st = UART(LPUART_STAT);
  if (st & LPUART_STAT_OR) UART(LPUART_STAT) = LPUART_STAT_OR;  // overrun: clear, keep going
  if (!(st & LPUART_STAT_RDRF)) return -1;
  return (int)(UART(LPUART_DATA) & 0xFFu);
}

// No host command line on a real board (main.cpp has the console instead).
int sh_cmdline(char* buf, size_t cap) {
  if (cap) buf[0] = 0;
  return -1;
}

// There is no host to return to: report the code, wait up to 10 s for a key
// (so a fault message can be read), then restart the board.
void sh_exit(int code) {
  ts_log("exit code %d: the board restarts in 10 s (press a key to restart now)\n", code);
  console_flush();
  __asm__ volatile("cpsid i" ::: "memory");
  REG32(DEMCR) |= 1u << 24;  // the cycle counter may not run yet (early fault)
  REG32(DWT_CTRL) |= 1u;
  int key = 0;
  for (int sec = 0; sec < 10 && !key; ++sec) {
    const uint32_t start = REG32(DWT_CYCCNT);
    while (!key && REG32(DWT_CYCCNT) - start < BOARD_TICK_HZ) key = console_getc() >= 0;
  }
  REG32(SCB_AIRCR) = 0x05FA0004u;  // SYSRESETREQ
  for (;;) {
  }
}
