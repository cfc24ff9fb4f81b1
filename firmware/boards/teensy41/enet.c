// Teensy 4.1 Ethernet (eth.h): the RT1062's ENET in RMII mode with the
// on-board TI DP83825I PHY at MDIO address 0. The chip drives the PHY's
// 50 MHz reference clock (ENET PLL -> GPIO_B1_10); the PHY's power and
// reset lines are GPIO_B0_15 and GPIO_B0_14 (GPIO2 bits 15 and 14).
// Frames are copied between lwIP's pbufs and the DMA buffers (enet_core.c).
#include <string.h>

#include "board.h"
#include "enet_core.h"
#include "eth.h"
#include "lwip/etharp.h"
#include "lwip/pbuf.h"
#include "netif/ethernet.h"
#include "semihost.h"
#include "teensy41.h"

#define PHY_ADDR 0
#define PHY_RCSR 0x17u  // DP83825: RMII and bypass register
#define LINK_POLL_MS 250u

static EthStats g_stats;
static uint8_t g_mac[6];
static uint8_t g_frame[ENET_BUF_BYTES] __attribute__((aligned(8)));
static int g_mac_set, g_hw_ready, g_link, g_speed100 = -1, g_full = -1;
static uint32_t g_last_poll_ms;

// Clocks, pins and PHY reset; the PHY answers on MDIO afterwards.
// Returns the PHY id (PHYIDR1 << 16 | PHYIDR2), or 0 if nothing answers.
uint32_t teensy_enet_hw_init(void) {
  if (g_hw_ready) return (uint32_t)(enet_mdio_read(PHY_ADDR, 2) << 16) | (uint32_t)enet_mdio_read(PHY_ADDR, 3);
  // ENET PLL: 50 MHz reference (DIV_SELECT 1), powered, locked, not bypassed.
  REG32(CCM_ANALOG_PLL_ENET) = PLL_BYPASS | PLL_ENABLE | 1u;
  while (!(REG32(CCM_ANALOG_PLL_ENET) & PLL_LOCK)) {
  }
  REG32(CCM_ANALOG_PLL_ENET) = PLL_ENABLE | 1u;
  // GPR1: ENET1 reference clock from the PLL (CLK_SEL 0), driven out on
  // the pad (TX_CLK_DIR 1).
  REG32(IOMUXC_GPR_GPR1) = (REG32(IOMUXC_GPR_GPR1) & ~(1u << 13)) | (1u << 17);
  REG32(CCM_CCGR1) |= 3u << 10;  // ENET clock gate
  REG32(CCM_CCGR0) |= 3u << 30;  // GPIO2 clock gate
  // PHY power on (B0_15 high), held in reset (B0_14 low), on GPIO2 (not the
  // fast GPIO7 alias: GPR27 bits clear).
  REG32(IOMUXC_GPR_GPR27) &= ~((1u << 14) | (1u << 15));
  REG32(IOMUXC_MUX(PAD_B0(14))) = 5;
  REG32(IOMUXC_MUX(PAD_B0(15))) = 5;
  REG32(GPIO2_BASE + GPIO_GDIR) |= (1u << 14) | (1u << 15);
  REG32(GPIO2_BASE + GPIO_DR_CLEAR) = 1u << 14;
  REG32(GPIO2_BASE + GPIO_DR_SET) = 1u << 15;
  // RMII pins (ALT3), weak pull-downs on the PHY's strap inputs (address 0).
  const uint32_t rmii_pad = PAD_SRE | PAD_DSE(5) | PAD_SPEED(3) | PAD_PKE | PAD_PUE | PAD_PUS(0);
  static const uint8_t rmii[] = {4, 5, 6, 7, 8, 9, 11};  // RXD0 RXD1 CRS_DV TXD0 TXD1 TXEN RXER
  for (unsigned i = 0; i < sizeof rmii; ++i) {
    REG32(IOMUXC_PAD(PAD_B1(rmii[i]))) = rmii_pad;
    REG32(IOMUXC_MUX(PAD_B1(rmii[i]))) = 3;
  }
  // Reference clock out (ALT6, input path on: SION), MDIO/MDC (ALT0).
  REG32(IOMUXC_PAD(PAD_B1(10))) = PAD_SRE | PAD_DSE(6) | PAD_SPEED(3);
  REG32(IOMUXC_MUX(PAD_B1(10))) = 6 | IOMUXC_SION;
  REG32(IOMUXC_PAD(PAD_B1(15))) = PAD_SRE | PAD_DSE(5) | PAD_SPEED(3) | PAD_PKE | PAD_PUE | PAD_PUS(2);
  REG32(IOMUXC_MUX(PAD_B1(14))) = 0;
  REG32(IOMUXC_MUX(PAD_B1(15))) = 0;
  REG32(IOMUXC_ENET_IPG_CLK_RMII_SELECT_INPUT) = 1;  // GPIO_B1_10
  REG32(IOMUXC_ENET_MDIO_SELECT_INPUT) = 2;          // GPIO_B1_15
  REG32(IOMUXC_ENET0_RXDATA_SELECT_INPUT) = 1;       // GPIO_B1_04
  REG32(IOMUXC_ENET1_RXDATA_SELECT_INPUT) = 1;       // GPIO_B1_05
  REG32(IOMUXC_ENET_RXEN_SELECT_INPUT) = 1;          // GPIO_B1_06
  REG32(IOMUXC_ENET_RXERR_SELECT_INPUT) = 1;         // GPIO_B1_11
  // Reference clock is running: release the PHY's reset, let it settle.
  teensy_delay_us(1000);
  REG32(GPIO2_BASE + GPIO_DR_SET) = 1u << 14;
  teensy_delay_us(50000);
  // MDC = 150 MHz IPG / (2 x 30) = 2.5 MHz.
  enet_core_reset(ENET_BASE, 29);
  // DP83825: 50 MHz reference clock mode (RCSR bit 7) with the default
  // elasticity buffer; then auto-negotiation (restart).
  enet_mdio_write(PHY_ADDR, PHY_RCSR, 0x0081u);
  enet_mdio_write(PHY_ADDR, 0, 0x1200u);
  g_hw_ready = 1;
  const int id1 = enet_mdio_read(PHY_ADDR, 2), id2 = enet_mdio_read(PHY_ADDR, 3);
  if (id1 < 0 || id2 < 0 || id1 == 0xFFFF) return 0;
  return ((uint32_t)id1 << 16) | (uint32_t)id2;
}

