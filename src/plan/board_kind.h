// Board kinds: what a testbed board is, in one registry.
//
// A testbed board names its kind ("kind": "host", "qemu-m7", "teensy41").
// The kind, not the board's address string, says how the board is started
// or reached, how many links it holds, which measured prices the planner
// uses for it and over which transport the coordinator talks to it. Every
// user (testbed validation, the cost model, the board set that starts and
// connects boards, the CLI) asks this registry.
//
// A board's address says where it is: "local" = start one on this machine
// (a host process, or a QEMU board for a kind that runs under QEMU), else
// host:port of a running board. Testbeds written before kinds existed still
// load: a board without "kind" takes the kind its address implies
// (kind_of): "local" a host process, "qemu" the Cortex-M7 firmware under
// QEMU, a loopback host:port a `tinysplit worker` on this machine, any other
// host:port our firmware on a Teensy 4.1.
//
// Adding a kind: one row in kKinds (board_kind.cpp), and, if it starts in a
// new way, its case in coord/boards.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts::plan {

struct Board;

// How a board of a kind is started when its testbed entry has no endpoint.
enum class BoardStart : uint8_t {
  Process,  // a `tinysplit worker` child process on this machine
  Qemu,     // the firmware image under qemu-system-arm (coord/qemu.h)
  None,     // cannot be started here: the testbed must give host:port
};

struct BoardKind {
  const char* name;     // the testbed's "kind" value
  const char* summary;  // one line, for help texts and errors
  BoardStart start;
  int links;            // links it holds at once unless the testbed says "links"
  // Measured per-op prices, data/costs/<costs>.json (cost.h
  // measured_for); "" = none (a host process: priced by the host model).
  const char* costs;
  // True if the board computes at this machine's speed (a host process):
  // only a testbed of such boards can be priced with the measured host
  // figures (--cost-model host, cost.h host_testbed).
  bool host_speed;
  const char* transport;  // the coordinator's transport to it ("tcp")
  // The board type whose time a board of this kind takes with `run
  // --emulate` (a simulator preset, sim/scenario.h: its per-op prices and
  // link figures); "" = none (the board has a time of its own).
  const char* emulates = "";
  // A QEMU kind (start == Qemu): the qemu-system-arm machine (-M) and the
  // firmware image it boots, relative to the project folder
  // (coord/qemu.h; $TS_FIRMWARE overrides the image). "" for other kinds.
  const char* qemu_machine = "";
  const char* firmware = "";
  // Where the machine's RAM (the board's flash, kept in a file with
  // --store) starts, and the provisioning record's address in it
  // (firmware/boards/<machine>/board_config.h BOARD_FLASH_BASE,
  // BOARD_PROVISION_ADDR).
  uint32_t qemu_flash_base = 0, qemu_provision_addr = 0;
  // The board's own figures for `--workers KIND:N` in a mix of kinds: arena
  // (RAM budget) and flash for fragments in bytes, clock in MHz; 0 = the
  // --ram / --flash defaults and the default clock.
  int64_t ram_bytes = 0, flash_bytes = 0;
  double clock_mhz = 0;
};

// Every kind, in a fixed order.
const std::vector<BoardKind>& board_kinds();

// The kind named `name`, or nullptr.
const BoardKind* find_board_kind(const std::string& name);

// "host, qemu-m7, teensy41": for help texts and errors.
std::string board_kind_names();

// The kind of a testbed board: its "kind", else the one its address implies
// (see above). The board must have passed validate_testbed.
const BoardKind& kind_of(const Board& b);

// True if the board is started on this machine by the run (address "local"
// or the legacy "qemu"), false if it is reached at host:port.
bool started_here(const Board& b);

}  // namespace ts::plan
