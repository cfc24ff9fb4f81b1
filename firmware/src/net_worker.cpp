// `serve`: the portable board worker (src/core/worker.h) behind lwIP's raw
// TCP API on the board's Ethernet driver (eth.h), listening on the
// ServeOptions address (QEMU: 10.0.2.15:7000; user-mode networking forwards
// a host port there).
//
// Links: the board holds up to kMaxLinks TCP connections at once, each a
// worker link: the coordinator's, the ones peer boards opened to it, and the
// ones it opens itself (tcp_connect) to the peers it sends activations to,
// at the addresses of the coordinator's PEERS message (docs/firmware.md,
// "Board to board under QEMU"). Each slot is static: a pcb, a queue of
// received pbufs and a few flags; the worker's per-link state (frame reader,
// windows) is in the worker. No heap after init.
//
// Event loop without an OS: poll the controller, run lwIP's timers, hand
// received bytes to the worker link by link, then sleep in WFI until an
// interrupt (a frame, or the 20 Hz tick for lwIP's timers). Received
// segments are queued by lwIP's receive callback and fed to the worker only
// from the main loop, so the worker is never re-entered while it is
// connecting (Port::open_link waits for the handshake).
//
// Sends never wait: what lwIP does not take at once waits in the link's send
// queue (kSendQueueBytes, static, one per slot), which lwIP's sent callback
// and the main loop move on as the peer acknowledges. The worker sends a
// frame of its results only when the queue has room for it (Port::room), so
// only ACKs and ERRORs to a peer that does not read can overflow it: that
// link is closed, as is one whose queue has not moved for
// core::kWriteDeadlineMs (the host boards' figure).
#include <string.h>

#include "board.h"
#include "core/crc32.h"
#include "core/layer_work.h"
#include "core/worker.h"
#include "net/fault_port.h"
#include "firmware.h"
#include "flash_store.h"
#include "eth.h"
#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"
#include "semihost.h"

namespace {

using ts::core::kMaxLinks;

// Send queues: two whole frames with their tags each, so that a frame of
// results can wait while lwIP's buffers are full. A link takes one from the
// pool when lwIP does not take all it sends, and gives it back once drained.
// One per link slot by default (16: 45,312 B of static data, which
// firmware/Makefile counts; the arena, which the planner budgets and the
// board measures, is not touched); a board with less data RAM sets
// BOARD_SEND_QUEUES (its links then wait for a queue to free, as for a full
// window, when more than that many find lwIP full at once).
constexpr uint32_t kSendQueueBytes = 2 * uint32_t(ts::wire::kMaxFrameBuf);
#ifndef BOARD_SEND_QUEUES
#define BOARD_SEND_QUEUES TS_MAX_LINKS
#endif
constexpr int kSendQueues = BOARD_SEND_QUEUES;
// A peer listens before the coordinator sends PEERS, so a handshake that
// does not complete in this time means the peer is gone.
constexpr uint32_t kConnectTimeoutMs = 5000;
// Peer addresses the board keeps from PEERS (plan indices 0..kMaxPeers-1).
constexpr int kMaxPeers = 32;

// One TCP connection = one worker link (same index).
struct FwLink {
  struct tcp_pcb* pcb = nullptr;
  struct pbuf* rxq = nullptr;  // received, not yet given to the worker
  uint16_t rx_off = 0;         // bytes of rxq's first pbuf already given
  bool used = false;           // the slot is taken
  bool fresh = false;          // accepted; the worker has not seen it yet
  bool closed = false;         // the other end closed, or the connection failed
  bool outgoing = false;       // this board opened it (to a peer)
  bool connected = false;      // outgoing: handshake done
  uint32_t number = 0;         // connection count, for the logs
  uint32_t last_rx_ms = 0;     // when the connection last brought bytes
  // Send queue (a ring in g_send_queues[tx_q], -1: none held): bytes lwIP
  // has not taken, and when it last took some while any waited.
  int tx_q = -1;
  uint32_t tx_head = 0, tx_len = 0;
  uint32_t tx_moved_ms = 0;
  uint64_t start_ticks = 0, start_idle = 0, start_compute = 0;
};

struct netif g_netif;
FlashRegionStore g_flash;
ts::core::Worker g_worker;
ServeOptions g_opt;
struct tcp_pcb* g_listen = nullptr;
FwLink g_links[kMaxLinks];
uint8_t g_send_queues[kSendQueues][kSendQueueBytes];
bool g_send_queue_used[kSendQueues] = {};
bool g_queue_moved = false;  // some link's send queue moved (the worker may send on)
ts::wire::PeerEntry g_peers[kMaxPeers];
bool g_peer_known[kMaxPeers] = {};
uint32_t g_connections = 0;
uint32_t g_once_link = 0;          // --once: the connection whose end ends the run (the first accepted)
uint32_t g_errors_sent[16] = {};  // by ErrorCode
uint64_t g_compute_instr = 0;      // instructions inside compute_range, all layers
uint32_t g_refused_busy = 0;   // connections turned away while every slot was in use
uint32_t g_peer_links_opened = 0, g_peer_connect_failures = 0;
uint8_t g_seed[16] = {};       // provisioned per-boot entropy (nonces)
uint64_t g_isr_total = 0;      // ticks in the Ethernet interrupt, 64 bits
uint32_t g_isr_seen = 0;       // eth_isr_ticks() at the last reading

// lwIP callbacks get the slot index + 1 as their argument (0 = none).
void* slot_arg(int i) { return reinterpret_cast<void*>(uintptr_t(i) + 1u); }
int slot_of(void* arg) { return int(reinterpret_cast<uintptr_t>(arg)) - 1; }
bool valid_slot(int i) { return i >= 0 && i < kMaxLinks && g_links[i].used; }

// Reads the provisioning record (firmware.h). Returns 1 with a key, 0 without
// one, -1 if the record is damaged.
int read_provisioning(uint8_t key[32]) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(kProvisionAddr);
  if (memcmp(p, "TSKEY001", 8) != 0) return 0;
  const uint32_t stored = uint32_t(p[56]) | uint32_t(p[57]) << 8 | uint32_t(p[58]) << 16 | uint32_t(p[59]) << 24;
  if (ts::crc32(p, 56) != stored) return -1;
  memcpy(key, p + 8, 32);
  memcpy(g_seed, p + 40, 16);
  return 1;
}

