// The few newlib hooks a bare-metal image needs. There is no heap: the
// firmware allocates nothing at run time (lwIP uses its own static pools, the
// worker its arena), so _sbrk always fails and any stray malloc returns NULL.
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "semihost.h"

void* _sbrk(ptrdiff_t incr) {
  (void)incr;
  errno = ENOMEM;
  return (void*)-1;
}

int _write(int fd, const char* buf, int len) {
  (void)fd;
  sh_write(buf, (size_t)len);
  return len;
}

int _read(int fd, char* buf, int len) {
  (void)fd;
  (void)buf;
  (void)len;
  return 0;
}

int _close(int fd) {
  (void)fd;
  return -1;
}

int _fstat(int fd, struct stat* st) {
  (void)fd;
  st->st_mode = S_IFCHR;
  return 0;
}

int _isatty(int fd) {
  (void)fd;
  return 1;
}

int _lseek(int fd, int off, int whence) {
  (void)fd;
  (void)off;
  (void)whence;
  return 0;
}

void _exit(int code) { sh_exit(code); }

int _kill(int pid, int sig) {
  (void)pid;
  (void)sig;
  errno = EINVAL;
  return -1;
}

int _getpid(void) { return 1; }

// A pure virtual call can only be a bug: report it and stop.
void __cxa_pure_virtual(void) {
  ts_log("FATAL: pure virtual call\n");
  sh_exit(4);
}
