// SMSC LAN9118 Ethernet controller (as QEMU emulates it on the mps2 boards),
// the QEMU board's implementation of eth.h: polled receive, interrupt only to
// wake from WFI.
#pragma once

#include "eth.h"

#include "board_config.h"
#ifndef LAN9118_BASE
#define LAN9118_BASE 0xA0000000u  // mps2-an500
#endif
