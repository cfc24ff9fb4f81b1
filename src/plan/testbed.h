// tinysplit testbed: the boards a plan is made for.
//
// A testbed is a list of boards with the numbers the planner needs: where to
// reach the board, its clock, its RAM and flash budgets, and its link (delay
// per KB and bandwidth) for the capability rating of eq. 5 (ratings.h).
//
// On disk it is JSON, either a bare list of boards or {"boards": [...]}:
//
//   [ {"id": 0, "address": "local", "clock_mhz": 600, "ram_bytes": "512K",
//      "flash_bytes": "8M", "delay_s_per_kb": 0.0, "bandwidth_kbps": 12500},
//     {"id": 1, "address": "192.168.1.21:5000", "kind": "teensy41", "clock_mhz": 396, "links": 16},
//     {"id": 2, "kind": "qemu-m7"} ]
//
// Only "id" is required; every other key defaults to a Teensy 4.1 on its
// Ethernet at 94 Mbit/s (the constants below). "kind" is what the board is
// (plan/board_kind.h: host, qemu-m7, teensy41; by default the kind its
// address implies). "links" is the most links the board holds at once
// (board_links: by default what boards of its kind hold). Sizes are either an integer
// number of bytes or a size string ("512K", "8M"; see parse_bytes).
//
// Units used throughout the rating maths: 1 KB = 1000 bytes (kBytesPerKB),
// so a 100 Mbit/s link is 12500 KB/s. RAM and flash sizes are plain bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace ts::plan {

// Bytes per KB in delay (s/KB), bandwidth (KB/s) and K1 (KB/Mcycle).
inline constexpr double kBytesPerKB = 1000.0;

// Defaults: a Teensy 4.1 (Cortex-M7 at 600 MHz, 1 MB RAM, 8 MB flash).
// The RAM default is the 512 KiB budget the paper's evaluation uses (§7.2.1)
// rather than the whole 1 MB (§6.1): half the RAM is left to the firmware,
// network stack and buffers. The link default is about what the board's
// native Ethernet carries with lwIP, 94 Mbit/s (the PHY's nominal 100 less
// the stack's overhead), with no injected delay; a measured figure should go
// in the testbed file when known.
inline constexpr double kTeensyClockMhz = 600.0;
inline constexpr int64_t kTeensyRamBytes = 512 * 1024;
inline constexpr int64_t kTeensyFlashBytes = 8 * 1024 * 1024;
inline constexpr double kDefaultDelaySPerKB = 0.0;
inline constexpr double kDefaultBandwidthKBps = 11750.0;  // 94 Mbit/s
// One-way latency of a Teensy 4.1's message (stacks and switch): half its
// 0.65 ms round trip on its native Ethernet with lwIP. The planner's price
// per message (cost.h CostModel) and the simulator's teensy41 timing.
inline constexpr double kTeensyFrameLatencyS = 325e-6;

// Seconds per byte of a link with delay d (s/KB) and bandwidth B (KB/s):
// eq. 1's d + 1/B per KB. The cost model, the simulator and emulated links
// (`run --emulate`) all read a board's link so.
inline double link_s_per_byte(double delay_s_per_kb, double bandwidth_kbps) {
  return (delay_s_per_kb + 1.0 / bandwidth_kbps) / kBytesPerKB;
}

// Links a board holds at once (the coordinator's and one per peer board on
// the direct route): a host board (`tinysplit worker`, core::kMaxLinks of
// the host build) and the firmware as built by default (firmware/Makefile
// MAX_LINKS, for QEMU and the Teensy 4.1).
inline constexpr int kHostBoardLinks = 40;
inline constexpr int kFirmwareLinks = 16;
inline constexpr int kMaxBoardLinks = 1024;  // the largest "links" a testbed may give

// What a board accepts as its budget: RAM and flash of 1 byte to 2 GiB each
// (the hello carries them as u32) and a clock of 1 to 65535 MHz (a u16). The
// coordinator checks every testbed against these (check_board) and
// `tinysplit worker` its options, so a board out of range is refused in one
// line before any board starts.
inline constexpr int64_t kMaxBoardBytes = int64_t(1) << 31;
inline constexpr double kMinBoardClockMhz = 1, kMaxBoardClockMhz = 65535;
struct BudgetNames {
  const char* ram;
  const char* flash;
  const char* clock;
};
inline constexpr BudgetNames kBudgetOptions{"--ram", "--flash", "--clock-mhz"};
inline constexpr BudgetNames kBudgetFields{"'ram_bytes'", "'flash_bytes'", "'clock_mhz'"};
// "" if all three are in range, else one line naming the first that is not.
std::string board_budget_error(int64_t ram_bytes, int64_t flash_bytes, double clock_mhz, const BudgetNames& names);

