// i.MX ENET driver core. Register map and descriptor format from the i.MX
// RT1060 reference manual (ENET chapter). Enhanced 32-byte buffer
// descriptors (ECR.EN1588) with ECR.DBSWP set, so they read as little-endian
// {length, status, buffer, extended status/control, ...}: the RT1062 takes
// either format, QEMU's imx.enet model only this one.
// Rings and buffers are static (.bss): on the Teensy that is DTCM, which the
// ENET's DMA reaches and the data cache never holds, so no cache upkeep.
#include "enet_core.h"

#include <string.h>

#define R(off) (*(volatile uint32_t*)(g_base + (off)))
#define EIR 0x004u
#define EIMR 0x008u
#define RDAR 0x010u
#define TDAR 0x014u
#define ECR 0x024u
#define MMFR 0x040u
#define MSCR 0x044u
#define RCR 0x084u
#define TCR 0x0C4u
#define PALR 0x0E4u
#define PAUR 0x0E8u
#define IAUR 0x118u
#define IALR 0x11Cu
#define GAUR 0x120u
#define GALR 0x124u
#define TFWR 0x144u
#define RDSR 0x180u
#define TDSR 0x184u
#define MRBR 0x188u
#define RSFL 0x190u
#define TACC 0x1C0u
#define RACC 0x1C4u

#define EIR_MII (1u << 23)
#define EIR_RXF (1u << 25)
#define ECR_RESET (1u << 0)
#define ECR_ETHEREN (1u << 1)
#define ECR_EN1588 (1u << 4)
#define ECR_DBSWP (1u << 8)
#define RCR_MII_MODE (1u << 2)
#define RCR_FCE (1u << 5)
#define RCR_RMII_MODE (1u << 8)
#define RCR_RMII_10T (1u << 9)
#define TCR_FDEN (1u << 2)
#define TFWR_STRFWD (1u << 8)
#define DAR_ACTIVE (1u << 24)

// Descriptor status bits.
#define RX_E (1u << 15)
#define RX_W (1u << 13)
#define RX_L (1u << 11)
#define RX_ERRORS 0x37u  // LG | NO | CR | OV | TR
#define TX_R (1u << 15)
#define TX_W (1u << 13)
#define TX_L (1u << 11)
#define TX_TC (1u << 10)
#define RX_EXT_INT (1u << 7)  // extended control: RXF interrupt for this descriptor

typedef struct {
  volatile uint16_t length;
  volatile uint16_t status;
  volatile uint32_t buffer;
  volatile uint16_t ext_status;
  volatile uint16_t ext_control;
  volatile uint16_t checksum;
  volatile uint16_t proto;
  volatile uint32_t bdu;
  volatile uint32_t timestamp;
  uint32_t reserved[2];
} Bd;
_Static_assert(sizeof(Bd) == 32, "enhanced buffer descriptor");

static uintptr_t g_base;
static Bd g_rx[ENET_RX_RING] __attribute__((aligned(64)));
static Bd g_tx[ENET_TX_RING] __attribute__((aligned(64)));
static uint8_t g_rx_buf[ENET_RX_RING][ENET_BUF_BYTES] __attribute__((aligned(64)));
static uint8_t g_tx_buf[ENET_TX_RING][ENET_BUF_BYTES] __attribute__((aligned(64)));
static uint32_t g_rx_next, g_tx_next;
static EnetCoreStats g_stats;

static inline void dmb(void) { __asm__ volatile("dmb" ::: "memory"); }
static inline void dsb(void) { __asm__ volatile("dsb" ::: "memory"); }

void enet_core_reset(uintptr_t base, uint32_t mii_speed) {
  g_base = base;
  R(ECR) = ECR_RESET;
  for (uint32_t i = 0; i < 1000000u && (R(ECR) & ECR_RESET); ++i) {
  }
  R(EIMR) = 0;
  R(EIR) = 0xFFFFFFFFu;
  R(MSCR) = ((mii_speed & 0x3Fu) << 1) | (2u << 8);  // HOLDTIME 2
}

static int mdio(uint32_t op, uint32_t phy, uint32_t reg, uint32_t data) {
  R(EIR) = EIR_MII;
  R(MMFR) = (1u << 30) | (op << 28) | ((phy & 31u) << 23) | ((reg & 31u) << 18) | (2u << 16) | (data & 0xFFFFu);
  for (uint32_t i = 0; i < 1000000u; ++i) {
    if (R(EIR) & EIR_MII) {
      R(EIR) = EIR_MII;
      return (int)(R(MMFR) & 0xFFFFu);
    }
  }
  return -1;
}

int enet_mdio_read(uint32_t phy, uint32_t reg) { return mdio(2u, phy, reg, 0); }
int enet_mdio_write(uint32_t phy, uint32_t reg, uint16_t value) { return mdio(1u, phy, reg, value) < 0 ? -1 : 0; }

int enet_phy_link(uint32_t phy, int* speed100, int* full) {
  (void)enet_mdio_read(phy, 1);  // BMSR link bit latches low: read twice
  const int bmsr = enet_mdio_read(phy, 1);
  if (bmsr < 0 || !(bmsr & (1 << 2))) return 0;
  const int bmcr = enet_mdio_read(phy, 0);
  if (bmcr >= 0 && (bmcr & (1 << 12)) && (bmsr & (1 << 5))) {  // auto-negotiation done
    const int anar = enet_mdio_read(phy, 4), anlpar = enet_mdio_read(phy, 5);
    const int common = (anar < 0 || anlpar < 0) ? 0 : (anar & anlpar);
    *speed100 = (common & 0x180) != 0;
    *full = (common & 0x100) || (!(common & 0x180) && (common & 0x40));
  } else {
    *speed100 = bmcr >= 0 && (bmcr & (1 << 13));
    *full = bmcr >= 0 && (bmcr & (1 << 8));
  }
  return 1;
}

