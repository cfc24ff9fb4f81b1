// `serve`: the portable board worker (src/core/worker.h) behind lwIP's raw
// TCP API on the board's Ethernet driver (eth.h), listening on the
// ServeOptions address (QEMU: 10.0.2.15:7000; user-mode networking forwards
// a host port there).
//
// Event loop without an OS: poll the controller, run lwIP's timers, hand
// received bytes to the worker, then sleep in WFI until an interrupt (a
// frame, or the 20 Hz tick for lwIP's timers). Received segments are queued
// by lwIP's receive callback and fed to the worker only from the main loop,
// so the worker is never re-entered while it is sending (Port::send may have
// to wait for ACKs, and waiting means polling the network).
#include <string.h>

#include "board.h"
#include "core/crc32.h"
#include "core/worker.h"
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

constexpr uint32_t kSendTimeoutMs = 30000;

struct netif g_netif;
FlashRegionStore g_flash;
ts::core::Worker g_worker;
ServeOptions g_opt;
struct tcp_pcb* g_listen = nullptr;
struct tcp_pcb* g_conn = nullptr;
struct pbuf* g_rxq = nullptr;  // received, not yet given to the worker
bool g_new_conn = false, g_peer_closed = false;
uint32_t g_connections = 0;
uint32_t g_errors_sent[16] = {};  // by ErrorCode
uint64_t g_compute_instr = 0;      // instructions inside compute_range, all layers
uint64_t g_conn_start_ticks = 0, g_conn_start_idle = 0, g_conn_start_compute = 0;
uint32_t g_last_rx_ms = 0;     // when the connection last brought bytes
uint32_t g_refused_busy = 0;   // connections turned away while one was served
uint8_t g_seed[16] = {};       // provisioned per-boot entropy (nonces)

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
  return g_tick_flag || eth_rx_pending() || g_rxq != nullptr || g_new_conn || g_peer_closed;
}

class LwipPort final : public ts::core::Port {
 public:
  bool send(const uint8_t* data, size_t len) override {
    log_if_error(data, len);
    const uint32_t start = board_ms();
    while (len > 0) {
      if (!g_conn) return false;
      const uint16_t room = tcp_sndbuf(g_conn);
      if (room > 0 && tcp_sndqueuelen(g_conn) + 2u < TCP_SND_QUEUELEN) {
        const uint16_t n = uint16_t(len < room ? len : room);
        const err_t e = tcp_write(g_conn, data, n, TCP_WRITE_FLAG_COPY);
        if (e == ERR_OK) {
          data += n;
          len -= n;
          continue;
        }
        if (e != ERR_MEM) return false;
      }
      // Full: push what is queued and wait for ACKs (sleeping until a frame
      // arrives or the tick, so that idle boards leave the host's cores alone).
      tcp_output(g_conn);
      service_network();
      if (!g_conn) return false;
      board_idle(rx_or_tick);
      g_tick_flag = 0;
      if (board_ms() - start > kSendTimeoutMs) {
        ts_log("send: no progress for %u ms, dropping the connection\n", (unsigned)kSendTimeoutMs);
        return false;
      }
    }
    return true;
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
    last_tick_ = board_ticks();
    return uint32_t(last_tick_ / (BOARD_TICK_HZ / 1000000u));
  }

  uint32_t after_compute(uint32_t layer, uint64_t macs, uint32_t elapsed_us) override {
    const uint64_t instr = (last_tick_ - prev_tick_) * BOARD_NS_PER_TICK;
    g_compute_instr += instr;
    // Exact only under -icount shift=0 (one instruction per virtual ns).
    last_instr_ = !g_opt.icount ? 0u : instr > 0xFFFFFFFFu ? 0xFFFFFFFFu : instr == 0 ? 1u : uint32_t(instr);
    const uint64_t mpi = macs ? (instr * 1000u + macs / 2u) / macs : 0;
    ts::core::FragLayer fl;
    const bool known = layer_info(layer, &fl);
    ts_log("layer %u kind=%s outputs=%ld macs=%llu instructions=%llu instr_per_mac=%llu.%03llu arena_peak=%u "
           "stack_used=%u\n",
           (unsigned)layer, known ? kind_of(fl.desc) : "?", known ? (long)(fl.run_end - fl.run_begin) : 0L,
           (unsigned long long)macs, (unsigned long long)instr, (unsigned long long)(mpi / 1000u),
           (unsigned long long)(mpi % 1000u), (unsigned)g_worker.arena().high_water(), (unsigned)board_stack_used());
    if (!g_opt.icount) return elapsed_us;
    // Under -icount the virtual clock runs at one instruction per ns; report
    // what the board's clock would take at one cycle per instruction.
    return uint32_t(instr / g_opt.clock_mhz);
  }
  uint32_t compute_instructions() override { return last_instr_; }

