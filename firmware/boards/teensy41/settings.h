// A Teensy 4.1 board's provisioned settings, kept in one flash sector
// (__settings_sector, just below the reserved top 256 KB) and edited from
// the serial console (main.cpp: `set ...`, `save`).
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t magic, version;
  uint32_t id;  // board id announced in HELLO
  uint8_t ip[4], mask[4], gw[4];
  uint16_t port;     // TCP listen port
  uint8_t mac[6];    // all zero: the chip's factory MAC from its fuses
  uint32_t ram;      // arena bytes (<= 512 KB OCRAM)
  uint32_t window;   // OUTPUT frames in flight
  uint32_t autoserve;  // 1: serve after the boot prompt; 0: stay in the console
  uint32_t check;    // CRC32 of everything above
} Settings;

// Defaults: id 0, 192.168.1.100/24, gateway 192.168.1.1, port 7000,
// factory MAC, 512 KB arena, window 8, autoserve on.
void settings_defaults(Settings* s);
// The saved settings; the defaults (returns 0) if none or corrupted.
int settings_load(Settings* s);
// Writes them to the settings sector; 1 on success.
int settings_save(Settings* s);

#ifdef __cplusplus
}
#endif
