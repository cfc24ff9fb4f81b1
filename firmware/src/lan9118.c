// LAN9118 driver. Register map and FIFO formats from the SMSC LAN9118
// datasheet; the subset used here is what QEMU's model implements:
// 32-bit PIO FIFOs, MAC registers reached through MAC_CSR_CMD/DATA, one
// interrupt line (mps2-an500: IRQ 13) used only to wake the core.
#include "lan9118.h"

#include <string.h>

#include "board.h"
#include "lwip/etharp.h"
#include "lwip/pbuf.h"
#include "netif/ethernet.h"
#include "semihost.h"

#define REG(off) (*(volatile uint32_t*)(LAN9118_BASE + (off)))

// System control and status registers (byte offsets).
#define RX_DATA_FIFO 0x00
#define TX_DATA_FIFO 0x20
#define RX_STATUS_FIFO 0x40
#define ID_REV 0x50
#define IRQ_CFG 0x54
#define INT_STS 0x58
#define INT_EN 0x5C
#define BYTE_TEST 0x64
#define FIFO_INT 0x68
#define RX_CFG 0x6C
#define TX_CFG 0x70
#define HW_CFG 0x74
#define RX_FIFO_INF 0x7C
#define TX_FIFO_INF 0x80
#define PMT_CTRL 0x84
#define MAC_CSR_CMD 0xA4
#define MAC_CSR_DATA 0xA8

// MAC registers (indirect).
#define MAC_CR 1
#define MAC_ADDRH 2
#define MAC_ADDRL 3
#define MAC_MII_ACC 6
#define MAC_MII_DATA 7

#define MAC_CR_TXEN (1u << 3)
#define MAC_CR_RXEN (1u << 2)
#define MAC_CR_FDPX (1u << 20)
#define CSR_BUSY (1u << 31)
#define CSR_READ (1u << 30)
#define HW_CFG_SRST 1u
#define PMT_READY 1u
#define TX_CFG_TX_ON (1u << 1)
#define INT_RSFL (1u << 3)
#define IRQ_CFG_EN (1u << 8)
#define IRQ_CFG_POL (1u << 4)   // active high
#define IRQ_CFG_TYPE 1u         // push-pull
#define RX_STS_ERROR (1u << 15)
#define TXA_FIRST (1u << 13)
#define TXA_LAST (1u << 12)

static EthStats g_stats;
static uint32_t g_frame[(1536 + 3) / 4];  // one frame, word aligned

static int wait_clear(uint32_t off, uint32_t bits) {
  for (uint32_t i = 0; i < 100000u; ++i)
    if ((REG(off) & bits) == 0) return 1;
  return 0;
}

static uint32_t mac_read(uint32_t reg) {
  wait_clear(MAC_CSR_CMD, CSR_BUSY);
  REG(MAC_CSR_CMD) = CSR_BUSY | CSR_READ | reg;
  wait_clear(MAC_CSR_CMD, CSR_BUSY);
  return REG(MAC_CSR_DATA);
}

static void mac_write(uint32_t reg, uint32_t v) {
  wait_clear(MAC_CSR_CMD, CSR_BUSY);
  REG(MAC_CSR_DATA) = v;
  REG(MAC_CSR_CMD) = CSR_BUSY | reg;
  wait_clear(MAC_CSR_CMD, CSR_BUSY);
}

static void phy_write(uint32_t reg, uint32_t v) {
  while (mac_read(MAC_MII_ACC) & 1u) {
  }
  mac_write(MAC_MII_DATA, v);
  mac_write(MAC_MII_ACC, (1u << 11) /* PHY address 1 */ | (reg << 6) | 2u /* write */ | 1u /* busy */);
}

