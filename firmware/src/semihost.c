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

// --- formatting -------------------------------------------------------------

typedef struct {
  char* buf;
  size_t cap, len;
} Out;

static void put(Out* o, char c) {
  if (o->len + 1 < o->cap) o->buf[o->len] = c;
  o->len++;
}

static void put_num(Out* o, unsigned long long v, unsigned base, int upper, int width, char pad, int neg) {
  char tmp[24];
  int n = 0;
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    tmp[n++] = digits[v % base];
    v /= base;
  } while (v != 0);
  if (neg) {
    if (pad == '0') put(o, '-');
    width--;
  }
  for (int i = n; i < width; ++i) put(o, pad);
  if (neg && pad != '0') put(o, '-');
  while (n > 0) put(o, tmp[--n]);
}

static void vformat(Out* o, const char* fmt, va_list ap) {
  for (const char* p = fmt; *p; ++p) {
    if (*p != '%') {
      put(o, *p);
      continue;
    }
    ++p;
    char pad = ' ';
    int width = 0, longs = 0;
    if (*p == '0') {
      pad = '0';
      ++p;
    }
    while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
    while (*p == 'l') {
      longs++;
      ++p;
    }
    switch (*p) {
      case 's': {
        const char* s = va_arg(ap, const char*);
        int n = 0;
        if (!s) s = "(null)";
        for (const char* q = s; *q; ++q) n++;
        for (int i = n; i < width; ++i) put(o, ' ');
        while (*s) put(o, *s++);
        break;
      }
      case 'c': put(o, (char)va_arg(ap, int)); break;
      case 'd': {
        long long v = longs >= 2 ? va_arg(ap, long long) : longs ? va_arg(ap, long) : va_arg(ap, int);
        const int neg = v < 0;
        put_num(o, neg ? 0ull - (unsigned long long)v : (unsigned long long)v, 10, 0, width, pad, neg);
        break;
      }
      case 'u':
      case 'x':
      case 'X': {
        unsigned long long v = longs >= 2 ? va_arg(ap, unsigned long long)
                               : longs    ? va_arg(ap, unsigned long)
                                          : va_arg(ap, unsigned);
        put_num(o, v, *p == 'u' ? 10 : 16, *p == 'X', width, pad, 0);
        break;
      }
      case '%': put(o, '%'); break;
      case 0: return;
      default: put(o, '?'); break;
    }
  }
}

int ts_format(char* buf, size_t cap, const char* fmt, ...) {
  Out o = {buf, cap, 0};
  va_list ap;
  va_start(ap, fmt);
  vformat(&o, fmt, ap);
  va_end(ap);
  if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
  return (int)(o.len < cap ? o.len : cap - 1);
}

void ts_log(const char* fmt, ...) {
  char buf[256];
  Out o = {buf, sizeof buf, 0};
  va_list ap;
  va_start(ap, fmt);
  vformat(&o, fmt, ap);
  va_end(ap);
  sh_write(buf, o.len < sizeof buf ? o.len : sizeof buf - 1);
}
