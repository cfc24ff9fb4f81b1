// Host-side byte transports for board links.
//
// A Transport is a reliable, ordered byte stream to one peer: TCP to a real
// board (tcp.h), or an in-process pair for tests and the simulator (below).
// It moves bytes only; framing, sequence numbers and ACKs live in
// core/wire.h, so the same protocol code runs over either.
//
// Errors are thrown as NetError with one line naming the peer; the two
// expected outcomes of waiting (nothing arrived in time, the peer closed the
// stream cleanly) are return values, because callers branch on them.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "util/endpoint.h"

namespace ts::net {

struct NetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Millis = std::chrono::milliseconds;
// Pass as a timeout to wait without limit.
inline constexpr Millis kForever{-1};

enum class RecvStatus : uint8_t {
  Data,     // `bytes` > 0 bytes were read
  Timeout,  // nothing arrived within the timeout
  Closed,   // the peer closed its end (end of stream), or we closed ours
};

struct RecvResult {
  RecvStatus status;
  size_t bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Sends all `len` bytes (loops over partial writes) or throws NetError.
  virtual void send(const void* data, size_t len) = 0;
  // Writes what the stream takes now, without waiting, and returns how many
  // bytes that was (0: the peer's window is full); throws NetError like
  // send(). For event loops that must never block on a peer (a board).
  // Transports that never block on a send take everything.
  virtual size_t try_send(const void* data, size_t len) {
    send(data, len);
    return len;
  }

  // Waits up to `timeout` (kForever: no limit; 0: just poll) for data, then
  // reads between 1 and `cap` bytes. A read may return any part of what was
  // sent: callers reassemble frames with wire::FrameReader. Throws NetError
  // on a hard error (e.g. connection reset).
  virtual RecvResult recv(void* buf, size_t cap, Millis timeout) = 0;

  // Closes the stream; the peer sees end of stream. Idempotent. Must not run
  // concurrently with send/recv on the same object.
  virtual void close() = 0;

  // Who is on the other end, for messages: "127.0.0.1:5000", "inproc:board1".
  virtual const std::string& peer() const = 0;

  // A descriptor poll() reports readable when recv() has something to
  // return (data, end of stream or an error), for event loops serving many
  // transports on one thread; -1 if the transport has none (in-process).
  virtual int poll_handle() const { return -1; }

  // Longest a send() may wait for the peer to take the bytes before it
  // throws (a peer that stopped reading). Transports that never block on a
  // send ignore it.
  virtual void set_send_timeout(Millis) {}
};

// Where a board waits for connections: the coordinator's and its peers'.
class Listener {
 public:
  virtual ~Listener() = default;
  // Waits up to `timeout` for a connection; nullptr on timeout.
  virtual std::unique_ptr<Transport> accept(Millis timeout) = 0;
  // The port it listens on (the one picked, when asked for port 0).
  virtual uint16_t port() const = 0;
  // Readable when a connection waits, for poll(); -1 if none.
  virtual int poll_handle() const = 0;
  virtual void close() = 0;
};

// One kind of network the boards are reached over: how to connect to an
// endpoint and how to listen on one. TCP is one implementation (tcp.h); a
// board kind names its network (plan/board_kind.h BoardKind::transport) and
// find_network gives it. Adding a transport: its implementation and its row
// in network.cpp.
class Network {
 public:
  virtual ~Network() = default;
  virtual const char* name() const = 0;
  // Connects to `at`, retrying refused or unreachable attempts every
  // `retry_every` until `timeout` (kForever: one attempt, a refusal is
  // final). Throws NetError naming the endpoint.
  virtual std::unique_ptr<Transport> connect(const Endpoint& at, Millis timeout, Millis retry_every) const = 0;
  // Listens on `at` (port 0: any free port). Throws NetError.
  virtual std::unique_ptr<Listener> listen(const Endpoint& at) const = 0;
};

// The network named `name` ("tcp"), or nullptr.
const Network* find_network(const std::string& name);
// The same, throwing NetError for an unknown name.
const Network& network(const std::string& name);

// ---------------------------------------------------------------------------
// In-process transport: two endpoints joined by two thread-safe byte queues.
// Used by tests and the simulator; no sockets, same semantics as TCP (ordered
// bytes, end-of-stream on close, send to a closed peer fails). The queues are
// unbounded: nothing blocks on send.
// ---------------------------------------------------------------------------

namespace detail {

// One direction of an in-process link.
struct ByteQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint8_t> bytes;
  bool writer_closed = false;  // no more bytes will come
  bool reader_closed = false;  // nobody will read: sends must fail
};

}  // namespace detail