// Starts or restarts the MAC when the link comes up with new parameters.
// Returns 1 when the link is up.
static int link_check(void) {
  int s100 = 0, full = 0;
  const int up = enet_phy_link(PHY_ADDR, &s100, &full);
  if (up && (s100 != g_speed100 || full != g_full)) {
    enet_core_start(g_mac, 1, s100, full, 1);
    g_speed100 = s100;
    g_full = full;
  }
  if (up != g_link)
    ts_log("enet: link %s%s%s\n", up ? "up, " : "down", up ? (s100 ? "100 Mbit/s" : "10 Mbit/s") : "",
           up ? (full ? " full duplex" : " half duplex") : "");
  g_link = up;
  return up;
}

int eth_link_up(void) { return g_link; }

// Waits up to `ms` for the link (selftest, startup). Returns 1 when up.
int teensy_enet_wait_link(uint32_t ms) {
  const uint32_t t0 = board_ms();
  while (!link_check()) {
    if (board_ms() - t0 >= ms) return 0;
    teensy_delay_us(50000);
  }
  return 1;
}

// Sends one raw frame (selftest). Returns 1 if the controller took it and
// finished sending within 100 ms.
int teensy_enet_send_raw(const uint8_t* frame, uint32_t len) {
  if (!g_link || !enet_core_tx(frame, len)) return 0;
  g_stats.tx_frames++;
  const uint32_t t0 = board_ms();
  while (board_ms() - t0 < 100u)
    if (enet_core_tx_idle()) return 1;  // the ready bit clears once sent
  return 0;
}