void enet_core_stop(void) {
  R(ECR) &= ~ECR_ETHEREN;
  dsb();
}

static uint16_t g_rx_ext;
static int g_loopback;

void enet_core_set_loopback(int on) { g_loopback = on; }

void enet_core_start(const uint8_t mac[6], int rmii, int speed100, int full, int rx_irq) {
  enet_core_stop();  // also resets the DMA's ring pointers to RDSR/TDSR
  memset(g_rx, 0, sizeof g_rx);
  memset(g_tx, 0, sizeof g_tx);
  g_rx_ext = rx_irq ? RX_EXT_INT : 0u;
  for (uint32_t i = 0; i < ENET_RX_RING; ++i) {
    g_rx[i].buffer = (uint32_t)(uintptr_t)g_rx_buf[i];
    g_rx[i].ext_control = g_rx_ext;
    g_rx[i].status = (uint16_t)(RX_E | (i == ENET_RX_RING - 1u ? RX_W : 0u));
  }
  for (uint32_t i = 0; i < ENET_TX_RING; ++i) {
    g_tx[i].buffer = (uint32_t)(uintptr_t)g_tx_buf[i];
    g_tx[i].status = (uint16_t)(i == ENET_TX_RING - 1u ? TX_W : 0u);
  }
  g_rx_next = g_tx_next = 0;
  dsb();
  R(PALR) = ((uint32_t)mac[0] << 24) | ((uint32_t)mac[1] << 16) | ((uint32_t)mac[2] << 8) | mac[3];
  R(PAUR) = ((uint32_t)mac[4] << 24) | ((uint32_t)mac[5] << 16) | 0x8808u;
  R(IAUR) = R(IALR) = R(GAUR) = R(GALR) = 0;
  // Frames up to 1518 bytes, CRC kept in the buffer (removed in rx).
  R(RCR) = (1518u << 16) | RCR_MII_MODE | RCR_FCE | (rmii ? RCR_RMII_MODE : 0u) |
           (rmii && !speed100 ? RCR_RMII_10T : 0u) | (g_loopback && !rmii ? 1u : 0u);
  R(TCR) = full ? TCR_FDEN : 0u;
  R(TFWR) = TFWR_STRFWD;
  R(RSFL) = 0;  // store and forward
  R(TACC) = 0;
  R(RACC) = 0;
  R(MRBR) = ENET_BUF_BYTES;
  R(RDSR) = (uint32_t)(uintptr_t)g_rx;
  R(TDSR) = (uint32_t)(uintptr_t)g_tx;
  R(EIR) = 0xFFFFFFFFu;
  R(EIMR) = rx_irq ? EIR_RXF : 0u;
  R(ECR) = 0x70000000u | ECR_DBSWP | ECR_EN1588 | ECR_ETHEREN;  // bits 30:28 read as 1 at reset
  dsb();
  R(RDAR) = DAR_ACTIVE;
}

int enet_core_rx_pending(void) { return !(g_rx[g_rx_next].status & RX_E); }

int enet_core_rx(uint8_t* dst, uint32_t cap) {
  Bd* bd = &g_rx[g_rx_next];
  const uint16_t st = bd->status;
  if (st & RX_E) return 0;
  dmb();
  int n = bd->length;
  if (!(st & RX_L) || (st & RX_ERRORS) || n < 18 || (uint32_t)(n - 4) > cap) {
    g_stats.rx_errors++;
    n = -1;
  } else {
    n -= 4;  // the frame's CRC
    memcpy(dst, g_rx_buf[g_rx_next], (uint32_t)n);
    g_stats.rx_frames++;
  }
  bd->length = 0;
  bd->ext_status = 0;
  bd->ext_control = g_rx_ext;
  bd->bdu = 0;
  dmb();
  bd->status = (uint16_t)(RX_E | (g_rx_next == ENET_RX_RING - 1u ? RX_W : 0u));
  g_rx_next = (g_rx_next + 1u) % ENET_RX_RING;
  dsb();
  R(RDAR) = DAR_ACTIVE;  // the DMA stops when it meets a full ring
  return n;
}

int enet_core_tx(const uint8_t* frame, uint32_t len) {
  Bd* bd = &g_tx[g_tx_next];
  if ((bd->status & TX_R) || len > ENET_BUF_BYTES) {
    g_stats.tx_full++;
    return 0;
  }
  memcpy(g_tx_buf[g_tx_next], frame, len);
  bd->length = (uint16_t)len;
  bd->ext_control = 0;
  bd->bdu = 0;
  dmb();
  bd->status = (uint16_t)(TX_R | TX_L | TX_TC | (g_tx_next == ENET_TX_RING - 1u ? TX_W : 0u));
  g_tx_next = (g_tx_next + 1u) % ENET_TX_RING;
  dsb();
  R(TDAR) = DAR_ACTIVE;
  g_stats.tx_frames++;
  return 1;
}

void enet_core_ack_irq(void) { R(EIR) = EIR_RXF; }

const EnetCoreStats* enet_core_stats(void) { return &g_stats; }

int enet_core_tx_idle(void) {
  for (uint32_t i = 0; i < ENET_TX_RING; ++i)
    if (g_tx[i].status & TX_R) return 0;
  return 1;
}
