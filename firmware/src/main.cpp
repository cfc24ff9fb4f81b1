// tinysplit board firmware: entry point.
//
// The command line comes over semihosting (QEMU -append "..."):
//   hello                 boot check: print the memory layout, exit 0
//   selftest [--split N] [--kernels dsp|portable]
//                         run the kernel suite (kernel_suite.h) on the target,
//                         print one line per layer with a checksum of the
//                         outputs and the instructions spent, with the
//                         active kernel table and with the other one (DSP vs
//                         portable); exit 0 if the split runs and the other
//                         table's outputs equal the whole-layer run
//   guardtest             check the MPU: a write just past a 64 KB arena
//                         must fault (exit code 3), not land
//   stacktest             unbounded recursion must hit the stack guard
//                         (exit code 3)
//   serve [options]       the board worker on lwIP/LAN9118, TCP port 7000
//     --id N              board id (HELLO)
//     --ram BYTES         arena budget, at most the 512 KB of OCRAM
//     --clock-mhz N       clock announced in HELLO and used for compute times
//     --window N          frames in flight for OUTPUT
//     --icount            QEMU runs with -icount shift=0: report compute time
//                         as instructions / clock (1 cycle per instruction)
//     --once              exit after the first connection ends
//     --idle-ms N         close a connection silent for N ms (0 = never;
//                         default 60000)
//     --kernels NAME      kernel table: dsp (default of a KERNELS=dsp image)
//                         or portable
//     --advertise-ram N   test hook: claim N bytes of RAM in HELLO while the
//                         arena stays at --ram (to show an over-budget plan
//                         being refused by the board itself)
//     --flash BYTES       fragment store budget (both A/B slots), at most the
//                         store region after the image (default: all of it)
//     --advertise-flash N test hook: claim N bytes of flash in HELLO while the
//                         slots stay as they are (to show a fragment too large
//                         for the flash being refused by the board itself)
//     --cut-after-store N test hook: a power cut in a deploy: stop at once
//                         (exit code 5) once N fragment bytes were staged
//     --inject-fault KIND:N  test hook (net/fault_port.h, the host board's
//                         mechanism; `run --inject-fault KIND:B:N`): flip
//                         changes one output value of layer N after computing
//                         it (the coordinator's per-layer digests must catch
//                         it); kill ends QEMU (exit code 6), stall stops the
//                         board for good, corrupt changes its next frame to
//                         the coordinator, right after computing layer N.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "board.h"
#include "core/kernel_table.h"
#include "firmware.h"
#include "net/fault_port.h"
#include "semihost.h"

namespace {

char g_cmdline[512];

// Recurses until the thread stack hits its MPU guard (stacktest mode).
__attribute__((noinline)) uint32_t dig(uint32_t depth) {
  volatile uint8_t frame[1024];
  // Probe the frame from the top down, 16 bytes at a time, as a compiler's
  // stack probes would: a 1 KB frame must not step over the 32-byte guard
  // into .bss without touching it (whether it does depends on where the
  // stack happens to end).
  for (int i = 1023; i >= 0; i -= 16) frame[i] = uint8_t(depth);
  frame[0] = uint8_t(depth);
  if (depth > 1000000u) return frame[0];  // never reached: 1 GB of stack
  return dig(depth + 1) + frame[0];
}

uint32_t parse_u32(const char* s, bool* ok) {
  uint64_t v = 0;
  if (!*s) *ok = false;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') {
      *ok = false;
      return 0;
    }
    v = v * 10u + uint32_t(*s - '0');
    if (v > 0xFFFFFFFFu) {
      *ok = false;
      return 0;
    }
  }
  return uint32_t(v);
}

// --kernels NAME: the kernel table for this run ("dsp", the default when the
// image is built with KERNELS=dsp, or "portable"); false for another name.
bool use_kernels(const char* name) {
  const ts::core::KernelTable* t = ts::core::find_kernels(name);
  if (!t) return false;
  ts::core::set_kernels(t);
  return true;
}

