// Bringing boards up for a run, each as its kind says (plan/board_kind.h):
// host-process boards are spawned as `tinysplit worker` child processes on
// loopback, QEMU boards as qemu-system-arm children (coord/qemu.h), boards
// at "host:port" are connected to as they are.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

#include "coord/link.h"
#include "net/fault.h"
#include "net/keyfile.h"
#include "net/transport.h"
#include "plan/testbed.h"

namespace ts::coord {

struct SpawnOptions {
  std::string exe;              // tinysplit binary (default: this process's)
  std::string store_root;       // board flash folders; empty = a temporary folder removed at exit
  double cycles_per_mac = 0;    // emulated clock, 0 = off
  double delay_ms = 0;          // injected delay per send/receive, 0 = off
  // `run --emulate` (docs/simulator.md "Emulated runs"): local boards take a
  // board type's time: each layer at the type's measured per-op cycles per
  // MAC (data/costs/<emulate_costs>.json; cycles_per_mac for ops it does not
  // list), each link paced at the testbed board's bandwidth and delay per KB
  // with this one-way latency per frame. emulate_costs "" = off.
  std::string emulate_costs;
  bool emulate_protocol = false;  // with emulate_costs: also the type's protocol CPU (plan/cost.h protocol_cpu)
  double frame_latency_s = 0;
  uint16_t window = 32;
  // Authenticated links (core/auth.h): the key file local boards are started
  // with, and the key itself (QEMU boards get it in their provisioning, the
  // coordinator's links use it). Empty key_file = no authentication.
  std::string key_file;
  net::Key key{};
  // Injected faults per board index (`run --inject-fault`, net/fault.h),
  // passed to each board in its form (`--inject-fault KIND:LAYER`): every
  // kind to local boards, flip to QEMU boards too; none to a running board.
  std::vector<net::BoardFault> faults;
  // Extra `tinysplit worker` arguments per board index; only for local boards.
  std::vector<std::vector<std::string>> board_args;
  net::BoardFault fault_of(int board) const { return size_t(board) < faults.size() ? faults[size_t(board)] : net::BoardFault{}; }
};

class BoardSet {
 public:
  BoardSet(const plan::Testbed& tb, const SpawnOptions& opt);
  ~BoardSet();  // stops spawned boards and removes temporary folders
  BoardSet(const BoardSet&) = delete;
  BoardSet& operator=(const BoardSet&) = delete;

  // One connected transport per board, in testbed order.
  std::vector<std::unique_ptr<net::Transport>> connect(std::chrono::milliseconds timeout);
  // The same, each wrapped in a coordinator link (board index = position)
  // with the window the boards were started with.
  std::vector<std::unique_ptr<BoardLink>> links(std::chrono::milliseconds timeout);
  const std::vector<std::string>& addresses() const { return addr_; }
  void stop();

 private:
  // One board, by its kind (plan/board_kind.h): started here or reached.
  void start_qemu(int i, const plan::Board& b, const SpawnOptions& opt, const std::string& root);
  void start_process(int i, const plan::Board& b, const SpawnOptions& opt, const std::string& root,
                     const std::string& exe);
  void reach(int i, const plan::Board& b, const SpawnOptions& opt);
  struct Child {
    pid_t pid = -1;
    int out_fd = -1;
  };
  std::vector<Child> children_;
  std::vector<std::string> addr_;
  std::vector<std::string> transport_;  // per board: its kind's network (net/transport.h)
  std::string temp_root_;
  uint16_t window_ = 32;
  bool auth_ = false;
  net::Key key_{};
  std::mutex stop_mu_;
};

}  // namespace ts::coord
