#include "net/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>

namespace ts::net {
namespace {

using Clock = std::chrono::steady_clock;

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;  // SO_NOSIGPIPE is set on the socket instead
#endif

std::string errno_text(int err) { return std::system_category().message(err); }

[[noreturn]] void fail(const std::string& what, int err) {
  throw NetError(what + ": " + errno_text(err));
}

std::string host_port(const std::string& host, uint16_t port) {
  // IPv6 literals need brackets to keep the port readable.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string sockaddr_text(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return host_port(host, uint16_t(std::stoi(serv)));
}

// Time left until `deadline` as a poll() timeout; -1 for no deadline.
int poll_ms(bool forever, Clock::time_point deadline) {
  if (forever) return -1;
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  // Round up so a 0.4 ms remainder does not become a busy 0 ms poll.
  if (left <= 0) return 0;
  return left >= INT_MAX - 1 ? INT_MAX - 1 : int(left) + 1;
}

bool set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// Options every connected socket gets.
void tune_connected(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
}

struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) freeaddrinfo(head);
  }
};

// Resolves host:port for TCP. Returns 0 or a getaddrinfo error code.
int resolve(const std::string& host, uint16_t port, bool passive, AddrList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string serv = std::to_string(port);
  return getaddrinfo(host.empty() ? nullptr : host.c_str(), serv.c_str(), &hints, &out->head);
}

// Errors worth retrying while a board boots or its link comes up.
bool retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == ECONNABORTED || err == EAGAIN || err == EINTR;
}

// One non-blocking connect attempt bounded by `deadline`. Returns a connected
// fd, or -1 with *err set.
int try_connect(const addrinfo* ai, Clock::time_point deadline, int* err) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    *err = errno;
    ::close(fd);
    return -1;
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    int n;
    do {
      n = poll(&p, 1, poll_ms(false, deadline));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      *err = n == 0 ? ETIMEDOUT : errno;
      ::close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      *err = so_error;
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

}  // namespace

// ---------------------------------------------------------------------------
// TcpTransport
// ---------------------------------------------------------------------------

TcpTransport::TcpTransport(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
  // send/recv wait in poll(), never in the syscall, so timeouts always hold.
  if (!set_nonblocking(fd_)) {
    int err = errno;
    close();
    fail("socket to " + peer_ + ": cannot make non-blocking", err);
  }
  tune_connected(fd_);
}

TcpTransport::~TcpTransport() { close(); }

void TcpTransport::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void TcpTransport::send(const void* data, size_t len) {
  if (fd_ < 0) throw NetError("send to " + peer_ + ": transport is closed");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const bool forever = send_timeout_ < Millis::zero();
  const auto deadline = Clock::now() + (forever ? Millis::zero() : send_timeout_);
  while (len > 0) {
    const size_t n = try_send(p, len);  // partial writes are normal: continue with the rest
    p += n;
    len -= n;
    if (len > 0) {
      // Socket buffer full: wait until the peer reads some, within the limit.
      pollfd pfd{fd_, POLLOUT, 0};
      int r = poll(&pfd, 1, poll_ms(forever, deadline));
      if (r < 0 && errno != EINTR) fail("send to " + peer_ + ": poll", errno);
      if (r == 0)
        throw NetError("send to " + peer_ + ": timed out after " +
                       std::to_string(send_timeout_.count()) + " ms (peer is not reading)");
    }
  }
}

size_t TcpTransport::try_send(const void* data, size_t len) {
  if (fd_ < 0) throw NetError("send to " + peer_ + ": transport is closed");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < len) {
    const ssize_t n = ::send(fd_, p + done, len - done, kSendFlags);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EPIPE) throw NetError("send to " + peer_ + ": peer closed the connection");
    fail("send to " + peer_, n < 0 ? errno : EIO);
  }
  return done;
}

RecvResult TcpTransport::recv(void* buf, size_t cap, Millis timeout) {
  if (fd_ < 0) return {RecvStatus::Closed, 0};
  // recv() of 0 bytes would return 0, indistinguishable from end of stream.
  if (cap == 0) throw NetError("recv from " + peer_ + ": zero-size buffer");
  const bool forever = timeout < Millis::zero();
  const auto deadline = Clock::now() + (forever ? Millis::zero() : timeout);
  for (;;) {
    // Read first (the socket is non-blocking): when bytes are already there,
    // as they mostly are for a caller that just polled or is draining a
    // burst, this is one system call instead of two.
    ssize_t n = ::recv(fd_, buf, cap, 0);
    if (n > 0) return {RecvStatus::Data, size_t(n)};
    if (n == 0) return {RecvStatus::Closed, 0};
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == ECONNRESET) throw NetError("recv from " + peer_ + ": connection reset by peer");
      fail("recv from " + peer_, errno);
    }
    // Nothing yet: wait for readable, hung up or errored, within the limit.
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, poll_ms(forever, deadline));
    if (r < 0) {
      if (errno == EINTR) continue;  // signal: wait again for the time left
      fail("recv from " + peer_ + ": poll", errno);
    }
    if (r == 0) return {RecvStatus::Timeout, 0};
  }
}

