// Fault handling shared by every board: the handler stack, the fault entry
// (ts_fault, for NMI/HardFault/MemManage/BusFault/UsageFault) and the report
// it prints before sh_exit(3) (QEMU: exit code 3; Teensy: restart), and the
// handler for exceptions nobody expects. Each board's startup.c puts
// ts_fault and ts_unexpected in its vector table.
#include <stdint.h>

#include "board.h"
#include "semihost.h"

#define FAULT_REG(a) (*(volatile uint32_t*)(uintptr_t)(a))

// Handlers run on their own small stack (MSP), so a thread stack overflow
// that hits the MPU guard can still be reported.
uint32_t g_handler_stack[512] __attribute__((aligned(8)));

// Which fault, where, and what it most likely was.
void ts_fault_report(uint32_t* frame, uint32_t exc_return) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  const uint32_t cfsr = FAULT_REG(0xE000ED28u), hfsr = FAULT_REG(0xE000ED2Cu);
  const uint32_t mmfar = FAULT_REG(0xE000ED34u), bfar = FAULT_REG(0xE000ED38u);
  const int stacked = (cfsr & ((1u << 4) | (1u << 12))) == 0;  // no stacking error
  ts_log("FATAL: fault exception %u cfsr=%08x hfsr=%08x mmfar=%08x bfar=%08x", (unsigned)ipsr, (unsigned)cfsr,
         (unsigned)hfsr, (unsigned)mmfar, (unsigned)bfar);
  if (stacked && frame) ts_log(" pc=%08x lr=%08x", (unsigned)frame[6], (unsigned)frame[5]);
  // A stack overflow shows either while pushing an exception frame (MSTKERR)
  // or as a data access into the 32-byte guard under the stack.
  const uint32_t guard = ((uint32_t)(uintptr_t)__stack_limit + 31u) & ~31u;
  if ((cfsr & (1u << 4)) || ((cfsr & 0x82u) == 0x82u && mmfar >= guard && mmfar < guard + 32u))
    ts_log(" (stack overflow: the thread stack hit its guard)");
  if ((cfsr & 0x82u) == 0x82u && mmfar >= (uint32_t)(uintptr_t)__arena_start &&
      mmfar < (uint32_t)(uintptr_t)__arena_end + 0x80000u)
    ts_log(" (access past the RAM budget)");
  ts_log("\n");
  (void)exc_return;
  sh_exit(3);
}

__attribute__((naked)) void ts_fault(void) {
  __asm__ volatile(
      "tst lr, #4\n"
      "ite eq\n"
      "mrseq r0, msp\n"
      "mrsne r0, psp\n"
      "mov r1, lr\n"
      "ldr r2, =g_handler_stack + 2048\n"
      "mov sp, r2\n"
      "b ts_fault_report\n"
      ".ltorg\n");
}

void ts_unexpected(void) {
  uint32_t ipsr;
  __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
  ts_log("FATAL: unexpected exception %u\n", (unsigned)ipsr);
  sh_exit(3);
}
