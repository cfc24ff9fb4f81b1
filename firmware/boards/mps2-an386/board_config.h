// Constants of the QEMU mps2-an386 board (Cortex-M4; make BOARD=mps2-an386); its code is in
// firmware/src (board.c, startup.c, lan9118.c, semihost.c).
#pragma once

// Timer input clock of the mps2 FPGA images (SYSCLK), Hz. With QEMU's
// -icount shift=0 each guest instruction advances virtual time by 1 ns, so
// one tick is exactly 40 instructions.
#define BOARD_TICK_HZ 25000000u
#define BOARD_NS_PER_TICK 40u
#define BOARD_TIMING_NOTE "instructions = 25 MHz ticks x 40 (exact with -icount shift=0)"
#define BOARD_NAME "QEMU mps2-an386 (Cortex-M4), 192 KB arena, 1 MB flash"
// Send queues shared by the links (firmware/src/net_worker.cpp; one per
// link slot by default): 3 (8,496 B), for which lwIP's heap is 8 KB smaller
// (firmware/Makefile), so the stack keeps the 34 KB it had (the M7's runs
// use 31 KB of theirs).
#define BOARD_SEND_QUEUES 3

// Interrupt lines of the mps2-an386 NVIC used here (the same as the an500:
// CMSDK timers 0/1, the LAN9118 at 0x40200000).
#define IRQ_TIMER0 8
#define IRQ_TIMER1 9
#define IRQ_ETHERNET 13
#define LAN9118_BASE 0x40200000u  // 0xA0000000 on the an500

// QEMU user-mode networking: every board is 10.0.2.15 behind its own NAT and
// reaches the host's loopback through its gateway (10.0.2.2). Peer addresses
// in PEERS are the boards' host port forwards on 127.0.0.1, so the firmware
// dials a loopback peer address through the gateway (net_worker.cpp).
#define BOARD_LOOPBACK_VIA_GATEWAY 1

// The flash (QEMU's mps.ram at 0x21000000, 16 MB, of which the board uses
// 1 MB): its base, the MPU guard past that 1 MB, and the provisioning record
// in its top 64 KB (firmware.h). The guard past the 192 KB arena is 64 KB.
#define BOARD_FLASH_BASE 0x21000000u
#define BOARD_FLASH_GUARD 0x21100000u
#define BOARD_FLASH_GUARD_LOG2 20
#define BOARD_ARENA_GUARD_LOG2 16
#define BOARD_PROVISION_ADDR 0x210F0000u
