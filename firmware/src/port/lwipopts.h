// lwIP configuration: raw API only, no OS (NO_SYS), IPv4 + TCP + ICMP, all
// memory in static pools sized for TS_MAX_LINKS connections (the coordinator
// and peer boards, firmware/Makefile MAX_LINKS).
//
// Sizing: QEMU's LAN9118 RX FIFO holds 10,560 bytes and drops a frame that
// does not fit (the driver's interrupt empties it into a ring, but QEMU may
// deliver several connections' bursts back to back first). The TCP receive
// window is therefore 2 segments: the bursts of three connections that
// deliver at once (the coordinator and two peers) fit the FIFO; with 6 (one
// coordinator only, before direct routing) and 4 segments, frames were
// dropped (docs/firmware.md, "Board to board under QEMU"). Received
// segments stay queued (as pbufs) until the worker has consumed them, so the
// pbuf pool covers the windows of the links that carry data at once plus
// headroom. The send buffer holds more than the protocol's OUTPUT window
// (8 frames of 1400 bytes).
#pragma once

#define NO_SYS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_NETCONN 0
#define LWIP_SOCKET 0
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
#define LWIP_ICMP 1
#define LWIP_RAW 0
#define LWIP_UDP 0
#define LWIP_DHCP 0
#define LWIP_DNS 0
#define LWIP_IGMP 0
#define LWIP_TCP 1
#define LWIP_STATS 0
#define LWIP_NETIF_STATUS_CALLBACK 0
#define LWIP_NETIF_LINK_CALLBACK 0
#define LWIP_TIMERS 1
#define IP_REASSEMBLY 0
#define IP_FRAG 0

#define MEM_ALIGNMENT 4
// 48 KB; a board short of data RAM gives some to the send queues
// (firmware/Makefile, the Cortex-M4's BOARD_DEFS).
#ifdef TS_LWIP_MEM_SIZE
#define MEM_SIZE TS_LWIP_MEM_SIZE
#else
#define MEM_SIZE (48 * 1024)
#endif
#define MEMP_NUM_PBUF 16
#ifndef TS_MAX_LINKS
#define TS_MAX_LINKS 16
#endif
// One pcb per link, plus one for a connection turned away busy and one in
// TIME_WAIT (lwIP reuses those when it runs out).
#define MEMP_NUM_TCP_PCB (TS_MAX_LINKS + 2)
#define MEMP_NUM_TCP_PCB_LISTEN 1
#define MEMP_NUM_TCP_SEG 96
#define MEMP_NUM_SYS_TIMEOUT 8
#define PBUF_POOL_SIZE 40
#define PBUF_POOL_BUFSIZE 1536
#define ETH_PAD_SIZE 2

#define TCP_MSS 1460
#define TCP_WND (2 * TCP_MSS)
#define TCP_SND_BUF (12 * TCP_MSS)
#define TCP_SND_QUEUELEN (4 * TCP_SND_BUF / TCP_MSS)
#define TCP_QUEUE_OOSEQ 0
#define TCP_LISTEN_BACKLOG 1
#define LWIP_TCP_KEEPALIVE 0

#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_TCP 1
#define CHECKSUM_CHECK_IP 1
#define CHECKSUM_CHECK_TCP 1
