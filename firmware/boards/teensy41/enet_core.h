// The i.MX ENET 10/100 MAC (the controller of the i.MX RT1062; i.MX6UL/7D
// and QEMU's "imx.enet" model are the same family): reset, MDIO, legacy
// DMA descriptor rings (enhanced format), frame send/receive, generic IEEE 802.3 PHY link
// state. No board, pin, clock or lwIP code here: boards/teensy41/enet.c
// adds the Teensy's clocks, pins and PHY; tests/enet_qemu/ runs this file
// against QEMU's model.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENET_RX_RING 12
#define ENET_TX_RING 4
#define ENET_BUF_BYTES 1536  // per descriptor (multiple of 64); max frame 1518

typedef struct {
  uint32_t rx_frames, tx_frames, rx_errors, tx_full;
} EnetCoreStats;

// Resets the controller at `base`; MDC = ipg_hz / (2 (mii_speed + 1)).
void enet_core_reset(uintptr_t base, uint32_t mii_speed);
// Clause 22 MDIO; -1 on timeout.
int enet_mdio_read(uint32_t phy, uint32_t reg);
int enet_mdio_write(uint32_t phy, uint32_t reg, uint16_t value);
// Link state from the PHY's standard registers: 0 down, else up with
// *speed100 / *full from the negotiated abilities (or BMCR if no
// auto-negotiation).
int enet_phy_link(uint32_t phy, int* speed100, int* full);
// (Re)starts the MAC: rings, address, RMII or MII, speed, duplex; RX on.
// `rx_irq`: interrupt on received frames (EIMR RXF).
void enet_core_start(const uint8_t mac[6], int rmii, int speed100, int full, int rx_irq);
// The MAC's internal loopback (RCR.LOOP; MII mode only) from the next
// enet_core_start on: sent frames come back as received ones.
void enet_core_set_loopback(int on);
// Stops the MAC (ETHEREN off).
void enet_core_stop(void);
// Copies one frame (without CRC) out of the RX ring into dst (cap bytes);
// returns its length, 0 if none waits, -1 if a bad/oversized frame was
// dropped (call again).
int enet_core_rx(uint8_t* dst, uint32_t cap);
int enet_core_rx_pending(void);
// Queues one frame (no CRC: the MAC adds it); 0 if the TX ring is full.
int enet_core_tx(const uint8_t* frame, uint32_t len);
// 1 when every queued frame has been sent.
int enet_core_tx_idle(void);
// Acknowledges the RX interrupt (for the ISR).
void enet_core_ack_irq(void);
const EnetCoreStats* enet_core_stats(void);

#ifdef __cplusplus
}
#endif
