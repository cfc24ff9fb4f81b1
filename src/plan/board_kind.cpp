#include "plan/board_kind.h"

#include "plan/testbed.h"
#include "util/endpoint.h"

namespace ts::plan {
namespace {

const std::vector<BoardKind> kKinds = {
    {"host", "a `tinysplit worker` process on this machine, with a board's RAM and flash budget", BoardStart::Process,
     kHostBoardLinks, "", true, "tcp", "teensy41"},
    {"qemu-m7", "the Cortex-M7 firmware under QEMU (mps2-an500, the Teensy 4.1 memory budget)", BoardStart::Qemu,
     kFirmwareLinks, "cortex-m7", false, "tcp", "", "mps2-an500", "firmware/build/tinysplit-board.elf", 0x60000000u,
     0x607C0000u},
    // A small Cortex-M4 board (168 MHz, DSP extension): 192 KB arena, 1 MB of
    // flash of which 384 KB is each A/B fragment slot's data (the rest: image,
    // slot headers, reserved top; fixed by firmware/boards/mps2-an386/mps2-an386.ld).
    // Measured prices: data/costs/cortex-m4.json (DSP kernels, scripts/board_costs.sh --kind qemu-m4).
    {"qemu-m4", "the Cortex-M4 firmware under QEMU (mps2-an386: 168 MHz, 192 KB arena, 1 MB flash)", BoardStart::Qemu,
     kFirmwareLinks, "cortex-m4", false, "tcp", "", "mps2-an386", "firmware/build/mps2-an386/tinysplit-m4.elf",
     0x21000000u, 0x210F0000u, 192 * 1024, 384 * 1024, 168},
    // A Cortex-M55 board with Helium (400 MHz): 1 MB arena (the an547's
    // SRAM at 0x01000000), 8 MB of flash in the machine's DDR of which
    // 3840 KB is each A/B fragment slot's data (fixed by
    // firmware/boards/mps3-an547/mps3-an547.ld). Measured prices:
    // data/costs/cortex-m55.json (Helium kernels, scripts/board_costs.sh --kind qemu-m55).
    {"qemu-m55", "the Cortex-M55 firmware under QEMU (mps3-an547: 400 MHz, 1 MB arena, 8 MB flash)", BoardStart::Qemu,
     kFirmwareLinks, "cortex-m55", false, "tcp", "", "mps3-an547", "firmware/build/mps3-an547/tinysplit-m55.elf",
     0x60000000u, 0x607F0000u, 1024 * 1024, 3840 * 1024, 400},
    {"teensy41", "a Teensy 4.1 (Cortex-M7 at 600 MHz) running the firmware, reached at its address", BoardStart::None,
     kFirmwareLinks, "cortex-m7", false, "tcp", ""},
};

}  // namespace

const std::vector<BoardKind>& board_kinds() { return kKinds; }

const BoardKind* find_board_kind(const std::string& name) {
  for (const BoardKind& k : kKinds)
    if (name == k.name) return &k;
  return nullptr;
}

std::string board_kind_names() {
  std::string s;
  for (const BoardKind& k : kKinds) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

const BoardKind& kind_of(const Board& b) {
  if (!b.kind.empty())
    if (const BoardKind* k = find_board_kind(b.kind)) return *k;
  if (b.address == "qemu") return *find_board_kind("qemu-m7");
  if (b.address == "local") return *find_board_kind("host");
  Endpoint e;
  if (parse_endpoint(b.address, &e) && e.loopback()) return *find_board_kind("host");
  return *find_board_kind("teensy41");
}

bool started_here(const Board& b) { return b.address == "local" || b.address == "qemu"; }

}  // namespace ts::plan
