// tinysplit board firmware on a Teensy 4.1: entry point and serial console
// (LPUART6, pins 0/1, 115200 8N1).
//
// At power-up the board prints its layout and settings, then waits 3 s: a
// key opens the console, otherwise it serves (the board worker on TCP) with
// the saved settings. Console commands:
//   show                      the settings
//   set id N                  board id (HELLO)
//   set ip A.B.C.D            address; also: mask, gw
//   set port N                TCP listen port
//   set mac XX:XX:XX:XX:XX:XX or `set mac factory` (the chip's fused MAC)
//   set ram BYTES             arena budget (<= 524288, the OCRAM)
//   set window N              OUTPUT frames in flight
//   set autoserve on|off      serve after the boot prompt, or stay here
//   save                      write the settings to flash
//   defaults                  back to the defaults (not saved)
//   selftest                  clock, kernels, flash, Ethernet (board_selftest.cpp)
//   serve                     the board worker (what boot does)
//   hello                     the memory layout
//   guardtest | stacktest     the MPU guards must stop an overrun (the board restarts)
//   reboot
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "core/crc32.h"
#include "core/worker.h"
#include "firmware.h"
#include "semihost.h"
#include "settings.h"
#include "teensy41.h"

extern "C" uint32_t ts_crc32_c(const void* p, uint32_t n) { return ts::crc32(p, n); }
extern "C" void teensy_set_mac(const uint8_t mac[6]);
int teensy_selftest();

namespace {

Settings g_set;

__attribute__((noinline)) uint32_t dig(uint32_t depth) {
  volatile uint8_t frame[1024];
  frame[0] = uint8_t(depth);
  if (depth > 1000000u) return frame[0];
  return dig(depth + 1) + frame[0];
}

void print_layout() {
  const uint32_t itcm = uint32_t(__itcm_end - __itcm_start);
  ts_log("layout: ITCM %u B code (%u x 32 KB banks), DTCM data+bss %u B, stack %u B (top %08x)\n", (unsigned)itcm,
         (unsigned)((itcm + 32767u) / 32768u), (unsigned)(__bss_end - __data_start), (unsigned)board_stack_size(),
         (unsigned)(uintptr_t)__stack_top);
  ts_log("layout: arena %u B at %08x (OCRAM), flash image %u B, fragment store %u B at %08x\n",
         (unsigned)(__arena_end - __arena_start), (unsigned)(uintptr_t)__arena_start,
         (unsigned)((uintptr_t)__flash_image_end - TEENSY_FLASH_BASE), (unsigned)(__store_end - __store_start),
         (unsigned)(uintptr_t)__store_start);
}

bool mac_is_set(const uint8_t* m) {
  for (int i = 0; i < 6; ++i)
    if (m[i]) return true;
  return false;
}

void show() {
  const Settings& s = g_set;
  uint8_t mac[6];
  if (mac_is_set(s.mac)) memcpy(mac, s.mac, 6);
  else teensy_fuse_mac(mac);
  ts_log("settings: id %u, ip %u.%u.%u.%u, mask %u.%u.%u.%u, gw %u.%u.%u.%u, port %u\n", (unsigned)s.id, s.ip[0],
         s.ip[1], s.ip[2], s.ip[3], s.mask[0], s.mask[1], s.mask[2], s.mask[3], s.gw[0], s.gw[1], s.gw[2], s.gw[3],
         (unsigned)s.port);
  ts_log("settings: mac %02x:%02x:%02x:%02x:%02x:%02x (%s), ram %u, window %u, autoserve %s\n", mac[0], mac[1],
         mac[2], mac[3], mac[4], mac[5], mac_is_set(s.mac) ? "set" : "factory", (unsigned)s.ram,
         (unsigned)s.window, s.autoserve ? "on" : "off");
}

bool parse_u32(const char* s, uint32_t* out) {
  uint64_t v = 0;
  if (!*s) return false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10u + uint32_t(*s - '0');
    if (v > 0xFFFFFFFFu) return false;
  }
  *out = uint32_t(v);
  return true;
}

bool parse_ip(const char* s, uint8_t out[4]) {
  for (int i = 0; i < 4; ++i) {
    uint32_t v = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 4) v = v * 10u + uint32_t(*s++ - '0'), digits++;
    if (!digits || v > 255 || (i < 3 ? *s != '.' : *s != 0)) return false;
    out[i] = uint8_t(v);
    if (i < 3) ++s;
  }
  return true;
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_mac(const char* s, uint8_t out[6]) {
  if (strcmp(s, "factory") == 0) {
    memset(out, 0, 6);
    return true;
  }
  for (int i = 0; i < 6; ++i) {
    const int h = hexval(s[0]), l = h < 0 ? -1 : hexval(s[1]);
    if (l < 0 || (i < 5 ? s[2] != ':' : s[2] != 0)) return false;
    out[i] = uint8_t(h * 16 + l);
    s += 3;
  }
  return !(out[0] & 1u);  // a station address is not multicast
}

