// Constants of the QEMU mps3-an547 board (Cortex-M55 with Helium, SSE-300;
// make BOARD=mps3-an547); its code is in firmware/src (board.c, startup.c,
// lan9118.c, semihost.c), with the SSE-300 differences selected here.
//
// The core boots in the secure state and the firmware stays there: with the
// SAU off every address is secure, so the memory protection controllers
// (SRAM, DDR) and the peripheral protection controller in front of the
// LAN9118 pass its accesses with their reset configuration (everything
// secure) and nothing needs programming.
#pragma once

// The SSE-300 has no CMSDK timers at 0x40000000: the clock is its 64-bit
// system counter (secure control frame 0x58100000, status frame after it),
// which counts the machine's 32 MHz clock; its scale register (8.24 fixed
// point) 0.78125 makes it 25 MHz, so with QEMU's -icount shift=0 (1 ns per
// instruction) one tick is 40 instructions, as on the mps2 boards. The
// 20 Hz wake-up is the core's SysTick on the 32 MHz processor clock.
#define BOARD_TIMER_SYSTICK 1
#define BOARD_SYSTICK_HZ 32000000u
#define BOARD_COUNTER_BASE 0x58100000u
#define BOARD_COUNTER_SCALE 0x00C80000u  // 25 / 32 in 8.24
#define BOARD_TICK_HZ 25000000u
#define BOARD_NS_PER_TICK 40u
#define BOARD_TIMING_NOTE "instructions = 25 MHz ticks x 40 (exact with -icount shift=0)"
#define BOARD_NAME "QEMU mps3-an547 (Cortex-M55), 1 MB arena, 8 MB flash"

// The ARMv8-M MPU (PMSAv8: base/limit regions, no privileged no-access
// permission): board.c maps what the firmware may touch and leaves the
// default map off, so every hole (under the stack, past the arena budget,
// past the 8 MB of flash, the rest of the machine) faults.
#define BOARD_MPU_V8M 1

// Interrupt lines: the AN547's Ethernet is external interrupt 49 (the
// SSE-300 has 96; the vector table covers the first 64).
#define BOARD_NUM_IRQ 64
#define IRQ_ETHERNET 49
#define LAN9118_BASE 0x41400000u  // the Ethernet/USB block, behind a PPC
#define BOARD_PERIPH_BASE 0x41400000u
#define BOARD_PERIPH_LIMIT 0x41500000u  // the LAN9118's 1 MB of the block

// QEMU user-mode networking, as on the mps2 boards (net_worker.cpp).
#define BOARD_LOOPBACK_VIA_GATEWAY 1

// The flash: the machine's RAM (DDR at 0x60000000, 2 GB, the one a
// memory-backend replaces), of which the board uses 8 MB; its top 64 KB holds
// the provisioning record (firmware.h). The arena is the 2 MB SRAM at
// 0x01000000, of which the board uses 1 MB.
#define BOARD_FLASH_BASE 0x60000000u
#define BOARD_FLASH_GUARD 0x60800000u
#define BOARD_PROVISION_ADDR 0x607F0000u
