// Emulated links (`run --emulate`, docs/simulator.md "Emulated runs"): one
// end's link paced as the simulator models it (src/sim/core.h): each frame
// is serialised on the sender's link (a FIFO at the link's seconds per byte),
// crosses with a fixed one-way latency, and is served by the receiver's link
// in arrival order (a FIFO again). Over loopback bytes cross at once, so the
// sender holds each frame until its link has serialised it (depart) and the
// receiver holds what it reads until the latency and its own link are over
// (arrive). Every end of a link paces its own side: the host boards
// (net/host_board.cpp) and the coordinator (ShapedTransport below), so the
// coordinator's link is the same kind of link as the boards', as in the
// simulator. The figures come from one place: the testbed board (bandwidth,
// delay per KB) and the emulated board type's timing (sim/scenario.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "net/transport.h"

namespace ts::net {

struct LinkShape {
  double s_per_byte = 0;  // this end's link, each way (eq. 1's (d + 1/B) per byte)
  double latency_s = 0;   // one way, every frame
  bool on() const { return s_per_byte > 0 || latency_s > 0; }
};

// The timing of one end's link (thread-safe: the coordinator's is shared by
// its per-board threads). Times are steady-clock instants.
class LinkShaper {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LinkShaper(LinkShape s) : s_(s) {}
  const LinkShape& shape() const { return s_; }
  // A frame of `bytes` handed to the link at `now`: when it has left.
  Clock::time_point depart(Clock::time_point now, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    tx_free_ = std::max(now, tx_free_) + serialise(bytes);
    return tx_free_;
  }
  // Bytes read at `now` (their sender released them as they left its link):
  // when they have crossed and this end's link has served them.
  Clock::time_point arrive(Clock::time_point now, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point at = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s_.latency_s));
    rx_free_ = std::max(at, rx_free_) + serialise(bytes);
    return rx_free_;
  }

 private:
  Clock::duration serialise(size_t bytes) const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(double(bytes) * s_.s_per_byte));
  }
  LinkShape s_;
  std::mutex mu_;
  Clock::time_point tx_free_{}, rx_free_{};
};

// Asks that this process's timed waits end when due: Linux lets a sleep or
// a poll's timeout run up to 50 us late by default (timer slack), which an
// emulated board or link, waiting until a layer's or a frame's time is up,
// would add at every wait (at 112 on 3 boards, about 4 ms an inference).
inline void precise_timers() {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

// Frames leave a little early rather than one sleep each: a frame due within
// this much of now goes now (a sleep overshoots by about as much).
inline constexpr std::chrono::microseconds kShapeSlack{100};

// The coordinator's side: a Transport decorator that paces what it sends and
// holds what it receives by a LinkShaper shared by all its boards' links
// (the coordinator has one link). Its threads block while they wait, as a
// thread waiting on its link would.
class ShapedTransport final : public Transport {
 public:
  ShapedTransport(std::unique_ptr<Transport> inner, std::shared_ptr<LinkShaper> shaper)
      : inner_(std::move(inner)), shaper_(std::move(shaper)) {}
  void send(const void* data, size_t len) override {
    // Frame-sized pieces, each when the link has serialised the ones before.
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t off = 0; off < len;) {
      const size_t n = std::min(kPiece, len - off);
      wait_until(shaper_->depart(LinkShaper::Clock::now(), n));
      inner_->send(p + off, n);
      off += n;
    }
  }
  RecvResult recv(void* buf, size_t cap, Millis timeout) override {
    const RecvResult r = inner_->recv(buf, cap, timeout);
    if (r.status == RecvStatus::Data && r.bytes > 0) wait_until(shaper_->arrive(LinkShaper::Clock::now(), r.bytes));
    return r;
  }
  void close() override { inner_->close(); }
  const std::string& peer() const override { return inner_->peer(); }
  int poll_handle() const override { return inner_->poll_handle(); }
  void set_send_timeout(Millis t) override { inner_->set_send_timeout(t); }

 private:
  static constexpr size_t kPiece = 1400;
  static void wait_until(LinkShaper::Clock::time_point t) {
    if (t - LinkShaper::Clock::now() > kShapeSlack) std::this_thread::sleep_until(t);
  }
  std::unique_ptr<Transport> inner_;
  std::shared_ptr<LinkShaper> shaper_;
};

}  // namespace ts::net
