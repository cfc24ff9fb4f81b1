// lwIP configuration: raw API only, no OS (NO_SYS), IPv4 + TCP + ICMP, all
// memory in static pools sized for one coordinator connection.
//
// Sizing: the LAN9118 RX FIFO holds about 10 KB, so the TCP receive window
// (6 segments) is kept below it; received segments stay queued (as pbufs)
// until the worker has consumed them, so the pbuf pool covers one window
// plus headroom. The send buffer holds more than the protocol's OUTPUT
// window (8 frames of 1400 bytes).
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
#define MEM_SIZE (32 * 1024)
#define MEMP_NUM_PBUF 16
#define MEMP_NUM_TCP_PCB 2
#define MEMP_NUM_TCP_PCB_LISTEN 1
#define MEMP_NUM_TCP_SEG 48
#define MEMP_NUM_SYS_TIMEOUT 8
#define PBUF_POOL_SIZE 24
#define PBUF_POOL_BUFSIZE 1536
#define ETH_PAD_SIZE 2

#define TCP_MSS 1460
#define TCP_WND (6 * TCP_MSS)
#define TCP_SND_BUF (12 * TCP_MSS)
#define TCP_SND_QUEUELEN (4 * TCP_SND_BUF / TCP_MSS)
#define TCP_QUEUE_OOSEQ 0
#define TCP_LISTEN_BACKLOG 1
#define LWIP_TCP_KEEPALIVE 0

#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_TCP 1
#define CHECKSUM_CHECK_IP 1
#define CHECKSUM_CHECK_TCP 1