void service_network() {
  eth_poll(&g_netif);
  sys_check_timeouts();
}

int rx_or_tick() { return g_tick_flag || eth_rx_pending(); }

int has_work() {
  if (g_tick_flag || eth_rx_pending()) return 1;
  for (int i = 0; i < kMaxLinks; ++i) {
    const FwLink& l = g_links[i];
    if (!l.used) continue;
    // A closed connection whose bytes the worker still holds waits for them.
    if (l.fresh || (l.closed && !l.rxq) || (l.rxq && !g_worker.holding(i))) return 1;
  }
  return 0;
}

// Where a peer listens, as this board must dial it. Under QEMU's user-mode
// networking each board sits behind its own NAT and the coordinator knows the
// boards by their host port forwards on 127.0.0.1; the host's loopback is
// the guest's gateway address (10.0.2.2), so a loopback address in PEERS is
// dialled through the gateway, which reaches the peer's forwarded port.
void dial_address(const ts::wire::PeerEntry& e, ip4_addr_t* ip) {
#ifdef BOARD_LOOPBACK_VIA_GATEWAY
  if ((e.ipv4 >> 24) == 127) {
    IP4_ADDR(ip, g_opt.gw[0], g_opt.gw[1], g_opt.gw[2], g_opt.gw[3]);
    return;
  }
#endif
  IP4_ADDR(ip, uint8_t(e.ipv4 >> 24), uint8_t(e.ipv4 >> 16), uint8_t(e.ipv4 >> 8), uint8_t(e.ipv4));
}

err_t on_recv(void* arg, struct tcp_pcb* pcb, struct pbuf* p, err_t err) {
  const int i = slot_of(arg);
  if (!valid_slot(i) || g_links[i].pcb != pcb) {
    if (p) pbuf_free(p);
    return ERR_OK;
  }
  FwLink& l = g_links[i];
  if (!p) {
    l.closed = true;
    return ERR_OK;
  }
  if (err != ERR_OK) {
    pbuf_free(p);
    return err;
  }
  if (l.rxq) pbuf_cat(l.rxq, p);
  else l.rxq = p;
  tcp_ack_now(pcb);  // no delayed ACK: the peer may be waiting on it (Nagle)
  return ERR_OK;
}

void on_error(void* arg, err_t err) {
  // lwIP has already freed the pcb.
  const int i = slot_of(arg);
  if (!valid_slot(i)) return;
  g_links[i].pcb = nullptr;
  g_links[i].closed = true;
  ts_log("tcp: connection %u error %d\n", (unsigned)g_links[i].number, (int)err);
}

err_t on_connected(void* arg, struct tcp_pcb*, err_t err) {
  const int i = slot_of(arg);
  if (valid_slot(i) && err == ERR_OK) g_links[i].connected = true;
  return ERR_OK;
}

err_t on_sent(void* arg, struct tcp_pcb*, u16_t);

void watch(int i, struct tcp_pcb* pcb) {
  tcp_arg(pcb, slot_arg(i));
  tcp_recv(pcb, on_recv);
  tcp_err(pcb, on_error);
  tcp_sent(pcb, on_sent);
  tcp_nagle_disable(pcb);
}

// Takes a free slot, or -1.
int claim_slot(bool outgoing) {
  for (int i = 0; i < kMaxLinks; ++i)
    if (!g_links[i].used) {
      FwLink& l = g_links[i];
      l = FwLink();
      l.used = true;
      l.outgoing = outgoing;
      l.number = ++g_connections;
      l.last_rx_ms = board_ms();
      l.start_ticks = board_ticks();
      l.start_idle = board_idle_ticks();
      l.start_compute = g_compute_instr;
      return i;
    }
  return -1;
}

// A free queue of the pool, or -1.
int free_queue() {
  for (int q = 0; q < kSendQueues; ++q)
    if (!g_send_queue_used[q]) return q;
  return -1;
}

void release_queue(FwLink& l) {
  if (l.tx_q >= 0) g_send_queue_used[l.tx_q] = false;
  l.tx_q = -1;
  l.tx_head = l.tx_len = 0;
}

