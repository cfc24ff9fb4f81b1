// TCP transport over POSIX sockets (host side).
//
// Every connected socket has TCP_NODELAY set (frames are small and each one
// waits for an application ACK, so Nagle's algorithm would only add delay),
// is non-blocking underneath (send and recv wait with poll, which is what
// gives them timeouts), and never raises SIGPIPE (MSG_NOSIGNAL): a send to a
// closed peer throws NetError instead of killing the process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "net/transport.h"

namespace ts::net {

class TcpTransport final : public Transport {
 public:
  // Takes ownership of a connected socket; `peer` is its printable address.
  TcpTransport(int fd, std::string peer);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  void send(const void* data, size_t len) override;
  size_t try_send(const void* data, size_t len) override;
  RecvResult recv(void* buf, size_t cap, Millis timeout) override;
  void close() override;
  const std::string& peer() const override { return peer_; }
  int poll_handle() const override { return fd_; }

  // Longest a send() may wait for the peer to drain its receive window before
  // throwing (a board that stopped reading). Default kForever.
  void set_send_timeout(Millis t) override { send_timeout_ = t; }
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string peer_;
  Millis send_timeout_ = kForever;
};

// Connects to host:port, retrying refused/unreachable attempts every
// `retry_every` until `timeout` has passed (a board may still be booting).
// Throws NetError naming host:port, the last error and the attempts made.
// retry_every = kForever: one attempt per address, a refusal is final (a
// board whose process is gone), while a slow or lost SYN still has until
// `timeout`.
std::unique_ptr<TcpTransport> tcp_connect(const std::string& host, uint16_t port, Millis timeout,
                                          Millis retry_every = Millis(100));

class TcpListener final : public Listener {
 public:
  // Binds host:port and listens. Port 0 picks an ephemeral port (see port()).
  // host is a numeric address or a name ("127.0.0.1", "0.0.0.0", "::1").
  explicit TcpListener(const std::string& host = "127.0.0.1", uint16_t port = 0, int backlog = 16);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  uint16_t port() const override { return port_; }
  const std::string& address() const { return address_; }

  // Waits up to `timeout` for a connection; nullptr on timeout.
  std::unique_ptr<Transport> accept(Millis timeout) override { return accept_tcp(timeout); }
  std::unique_ptr<TcpTransport> accept_tcp(Millis timeout);
  void close() override;
  // The listening socket (readable when a connection waits), for poll().
  int fd() const { return fd_; }
  int poll_handle() const override { return fd_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string address_;
};

// TCP as a Network (transport.h): tcp_connect and TcpListener.
const Network& tcp_network();

}  // namespace ts::net
