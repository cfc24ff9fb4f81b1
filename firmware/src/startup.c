// Reset and exception handling.
//
// As on a Teensy 4.1, the image lives in flash and the reset code, running
// from flash, copies code into ITCM and initialised data into DTCM before
// anything else runs. The stack is painted so that its deepest use can be
// measured, thread code runs on the process stack (PSP) and handlers on a
// small separate main stack (MSP), so a thread stack overflow that hits the
// MPU guard can still be reported.
#include <stdint.h>

#include "board.h"
#include "semihost.h"

extern uint8_t __itcm_load[], __data_load[], __data_end[], __bss_start[];
extern void (*__init_array_start[])(void);
extern void (*__init_array_end[])(void);

int main(void);
void ts_irq_timer0(void);
void ts_irq_timer1(void);
void ts_irq_systick(void);
void ts_irq_ethernet(void);

#define REG(a) (*(volatile uint32_t*)(a))

extern uint32_t g_handler_stack[512];

// Runs from flash: fills ITCM/DTCM, then jumps into ITCM. Kept free of
// library calls (they live in ITCM, not yet filled) and of loop idioms the
// compiler would turn into them.
__attribute__((section(".flashcode"), noreturn, used, optimize("no-tree-loop-distribute-patterns")))
void ts_reset_c(void) {
  REG(0xE000ED88u) |= 0xFu << 20;  // CPACR: full access to CP10/CP11 (FPU)
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
  REG(0xE000ED08u) = (uint32_t)(uintptr_t)__itcm_start;  // VTOR: the table in ITCM
  __asm__ volatile("dsb\n isb" ::: "memory");
  // Far calls (flash -> ITCM) through pointers: out of BL range.
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

// Reset entry: handlers get their own stack, thread code the big one.
__attribute__((section(".flashcode"), naked, noreturn)) void ts_reset(void) {
  __asm__ volatile(
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

#ifndef BOARD_NUM_IRQ
#define BOARD_NUM_IRQ 32  // the AN500's and AN386's interrupt lines
#endif

// The system exceptions + the board's BOARD_NUM_IRQ interrupt lines; every
// entry nobody handles is ts_unexpected (GCC range designators: the later
// entries override the first one).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
__attribute__((section(".vectors"), used)) const Vector ts_vectors[16 + BOARD_NUM_IRQ] = {
    [0 ... 15 + BOARD_NUM_IRQ] = ts_unexpected,
    [0] = (Vector)(uintptr_t)__stack_top,
    [1] = ts_reset,
    [2] = ts_fault,  // NMI
    [3] = ts_fault,  // HardFault
    [4] = ts_fault,  // MemManage
    [5] = ts_fault,  // BusFault
    [6] = ts_fault,  // UsageFault
#ifdef BOARD_MPU_V8M
    [7] = ts_fault,  // SecureFault (ARMv8-M)
#endif
#ifdef BOARD_TIMER_SYSTICK
    [15] = ts_irq_systick,
#else
    [16 + IRQ_TIMER0] = ts_irq_timer0,
    [16 + IRQ_TIMER1] = ts_irq_timer1,
#endif
    [16 + IRQ_ETHERNET] = ts_irq_ethernet,
};
#pragma GCC diagnostic pop