bool set(const char* key, const char* v) {
  Settings& s = g_set;
  uint32_t n = 0;
  if (strcmp(key, "id") == 0) return parse_u32(v, &n) && n <= 0xFFFEu && ((s.id = n), true);
  if (strcmp(key, "ip") == 0) return parse_ip(v, s.ip);
  if (strcmp(key, "mask") == 0) return parse_ip(v, s.mask);
  if (strcmp(key, "gw") == 0) return parse_ip(v, s.gw);
  if (strcmp(key, "port") == 0) return parse_u32(v, &n) && n >= 1 && n <= 65535 && ((s.port = uint16_t(n)), true);
  if (strcmp(key, "mac") == 0) return parse_mac(v, s.mac);
  if (strcmp(key, "ram") == 0)
    return parse_u32(v, &n) && n >= ts::core::kWorkerFixedArena && n <= uint32_t(__arena_end - __arena_start) &&
           ((s.ram = n), true);
  if (strcmp(key, "window") == 0) return parse_u32(v, &n) && n >= 1 && n <= 64 && ((s.window = n), true);
  if (strcmp(key, "autoserve") == 0) {
    if (strcmp(v, "on") == 0) return (s.autoserve = 1), true;
    if (strcmp(v, "off") == 0) return (s.autoserve = 0), true;
    return false;
  }
  return false;
}

int serve() {
  ServeOptions o;
  o.id = g_set.id;
  o.ram_bytes = g_set.ram;
  o.window = g_set.window;
  o.clock_mhz = 600;
  memcpy(o.ip, g_set.ip, 4);
  memcpy(o.mask, g_set.mask, 4);
  memcpy(o.gw, g_set.gw, 4);
  o.port = g_set.port;
  if (mac_is_set(g_set.mac)) teensy_set_mac(g_set.mac);
  return fw_serve(o);  // returns only on a start-up error
}

// Reads a line with echo and backspace; returns its length.
int read_line(char* buf, int cap) {
  int n = 0;
  for (;;) {
    const int c = console_getc();
    if (c < 0) {
      __asm__ volatile("wfi");  // SysTick wakes us at least every 20 ms
      continue;
    }
    if (c == '\r' || c == '\n') {
      sh_write("\n", 1);
      buf[n] = 0;
      return n;
    }
    if ((c == 8 || c == 127) && n > 0) {
      n--;
      sh_write("\b \b", 3);
    } else if (c >= 32 && c < 127 && n < cap - 1) {
      buf[n++] = char(c);
      const char ch = char(c);
      sh_write(&ch, 1);
    }
  }
}

bool key_within_ms(uint32_t ms) {
  const uint32_t t0 = board_ms();
  while (board_ms() - t0 < ms)
    if (console_getc() >= 0) return true;
  return false;
}

void console() {
  char line[128];
  ts_log("console: type 'help'\n");
  for (;;) {
    sh_write("> ", 2);
    read_line(line, sizeof line);
    const char* argv[4] = {"", "", "", ""};
    int argc = 0;
    for (char* p = line; *p && argc < 4;) {
      while (*p == ' ') *p++ = 0;
      if (!*p) break;
      argv[argc++] = p;
      while (*p && *p != ' ') ++p;
    }
    if (argc == 0) continue;
    const char* cmd = argv[0];
    if (strcmp(cmd, "help") == 0) {
      ts_log("commands: show | set id|ip|mask|gw|port|mac|ram|window|autoserve VALUE | save | defaults |\n"
             "          selftest | serve | hello | guardtest | stacktest | reboot\n");
    } else if (strcmp(cmd, "show") == 0) {
      show();
    } else if (strcmp(cmd, "set") == 0) {
      if (argc != 3 || !set(argv[1], argv[2])) ts_log("error: bad setting '%s %s' (see help)\n", argv[1], argv[2]);
      else show();
    } else if (strcmp(cmd, "save") == 0) {
      ts_log(settings_save(&g_set) ? "saved\n" : "error: the settings could not be written to flash\n");
    } else if (strcmp(cmd, "defaults") == 0) {
      settings_defaults(&g_set);
      show();
    } else if (strcmp(cmd, "selftest") == 0) {
      teensy_selftest();
    } else if (strcmp(cmd, "serve") == 0) {
      ts_log("serve: stopped with code %d\n", serve());
    } else if (strcmp(cmd, "hello") == 0) {
      print_layout();
      ts_log("hello: ok\n");
    } else if (strcmp(cmd, "guardtest") == 0) {
      board_guards(64u * 1024u);
      ts_log("guardtest: writing past a 64 KB arena (must fault)\n");
      *(volatile uint32_t*)(__arena_start + 64u * 1024u) = 0xDEADBEEFu;
      ts_log("guardtest: the write was not stopped: FAILED\n");
    } else if (strcmp(cmd, "stacktest") == 0) {
      board_guards(512u * 1024u);
      ts_log("stacktest: recursing (must fault)\n");
      ts_log("stacktest: %u\n", (unsigned)dig(0));
    } else if (strcmp(cmd, "reboot") == 0) {
      console_flush();
      REG32(SCB_AIRCR) = 0x05FA0004u;
    } else {
      ts_log("error: unknown command '%s' (help)\n", cmd);
    }
  }
}

}  // namespace

int main(void) {
  sh_init();
  board_init();
  ts_log("\ntinysplit board firmware (%s), core %u MHz\n", BOARD_NAME, (unsigned)(BOARD_TICK_HZ / 1000000u));
  print_layout();
  const bool saved = settings_load(&g_set) != 0;
  if (!saved) ts_log("settings: none saved, using the defaults\n");
  show();
  if (g_set.autoserve) {
    ts_log("press a key within 3 s for the console, else: serve\n");
    if (!key_within_ms(3000)) {
      ts_log("serve: stopped with code %d\n", serve());
    }
  }
  console();
  return 0;
}
