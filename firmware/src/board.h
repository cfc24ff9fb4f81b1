// Board support for the emulated Cortex-M7 (QEMU mps2-an500) with the
// Teensy 4.1 memory layout: the clock (a CMSDK timer: QEMU does not emulate
// the DWT cycle counter), interrupts, idle, memory guards and watermarks.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Timer input clock of the mps2 FPGA images (SYSCLK), Hz. With QEMU's
// -icount shift=0 each guest instruction advances virtual time by 1 ns, so
// one tick is exactly 40 instructions.
#define BOARD_TICK_HZ 25000000u
#define BOARD_NS_PER_TICK 40u

// Linker-provided layout (ld/teensy41.ld).
extern uint8_t __arena_start[], __arena_end[];
extern uint8_t __store_start[], __store_end[];
extern uint8_t __stack_top[], __stack_limit[];
extern uint8_t __itcm_start[], __itcm_end[], __data_start[], __bss_end[];
extern uint8_t __flash_image_end[];

// Starts the clocks (free-running tick counter, 20 Hz wake-up tick).
void board_init(void);
// Ticks of BOARD_TICK_HZ since board_init (64-bit, never wraps in practice).
uint64_t board_ticks(void);
uint32_t board_us(void);
uint32_t board_ms(void);

// Interrupt lines of the mps2-an500 NVIC used here.
#define IRQ_TIMER0 8
#define IRQ_TIMER1 9
#define IRQ_ETHERNET 13
void nvic_enable(int irq);
void nvic_disable(int irq);

// Sleeps until an interrupt arrives unless `ready()` says there is work;
// the check and the WFI happen with interrupts masked so no wake-up is lost.
void board_idle(int (*ready)(void));
// Ticks spent asleep in board_idle since reset (the rest is busy time).
uint64_t board_idle_ticks(void);
// Set by the 20 Hz tick; cleared by the caller.
extern volatile uint32_t g_tick_flag;

// MPU guards: no access just below the stack (overflow faults instead of
// corrupting .bss), just past `arena_bytes` of the arena, and past the 8 MB
// of flash (the emulator maps 16 MB there).
void board_guards(uint32_t arena_bytes);
// Deepest stack use since reset, in bytes (the stack is painted at reset).
uint32_t board_stack_used(void);
uint32_t board_stack_size(void);

// Registered by the Ethernet driver.
void board_set_ethernet_isr(void (*isr)(void));

#ifdef __cplusplus
}
#endif
