// Log formatting shared by every board: a printf subset written through the
// board's console (sh_write: semihosting on QEMU, LPUART6 on a Teensy 4.1).
#include <stdarg.h>

#include "semihost.h"

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
  // Digits above 32 bits by 64-bit division (a library call on these
  // cores), the rest in 32 bits (one UDIV each).
  while (v > 0xFFFFFFFFull) {
    tmp[n++] = digits[v % base];
    v /= base;
  }
  unsigned w = (unsigned)v;
  do {
    tmp[n++] = digits[w % base];
    w /= base;
  } while (w != 0);
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
