// cpuid_avx2.so: make an x86-64 Linux process see a CPU without AVX-512,
// AVX-VNNI or AMX, so that a library choosing its kernels from CPUID (ONNX
// Runtime's MLAS) takes its AVX2 path. For scripts/bench.sh --avx2-only.
//
//   gcc -O2 -shared -fPIC -o cpuid_avx2.so cpuid_avx2.c
//   LD_PRELOAD=$PWD/cpuid_avx2.so node ...
//
// How: the constructor turns on CPUID faulting for the process's first thread
// (arch_prctl(ARCH_SET_CPUID, 0); the kernel then answers every CPUID
// instruction of that thread with SIGSEGV). The flag is a thread flag copied
// into every thread and child the thread creates later (clone copies it; only
// execve clears it, and LD_PRELOAD then loads this library again). The SIGSEGV
// handler checks that the faulting instruction is CPUID (0F A2), runs the
// real CPUID with faulting off for that one instruction, clears the feature
// bits listed in mask_leaf(), writes EAX..EDX into the interrupted context and
// steps over the instruction. Any other SIGSEGV goes to the handler that was
// there before, or, if that was the default, kills the process as it would
// have without this library.
//
// What it cannot hide: XGETBV (XCR0 still enables the AVX-512 state), and
// code that ran before the constructor (the dynamic loader's and libc's own
// feature probe, which choose libc's string functions). A library that reads
// the CPUID bits first, as MLAS does, sees AVX2 only.
//
// If CPUID faulting is not available (an older kernel or CPU, or a hypervisor
// that does not offer it) the constructor says so on stderr and exits with
// status 97: a benchmark labelled "AVX2-only" must not run on AVX-512.
//
// CPUID_AVX2_LOG=1 in the environment prints, at exit, how many CPUID
// instructions were answered (and that the mask was in force).
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

static struct sigaction previous;   // SIGSEGV's disposition before ours
static volatile long answered;      // CPUID instructions answered (all threads)

static long set_cpuid_enabled(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

// Clears what an AVX2-only x86-64 (Haswell to Skylake client, Zen 1-3) does
// not have. r = {eax, ebx, ecx, edx}.
static void mask_leaf(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  if (leaf == 7 && sub == 0) {
    // EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31.
    r[1] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
    // ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14.
    r[2] &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
    // EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512-FP16 23,
    // AMX-TILE 24, AMX-INT8 25.
    r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
  } else if (leaf == 7 && sub == 1) {
    // EAX: AVX-VNNI 4, AVX512-BF16 5, AMX-FP16 21, AVX-IFMA 23.
    r[0] &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));
    // EDX: AVX-VNNI-INT8 4, AVX-NE-CONVERT 5, AMX-COMPLEX 8, AVX-VNNI-INT16 10,
    // AVX10 19.
    r[3] &= ~(BIT(4) | BIT(5) | BIT(8) | BIT(10) | BIT(19));
  } else if (leaf == 0xd && sub == 0) {
    // EAX: the XSAVE state components the CPU supports; 5-7 are AVX-512's
    // (opmask, upper halves of ZMM0-15, ZMM16-31), 17-18 AMX's.
    r[0] &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18));
  } else if (leaf == 0x24) {
    r[0] = r[1] = r[2] = r[3] = 0;  // AVX10's leaf (its bit is cleared above)
  }
}

// Reads the two bytes at `at` (the interrupted instruction) without faulting
// if they are not readable. Where a sandbox forbids process_vm_readv they are
// read directly: an unreadable address then ends the process with SIGSEGV,
// the fate of the fault being handled anyway.
static int read_two(uintptr_t at, unsigned char out[2]) {
  struct iovec local = {out, 2}, remote = {(void*)at, 2};
  long n = syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
  if (n == 2) return 1;
  if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
    out[0] = ((const volatile unsigned char*)at)[0];
    out[1] = ((const volatile unsigned char*)at)[1];
    return 1;
  }
  return 0;
}

static void pass_on(int sig, siginfo_t* info, void* context) {
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  if (previous.sa_handler == SIG_IGN && info->si_code <= 0) return;  // sent by kill() and ignored
  // Default action: put it back and let the signal happen again, from the
  // faulting instruction when the kernel raised it, or raised here (it is
  // blocked while this handler runs, so it arrives on return).
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (info->si_code <= 0) raise(sig);
}

static void on_segv(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  ucontext_t* uc = (ucontext_t*)context;
  greg_t* g = uc->uc_mcontext.gregs;
  unsigned char op[2];
  // A faulting CPUID is a general-protection fault: si_code SI_KERNEL.
  if (info->si_code == SI_KERNEL && read_two((uintptr_t)g[REG_RIP], op) && op[0] == 0x0f && op[1] == 0xa2) {
    uint32_t r[4];
    uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX];
    if (set_cpuid_enabled(1) != 0) {
      static const char msg[] = "cpuid_avx2: cannot turn CPUID faulting off in the handler\n";
      (void)!write(2, msg, sizeof msg - 1);
      _exit(97);
    }
    real_cpuid(leaf, sub, r);
    set_cpuid_enabled(0);
    mask_leaf(leaf, sub, r);
    // CPUID writes the low 32 bits and zeroes the upper half of each register.
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
    __atomic_add_fetch(&answered, 1, __ATOMIC_RELAXED);
    errno = saved_errno;
    return;
  }
  errno = saved_errno;
  pass_on(sig, info, context);
}

static void report(void) {
  char line[160];
  int n = snprintf(line, sizeof line, "cpuid_avx2: pid %d answered %ld CPUID instructions with AVX-512/AVX-VNNI/AMX hidden\n",
                   (int)getpid(), (long)answered);
  if (n > 0) (void)!write(2, line, (size_t)n);
}

__attribute__((constructor)) static void cpuid_avx2_init(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &previous) != 0) {
    fprintf(stderr, "cpuid_avx2: sigaction(SIGSEGV) failed: %s\n", strerror(errno));
    _exit(97);
  }
  if (set_cpuid_enabled(0) != 0) {
    fprintf(stderr, "cpuid_avx2: CPUID faulting is not available here (arch_prctl(ARCH_SET_CPUID, 0): %s)\n",
            strerror(errno));
    _exit(97);
  }
  const char* log = getenv("CPUID_AVX2_LOG");
  if (log && *log && strcmp(log, "0") != 0) atexit(report);
}
