// QEMU boards: the firmware (firmware/, built by scripts/build_firmware.sh)
// run under qemu-system-arm, the machine and image named by the board's kind
// (plan/board_kind.cpp; qemu-m7: -M mps2-an500), one process per board, reached over QEMU user-mode networking through a host
// port forward to the board's 10.0.2.15:7000.
#pragma once

#include <chrono>
#include <cstdint>
#include <array>
#include <string>
#include <sys/types.h>

namespace ts::plan {
struct BoardKind;
}

namespace ts::coord {

struct QemuBoardOptions {
  // The board's kind (plan/board_kind.h): its row names the QEMU machine and
  // the firmware image. nullptr: the Cortex-M7 kind, qemu-m7.
  const plan::BoardKind* kind = nullptr;
  int id = 0;                      // board id announced in HELLO (testbed index)
  int64_t ram_bytes = 512 * 1024;  // arena; the firmware refuses more than its 512 KB OCRAM
  double clock_mhz = 600;
  uint16_t window = 8;
  std::string log_path;            // the board's semihosting output (created)
  // -icount shift=0: one instruction per virtual ns, so the per-layer
  // instruction counts in the log are exact, and compute times are reported
  // as instructions / clock. Off: faster, times are host times.
  bool icount = true;
  std::chrono::milliseconds ready_timeout{30000};
  // Appended to the firmware's command line (test hooks such as
  // "--advertise-ram N --once"; see firmware/src/main.cpp).
  std::string extra_args;
  // Shared key for authenticated links, provisioned into the board (see
  // spawn_qemu_board). auth = false: the board runs without a key.
  bool auth = false;
  std::array<uint8_t, 32> key{};
  // The board's flash kept in this file (created if absent, the size of the
  // machine's RAM: 16 MiB on mps2-an500/-an386 (the an500's PSRAM at
  // 0x60000000), 2 GiB sparse on mps3-an547 (its DDR); mapped shared, so every erase and program lands in
  // the file at once, even if the board is killed). The committed fragment
  // then survives a restart of the board with the same file, as on a real
  // board. Empty: the flash is lost when QEMU exits. The provisioning record
  // is not kept in the file (cleared before boot without a key, and once the
  // board listens with one).
  std::string flash_path;
};

struct QemuBoard {
  pid_t pid = -1;
  std::string address;  // 127.0.0.1:PORT
  std::string log_path;
};

// The QEMU kind a board of these options is (o.kind, else qemu-m7).
const plan::BoardKind& qemu_kind(const QemuBoardOptions& o);

// The environment variable that overrides a QEMU kind's image:
// TS_FIRMWARE for qemu-m7, TS_FIRMWARE_<KIND> for the others
// (TS_FIRMWARE_QEMU_M4).
std::string firmware_env(const plan::BoardKind& kind);

// The firmware image of a QEMU kind: $<firmware_env> if set, else the
// kind's image (its `firmware`, relative to the project folder,
// project_home()). Throws ts::Error (naming the build script) if there is
// none.
std::string find_firmware(const plan::BoardKind& kind);

// Starts one board and waits until its firmware listens. The child gets
// SIGTERM if this process dies. Throws ts::Error with the board's last log
// line if QEMU or the firmware fails to start. $TS_QEMU names the QEMU
// binary (default qemu-system-arm); $TS_QEMU_ICOUNT=0 turns icount off.
QemuBoard spawn_qemu_board(const QemuBoardOptions& opt);

}  // namespace ts::coord