// Received frames are moved out of the controller in its interrupt, into a
// ring of frame buffers that eth_poll hands to lwIP from the main loop. The
// controller's RX FIFO holds 10,560 bytes, and the main loop does not poll
// while a kernel runs: with several connections delivering at once (the
// coordinator and peer boards), frames that arrived during a long layer
// overflowed the FIFO and QEMU dropped them ("Slirp: Failed to send
// packet"), each costing a TCP retransmission timeout. The ring is written
// only by the handler (head) and read only by the main loop (tail). The
// TCP window (port/lwipopts.h) covers what the ring cannot: bursts QEMU
// delivers back to back before the handler runs.
#define RX_RING 32u
static uint32_t g_ring[RX_RING][(1536 + 3) / 4];
static uint16_t g_ring_len[RX_RING];
static volatile uint32_t g_ring_head, g_ring_tail;
static volatile uint32_t g_isr_ticks;  // low 32 bits of the ticks spent in the handler

static void drain_fifo(void) {
  while ((REG(RX_FIFO_INF) >> 16) & 0xFFu) {
    const uint32_t status = REG(RX_STATUS_FIFO);
    const uint32_t bytes = (status >> 16) & 0x3FFFu;  // frame + 4 CRC bytes
    const uint32_t words = (bytes + 3u) / 4u;
    const uint32_t head = g_ring_head;
    if ((status & RX_STS_ERROR) || bytes < 18u || bytes - 4u > sizeof g_ring[0] || head - g_ring_tail >= RX_RING) {
      for (uint32_t i = 0; i < words; ++i) (void)REG(RX_DATA_FIFO);
      g_stats.rx_dropped++;  // TCP will retransmit
      continue;
    }
    uint32_t* dst = g_ring[head % RX_RING];
    for (uint32_t i = 0; i < words; ++i) {
      const uint32_t w = REG(RX_DATA_FIFO);
      if (i < sizeof g_ring[0] / 4u) dst[i] = w;
    }
    g_ring_len[head % RX_RING] = (uint16_t)(bytes - 4u);
    __asm__ volatile("dmb" ::: "memory");
    g_ring_head = head + 1u;
  }
}

static void eth_isr(void) {
  const uint32_t t0 = (uint32_t)board_ticks();
  g_stats.irqs++;
  REG(INT_STS) = INT_RSFL;  // acknowledge first: a frame arriving later raises it again
  drain_fifo();
  g_isr_ticks += (uint32_t)board_ticks() - t0;
}

uint32_t eth_isr_ticks(void) { return g_isr_ticks; }

// Ticks spent moving frames through the LAN9118's FIFOs word by word (the
// receive interrupt's drain and the transmit loop below): programmed I/O a
// board with a DMA Ethernet (a Teensy 4.1's ENET) does not spend.
static uint32_t g_tx_pio_ticks;
uint32_t eth_pio_ticks(void) { return g_isr_ticks + g_tx_pio_ticks; }

int eth_rx_pending(void) { return g_ring_head != g_ring_tail || ((REG(RX_FIFO_INF) >> 16) & 0xFFu); }

const EthStats* eth_stats(void) { return &g_stats; }

static err_t low_level_output(struct netif* nif, struct pbuf* p) {
  (void)nif;
#if ETH_PAD_SIZE
  pbuf_remove_header(p, ETH_PAD_SIZE);
#endif
  const uint16_t len = p->tot_len;
  if (len > sizeof g_frame) {
#if ETH_PAD_SIZE
    pbuf_add_header(p, ETH_PAD_SIZE);
#endif
    return ERR_BUF;
  }
  pbuf_copy_partial(p, g_frame, len, 0);
#if ETH_PAD_SIZE
  pbuf_add_header(p, ETH_PAD_SIZE);
#endif
  // Room for the two command words and the data (TX_FIFO_INF: free bytes).
  const uint32_t t0 = (uint32_t)board_ticks();
  while ((REG(TX_FIFO_INF) & 0xFFFFu) < (uint32_t)len + 8u) g_stats.tx_busy_waits++;
  REG(TX_DATA_FIFO) = TXA_FIRST | TXA_LAST | len;  // command A: one buffer, no offset
  REG(TX_DATA_FIFO) = ((uint32_t)len << 16) | len; // command B: tag, packet length
  for (uint32_t i = 0; i < (len + 3u) / 4u; ++i) REG(TX_DATA_FIFO) = g_frame[i];
  g_tx_pio_ticks += (uint32_t)board_ticks() - t0;
  g_stats.tx_frames++;
  return ERR_OK;
}

