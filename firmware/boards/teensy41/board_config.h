// Constants of the Teensy 4.1 board (i.MX RT1062, Cortex-M7 at 600 MHz).
#pragma once

// board_ticks() is the DWT cycle counter (extended to 64 bits), so a tick
// is one core cycle; the shared logs multiply ticks by BOARD_NS_PER_TICK and
// call the result "instructions": on this board those figures are cycles.
#define BOARD_TICK_HZ 600000000u
#define BOARD_NS_PER_TICK 1u
#define BOARD_TIMING_NOTE "instructions = DWT cycles at 600 MHz (on this board every 'instructions' figure is cycles)"
#define BOARD_NAME "Teensy 4.1 (i.MX RT1062)"

// NVIC lines (i.MX RT1060 reference manual, interrupt table).
#define IRQ_LPUART6 25
#define IRQ_ENET 114
#define BOARD_IRQ_COUNT 160

// Flash layout: the last 256 KB of the 8 MB chip stay untouched (on a
// Teensy 4.1 they hold the EEPROM emulation and the recovery program); the
// two sectors below them hold the provisioned settings and the selftest's
// scratch sector; the fragment store (A/B slots) takes the rest after the
// program image.
#define TEENSY_FLASH_BASE 0x60000000u
#define TEENSY_FLASH_SIZE (8u * 1024u * 1024u)
