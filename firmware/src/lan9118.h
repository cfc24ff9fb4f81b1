// SMSC LAN9118 Ethernet controller (as QEMU emulates it on the mps2 boards)
// behind an lwIP netif: polled receive, interrupt only to wake from WFI.
#pragma once

#include <stdint.h>

#include "lwip/netif.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LAN9118_BASE 0xA0000000u  // mps2-an500

// lwIP netif init callback (pass to netif_add).
err_t lan9118_netif_init(struct netif* nif);
// Moves every received frame into lwIP (netif->input). Returns frames taken.
int lan9118_poll(struct netif* nif);
// True when a received frame waits in the controller.
int lan9118_rx_pending(void);
// Counters for the logs.
typedef struct {
  uint32_t rx_frames, tx_frames, rx_dropped, tx_busy_waits, irqs;
} Lan9118Stats;
const Lan9118Stats* lan9118_stats(void);

#ifdef __cplusplus
}
#endif
