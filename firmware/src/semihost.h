// The console interface every board implements. QEMU (semihost.c): ARM
// semihosting (the debugger-call interface QEMU implements with
// -semihosting): console output, the command line, and the exit code; calls
// are `bkpt 0xAB` with the operation in r0 and its argument in r1.
// Teensy 4.1 (boards/teensy41/console.c): LPUART6 on pins 0/1; sh_exit
// reports the code and resets the board. ts_log/ts_format are in log.c.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Opens the host's stdout (":tt" in write mode); called once at boot.
void sh_init(void);
// Writes bytes to the host's stdout.
void sh_write(const char* s, size_t n);
// Copies the command line given with -semihosting-config arg=... (or
// -append) into buf, NUL-terminated. Returns its length, or -1.
int sh_cmdline(char* buf, size_t cap);
// Ends the emulation with an exit code (SYS_EXIT_EXTENDED). Never returns.
void sh_exit(int code) __attribute__((noreturn));

// printf subset for logs: %s %c %d %u %x %X with optional zero pad and
// width, and the l / ll length modifiers. No floating point.
void ts_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Formats into buf (always NUL-terminated); returns the length written.
int ts_format(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
