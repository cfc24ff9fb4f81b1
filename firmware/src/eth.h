// The board's Ethernet driver behind an lwIP netif: what the shared network
// glue (net_worker.cpp) calls. QEMU: lan9118.c (SMSC LAN9118 PIO FIFOs);
// Teensy 4.1: boards/teensy41/enet.c (i.MX RT1062 ENET with DMA rings, DP83825I
// PHY over RMII). Receive is polled from the main loop; the interrupt only
// wakes the core from WFI.
#pragma once

#include <stdint.h>

#include "lwip/netif.h"

#ifdef __cplusplus
extern "C" {
#endif

// lwIP netif init callback (pass to netif_add).
err_t eth_netif_init(struct netif* nif);
// Moves every received frame into lwIP (netif->input). Returns frames taken.
int eth_poll(struct netif* nif);
// True when a received frame waits in the controller.
int eth_rx_pending(void);
// 1 when the PHY reports a link (QEMU's model: always).
int eth_link_up(void);
// Ticks spent in the driver's receive interrupt since reset, low 32 bits
// (the QEMU driver copies frames there; a board whose handler does no work
// returns 0). Subtracted from a layer's compute time.
uint32_t eth_isr_ticks(void);
// Ticks of programmed I/O through the NIC's FIFOs (receive interrupt and
// transmit copies; wraps at 2^32).
uint32_t eth_pio_ticks(void);
// Counters for the logs.
typedef struct {
  uint32_t rx_frames, tx_frames, rx_dropped, tx_busy_waits, irqs;
} EthStats;
const EthStats* eth_stats(void);

#ifdef __cplusplus
}
#endif
