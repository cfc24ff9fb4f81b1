// The coordinator's end of one board connection: framing, sequence numbers,
// the ACK window, timeouts and byte accounting, over any Transport.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/wire.h"
#include "net/transport.h"

namespace ts::coord {

// A board misbehaved, vanished or timed out. The message is one line that
// names the board.
// `board` is the link index of the board at fault and `layer` the layer it
// failed at, when known (-1 otherwise); failover (failover.h) reads them.
struct BoardError : std::runtime_error {
  explicit BoardError(const std::string& what, int board_index = -1, int layer_index = -1)
      : std::runtime_error(what), board(board_index), layer(layer_index) {}
  int board = -1;
  int layer = -1;
  // The board reported that its link to this peer (plan index) closed
  // (ERROR PeerLost): the peer is the one suspected, not the reporter.
  int lost_peer = -1;
};

// How long the coordinator lets a board's DONE reports gather in the socket
// before it reads them, while it waits for nothing else from that board
// (BoardLink::pause_before_waits). A board writes each layer's report before
// its next compute (core/worker_links.h), so that a board that dies has
// reported every layer before the one it died in; read one by one, those
// reports woke the coordinator once per layer and board, which cost 30 % of
// the 3-board latency on host boards (docs/reliability.md).
constexpr std::chrono::microseconds kTelemetryPause{1000};

struct Frame {
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
};

struct LinkStats {
  uint64_t wire_out = 0, wire_in = 0;        // every byte of every frame
  uint64_t frames_out = 0, frames_in = 0;
  uint32_t bad_frames = 0;
  uint32_t auth_failures = 0;  // frames refused by authentication
};

class BoardLink {
 public:
  BoardLink(std::unique_ptr<net::Transport> t, int index, uint16_t window, std::chrono::milliseconds timeout);
  ~BoardLink();

  // Makes the session authenticated (core/auth.h): every frame after HELLO
  // carries a tag keyed from `key` (shared with the board), this run's
  // `session_nonce` and the board's HELLO. Call before handshake().
  void set_auth(const uint8_t key[auth::kKeyBytes], const uint8_t session_nonce[auth::kNonceBytes]);
  bool authenticated() const { return tx_mac_.active(); }

  // Waits for the board's HELLO, then claims the board for this session:
  // sends AUTH (with set_auth; acknowledged under the session keys, the
  // board's proof that it holds the same key) or RESET, and waits for the
  // ACK. A board owned by another session refuses it (BoardInUse).
  wire::HelloPayload handshake();

  // Sends one sequenced frame, waiting for ACKs while the window is full.
  void send(wire::MsgType type, uint16_t layer, uint32_t offset, const uint8_t* payload, size_t len, uint16_t flags,
            uint32_t deployment);
  // Sends a message of any length as consecutive frames (LAST on the final).
  void send_message(wire::MsgType type, uint16_t layer, uint32_t base_offset, const uint8_t* data, size_t len,
                    uint32_t deployment);
  // Next sequenced frame from the board (ACKs are consumed on the way and
  // ACKs owed are sent). Throws BoardError on timeout, close, a bad frame, a
  // sequence error, or an ERROR frame (its text is in the message).
  Frame recv();
  // Like recv() but returns an ERROR frame instead of throwing on it.
  Frame recv_or_error();
  // Writes queued frames now (also done before every wait for the board).
  void flush();
  void close();

  // Inference tag (wire.h FrameHeader::inference) that send() puts on the
  // types that carry one; 0 (the default) = untagged. Pipelined runs set it
  // per inference; collect checks the board's frames carry the same.
  void set_inference(uint16_t tag) { inference_ = tag; }
  uint16_t inference() const { return inference_; }
  // Before each wait for the board, first sleep `p` (0: none): while only
  // telemetry is due (DONE reports of layers whose outputs go elsewhere),
  // the reports the board writes meanwhile wait in the socket and are read
  // together, instead of each waking this thread (kTelemetryPause).
  void pause_before_waits(std::chrono::microseconds p) { pause_ = p; }
  const std::string& peer() const { return peer_; }
  int index() const { return index_; }
  const LinkStats& stats() const { return stats_; }
  // Later waits take at most `t`; a wait already under way (another thread)
  // ends at most `t` from now.
  void set_timeout(std::chrono::milliseconds t);
  std::string who() const;

 private:
  // Reads until one frame is available; returns false on timeout.
  bool read_frame(Frame* out, std::chrono::steady_clock::time_point deadline);
  void handle_ack(const Frame& f);
  void send_ack_if_due();
  // Reads ACKs until every frame sent is acknowledged (`what` names them).
  void await_acks(const char* what);
  void queue(const uint8_t* data, size_t n);
  static constexpr size_t kFlushBytes = 64 * 1024;
  std::vector<uint8_t> out_;  // frames not yet written
  [[noreturn]] void fail(const std::string& why) const;
  [[noreturn]] void fail_with(const Frame& error) const;

  std::unique_ptr<net::Transport> t_;
  int index_;
  std::string peer_;
  std::atomic<long long> timeout_ms_;  // may be shortened from another thread
  std::atomic<long long> cut_at_ns_{std::numeric_limits<long long>::max()};  // steady clock; set_timeout
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }
  wire::FrameReader reader_;
  bool use_auth_ = false;
  uint8_t key_[auth::kKeyBytes] = {};
  uint8_t nonce_[auth::kNonceBytes] = {};
  auth::FrameMac tx_mac_, rx_mac_;
  // Encodes a frame into tx_ (tagged when the session is authenticated);
  // returns its size, 0 if it cannot be encoded.
  size_t encode(wire::FrameHeader& h, const uint8_t* payload, size_t len);
  wire::SendWindow window_;
  wire::AckTracker acks_;
  uint16_t inference_ = 0;
  std::chrono::microseconds pause_{0};  // pause_before_waits
  std::vector<uint8_t> rx_, tx_;
  size_t rx_have_ = 0, rx_pos_ = 0;
  LinkStats stats_;
  uint32_t now_ms() const;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace ts::coord
