// The firmware's run modes (main.cpp parses the command line).
#pragma once

#include <stdint.h>

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
  int32_t flip_layer = -1;     // test hook: change one output value of this layer
};

// Kernel suite on the target; 0 if every split run equals the whole run
// (and, given `expected_crcs` (one per kernel_suite.h case, computed on the
// host at build time), every output checksum equals the host's).
int fw_selftest(int split, const uint32_t* expected_crcs = nullptr);
// Board worker over TCP; returns only with --once (or on a fatal error).
int fw_serve(const ServeOptions& o);
