// Constants of the QEMU mps2-an500 board (the default build); its code is in
// firmware/src (board.c, startup.c, lan9118.c, semihost.c).
#pragma once

// Timer input clock of the mps2 FPGA images (SYSCLK), Hz. With QEMU's
// -icount shift=0 each guest instruction advances virtual time by 1 ns, so
// one tick is exactly 40 instructions.
#define BOARD_TICK_HZ 25000000u
#define BOARD_NS_PER_TICK 40u
#define BOARD_TIMING_NOTE "instructions = 25 MHz ticks x 40 (exact with -icount shift=0)"
#define BOARD_NAME "QEMU mps2-an500, Teensy 4.1 layout"

// Interrupt lines of the mps2-an500 NVIC used here.
#define IRQ_TIMER0 8
#define IRQ_TIMER1 9
#define IRQ_ETHERNET 13

// QEMU user-mode networking: every board is 10.0.2.15 behind its own NAT and
// reaches the host's loopback through its gateway (10.0.2.2). Peer addresses
// in PEERS are the boards' host port forwards on 127.0.0.1, so the firmware
// dials a loopback peer address through the gateway (net_worker.cpp).
#define BOARD_LOOPBACK_VIA_GATEWAY 1

// The flash (QEMU's PSRAM, the machine's RAM): its base, the MPU guard past
// the Teensy's 8 MB, and the provisioning record in its reserved top
// (firmware.h). The guard past the 512 KB arena is 2^19 bytes.
#define BOARD_FLASH_BASE 0x60000000u
#define BOARD_FLASH_GUARD 0x60800000u
#define BOARD_FLASH_GUARD_LOG2 23
#define BOARD_ARENA_GUARD_LOG2 19
#define BOARD_PROVISION_ADDR 0x607C0000u