static void enet_isr(void) {
  g_stats.irqs++;
  enet_core_ack_irq();
}

int eth_rx_pending(void) { return g_link && enet_core_rx_pending(); }

// Receive is by DMA into the descriptor ring; the interrupt only wakes the core.
uint32_t eth_isr_ticks(void) { return 0; }
// Frames move by DMA both ways: no programmed I/O.
uint32_t eth_pio_ticks(void) { return 0; }

const EthStats* eth_stats(void) { return &g_stats; }

static err_t low_level_output(struct netif* nif, struct pbuf* p) {
  (void)nif;
  const uint16_t len = (uint16_t)(p->tot_len - ETH_PAD_SIZE);
  if (len > sizeof g_frame) return ERR_BUF;
  pbuf_copy_partial(p, g_frame, len, ETH_PAD_SIZE);
  if (!g_link) return ERR_OK;  // no cable: dropped (TCP retransmits)
  // The ring has 4 slots and the wire drains one in 0.12 ms at 100 Mbit/s.
  const uint32_t t0 = board_ms();
  while (!enet_core_tx(g_frame, len)) {
    g_stats.tx_busy_waits++;
    if (board_ms() - t0 > 50u) return ERR_IF;
  }
  g_stats.tx_frames++;
  return ERR_OK;
}

err_t eth_netif_init(struct netif* nif) {
  if (!g_mac_set) teensy_fuse_mac(g_mac);
  const uint32_t id = teensy_enet_hw_init();
  if (id == 0) {
    ts_log("enet: no PHY answers on MDIO address %d\n", PHY_ADDR);
    return ERR_IF;
  }
  memcpy(nif->hwaddr, g_mac, 6);
  nif->hwaddr_len = 6;
  nif->name[0] = 'e';
  nif->name[1] = 'n';
  nif->output = etharp_output;
  nif->linkoutput = low_level_output;
  nif->mtu = 1500;
  nif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_LINK_UP;
  board_set_ethernet_isr(enet_isr);
  nvic_enable(IRQ_ENET);
  ts_log("enet: PHY id %04x:%04x, MAC %02x:%02x:%02x:%02x:%02x:%02x; waiting up to 5 s for the link\n",
         (unsigned)(id >> 16), (unsigned)(id & 0xFFFFu), g_mac[0], g_mac[1], g_mac[2], g_mac[3], g_mac[4], g_mac[5]);
  teensy_enet_wait_link(5000);
  g_last_poll_ms = board_ms();
  return ERR_OK;
}

void teensy_set_mac(const uint8_t mac[6]) {
  memcpy(g_mac, mac, 6);
  g_mac_set = 1;
}

int eth_poll(struct netif* nif) {
  if (board_ms() - g_last_poll_ms >= LINK_POLL_MS) {
    g_last_poll_ms = board_ms();
    link_check();
  }
  if (!g_link) return 0;
  int n = 0;
  for (;;) {
    const int len = enet_core_rx(g_frame, sizeof g_frame);
    if (len == 0) break;
    if (len < 0) {
      g_stats.rx_dropped++;
      continue;
    }
    struct pbuf* p = pbuf_alloc(PBUF_RAW, (uint16_t)(len + ETH_PAD_SIZE), PBUF_POOL);
    if (!p) {
      g_stats.rx_dropped++;  // pool full: TCP will retransmit
      continue;
    }
    pbuf_take_at(p, g_frame, (uint16_t)len, ETH_PAD_SIZE);
    g_stats.rx_frames++;
    if (nif->input(p, nif) != ERR_OK) pbuf_free(p);
    n++;
  }
  return n;
}