class InprocTransport final : public Transport {
 public:
  // max_read > 0 caps the bytes one recv returns, to exercise partial reads.
  InprocTransport(std::shared_ptr<detail::ByteQueue> rx, std::shared_ptr<detail::ByteQueue> tx,
                  std::string peer, size_t max_read)
      : rx_(std::move(rx)), tx_(std::move(tx)), peer_(std::move(peer)), max_read_(max_read) {}
  ~InprocTransport() override { close(); }
  InprocTransport(const InprocTransport&) = delete;
  InprocTransport& operator=(const InprocTransport&) = delete;

  void send(const void* data, size_t len) override {
    std::lock_guard<std::mutex> lock(tx_->mu);
    if (tx_->writer_closed) throw NetError("send to " + peer_ + ": transport is closed");
    if (tx_->reader_closed) throw NetError("send to " + peer_ + ": peer closed the connection");
    const uint8_t* p = static_cast<const uint8_t*>(data);
    tx_->bytes.insert(tx_->bytes.end(), p, p + len);
    tx_->cv.notify_all();
  }

  RecvResult recv(void* buf, size_t cap, Millis timeout) override {
    std::unique_lock<std::mutex> lock(rx_->mu);
    auto ready = [&] { return !rx_->bytes.empty() || rx_->writer_closed || rx_->reader_closed; };
    if (timeout < Millis::zero()) {
      rx_->cv.wait(lock, ready);
    } else if (!rx_->cv.wait_for(lock, timeout, ready)) {
      return {RecvStatus::Timeout, 0};
    }
    if (rx_->reader_closed || rx_->bytes.empty()) return {RecvStatus::Closed, 0};
    size_t n = std::min(cap, rx_->bytes.size());
    if (max_read_ > 0) n = std::min(n, max_read_);
    uint8_t* out = static_cast<uint8_t*>(buf);
    std::copy_n(rx_->bytes.begin(), n, out);
    rx_->bytes.erase(rx_->bytes.begin(), rx_->bytes.begin() + std::ptrdiff_t(n));
    return {RecvStatus::Data, n};
  }

  void close() override {
    {
      std::lock_guard<std::mutex> lock(tx_->mu);
      tx_->writer_closed = true;
      tx_->cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(rx_->mu);
    rx_->reader_closed = true;
    rx_->bytes.clear();
    rx_->cv.notify_all();
  }

  const std::string& peer() const override { return peer_; }

 private:
  std::shared_ptr<detail::ByteQueue> rx_;
  std::shared_ptr<detail::ByteQueue> tx_;
  std::string peer_;
  size_t max_read_;
};

// Two connected endpoints. `first` talks to `second`; each endpoint's peer()
// is "inproc:" + the other's name.
inline std::pair<std::unique_ptr<Transport>, std::unique_ptr<Transport>> make_inproc_pair(
    const std::string& name_a = "a", const std::string& name_b = "b", size_t max_read = 0) {
  auto a_to_b = std::make_shared<detail::ByteQueue>();
  auto b_to_a = std::make_shared<detail::ByteQueue>();
  std::unique_ptr<Transport> a =
      std::make_unique<InprocTransport>(b_to_a, a_to_b, "inproc:" + name_b, max_read);
  std::unique_ptr<Transport> b =
      std::make_unique<InprocTransport>(a_to_b, b_to_a, "inproc:" + name_a, max_read);
  return {std::move(a), std::move(b)};
}

}  // namespace ts::net
