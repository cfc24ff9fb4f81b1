// The firmware's run modes (main.cpp parses the command line).
#pragma once

#include <stdint.h>

struct ServeOptions {
  uint32_t id = 0;
  uint32_t ram_bytes = 512u * 1024u;
  uint32_t clock_mhz = 600;
  uint32_t window = 8;
  uint32_t advertise_ram = 0;  // 0 = the real budget
  bool icount = false;
  bool once = false;
};

// Kernel suite on the target; 0 if every split run equals the whole run.
int fw_selftest(int split);
// Board worker over TCP; returns only with --once (or on a fatal error).
int fw_serve(const ServeOptions& o);
