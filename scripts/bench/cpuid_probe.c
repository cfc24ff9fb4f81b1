// cpuid_probe: prints the CPUID feature bits that decide AVX2 / AVX-512 /
// VNNI kernels, as this process sees them, on its first thread and on a thread
// it starts afterwards; with cpuid_avx2.so preloaded they must read AVX2 only.
//
//   gcc -O2 -pthread -o cpuid_probe cpuid_probe.c
//   LD_PRELOAD=$PWD/cpuid_avx2.so ./cpuid_probe --expect-avx2-only   # exit 0 iff masked on both threads
//   ./cpuid_probe                                                     # the machine's real bits
//   LD_PRELOAD=... ./cpuid_probe --crash    # a real SIGSEGV must still kill the process
//
// For scripts/bench.sh --avx2-only, which runs it before trusting the preload.
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct seen {
  int faulting;  // ARCH_GET_CPUID: 1 = CPUID runs natively, 0 = it faults
  int avx, avx2, fma, osxsave;
  int avx512f, avx512dq, avx512cd, avx512bw, avx512vl, avx512ifma, avx512vbmi, avx512vbmi2, avx512vnni,
      avx512bitalg, avx512vpopcntdq, avx512fp16, avx512bf16, avx_vnni, amx_tile, amx_int8;
  unsigned xsave_low;  // CPUID.(EAX=0xD, ECX=0):EAX, supported XSAVE components
};

static void probe(struct seen* s) {
  unsigned a, b, c, d;
  memset(s, 0, sizeof *s);
  s->faulting = (int)syscall(SYS_arch_prctl, ARCH_GET_CPUID, 0);
  __cpuid_count(1, 0, a, b, c, d);
  s->fma = (c >> 12) & 1;
  s->osxsave = (c >> 27) & 1;
  s->avx = (c >> 28) & 1;
  __cpuid_count(7, 0, a, b, c, d);
  s->avx2 = (b >> 5) & 1;
  s->avx512f = (b >> 16) & 1;
  s->avx512dq = (b >> 17) & 1;
  s->avx512ifma = (b >> 21) & 1;
  s->avx512cd = (b >> 28) & 1;
  s->avx512bw = (b >> 30) & 1;
  s->avx512vl = (b >> 31) & 1;
  s->avx512vbmi = (c >> 1) & 1;
  s->avx512vbmi2 = (c >> 6) & 1;
  s->avx512vnni = (c >> 11) & 1;
  s->avx512bitalg = (c >> 12) & 1;
  s->avx512vpopcntdq = (c >> 14) & 1;
  s->avx512fp16 = (d >> 23) & 1;
  s->amx_tile = (d >> 24) & 1;
  s->amx_int8 = (d >> 25) & 1;
  __cpuid_count(7, 1, a, b, c, d);
  s->avx_vnni = (a >> 4) & 1;
  s->avx512bf16 = (a >> 5) & 1;
  __cpuid_count(0xd, 0, a, b, c, d);
  s->xsave_low = a;
}

static int any_avx512(const struct seen* s) {
  return s->avx512f | s->avx512dq | s->avx512cd | s->avx512bw | s->avx512vl | s->avx512ifma | s->avx512vbmi |
         s->avx512vbmi2 | s->avx512vnni | s->avx512bitalg | s->avx512vpopcntdq | s->avx512fp16 | s->avx512bf16 |
         s->avx_vnni | s->amx_tile | s->amx_int8 | ((s->xsave_low & 0xe0) != 0);
}

static void print(const char* who, const struct seen* s) {
  printf("%s: cpuid %s; avx %d avx2 %d fma %d osxsave %d | avx512 f %d dq %d cd %d bw %d vl %d ifma %d vbmi %d "
         "vbmi2 %d vnni %d bitalg %d vpopcntdq %d fp16 %d bf16 %d | avx_vnni %d amx tile %d int8 %d | "
         "xsave components 0x%x\n",
         who, s->faulting == 0 ? "faults (trapped)" : s->faulting == 1 ? "native" : "state unknown", s->avx, s->avx2,
         s->fma, s->osxsave, s->avx512f, s->avx512dq, s->avx512cd, s->avx512bw, s->avx512vl, s->avx512ifma,
         s->avx512vbmi, s->avx512vbmi2, s->avx512vnni, s->avx512bitalg, s->avx512vpopcntdq, s->avx512fp16,
         s->avx512bf16, s->avx_vnni, s->amx_tile, s->amx_int8, s->xsave_low);
}

static void* thread_main(void* out) {
  probe((struct seen*)out);
  return NULL;
}

int main(int argc, char** argv) {
  int expect = argc > 1 && strcmp(argv[1], "--expect-avx2-only") == 0;
  if (argc > 1 && strcmp(argv[1], "--crash") == 0) {
    volatile uintptr_t bad = 8;
    return *(volatile int*)bad;  // must die with SIGSEGV, preload or not
  }
  struct seen main_seen, thread_seen;
  probe(&main_seen);
  pthread_t t;
  if (pthread_create(&t, NULL, thread_main, &thread_seen) != 0 || pthread_join(t, NULL) != 0) {
    fprintf(stderr, "cpuid_probe: pthread_create failed\n");
    return 2;
  }
  print("first thread", &main_seen);
  print("new thread  ", &thread_seen);
  if (!expect) return 0;
  for (int i = 0; i < 2; ++i) {
    const struct seen* s = i ? &thread_seen : &main_seen;
    if (s->faulting != 0 || any_avx512(s) || !(s->avx2 && s->fma && s->avx && s->osxsave)) {
      fprintf(stderr, "cpuid_probe: the %s does not see an AVX2-only CPU with CPUID trapped\n",
              i ? "new thread" : "first thread");
      return 1;
    }
  }
  return 0;
}
