// Reset and exceptions on the Teensy 4.1.
//
// The boot ROM jumps to ts_reset (the IVT's entry point) running from flash
// with its own stack. ts_reset first gives FlexRAM the layout the linker
// computed (code banks ITCM, the rest DTCM: IOMUXC_GPR17, selected by
// GPR16, with both TCM windows sized 512 KB in GPR14), because the stack
// lives in DTCM; then, as on QEMU, thread code runs on the big stack (PSP)
// and handlers on a small one (MSP). ts_reset_c (still in flash) stops the
// watchdogs, copies code to ITCM and data to DTCM, clears .bss, paints the
// stack and continues from ITCM.
#include <stdint.h>

#include "board.h"
#include "semihost.h"
#include "teensy41.h"

extern uint8_t __itcm_load[], __data_load[], __data_end[], __bss_start[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);

int main(void);
void teensy_clock_init(void);
void ts_irq_systick(void);
void ts_irq_lpuart6(void);
void ts_irq_enet(void);

extern uint32_t g_handler_stack[512];

__attribute__((section(".flashcode"), noreturn, used, optimize("no-tree-loop-distribute-patterns")))
void ts_reset_c(void) {
  // Watchdogs: WDOG1/2's power-down counter would reset the chip after 16 s;
  // RTWDOG may be running from reset. Unlock and disable it.
  REG16(WDOG1_WMCR) = 0;
  REG16(WDOG2_WMCR) = 0;
  if (REG32(RTWDOG_CS) & (1u << 13)) {  // CMD32EN
    REG32(RTWDOG_CNT) = 0xD928C520u;
  } else {
    REG16(RTWDOG_CNT) = 0xC520u;
    REG16(RTWDOG_CNT) = 0xD928u;
  }
  REG32(RTWDOG_TOVAL) = 0xFFFFu;
  REG32(RTWDOG_CS) = (REG32(RTWDOG_CS) & ~(1u << 7)) | (1u << 5);  // EN off, UPDATE on

  REG32(SCB_CPACR) |= 0xFu << 20;  // FPU
  __asm__ volatile("dsb\n isb" ::: "memory");
  volatile uint32_t* dst = (volatile uint32_t*)__itcm_start;
  const volatile uint32_t* src = (const volatile uint32_t*)__itcm_load;
  while (dst < (volatile uint32_t*)__itcm_end) *dst++ = *src++;
  dst = (volatile uint32_t*)__data_start;
  src = (const volatile uint32_t*)__data_load;
  while (dst < (volatile uint32_t*)__data_end) *dst++ = *src++;
  dst = (volatile uint32_t*)__bss_start;
  while (dst < (volatile uint32_t*)__bss_end) *dst++ = 0;
  uint32_t sp;
  __asm__ volatile("mov %0, sp" : "=r"(sp));
  dst = (volatile uint32_t*)((((uintptr_t)__stack_limit + 31u) & ~(uintptr_t)31u) + 32u);
  while ((uint32_t)(uintptr_t)dst < sp - 128u) *dst++ = 0xA5A5A5A5u;
  REG32(SCB_VTOR) = (uint32_t)(uintptr_t)__itcm_start;  // the table at ITCM 0
  __asm__ volatile("dsb\n isb" ::: "memory");
  // From here on, calls go through pointers (flash -> ITCM is out of BL range).
  void (*volatile clocks)(void) = teensy_clock_init;
  clocks();
  for (void (**f)(void) = __init_array_start; f < __init_array_end; ++f) {
    void (*volatile fn)(void) = *f;
    fn();
  }
  int (*volatile entry)(void) = main;
  void (*volatile quit)(int) = sh_exit;
  quit(entry());
  for (;;) {
  }
}

// Entry point (IVT). No stack use before FlexRAM is configured.
__attribute__((section(".flashcode"), naked, noreturn, used)) void ts_reset(void) {
  __asm__ volatile(
      "cpsid i\n"
      // GPR17: 2 bits per 32 KB bank, bank 0 lowest: 0b11 ITCM for the
      // first __itcm_banks banks, 0b10 DTCM for the others.
      "ldr r0, =__itcm_banks\n"
      "movs r1, #0\n"
      "movs r2, #0\n"
      "1:\n"
      "cmp r2, #16\n"
      "bge 2f\n"
      "cmp r2, r0\n"
      "ite lt\n"
      "movlt r3, #3\n"
      "movge r3, #2\n"
      "lsls r12, r2, #1\n"
      "lsl r3, r3, r12\n"
      "orrs r1, r1, r3\n"
      "adds r2, r2, #1\n"
      "b 1b\n"
      "2:\n"
      "ldr r0, =0x400AC044\n"  // IOMUXC_GPR_GPR17
      "str r1, [r0]\n"
      "ldr r0, =0x400AC040\n"  // GPR16: bank configuration from GPR17, TCMs on
      "ldr r1, [r0]\n"
      "orr r1, r1, #7\n"
      "str r1, [r0]\n"
      "ldr r0, =0x400AC038\n"  // GPR14: ITCM and DTCM windows of 512 KB
      "ldr r1, [r0]\n"
      "bic r1, r1, #0x00FF0000\n"
      "orr r1, r1, #0x00AA0000\n"
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
      "ldr r0, =__stack_top\n"
      "msr psp, r0\n"
      "ldr r0, =g_handler_stack + 2048\n"
      "msr msp, r0\n"
      "movs r0, #2\n"
      "msr control, r0\n"
      "isb\n"
      "ldr r0, =ts_reset_c\n"
      "bx r0\n"
      ".ltorg\n");
}

// Fault entry and report, shared by every board (fault.c).
void ts_fault(void);
void ts_unexpected(void);

typedef void (*Vector)(void);

// 16 system exceptions + the RT1062's 160 interrupt lines: the lines this
// firmware uses get their handlers, the others report themselves. Placed
// at ITCM 0x0 (the linker script checks).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
__attribute__((section(".vectors"), used, aligned(1024))) const Vector ts_vectors[16 + BOARD_IRQ_COUNT] = {
    [0] = (Vector)(uintptr_t)__stack_top,
    [1] = ts_reset,
    [2 ... 6] = ts_fault,  // NMI, HardFault, MemManage, BusFault, UsageFault
    [7 ... 14] = ts_unexpected,  // reserved, SVCall, DebugMonitor, PendSV
    [15] = ts_irq_systick,
    [16 ... 16 + BOARD_IRQ_COUNT - 1] = ts_unexpected,
    [16 + IRQ_LPUART6] = ts_irq_lpuart6,
    [16 + IRQ_ENET] = ts_irq_enet,
};
#pragma GCC diagnostic pop