// Moves link i's queued bytes into lwIP while it takes them; true if any
// moved. Never waits.
bool drain(int i) {
  FwLink& l = g_links[i];
  bool moved = false;
  while (l.tx_len > 0 && l.pcb) {
    uint32_t n = kSendQueueBytes - l.tx_head;  // up to the ring's end
    if (n > l.tx_len) n = l.tx_len;
    const uint16_t room = tcp_sndbuf(l.pcb);
    if (room == 0 || tcp_sndqueuelen(l.pcb) + 2u >= TCP_SND_QUEUELEN) break;
    if (n > room) n = room;
    if (tcp_write(l.pcb, g_send_queues[l.tx_q] + l.tx_head, uint16_t(n), TCP_WRITE_FLAG_COPY) != ERR_OK) break;
    l.tx_head = (l.tx_head + n) % kSendQueueBytes;
    l.tx_len -= n;
    moved = true;
  }
  if (moved) {
    l.tx_moved_ms = board_ms();
    g_queue_moved = true;
  }
  if (l.tx_len == 0) release_queue(l);
  return moved;
}

// lwIP: the peer acknowledged `len` bytes of link i; its queue can move.
err_t on_sent(void* arg, struct tcp_pcb*, u16_t) {
  const int i = slot_of(arg);
  if (valid_slot(i)) drain(i);
  return ERR_OK;
}

// Appends to link i's queue (taking one from the pool if it holds none);
// false if it does not fit or none is free.
bool enqueue(int i, const uint8_t* data, size_t len) {
  FwLink& l = g_links[i];
  if (l.tx_q < 0) {
    l.tx_q = free_queue();
    if (l.tx_q < 0) return false;
    g_send_queue_used[l.tx_q] = true;
    l.tx_head = l.tx_len = 0;
  }
  if (len > kSendQueueBytes - l.tx_len) return false;
  if (l.tx_len == 0) l.tx_moved_ms = board_ms();
  for (size_t k = 0; k < len; ++k) g_send_queues[l.tx_q][(l.tx_head + l.tx_len + k) % kSendQueueBytes] = data[k];
  l.tx_len += uint32_t(len);
  return true;
}

class LwipPort final : public ts::core::Port {
 public:
  // Never waits: lwIP takes what it can, the link's queue the rest (in
  // order: nothing goes to lwIP while the queue holds bytes). False when
  // the queue cannot take it (a peer that does not read our ACKs): the
  // worker closes the link.
  bool send(int link, const uint8_t* data, size_t len) override {
    if (link < 0 || link >= kMaxLinks) return false;
    FwLink& l = g_links[link];
    if (!l.used || !l.pcb) return false;
    log_if_error(data, len);
    while (len > 0 && l.tx_len == 0) {
      const uint16_t room = tcp_sndbuf(l.pcb);
      if (room == 0 || tcp_sndqueuelen(l.pcb) + 2u >= TCP_SND_QUEUELEN) break;
      const uint16_t n = uint16_t(len < room ? len : room);
      const err_t e = tcp_write(l.pcb, data, n, TCP_WRITE_FLAG_COPY);
      if (e == ERR_MEM) break;
      if (e != ERR_OK) return false;
      data += n;
      len -= n;
    }
    if (len > 0 && !enqueue(link, data, len)) {
      ts_log("send: the queue of connection %u is full (%u bytes): its peer does not read, dropping it\n",
             (unsigned)l.number, (unsigned)l.tx_len);
      return false;
    }
    return true;
  }
  // What the link's queue can still take: a queue it holds, or one free in
  // the pool (none free: 0, and its results wait for one).
  size_t room(int link) override {
    if (link < 0 || link >= kMaxLinks || !g_links[link].used) return 0;
    const FwLink& l = g_links[link];
    if (l.tx_q >= 0) return kSendQueueBytes - l.tx_len;
    // With fewer queues than links, the last free one is kept for ACKs and
    // ERRORs, which cannot wait.
    int free = 0;
    for (int q = 0; q < kSendQueues; ++q) free += !g_send_queue_used[q];
    return free > (kSendQueues < kMaxLinks ? 1 : 0) ? kSendQueueBytes : 0;
  }
  // Before a compute: what is queued goes out now (the DONE reports of the
  // layers finished, the halos peers wait for), not after the compute.
  void flush(int link) override {
    if (link < 0 || link >= kMaxLinks || !g_links[link].used || !g_links[link].pcb) return;
    drain(link);
    tcp_output(g_links[link].pcb);
  }

  void peer_address(const ts::wire::PeerEntry& e) override {
    if (e.worker >= kMaxPeers) return;  // open_link then fails: "cannot reach a peer board"
    g_peers[e.worker] = e;
    g_peer_known[e.worker] = true;
    ip4_addr_t ip;
    dial_address(e, &ip);
    ts_log("peer %u at %u.%u.%u.%u:%u, dialled as %s:%u\n", (unsigned)e.worker, (unsigned)(e.ipv4 >> 24),
           (unsigned)((e.ipv4 >> 16) & 255), (unsigned)((e.ipv4 >> 8) & 255), (unsigned)(e.ipv4 & 255),
           (unsigned)e.port, ip4addr_ntoa(&ip), (unsigned)e.port);
  }