void print_layout() {
  const uint32_t itcm = uint32_t(__itcm_end - __itcm_start);
  const uint32_t itcm_banks = (itcm + 32767u) / 32768u;
  ts_log("layout: ITCM %u B code (%u x 32 KB banks), DTCM data+bss %u B, stack %u B (top %08x)\n", (unsigned)itcm,
         (unsigned)itcm_banks, (unsigned)(__bss_end - __data_start), (unsigned)board_stack_size(),
         (unsigned)(uintptr_t)__stack_top);
  ts_log("layout: arena %u B at %08x (OCRAM), flash image %u B, fragment store %u B at %08x\n",
         (unsigned)(__arena_end - __arena_start), (unsigned)(uintptr_t)__arena_start,
         (unsigned)((uintptr_t)__flash_image_end - BOARD_FLASH_BASE), (unsigned)(__store_end - __store_start),
         (unsigned)(uintptr_t)__store_start);
}

}  // namespace

// `--inject-fault KIND:LAYER` with the host board's parser.
static bool parse_fault(const char* v, ServeOptions* o) {
  ts::net::BoardFault f;
  int bad = 0;
  if (ts::net::parse_board_fault(v, &f, &bad) != ts::net::FaultField::Ok) return false;
  o->fault_kind = int32_t(f.kind);
  o->fault_layer = f.layer;
  return true;
}

int main(void) {
  sh_init();
  board_init();
  if (sh_cmdline(g_cmdline, sizeof g_cmdline) < 0) g_cmdline[0] = 0;
  // Tokenise in place; the first token is the image name.
  const char* argv[32];
  int argc = 0;
  for (char* p = g_cmdline; *p && argc < 32;) {
    while (*p == ' ') *p++ = 0;
    if (!*p) break;
    argv[argc++] = p;
    while (*p && *p != ' ') ++p;
  }
  const char* mode = argc > 1 ? argv[1] : "serve";
  ts_log("tinysplit board firmware (%s) mode %s\n", BOARD_NAME, mode);

  if (strcmp(mode, "hello") == 0) {
    print_layout();
    ts_log("hello: ok\n");
    return 0;
  }
  if (strcmp(mode, "guardtest") == 0) {
    // A store just past a 64 KB arena budget must fault (MPU), not land.
    board_guards(64u * 1024u);
    ts_log("guardtest: writing past the 64 KB arena\n");
    *(volatile uint32_t*)(__arena_start + 64u * 1024u) = 0xDEADBEEFu;
    ts_log("guardtest: the write was not stopped\n");
    return 0;
  }
  if (strcmp(mode, "stacktest") == 0) {
    // Unbounded recursion must stop at the stack guard, not run into .bss.
    board_guards((uint32_t)(__arena_end - __arena_start));
    ts_log("stacktest: recursing\n");
    return int(dig(0));
  }
  if (strcmp(mode, "selftest") == 0) {
    int split = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
      bool ok = true;
      if (strcmp(argv[i], "--split") == 0) split = int(parse_u32(argv[i + 1], &ok));
      else if (strcmp(argv[i], "--kernels") == 0) ok = use_kernels(argv[i + 1]);
      else ok = false;
      if (!ok || split < 1) {
        ts_log("error: bad option %s %s\n", argv[i], argv[i + 1]);
        return 2;
      }
    }
    print_layout();
    return fw_selftest(split);
  }
  if (strcmp(mode, "serve") == 0) {
    ServeOptions o;
    for (int i = 2; i < argc; ++i) {
      bool ok = true;
      const char* a = argv[i];
      const char* v = i + 1 < argc ? argv[i + 1] : "";
      if (strcmp(a, "--icount") == 0) o.icount = true;
      else if (strcmp(a, "--once") == 0) o.once = true;
      else if (strcmp(a, "--id") == 0) o.id = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--ram") == 0) o.ram_bytes = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--clock-mhz") == 0) o.clock_mhz = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--window") == 0) o.window = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--advertise-ram") == 0) o.advertise_ram = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--idle-ms") == 0) o.idle_ms = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--kernels") == 0) ok = use_kernels(v), ++i;
      else if (strcmp(a, "--inject-fault") == 0) ok = parse_fault(v, &o), ++i;
      else if (strcmp(a, "--flash") == 0) o.flash_bytes = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--advertise-flash") == 0) o.advertise_flash = parse_u32(v, &ok), ++i;
      else if (strcmp(a, "--cut-after-store") == 0) o.cut_after_store = parse_u32(v, &ok), ++i;
      else ok = false;
      if (!ok) {
        ts_log("error: bad option '%s'\n", a);
        return 2;
      }
    }
    print_layout();
    return fw_serve(o);
  }
  ts_log("error: unknown mode '%s' (hello, selftest, guardtest, stacktest, serve)\n", mode);
  return 2;
}
