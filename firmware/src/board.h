// The board interface: what the shared firmware (main loop, worker glue,
// flash store, selftest) needs from a board. Each board implements it in its
// own files and gives its constants in "board_config.h" (found through the
// board's include directory, firmware/boards/<board>/):
//   BOARD_TICK_HZ      rate of board_ticks()
//   BOARD_NS_PER_TICK  what one tick is worth in the logs' "instructions":
//                      40 on QEMU (-icount shift=0: 1 ns per instruction,
//                      25 MHz timer); 1 on the Teensy, where a tick is one
//                      DWT cycle, so the logged figures are cycles
//   BOARD_TIMING_NOTE  one phrase saying which of the two the figures are
//   BOARD_NAME         for the logs
//
// Boards: mps2-an500 (QEMU, files in firmware/src: board.c, startup.c,
// lan9118.c, semihost.c) and teensy41 (firmware/boards/teensy41).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "board_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// Linker-provided layout (boards/mps2-an500/mps2-an500.ld for QEMU, boards/teensy41/teensy41.ld for the board).
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
// of flash (the emulator maps 16 MB there; the Teensy's map ends there).
void board_guards(uint32_t arena_bytes);
// Deepest stack use since reset, in bytes (the stack is painted at reset).
uint32_t board_stack_used(void);
uint32_t board_stack_size(void);

// Registered by the Ethernet driver.
void board_set_ethernet_isr(void (*isr)(void));

// The flash that holds the fragment store (NOR semantics: erase sets a whole
// 4 KB sector to 0xFF, program only clears bits). `sector` must be
// 4 KB-aligned and [dst, dst + len) erased and inside the store. Reads are
// plain loads. Both return 1 on success, 0 if the flash reported an error
// or the read-back differs. QEMU: plain stores; Teensy: FlexSPI commands
// from RAM-resident code.
int board_flash_erase(uint8_t* sector);
int board_flash_program(uint8_t* dst, const uint8_t* src, uint32_t len);

#ifdef __cplusplus
}
#endif