  // Connects to a peer and waits for the handshake (polling the network; the
  // worker is not re-entered meanwhile). Returns the link, or -1.
  int open_link(uint16_t worker) override {
    if (worker >= kMaxPeers || !g_peer_known[worker]) return -1;
    const int i = claim_slot(true);
    if (i < 0) {
      ts_log("peer %u: every connection slot in use (%d)\n", (unsigned)worker, kMaxLinks);
      return -1;
    }
    FwLink& l = g_links[i];
    ip4_addr_t ip;
    dial_address(g_peers[worker], &ip);
    struct tcp_pcb* pcb = tcp_new();
    if (!pcb) {
      l = FwLink();
      return -1;
    }
    l.pcb = pcb;
    watch(i, pcb);
    if (tcp_connect(pcb, &ip, g_peers[worker].port, on_connected) != ERR_OK) {
      drop(i);
      return -1;
    }
    const uint32_t start = board_ms();
    while (!l.connected && l.pcb && !l.closed && board_ms() - start < kConnectTimeoutMs) {
      service_network();
      if (l.connected || !l.pcb || l.closed) break;
      board_idle(rx_or_tick);
      g_tick_flag = 0;
    }
    if (!l.connected || !l.pcb || l.closed) {
      g_peer_connect_failures++;
      ts_log("peer %u: cannot connect to %s:%u\n", (unsigned)worker, ip4addr_ntoa(&ip), (unsigned)g_peers[worker].port);
      drop(i);
      return -1;
    }
    g_peer_links_opened++;
    ts_log("connection %u: to peer %u (%s:%u)\n", (unsigned)l.number, (unsigned)worker, ip4addr_ntoa(&ip),
           (unsigned)g_peers[worker].port);
    return i;
  }

  // The other end as lwIP has it (under QEMU's user network the host's
  // connections come from the gateway, 10.0.2.2, and a port of its own).
  size_t describe_link(int link, char* out, size_t cap) override {
    if (link < 0 || link >= kMaxLinks || !g_links[link].pcb || cap < 2) return 0;
    const struct tcp_pcb* pcb = g_links[link].pcb;
    size_t n = 0;
    for (const char* c = ip4addr_ntoa(ip_2_ip4(&pcb->remote_ip)); *c && n + 7 < cap; ++c) out[n++] = *c;
    out[n++] = ':';
    char d[5];
    int k = 0;
    uint16_t port = pcb->remote_port;
    do {
      d[k++] = char('0' + port % 10);
      port = uint16_t(port / 10);
    } while (port && k < 5);
    while (k > 0 && n + 1 < cap) out[n++] = d[--k];
    out[n] = 0;
    return n;
  }
  // The close of the other end is seen in on_recv; the worker hears of it
  // when the main loop closes the slot.
  bool link_alive(int link) override {
    return link >= 0 && link < kMaxLinks && g_links[link].used && !g_links[link].closed;
  }

  // The worker reads the clock right before and right after a layer's
  // compute_range (worker.cpp, on_run), then calls after_compute: the last
  // two readings bracket exactly the kernel.
  // The provisioned seed (fresh for every QEMU launch) and the tick counter.
  size_t entropy(uint8_t* out, size_t cap) override {
    uint8_t e[24];
    memcpy(e, g_seed, 16);
    const uint64_t t = board_ticks();
    for (int i = 0; i < 8; ++i) e[16 + i] = uint8_t(t >> (8 * i));
    const size_t n = cap < sizeof e ? cap : sizeof e;
    memcpy(out, e, n);
    return n;
  }

  uint32_t now_us() override {
    prev_tick_ = last_tick_;
    // The kernel's bracket leaves out the ticks the Ethernet interrupt took
    // meanwhile (frames arriving during a layer are not the kernel's work).
    const uint32_t isr = eth_isr_ticks();
    g_isr_total += uint32_t(isr - g_isr_seen);
    g_isr_seen = isr;
    const uint64_t t = board_ticks();
    // An interrupt that began before the last reading and ended after it
    // is counted whole here: on a bracket shorter than its part before that
    // reading, the difference would go below zero (a few-instruction layer
    // then reported 2^32 instructions); it is 0 instead.
    const uint64_t kernel = t - g_isr_total;
    last_tick_ = kernel > prev_tick_ ? kernel : prev_tick_;
    return uint32_t(t / (BOARD_TICK_HZ / 1000000u));
  }

  // The first part of a layer computed halos first (core/halo_first.h):
  // its bracket's instructions are added to the layer's in after_compute.
  uint32_t compute_part(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    (void)layer;
    (void)macs;
    const uint64_t instr = (last_tick_ - prev_tick_) * BOARD_NS_PER_TICK;
    part_instr_ += instr;
    return g_opt.icount ? uint32_t(instr / g_opt.clock_mhz) : elapsed_us;
  }

  uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    const uint64_t instr = part_instr_ + (last_tick_ - prev_tick_) * BOARD_NS_PER_TICK;
    part_instr_ = 0;
    g_compute_instr += instr;
    // Exact only under -icount shift=0 (one instruction per virtual ns).
    last_instr_ = !g_opt.icount ? 0u : instr > 0xFFFFFFFFu ? 0xFFFFFFFFu : instr == 0 ? 1u : uint32_t(instr);
    const uint64_t mpi = macs ? (instr * 1000u + macs / 2u) / macs : 0;
    const ts::core::FragLayer* fl = layer_info(layer);
    const bool known = fl != nullptr;
    // The stack's high-water mark is not here: finding it scans the unused
    // stack (about 17k words), which on every layer cost more instructions
    // than the board's protocol; it is in the inference's last line.
    // other=: the busy instructions since the last layer's line outside the
    // kernels (receiving, copying inputs, sending, logging).
    const uint64_t busy = (board_ticks() - board_idle_ticks()) * BOARD_NS_PER_TICK;
    const uint64_t other = busy - last_busy_ - instr;
    last_busy_ = busy;
    // nic=: the part of other= in the network controller's programmed I/O
    // (a Teensy's Ethernet moves frames by DMA). With the fragment's
    // `pieces` lines (layer_info) it is what scripts/board_costs.sh fits the
    // board's protocol prices to.
    const uint32_t pio = eth_pio_ticks();
    const uint64_t nic = uint64_t(uint32_t(pio - last_pio_)) * BOARD_NS_PER_TICK;
    last_pio_ = pio;
    ts_log("layer %u kind=%s outputs=%ld macs=%u instructions=%u instr_per_mac=%u.%03u arena_peak=%u other=%u nic=%u\n",
           (unsigned)layer, known ? kind_of(fl->desc) : "?", known ? (long)(fl->run_end - fl->run_begin) : 0L,
           clamp32(macs), clamp32(instr), clamp32(mpi / 1000u), clamp32(mpi % 1000u),
           (unsigned)g_worker.arena().high_water(), clamp32(other), clamp32(nic));
    if (known && layer == last_active_) {
      // The board's last layer of an inference: its busy time so far (under
      // -icount, instructions; the difference between two inferences is what
      // one costs the board, scripts/qemu_route_bench.sh --instructions).
      // Also the NIC's programmed I/O (ticks, wrapping at 2^32) and the
      // protocol frames in and out, for the per-frame CPU figure.
      const uint64_t busy = (board_ticks() - board_idle_ticks()) * BOARD_NS_PER_TICK;
      const ts::core::WorkerStats& s = g_worker.stats();
      ts_log("inference done: busy instructions %llu, compute %llu (since boot), nic pio ticks %u, frames %u, "
             "stack_used %u\n",
             (unsigned long long)busy, (unsigned long long)g_compute_instr, (unsigned)eth_pio_ticks(),
             (unsigned)(s.frames_in + s.frames_out), (unsigned)board_stack_used());
    }
    if (!g_opt.icount) return elapsed_us;
    // Under -icount the virtual clock runs at one instruction per ns; report
    // what the board's clock would take at one cycle per instruction.
    return uint32_t(instr / g_opt.clock_mhz);
  }
  uint32_t compute_instructions() override { return last_instr_; }

  // Frees slot i without telling the worker (it never saw the link).
  static void drop(int i) {
    FwLink& l = g_links[i];
    if (l.pcb) {
      tcp_arg(l.pcb, nullptr);
      tcp_recv(l.pcb, nullptr);
      tcp_err(l.pcb, nullptr);
      tcp_sent(l.pcb, nullptr);
      tcp_abort(l.pcb);
    }
    if (l.rxq) pbuf_free(l.rxq);
    release_queue(l);
    l = FwLink();
  }

 private:
  // Kernel kind of a layer, for the per-kind instruction statistics.
  static const char* kind_of(const ts::core::LayerDesc& d) {
    if (d.op == ts::core::QOp::Gemm) return "linear";
    if (d.op != ts::core::QOp::Conv) return ts::core::qop_name(d.op);
    if (d.groups > 1 && d.groups == d.in[0].c) return "depthwise";
    if (d.kh == 1 && d.kw == 1) return "pointwise";
    return "conv";
  }
  static unsigned clamp32(uint64_t v) { return v > 0xFFFFFFFFu ? 0xFFFFFFFFu : unsigned(v); }
  // The committed fragment's entry for `layer`, as the worker holds it
  // decoded, or nullptr. A newly committed fragment is opened here once (one
  // CRC pass) for its layers' pieces lines.
  const ts::core::FragLayer* layer_info(uint32_t layer) {
    uint32_t size = 0;
    const uint8_t* p = g_flash.current(&size);
    if (!p) return nullptr;
    if (g_flash.generation() != frag_gen_) {
      frag_ok_ = reader_.open(p, size) == ts::core::FragStatus::Ok;
      frag_gen_ = g_flash.generation();
      last_active_ = ~0u;
      ts::core::FragLayer e;
      for (uint32_t i = 0; frag_ok_ && i < reader_.layer_count(); ++i) {
        if (reader_.layer(i, &e) != ts::core::FragStatus::Ok || !e.active()) continue;
        last_active_ = i;
        // The pieces of the layer's share (core/layer_work.h), once per
        // fragment: scripts/board_costs.sh fits the protocol prices to them.
        const ts::core::LayerWork w = ts::core::layer_work(e);
        ts_log("pieces %u local_runs=%u recv_runs=%u sends=%u net=%u local=%u out=%u\n", (unsigned)i,
               (unsigned)w.local_runs, (unsigned)w.recv_runs, (unsigned)w.sends, clamp32(w.net_bytes),
               clamp32(w.local_bytes), clamp32(w.out_bytes));
      }
    }
    return frag_ok_ ? g_worker.layer_entry(layer) : nullptr;
  }
  ts::core::FragmentReader reader_;
  uint32_t frag_gen_ = 0;
  uint32_t last_active_ = ~0u;  // the fragment's last layer with a share
  bool frag_ok_ = false;
  // The worker sends whole frames; an ERROR frame is logged with its reason.
  static void log_if_error(const uint8_t* data, size_t len) {
    ts::wire::FrameHeader h;
    if (ts::wire::decode_header(data, len, &h) != ts::wire::WireError::Ok || h.type != ts::wire::MsgType::Error) return;
    ts::wire::ErrorPayload e;
    if (len < ts::wire::kHeaderSize + h.payload_len || !e.decode(data + ts::wire::kHeaderSize, h.payload_len)) return;
    g_errors_sent[uint16_t(e.code) < 16 ? uint16_t(e.code) : 0]++;
    ts_log("sent ERROR %s: %s\n", ts::wire::error_code_name(e.code), e.text);
  }
  uint64_t prev_tick_ = 0, last_tick_ = 0;
  uint64_t part_instr_ = 0;  // compute_part's instructions, for after_compute
  uint64_t last_busy_ = 0;  // busy instructions at the last layer's line
  uint32_t last_pio_ = 0;   // eth_pio_ticks() at the last layer's line
  uint32_t last_instr_ = 0;
};