 private:
  // Kernel kind of a layer, for the per-kind instruction statistics.
  static const char* kind_of(const ts::core::LayerDesc& d) {
    if (d.op == ts::core::QOp::Gemm) return "linear";
    if (d.op != ts::core::QOp::Conv) return ts::core::qop_name(d.op);
    if (d.groups > 1 && d.groups == d.in[0].c) return "depthwise";
    if (d.kh == 1 && d.kw == 1) return "pointwise";
    return "conv";
  }
  // The committed fragment's entry for `layer`, read in place. The reader is
  // reopened (one CRC pass) only when a new fragment was committed.
  bool layer_info(uint32_t layer, ts::core::FragLayer* out) {
    uint32_t size = 0;
    const uint8_t* p = g_flash.current(&size);
    if (!p) return false;
    if (g_flash.generation() != frag_gen_) {
      frag_ok_ = reader_.open(p, size) == ts::core::FragStatus::Ok;
      frag_gen_ = g_flash.generation();
    }
    return frag_ok_ && reader_.layer(layer, out) == ts::core::FragStatus::Ok;
  }
  ts::core::FragmentReader reader_;
  uint32_t frag_gen_ = 0;
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
  uint32_t last_instr_ = 0;
};

LwipPort g_port;

void log_connection_end(const char* why) {
  // Busy time: everything but WFI sleep. Under -icount shift=0 these are
  // instruction counts (1 tick = 40 instructions).
  const uint64_t all = (board_ticks() - g_conn_start_ticks) * BOARD_NS_PER_TICK;
  const uint64_t idle = (board_idle_ticks() - g_conn_start_idle) * BOARD_NS_PER_TICK;
  const uint64_t compute = g_compute_instr - g_conn_start_compute;
  ts_log("connection %u busy instructions %llu: compute %llu, protocol+network %llu (idle %llu)\n",
         (unsigned)g_connections, (unsigned long long)(all - idle), (unsigned long long)compute,
         (unsigned long long)(all - idle - compute), (unsigned long long)idle);
  const ts::core::WorkerStats& s = g_worker.stats();
  const EthStats* e = eth_stats();
  ts_log("connection %u closed (%s): frames in %u out %u, bytes in %u out %u, layers %u, errors sent %u, "
         "arena peak %u of %u, stack %u of %u, eth rx %u tx %u dropped %u irqs %u\n",
         (unsigned)g_connections, why, (unsigned)s.frames_in, (unsigned)s.frames_out, (unsigned)s.bytes_in,
         (unsigned)s.bytes_out, (unsigned)s.layers_run, (unsigned)s.errors_sent, (unsigned)s.peak_arena,
         (unsigned)g_worker.arena().capacity(), (unsigned)board_stack_used(), (unsigned)board_stack_size(),
         (unsigned)e->rx_frames, (unsigned)e->tx_frames, (unsigned)e->rx_dropped, (unsigned)e->irqs);
  ts_log("connection %u security: frames refused by authentication %u, connections turned away busy %u\n",
         (unsigned)g_connections, (unsigned)s.auth_failures, (unsigned)g_refused_busy);
}

void close_connection(const char* why) {
  if (g_conn) {
    tcp_arg(g_conn, nullptr);
    tcp_recv(g_conn, nullptr);
    tcp_err(g_conn, nullptr);
    tcp_output(g_conn);
    if (tcp_close(g_conn) != ERR_OK) tcp_abort(g_conn);
    g_conn = nullptr;
  }
  if (g_rxq) {
    pbuf_free(g_rxq);
    g_rxq = nullptr;
  }
  g_peer_closed = false;
  g_worker.abort_layer();
  log_connection_end(why);
  // With --once the exit code tells a test whether the board refused work
  // for lack of memory (1) or not (0); the expected HashMismatch of a first
  // deploy does not count.
  if (g_opt.once) sh_exit(g_errors_sent[uint16_t(ts::wire::ErrorCode::OutOfMemory)] ? 1 : 0);
}

