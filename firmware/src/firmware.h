// The firmware's run modes (main.cpp parses the command line).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "board_config.h"

struct ServeOptions {
  uint32_t id = 0;
  uint32_t ram_bytes = 512u * 1024u;
  uint32_t clock_mhz = 600;
  uint32_t window = 8;
  uint32_t advertise_ram = 0;  // 0 = the real budget
  // Address and port (QEMU's user-mode network; a Teensy's come from its
  // provisioned settings, boards/teensy41/settings.h).
  uint8_t ip[4] = {10, 0, 2, 15};
  uint8_t mask[4] = {255, 255, 255, 0};
  uint8_t gw[4] = {10, 0, 2, 2};
  uint16_t port = 7000;
  bool icount = false;
  bool once = false;
  // A connection that brings no bytes for this long is closed, so one idle
  // or half-open connection cannot hold the board (it serves one at a time).
  uint32_t idle_ms = 60000;
  // Injected fault (--inject-fault KIND:LAYER, net/fault_port.h; kind 0 =
  // none).
  int32_t fault_kind = 0, fault_layer = -1;
  // Fragment store budget (the flash after the image, split into the two
  // A/B slots); 0 = the whole store region. Smaller values model a board
  // with less flash (the full-flash tests).
  uint32_t flash_bytes = 0;
  uint32_t advertise_flash = 0;  // test hook: claim this much flash in HELLO (0 = the real slot size)
  // Test hook: a power cut during a deploy. The board stops at once (exit
  // code 5, no clean-up) once this many fragment bytes were staged since boot.
  uint32_t cut_after_store = 0;
};

// Provisioning record (the board's shared key for authenticated links,
// core/auth.h), in the top 256 KB of flash that the Teensy 4.1 reserves for
// EEPROM emulation (0x607C0000; QEMU: placed there by spawn_qemu_board with
// -device loader). Layout, 60 bytes:
//   0  "TSKEY001"  magic
//   8  key[32]     the shared key
//  40  seed[16]    per-boot entropy for the board's nonces (QEMU: fresh for
//                  every launch; a Teensy would use its TRNG instead)
//  56  crc32 of bytes 0..55, little-endian
// No magic: the board runs without a key. Magic with a bad CRC: the board
// refuses to start (a damaged key must not silently disable authentication).
#ifdef BOARD_PROVISION_ADDR
constexpr uintptr_t kProvisionAddr = BOARD_PROVISION_ADDR;  // QEMU boards: board_config.h
#else
constexpr uintptr_t kProvisionAddr = 0x607C0000u;
#endif
constexpr uint32_t kProvisionBytes = 60;

// Kernel suite on the target; 0 if every split run equals the whole run
// (and, given `expected_crcs` (one per kernel_suite.h case, computed on the
// host at build time), every output checksum equals the host's).
int fw_selftest(int split, const uint32_t* expected_crcs = nullptr);
// Board worker over TCP; returns only with --once (or on a fatal error).
int fw_serve(const ServeOptions& o);