// The most boards a testbed (or --workers, --sweep) may list: planning 1,024
// boards takes about 17 s and 1 GB (MobileNetV2, x86); past that, time and
// memory grow with the count (docs/reliability.md, "Bounded inputs").
inline constexpr int kMaxBoards = 1024;

struct Board {
  int id = 0;
  // "local" = start the board on this machine (as its kind starts: a host
  // process or a QEMU board), "qemu" = the same for a QEMU Cortex-M7 board
  // (the form before kinds), otherwise "host:port" of a running board.
  std::string address = "local";
  double clock_mhz = kTeensyClockMhz;
  int64_t ram_bytes = kTeensyRamBytes;      // working RAM budget
  int64_t flash_bytes = kTeensyFlashBytes;  // storage for fragments (S_it)
  double delay_s_per_kb = kDefaultDelaySPerKB;     // d in eq. 1
  double bandwidth_kbps = kDefaultBandwidthKBps;   // B in eq. 1, KB/s
  int links = 0;  // most links it holds at once; 0 = by its kind (board_links)
  // Its kind's name (plan/board_kind.h); "" = the kind the address implies.
  std::string kind;

  bool operator==(const Board&) const = default;
};

// The links `b` holds: its "links", else what its kind holds (board_kind.h:
// kHostBoardLinks for a host process, kFirmwareLinks for the firmware).
int board_links(const Board& b);

struct Testbed {
  std::vector<Board> boards;
  // Shared key file for authenticated links (core/auth.h), as written in
  // the testbed; load_testbed resolves a relative path against the
  // testbed file's folder. Empty = none.
  std::string key_file;
  // Host boards (processes on one machine, e.g. "local"): how many cores they
  // share, for the simulator's host model (sim.h TimingModel::host_cores).
  // 0 = not given (each board has a CPU of its own). JSON key "host_cores".
  int host_cores = 0;

  bool operator==(const Testbed&) const = default;
};

// Reads and validates a testbed file. Throws ts::Error with one line naming
// the file and, where relevant, the board index and key.
Testbed load_testbed(const std::string& path);

// Same as load_testbed for a parsed document; `source` names it in errors.
Testbed testbed_from_json(const nlohmann::json& doc, const std::string& source);

// Parses JSON text (for tests and for testbeds passed inline).
Testbed parse_testbed(const std::string& text, const std::string& source);

// {"boards": [...]} with every field written out, so that
// testbed_from_json(to_json(t), ...) == t.
nlohmann::json to_json(const Testbed& t);

// Writes to_json(t) to a file (throws ts::Error if it cannot).
void save_testbed(const Testbed& t, const std::string& path);

// n identical Teensy 4.1 boards with ids 0..n-1 at `address`.
Testbed default_testbed(int n, const std::string& address = "local",
                        int64_t ram_bytes = kTeensyRamBytes,
                        int64_t flash_bytes = kTeensyFlashBytes,
                        double clock_mhz = kTeensyClockMhz);

// Checks the invariants load_testbed enforces (non-empty, unique ids,
// positive clock/bandwidth/RAM/flash, non-negative delay, valid address).
// `source` names the testbed in the error.
void validate_testbed(const Testbed& t, const std::string& source);

// Boards started on this machine (board_kind.h started_here) are processes,
// one each: at most this many per testbed.
inline constexpr int kMaxSpawnedBoards = 64;

// Throws ts::Error (one line, naming `source`) if `t` lists more than
// kMaxSpawnedBoards local or QEMU boards. Checked before any board process is
// started; planning and simulating such testbeds remain allowed.
void check_spawn_limit(const Testbed& t, const std::string& source);

// Throws ts::Error (one line, naming `source` and both boards) if two boards
// of `t` give the same "host:port" (compared without case): one running
// board cannot be two boards of a run. Checked before any work.
void check_board_addresses(const Testbed& t, const std::string& source);

// "1048576" -> 1048576; "512K"/"512k"/"512KB"/"512KiB" -> 524288;
// "8M" -> 8388608; "1G" -> 1073741824. Suffixes are binary (1K = 1024 bytes),
// as memory sizes are. Whole numbers only, no sign, no spaces.
// Throws ts::Error naming the string.
int64_t parse_bytes(const std::string& text);

// Inverse of parse_bytes for display: the largest exact binary unit
// (524288 -> "512K", 1000 -> "1000").
std::string format_bytes(int64_t bytes);

// A number as the shortest stream form (for one-line error messages).
std::string format_number(double v);

}  // namespace ts::plan