err_t on_recv(void*, struct tcp_pcb* pcb, struct pbuf* p, err_t err) {
  if (!p) {
    g_peer_closed = true;
    return ERR_OK;
  }
  if (err != ERR_OK) {
    pbuf_free(p);
    return err;
  }
  if (g_rxq) pbuf_cat(g_rxq, p);
  else g_rxq = p;
  tcp_ack_now(pcb);  // no delayed ACK: the peer may be waiting on it (Nagle)
  return ERR_OK;
}

void on_error(void*, err_t err) {
  // lwIP has already freed the pcb.
  g_conn = nullptr;
  g_peer_closed = true;
  ts_log("tcp: connection error %d\n", (int)err);
}

// Turns a connection away while another is served: one ERROR frame saying
// so (a coordinator reports "busy", not "no answer"), then close.
err_t refuse_busy(struct tcp_pcb* pcb) {
  g_refused_busy++;
  const ts::wire::ErrorPayload e =
      ts::wire::ErrorPayload::make(ts::wire::ErrorCode::NotReady, 0, "board busy: serving another connection");
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
  if (g_conn) return refuse_busy(pcb);  // one coordinator at a time
  g_conn = pcb;
  tcp_arg(pcb, nullptr);
  tcp_recv(pcb, on_recv);
  tcp_err(pcb, on_error);
  tcp_nagle_disable(pcb);
  g_new_conn = true;
  return ERR_OK;
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
  board_guards(o.ram_bytes);
  g_flash.init(__store_start, uint32_t(__store_end - __store_start));
  ts::core::WorkerConfig cfg;
  cfg.id = uint16_t(o.id);
  cfg.clock_mhz = uint16_t(o.clock_mhz);
  cfg.ram_bytes = o.advertise_ram ? o.advertise_ram : o.ram_bytes;
  cfg.flash_bytes = g_flash.capacity();
  cfg.window = uint16_t(o.window);
  const int prov = read_provisioning(cfg.key);
  if (prov < 0) {
    ts_log("error: the provisioning record at %08x is damaged (CRC); refusing to serve without its key\n",
           (unsigned)kProvisionAddr);
    return 2;
  }
  cfg.has_key = prov > 0;
  cfg.flip_layer = o.flip_layer;
  if (!g_worker.init(cfg, __arena_start, o.ram_bytes, &g_flash, &g_port)) {
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
  ts_log("board %u listening on %u.%u.%u.%u:%u (arena %u B%s, flash store %u B, clock %u MHz%s)\n", (unsigned)o.id,
         o.ip[0], o.ip[1], o.ip[2], o.ip[3], (unsigned)o.port, (unsigned)o.ram_bytes, o.advertise_ram ? ", advertised differently (test hook)" : "",
         (unsigned)g_flash.capacity(), (unsigned)o.clock_mhz, o.icount ? ", times from instruction counts" : "");
  ts_log("links: %s; idle connections closed after %u ms\n",
         cfg.has_key ? "authenticated (provisioned key; coordinators must prove it)" : "unauthenticated (no provisioned key)",
         (unsigned)o.idle_ms);

  for (;;) {
    service_network();
    g_tick_flag = 0;
    if (g_new_conn) {
      g_new_conn = false;
      g_connections++;
      g_conn_start_ticks = board_ticks();
      g_conn_start_idle = board_idle_ticks();
      g_conn_start_compute = g_compute_instr;
      g_last_rx_ms = board_ms();
      if (!g_worker.on_connect()) close_connection("hello failed");
      else if (g_conn) tcp_output(g_conn);
    }
    if (g_rxq && g_conn) {
      g_last_rx_ms = board_ms();
      struct pbuf* p = g_rxq;
      g_rxq = nullptr;
      bool ok = true;
      for (struct pbuf* q = p; q && ok; q = q->next)
        ok = g_worker.on_bytes(static_cast<const uint8_t*>(q->payload), q->len);
      if (g_conn) tcp_recved(g_conn, p->tot_len);
      pbuf_free(p);
      if (!ok) close_connection("closed by the protocol");
      else if (g_conn) tcp_output(g_conn);
    }
    if (g_peer_closed && !g_rxq) close_connection("peer closed");
    if (g_conn && g_opt.idle_ms && !g_rxq && board_ms() - g_last_rx_ms > g_opt.idle_ms)
      close_connection("idle timeout");
    board_idle(has_work);
  }
}
