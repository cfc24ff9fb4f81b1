#include "semihost.h"

#include <stdarg.h>

enum {
  kSysOpen = 0x01,
  kSysWrite = 0x05,
  kSysGetCmdline = 0x15,
  kSysExitExtended = 0x20,
};

static int sh_call(int op, void* arg) {
  register int r0 __asm__("r0") = op;
  register void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static int g_stdout = -1;

void sh_init(void) {
  static const char tt[] = ":tt";
  uint32_t args[3] = {(uint32_t)(uintptr_t)tt, 4 /* "w" */, 3};
  g_stdout = sh_call(kSysOpen, args);
}

void sh_write(const char* s, size_t n) {
  if (g_stdout < 0 || n == 0) return;
  uint32_t args[3] = {(uint32_t)g_stdout, (uint32_t)(uintptr_t)s, (uint32_t)n};
  sh_call(kSysWrite, args);
}

int sh_cmdline(char* buf, size_t cap) {
  uint32_t args[2] = {(uint32_t)(uintptr_t)buf, (uint32_t)cap};
  if (cap == 0) return -1;
  buf[0] = 0;
  if (sh_call(kSysGetCmdline, args) != 0) return -1;
  if (args[1] >= cap) args[1] = (uint32_t)cap - 1;
  buf[args[1]] = 0;
  return (int)args[1];
}

void sh_exit(int code) {
  uint32_t args[2] = {0x20026 /* ADP_Stopped_ApplicationExit */, (uint32_t)code};
  for (;;) sh_call(kSysExitExtended, args);
}