// ---------------------------------------------------------------------------
// Connect
// ---------------------------------------------------------------------------

std::unique_ptr<TcpTransport> tcp_connect(const std::string& host, uint16_t port, Millis timeout,
                                          Millis retry_every) {
  const std::string target = host_port(host, port);
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const bool once = retry_every == kForever;  // one attempt per address: a refusal is final
  if (retry_every < Millis(1)) retry_every = Millis(1);
  int attempts = 0;
  int last_err = 0;
  std::string last_what;
  for (;;) {
    AddrList addrs;
    int gai = resolve(host, port, false, &addrs);
    if (gai != 0 && gai != EAI_AGAIN)  // a name that does not exist will not appear
      throw NetError("connect to " + target + ": cannot resolve host: " + gai_strerror(gai));
    if (gai == 0) {
      for (const addrinfo* ai = addrs.head; ai; ai = ai->ai_next) {
        ++attempts;
        int fd = try_connect(ai, deadline, &last_err);
        if (fd >= 0) return std::make_unique<TcpTransport>(fd, target);
        if (!retryable(last_err)) fail("connect to " + target, last_err);
      }
      last_what = errno_text(last_err);
    } else {
      last_what = std::string("cannot resolve host: ") + gai_strerror(gai);
    }
    auto now = Clock::now();
    if (now >= deadline || once) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(retry_every, deadline - now));
    if (Clock::now() >= deadline) break;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  char tail[96];
  snprintf(tail, sizeof tail, " (gave up after %.1f s, %d attempts)", secs, attempts);
  throw NetError("connect to " + target + ": " + last_what + tail);
}

// ---------------------------------------------------------------------------
// TcpListener
// ---------------------------------------------------------------------------

TcpListener::TcpListener(const std::string& host, uint16_t port, int backlog) {
  const std::string where = host_port(host, port);
  AddrList addrs;
  int gai = resolve(host, port, true, &addrs);
  if (gai != 0) throw NetError("listen on " + where + ": cannot resolve host: " + gai_strerror(gai));
  const addrinfo* ai = addrs.head;
  fd_ = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd_ < 0) fail("listen on " + where + ": socket", errno);
  int one = 1;
  // Lets a restarted coordinator rebind while old connections sit in TIME_WAIT.
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd_, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd_, backlog) != 0) {
    int err = errno;
    close();
    fail("listen on " + where, err);
  }
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    int err = errno;
    close();
    fail("listen on " + where + ": getsockname", err);
  }
  address_ = sockaddr_text(reinterpret_cast<sockaddr*>(&local), len);
  port_ = local.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

TcpListener::~TcpListener() { close(); }

void TcpListener::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::unique_ptr<TcpTransport> TcpListener::accept_tcp(Millis timeout) {
  if (fd_ < 0) throw NetError("accept on " + address_ + ": listener is closed");
  const bool forever = timeout < Millis::zero();
  const auto deadline = Clock::now() + (forever ? Millis::zero() : timeout);
  for (;;) {
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, poll_ms(forever, deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("accept on " + address_ + ": poll", errno);
    }
    if (r == 0) return nullptr;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      // The client may have given up between poll and accept: wait again.
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
      fail("accept on " + address_, errno);
    }
    return std::make_unique<TcpTransport>(fd, sockaddr_text(reinterpret_cast<sockaddr*>(&peer), len));
  }
}

namespace {

class TcpNetwork final : public Network {
 public:
  const char* name() const override { return "tcp"; }
  std::unique_ptr<Transport> connect(const Endpoint& at, Millis timeout, Millis retry_every) const override {
    return tcp_connect(at.host, at.port, timeout, retry_every);
  }
  std::unique_ptr<Listener> listen(const Endpoint& at) const override {
    return std::make_unique<TcpListener>(at.host, at.port);
  }
};

}  // namespace

const Network& tcp_network() {
  static const TcpNetwork n;
  return n;
}

}  // namespace ts::net