err_t eth_netif_init(struct netif* nif) {
  if (REG(BYTE_TEST) != 0x87654321u) {
    ts_log("lan9118: no controller at %08x\n", (unsigned)LAN9118_BASE);
    return ERR_IF;
  }
  REG(HW_CFG) = HW_CFG_SRST;
  if (!wait_clear(HW_CFG, HW_CFG_SRST)) return ERR_IF;
  for (uint32_t i = 0; i < 100000u && (REG(PMT_CTRL) & PMT_READY) == 0; ++i) {
  }
  const uint32_t lo = mac_read(MAC_ADDRL), hi = mac_read(MAC_ADDRH);
  nif->hwaddr_len = 6;
  nif->hwaddr[0] = (uint8_t)lo;
  nif->hwaddr[1] = (uint8_t)(lo >> 8);
  nif->hwaddr[2] = (uint8_t)(lo >> 16);
  nif->hwaddr[3] = (uint8_t)(lo >> 24);
  nif->hwaddr[4] = (uint8_t)hi;
  nif->hwaddr[5] = (uint8_t)(hi >> 8);
  phy_write(0, 0x1000u);  // basic control: auto-negotiation on
  REG(RX_CFG) = 0;        // no offset: frames start at the first FIFO byte
  REG(FIFO_INT) = 0x48000000u;  // RX status level 0: interrupt on every frame
  REG(INT_STS) = 0xFFFFFFFFu;
  REG(INT_EN) = INT_RSFL;
  REG(IRQ_CFG) = IRQ_CFG_EN | IRQ_CFG_POL | IRQ_CFG_TYPE;
  REG(TX_CFG) = TX_CFG_TX_ON;
  mac_write(MAC_CR, MAC_CR_TXEN | MAC_CR_RXEN | MAC_CR_FDPX);

  nif->name[0] = 'e';
  nif->name[1] = 'n';
  nif->output = etharp_output;
  nif->linkoutput = low_level_output;
  nif->mtu = 1500;
  nif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_LINK_UP;
  board_set_ethernet_isr(eth_isr);
  nvic_enable(IRQ_ETHERNET);
  ts_log("lan9118: id %08x, MAC %02x:%02x:%02x:%02x:%02x:%02x\n", (unsigned)REG(ID_REV), nif->hwaddr[0],
         nif->hwaddr[1], nif->hwaddr[2], nif->hwaddr[3], nif->hwaddr[4], nif->hwaddr[5]);
  return ERR_OK;
}

int eth_poll(struct netif* nif) {
  int n = 0;
  // Frames the handler has not taken yet (it runs on every frame; this only
  // matters if the line was masked): move them with interrupts off.
  if ((REG(RX_FIFO_INF) >> 16) & 0xFFu) {
    __asm__ volatile("cpsid i" ::: "memory");
    drain_fifo();
    __asm__ volatile("cpsie i" ::: "memory");
  }
  while (g_ring_tail != g_ring_head) {
    const uint32_t tail = g_ring_tail;
    const uint16_t len = g_ring_len[tail % RX_RING];
    struct pbuf* p = pbuf_alloc(PBUF_RAW, (uint16_t)(len + ETH_PAD_SIZE), PBUF_POOL);
    if (!p) {
      g_stats.rx_dropped++;  // pool full: TCP will retransmit
      g_ring_tail = tail + 1u;
      continue;
    }
    pbuf_take_at(p, g_ring[tail % RX_RING], len, ETH_PAD_SIZE);
    __asm__ volatile("dmb" ::: "memory");
    g_ring_tail = tail + 1u;
    g_stats.rx_frames++;
    if (nif->input(p, nif) != ERR_OK) pbuf_free(p);
    n++;
  }
  return n;
}

int eth_link_up(void) { return 1; }  // QEMU's model has no cable to pull
