// Runs the Teensy 4.1 firmware's ENET driver core (boards/teensy41/
// enet_core.c, unchanged) against QEMU's i.MX ENET model ("imx.enet", the
// same controller family as the RT1062's ENET) on the mcimx6ul-evk machine
// (Cortex-A7, ENET1 at 0x02188000), with only loopback networking:
//   1. MDIO: find the PHY, read its id, link state through the standard
//      registers (enet_phy_link)
//   2. QEMU user networking with restrict=on (no traffic leaves QEMU): an
//      ARP request for the virtual gateway 10.0.2.2 gets its reply (TX and
//      RX through the DMA rings), then 3 x 12 more, one at a time, so both
//      rings wrap several times (TX ring 4, RX ring 12 descriptors)
// (Debian 12's QEMU 7.2 does not model the MAC's internal loopback,
// RCR.LOOP: a looped frame never comes back, so that is not tested.)
// Prints one line per step over semihosting; exit code 0 when all pass.
// Build and run: scripts/enet_qemu_test.sh.
#include <stdint.h>

#include "enet_core.h"

#define ENET1_BASE 0x02188000u

static int sh_call(int op, void* arg) {
  register int r0 __asm__("r0") = op;
  register void* r1 __asm__("r1") = arg;
  __asm__ volatile("svc 0x123456" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static void out(const char* s) { sh_call(0x04, (void*)s); }  // SYS_WRITE0

static void out_hex(uint32_t v, int digits) {
  char b[9];
  for (int i = digits - 1; i >= 0; --i, v >>= 4) b[i] = "0123456789abcdef"[v & 15u];
  b[digits] = 0;
  out(b);
}

__attribute__((used, noreturn)) void quit(int code);
__attribute__((used, noreturn)) void quit(int code) {
  uint32_t args[2] = {0x20026u, (uint32_t)code};
  for (;;) sh_call(0x20, args);  // SYS_EXIT_EXTENDED
}

// The driver core uses memcpy/memset; no C library here.
void* memcpy(void* d, const void* s, unsigned n) {
  uint8_t* dd = d;
  const uint8_t* ss = s;
  while (n--) *dd++ = *ss++;
  return d;
}
void* memset(void* d, int c, unsigned n) {
  uint8_t* dd = d;
  while (n--) *dd++ = (uint8_t)c;
  return d;
}
static int same(const uint8_t* a, const uint8_t* b, unsigned n) {
  while (n--)
    if (*a++ != *b++) return 0;
  return 1;
}

static const uint8_t kMac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
static uint8_t g_rx[1536];

// Polls the RX ring for a frame (virtual time: bounded by iterations).
static int receive(void) {
  for (uint32_t i = 0; i < 2000000u; ++i) {
    const int n = enet_core_rx(g_rx, sizeof g_rx);
    if (n != 0) return n;
  }
  return 0;
}

int main(void) {
  int failures = 0;
  enet_core_reset(ENET1_BASE, 29);

  // 1. MDIO and the PHY.
  int phy = -1, id1 = -1, id2 = -1;
  for (int a = 0; a < 32 && phy < 0; ++a) {
    id1 = enet_mdio_read((uint32_t)a, 2);
    if (id1 >= 0 && id1 != 0xFFFF && id1 != 0) {
      phy = a;
      id2 = enet_mdio_read((uint32_t)a, 3);
    }
  }
  int s100 = 0, full = 0;
  const int link = phy >= 0 && enet_phy_link((uint32_t)phy, &s100, &full);
  out("enet-qemu mdio: PHY ");
  if (phy >= 0) {
    out("at address ");
    out_hex((uint32_t)phy, 2);
    out(" id ");
    out_hex((uint32_t)id1, 4);
    out(":");
    out_hex((uint32_t)id2, 4);
    out(link ? (s100 ? " link up 100 Mbit/s" : " link up 10 Mbit/s") : " link DOWN");
    out(link ? (full ? " full duplex" : " half duplex") : "");
  } else {
    out("not found");
  }
  out(phy >= 0 && link ? ": ok\n" : ": FAILED\n");
  if (phy < 0 || !link) failures++;

  // 2. ARP over QEMU's user network (restrict=on: nothing leaves QEMU).
  enet_core_start(kMac, 0, s100, full, 0);
  uint8_t arp[60];
  memset(arp, 0, sizeof arp);
  memset(arp, 0xFF, 6);
  memcpy(arp + 6, kMac, 6);
  static const uint8_t hdr[] = {0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01};
  memcpy(arp + 12, hdr, sizeof hdr);
  memcpy(arp + 22, kMac, 6);
  static const uint8_t me[4] = {10, 0, 2, 15}, gw[4] = {10, 0, 2, 2};
  memcpy(arp + 28, me, 4);
  memcpy(arp + 38, gw, 4);
  int answered = 0;
  const int rounds = 1 + 3 * ENET_RX_RING;
  for (int r = 0; r < rounds; ++r) {
    arp[59] = (uint8_t)r;  // padding: each request differs
    if (!enet_core_tx(arp, sizeof arp)) break;
    int n = 0;
    for (int tries = 0; tries < 8; ++tries) {  // skip anything that is not the reply
      n = receive();
      if (n >= 42 && g_rx[12] == 0x08 && g_rx[13] == 0x06 && g_rx[21] == 2 && same(g_rx + 28, gw, 4) &&
          same(g_rx, kMac, 6) && same(g_rx + 32, kMac, 6))
        break;
      n = 0;
    }
    if (n == 0) break;
    if (r == 0) {
      out("enet-qemu arp: request for 10.0.2.2 answered by ");
      for (int i = 0; i < 6; ++i) {
        out_hex(g_rx[22 + i], 2);
        if (i < 5) out(":");
      }
      out(": ok\n");
    }
    answered++;
  }
  out("enet-qemu rings: ");
  out_hex((uint32_t)answered, 2);
  out(" of ");
  out_hex((uint32_t)rounds, 2);
  out(" (hex) requests answered");
  out(answered == rounds ? ": ok\n" : ": FAILED\n");
  if (answered != rounds) failures++;
  const EnetCoreStats* st = enet_core_stats();
  out("enet-qemu stats: tx ");
  out_hex(st->tx_frames, 4);
  out(" rx ");
  out_hex(st->rx_frames, 4);
  out(" rx errors ");
  out_hex(st->rx_errors, 4);
  out(failures ? "\nenet-qemu: FAILED\n" : "\nenet-qemu: ok\n");
  return failures;
}

__attribute__((naked, section(".start"))) void _start(void) {
  __asm__ volatile(
      "ldr sp, =__stack_top\n"
      "bl main\n"
      "bl quit\n");
}