LwipPort g_port;
// `--inject-fault KIND:N` (`run --inject-fault KIND:B:N`): the worker's port
// is g_port behind the fault decorator (net/fault_port.h), set up in serve.
// kill ends QEMU (the host closes the board's sockets, as for a host board
// killed by SIGKILL); stall stops the board's one loop for good.
struct FirmwareFaultActions final : ts::net::FaultPort::Actions {
  void kill() override {
    ts_log("fault: kill (--inject-fault)\n");
    sh_exit(6);
  }
  void stall() override {
    ts_log("fault: stall (--inject-fault)\n");
    for (;;) board_idle(never_ready);
  }
  static int never_ready(void) { return 0; }
};
FirmwareFaultActions g_fault_actions;
ts::net::FaultPort g_fault_port(g_port, {}, &g_fault_actions);

// The worker's flash: the A/B store, plus the --cut-after-store test hook
// (a power cut in the middle of a deploy: the board stops right after a
// STORE was programmed, leaving a half-staged slot behind).
class ServeStore final : public ts::core::FlashStore {
 public:
  uint32_t capacity() const override { return g_flash.capacity(); }
  bool stage(uint32_t offset, const uint8_t* data, uint32_t len) override {
    const bool ok = g_flash.stage(offset, data, len);
    staged_ += len;
    if (g_opt.cut_after_store && staged_ >= g_opt.cut_after_store) {
      ts_log("power cut (test hook --cut-after-store): stopping after %u staged bytes\n", (unsigned)staged_);
      sh_exit(5);
    }
    return ok;
  }
  const uint8_t* staged(uint32_t size) const override { return g_flash.staged(size); }
  bool commit(uint32_t size, uint32_t crc) override { return g_flash.commit(size, crc); }
  const uint8_t* current(uint32_t* size) const override { return g_flash.current(size); }

 private:
  uint32_t staged_ = 0;
};
ServeStore g_store;

void log_connection_end(const FwLink& l, const char* why) {
  // Busy time: everything but WFI sleep. Under -icount shift=0 these are
  // instruction counts (1 tick = 40 instructions).
  const uint64_t all = (board_ticks() - l.start_ticks) * BOARD_NS_PER_TICK;
  const uint64_t idle = (board_idle_ticks() - l.start_idle) * BOARD_NS_PER_TICK;
  const uint64_t compute = g_compute_instr - l.start_compute;
  const unsigned n = (unsigned)l.number;
  ts_log("connection %u busy instructions %llu: compute %llu, protocol+network %llu (idle %llu)\n", n,
         (unsigned long long)(all - idle), (unsigned long long)compute, (unsigned long long)(all - idle - compute),
         (unsigned long long)idle);
  const ts::core::WorkerStats& s = g_worker.stats();
  const EthStats* e = eth_stats();
  ts_log("connection %u closed (%s%s): frames in %u out %u, bytes in %u out %u, layers %u, errors sent %u, "
         "arena peak %u of %u, stack %u of %u, eth rx %u tx %u dropped %u irqs %u\n",
         n, why, l.outgoing ? ", to a peer" : "", (unsigned)s.frames_in, (unsigned)s.frames_out, (unsigned)s.bytes_in,
         (unsigned)s.bytes_out, (unsigned)s.layers_run, (unsigned)s.errors_sent, (unsigned)s.peak_arena,
         (unsigned)g_worker.arena().capacity(), (unsigned)board_stack_used(), (unsigned)board_stack_size(),
         (unsigned)e->rx_frames, (unsigned)e->tx_frames, (unsigned)e->rx_dropped, (unsigned)e->irqs);
  ts_log("connection %u security: frames refused by authentication %u, connections turned away busy %u; "
         "peer links opened %u, failed %u\n",
         n, (unsigned)s.auth_failures, (unsigned)g_refused_busy, (unsigned)g_peer_links_opened,
         (unsigned)g_peer_connect_failures);
}

void close_link(int i, const char* why) {
  FwLink& l = g_links[i];
  if (!l.used) return;
  if (l.pcb) {
    tcp_arg(l.pcb, nullptr);
    tcp_recv(l.pcb, nullptr);
    tcp_err(l.pcb, nullptr);
    tcp_sent(l.pcb, nullptr);
    drain(i);  // what lwIP takes now goes with the close (the ERROR saying why)
    tcp_output(l.pcb);
    if (tcp_close(l.pcb) != ERR_OK) tcp_abort(l.pcb);
    l.pcb = nullptr;
  }
  if (l.rxq) {
    pbuf_free(l.rxq);
    l.rxq = nullptr;
  }
  release_queue(l);
  if (!l.fresh) g_worker.on_disconnect(i);
  log_connection_end(l, why);
  const uint32_t number = l.number;
  l = FwLink();
  // With --once the exit code tells a test whether the board refused work
  // for lack of memory (1) or not (0); the expected HashMismatch of a first
  // deploy does not count.
  if (g_opt.once && number == g_once_link) sh_exit(g_errors_sent[uint16_t(ts::wire::ErrorCode::OutOfMemory)] ? 1 : 0);
}

