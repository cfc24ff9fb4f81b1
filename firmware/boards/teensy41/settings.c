#include "settings.h"

#include <string.h>

#include "board.h"
#include <stddef.h>

#define SETTINGS_MAGIC 0x54535354u  // "TSST"
#define SETTINGS_VERSION 1u

extern uint8_t __settings_sector[];

// crc32() lives in src/core (C++); a C-callable wrapper is in main.cpp.
uint32_t ts_crc32_c(const void* p, uint32_t n);

static uint32_t check_of(const Settings* s) { return ts_crc32_c(s, (uint32_t)offsetof(Settings, check)); }

void settings_defaults(Settings* s) {
  memset(s, 0, sizeof *s);
  s->magic = SETTINGS_MAGIC;
  s->version = SETTINGS_VERSION;
  const uint8_t ip[4] = {192, 168, 1, 100}, mask[4] = {255, 255, 255, 0}, gw[4] = {192, 168, 1, 1};
  memcpy(s->ip, ip, 4);
  memcpy(s->mask, mask, 4);
  memcpy(s->gw, gw, 4);
  s->port = 7000;
  s->ram = 512u * 1024u;
  s->window = 8;
  s->autoserve = 1;
  s->check = check_of(s);
}

int settings_load(Settings* s) {
  memcpy(s, __settings_sector, sizeof *s);
  if (s->magic == SETTINGS_MAGIC && s->version == SETTINGS_VERSION && s->check == check_of(s)) return 1;
  settings_defaults(s);
  return 0;
}

int settings_save(Settings* s) {
  s->magic = SETTINGS_MAGIC;
  s->version = SETTINGS_VERSION;
  s->check = check_of(s);
  return board_flash_erase(__settings_sector) &&
         board_flash_program(__settings_sector, (const uint8_t*)s, (uint32_t)sizeof *s);
}