// Turns a connection away while every slot is in use: one ERROR frame
// saying so (a coordinator reports "busy", not "no answer"), then close.
err_t refuse_busy(struct tcp_pcb* pcb) {
  g_refused_busy++;
  const ts::wire::ErrorPayload e =
      ts::wire::ErrorPayload::make(ts::wire::ErrorCode::NotReady, 0, "board busy: every connection slot in use");
  uint8_t p[ts::wire::ErrorPayload::kMaxSize], f[ts::wire::kHeaderSize + ts::wire::ErrorPayload::kMaxSize];
  ts::wire::FrameHeader h;
  h.type = ts::wire::MsgType::Error;
  h.src = uint16_t(g_opt.id);
  h.dst = ts::wire::kCoordinatorId;
  const size_t n = ts::wire::encode_frame(h, p, e.encode(p, sizeof p), f, sizeof f);
  tcp_arg(pcb, nullptr);
  tcp_recv(pcb, nullptr);
  if (n == 0 || tcp_write(pcb, f, uint16_t(n), TCP_WRITE_FLAG_COPY) != ERR_OK || tcp_output(pcb) != ERR_OK ||
      tcp_close(pcb) != ERR_OK) {
    tcp_abort(pcb);
    return ERR_ABRT;
  }
  return ERR_OK;
}

err_t on_accept(void*, struct tcp_pcb* pcb, err_t err) {
  if (err != ERR_OK || !pcb) return ERR_VAL;
  const int i = claim_slot(false);
  if (i < 0) return refuse_busy(pcb);
  FwLink& l = g_links[i];
  l.pcb = pcb;
  l.fresh = true;  // the main loop tells the worker (never from a callback)
  if (g_once_link == 0) g_once_link = l.number;
  watch(i, pcb);
  return ERR_OK;
}

// Gives link i's queued bytes to the worker until they run out or the worker
// holds a frame of it (then the rest waits for resume()). Returns true if
// any byte was taken.
bool feed(int i) {
  FwLink& l = g_links[i];
  bool took = false;
  while (l.used && l.rxq && !g_worker.holding(i)) {
    struct pbuf* q = l.rxq;
    const uint16_t n = uint16_t(q->len - l.rx_off);
    const int32_t r = g_worker.on_bytes(i, static_cast<const uint8_t*>(q->payload) + l.rx_off, n);
    if (r < 0) {
      close_link(i, "closed by the protocol");
      return true;
    }
    if (r > 0) took = true;
    l.rx_off = uint16_t(l.rx_off + r);
    if (l.rx_off < q->len) break;  // held
    // Done with the first pbuf of the chain: free it alone.
    struct pbuf* rest = q->next;
    if (rest) pbuf_ref(rest);
    const uint16_t len = q->len;
    pbuf_free(q);
    l.rxq = rest;
    l.rx_off = 0;
    if (l.pcb) tcp_recved(l.pcb, len);
    took = true;
  }
  if (took) l.last_rx_ms = board_ms();
  return took;
}

}  // namespace

int fw_serve(const ServeOptions& o) {
  g_opt = o;
  const uint32_t ocram = uint32_t(__arena_end - __arena_start);
  if (o.ram_bytes > ocram || o.ram_bytes < ts::core::kWorkerFixedArena) {
    ts_log("error: --ram %u: the arena must be %u..%u bytes (the Teensy 4.1's OCRAM)\n", (unsigned)o.ram_bytes,
           (unsigned)ts::core::kWorkerFixedArena, (unsigned)ocram);
    return 2;
  }
  if (o.clock_mhz == 0 || o.window == 0 || o.window > 64 || o.id > 0xFFFEu) {
    ts_log("error: bad --clock-mhz, --window or --id\n");
    return 2;
  }
  const uint32_t region = uint32_t(__store_end - __store_start);
  if (o.flash_bytes > region || (o.flash_bytes && o.flash_bytes < 4u * FlashRegionStore::kSector)) {
    ts_log("error: --flash %u: the fragment store must be %u..%u bytes (the flash after the image)\n",
           (unsigned)o.flash_bytes, (unsigned)(4u * FlashRegionStore::kSector), (unsigned)region);
    return 2;
  }
  board_guards(o.ram_bytes);
  g_flash.init(__store_start, o.flash_bytes ? o.flash_bytes : region);
  ts::core::WorkerConfig cfg;
  cfg.id = uint16_t(o.id);
  cfg.clock_mhz = uint16_t(o.clock_mhz);
  cfg.ram_bytes = o.advertise_ram ? o.advertise_ram : o.ram_bytes;
  cfg.flash_bytes = o.advertise_flash ? o.advertise_flash : g_flash.capacity();
  cfg.window = uint16_t(o.window);
  cfg.idle_ms = o.idle_ms;
  const int prov = read_provisioning(cfg.key);
  if (prov < 0) {
    ts_log("error: the provisioning record at %08x is damaged (CRC); refusing to serve without its key\n",
           (unsigned)kProvisionAddr);
    return 2;
  }
  cfg.has_key = prov > 0;
  g_fault_port.set_fault({ts::net::FaultKind(o.fault_kind), o.fault_layer});
  ts::core::Port* port = &g_port;
  if (o.fault_kind != 0) port = &g_fault_port;
  if (!g_worker.init(cfg, __arena_start, o.ram_bytes, &g_store, port)) {
    ts_log("error: worker init failed\n");
    return 2;
  }

  lwip_init();
  ip4_addr_t ip, mask, gw;
  IP4_ADDR(&ip, o.ip[0], o.ip[1], o.ip[2], o.ip[3]);
  IP4_ADDR(&mask, o.mask[0], o.mask[1], o.mask[2], o.mask[3]);
  IP4_ADDR(&gw, o.gw[0], o.gw[1], o.gw[2], o.gw[3]);
  if (!netif_add(&g_netif, &ip, &mask, &gw, nullptr, eth_netif_init, ethernet_input)) {
    ts_log("error: no network interface\n");
    return 3;
  }
  netif_set_default(&g_netif);
  netif_set_up(&g_netif);
  netif_set_link_up(&g_netif);
  struct tcp_pcb* pcb = tcp_new();
  if (!pcb || tcp_bind(pcb, IP4_ADDR_ANY, o.port) != ERR_OK || !(g_listen = tcp_listen(pcb))) {
    ts_log("error: cannot listen on port %u\n", (unsigned)o.port);
    return 3;
  }
  tcp_accept(g_listen, on_accept);
  // The fragment the board holds from before this boot (QEMU: a kept flash
  // file; a Teensy: its flash), read in place. Logged before "listening", so
  // the line is there once a launcher sees the board ready.
  {
    uint32_t size = 0;
    if (g_flash.current(&size)) ts_log("flash: committed fragment of %u bytes, generation %u\n", (unsigned)size,
                                       (unsigned)g_flash.generation());
    else ts_log("flash: no committed fragment\n");
  }
  ts_log("board %u listening on %u.%u.%u.%u:%u (arena %u B%s, flash store %u B%s, window %u, clock %u MHz%s)\n", (unsigned)o.id,
         o.ip[0], o.ip[1], o.ip[2], o.ip[3], (unsigned)o.port, (unsigned)o.ram_bytes, o.advertise_ram ? ", advertised differently (test hook)" : "",
         (unsigned)g_flash.capacity(), o.advertise_flash ? ", advertised differently (test hook)" : "",
         (unsigned)o.window, (unsigned)o.clock_mhz, o.icount ? ", times from instruction counts" : "");
  ts_log("links: %s; idle connections closed after %u ms\n",
         cfg.has_key ? "authenticated (provisioned key; coordinators must prove it)" : "unauthenticated (no provisioned key)",
         (unsigned)o.idle_ms);
  ts_log("links: up to %d connections at once (the coordinator and peer boards)\n", kMaxLinks);

  for (;;) {
    service_network();
    g_tick_flag = 0;
    // New connections first: the worker says HELLO before it reads a byte.
    for (int i = 0; i < kMaxLinks; ++i) {
      FwLink& l = g_links[i];
      if (!l.used || !l.fresh) continue;
      l.fresh = false;
      l.last_rx_ms = board_ms();
      if (!g_worker.on_connect(i)) close_link(i, "hello failed");
    }
    // Received bytes, link by link, until no link makes progress (a frame
    // one link held may be taken after another link's frames moved the
    // worker on).
    for (int round = 0; round < 4 * kMaxLinks; ++round) {
      bool progress = false;
      for (int i = 0; i < kMaxLinks; ++i)
        if (g_links[i].used && !g_links[i].fresh && g_links[i].rxq) progress = feed(i) || progress;
      int held = 0;
      for (int i = 0; i < kMaxLinks; ++i) held += g_links[i].used && g_worker.holding(i);
      if (held) {
        g_worker.resume();
        int still = 0;
        for (int i = 0; i < kMaxLinks; ++i) still += g_links[i].used && g_worker.holding(i);
        progress = progress || still < held;
      }
      if (!progress) break;
    }
    // Send queues: on into lwIP as far as it takes them; results that
    // waited for room go on.
    for (int i = 0; i < kMaxLinks; ++i)
      if (g_links[i].used && g_links[i].tx_len) drain(i);
    if (g_queue_moved) {
      g_queue_moved = false;
      g_worker.resume();
    }
    for (int i = 0; i < kMaxLinks; ++i) {
      FwLink& l = g_links[i];
      if (!l.used || l.fresh) continue;  // fresh: accepted while the worker ran; next turn
      if (!g_worker.link_open(i)) close_link(i, "closed by the protocol");
      else if (l.tx_len && board_ms() - l.tx_moved_ms > ts::core::kWriteDeadlineMs) close_link(i, "its send queue did not move for 10 s: the peer does not read");
      else if (l.closed && !l.rxq) close_link(i, "peer closed");
      else if (g_opt.idle_ms && !l.rxq && board_ms() - l.last_rx_ms > g_opt.idle_ms) close_link(i, "idle timeout");
      else if (const char* why = g_worker.link_overdue(i)) close_link(i, why);
      else if (l.pcb) tcp_output(l.pcb);
    }
    // A newcomer always finds a slot: the oldest connection that has not
    // completed its handshake gives way (core::Worker::link_to_evict).
    {
      int free_slots = 0;
      for (int i = 0; i < kMaxLinks; ++i) free_slots += !g_links[i].used;
      const int v = g_worker.link_to_evict(free_slots);
      if (v >= 0 && !g_links[v].fresh) close_link(v, "pushed out: a newer connection needs the slot");
    }
    board_idle(has_work);
  }
}
