#include "coord/qemu.h"

#include <arpa/inet.h>
#include <csignal>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "coord/spawn.h"
#include "core/crc32.h"
#include "net/keyfile.h"
#include "plan/board_kind.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts::coord {

namespace fs = std::filesystem;

namespace {

// A free loopback TCP port (bound and released; QEMU binds it right after).
uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("cannot create a socket to pick a port for a QEMU board");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw Error("cannot pick a free port for a QEMU board");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Last non-empty line of a log, for error messages.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "(no output)";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// The machine's RAM, which a memory-backend file of exactly this size
// replaces: 16 MiB on mps2-an500 and -an386, the DDR's 2 GiB on mps3-an547
// (a sparse file: only what the board writes, its 8 MB of flash at most,
// takes disk space).
uint64_t machine_ram_bytes(const std::string& machine) {
  return machine == "mps3-an547" ? uint64_t(2) << 30 : uint64_t(16) << 20;
}

// Creates the flash file (0600, the machine's RAM size) if needed and clears
// the provisioning record in it (at `provision_offset`).
void prepare_flash_file(const std::string& path, const std::string& who, off_t provision_offset,
                        uint64_t file_bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(who + ": cannot open its flash file " + path);
  struct stat st {};
  bool ok = fstat(fd, &st) == 0;
  if (ok && uint64_t(st.st_size) != file_bytes) ok = ftruncate(fd, off_t(file_bytes)) == 0;
  static const uint8_t zero[64] = {};
  ok = ok && pwrite(fd, zero, sizeof zero, provision_offset) == ssize_t(sizeof zero);
  ::close(fd);
  if (!ok) throw Error(who + ": cannot prepare its flash file " + path);
}

}  // namespace

const plan::BoardKind& qemu_kind(const QemuBoardOptions& o) {
  const plan::BoardKind* k = o.kind ? o.kind : plan::find_board_kind("qemu-m7");
  if (!k || k->start != plan::BoardStart::Qemu || !*k->qemu_machine || !*k->firmware)
    throw Error(std::string("board kind ") + (k ? k->name : "qemu-m7") + " does not run under QEMU");
  return *k;
}

std::string firmware_env(const plan::BoardKind& kind) {
  if (std::string(kind.name) == "qemu-m7") return "TS_FIRMWARE";
  std::string v = "TS_FIRMWARE_";
  for (const char* c = kind.name; *c; ++c) v += *c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(*c)));
  return v;
}

std::string find_firmware(const plan::BoardKind& kind) {
  const std::string var = firmware_env(kind);
  if (const char* env = std::getenv(var.c_str()); env && *env) {
    if (!fs::is_regular_file(env)) throw Error(var + "=" + env + " is not a file");
    return env;
  }
  const fs::path image = fs::path(project_home()) / kind.firmware;
  std::error_code ec;
  if (fs::is_regular_file(image, ec)) return image.string();
  throw Error(std::string(kind.name) + " boards need their firmware (" + kind.firmware +
              "): build it with scripts/build_firmware.sh, or set " + var);
}

QemuBoard spawn_qemu_board(const QemuBoardOptions& o) {
  const plan::BoardKind& kind = qemu_kind(o);
  const std::string elf = find_firmware(kind);
  const std::string machine = kind.qemu_machine;
  const off_t provision_offset = off_t(kind.qemu_provision_addr - kind.qemu_flash_base);
  char provision_addr[16];
  std::snprintf(provision_addr, sizeof provision_addr, "0x%08X", unsigned(kind.qemu_provision_addr));
  const char* qemu_env = std::getenv("TS_QEMU");
  const std::string qemu = qemu_env && *qemu_env ? qemu_env : "qemu-system-arm";
  const char* ic = std::getenv("TS_QEMU_ICOUNT");
  const bool icount = o.icount && !(ic && std::string(ic) == "0");
  const std::string who = "board " + std::to_string(o.id) + " (qemu)";
  if (o.log_path.empty()) throw Error(who + ": no log path");
  std::error_code ec;
  fs::create_directories(fs::path(o.log_path).parent_path(), ec);
  // A board with a key gets it as the Teensy would hold it: a provisioning
  // record in the reserved top of flash (firmware/src/firmware.h), loaded
  // there by QEMU from a file only this user can read, with a fresh seed
  // for the board's nonces.
  std::string provision;
  if (o.auth) {
    uint8_t rec[60] = {'T', 'S', 'K', 'E', 'Y', '0', '0', '1'};
    std::copy(o.key.begin(), o.key.end(), rec + 8);
    net::random_bytes(rec + 40, 16);
    const uint32_t c = ts::crc32(rec, 56);
    for (int i = 0; i < 4; ++i) rec[56 + i] = uint8_t(c >> (8 * i));
    provision = (fs::path(o.log_path).parent_path() / "provision.bin").string();
    fs::remove(provision, ec);
    const int fd = ::open(provision.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const bool ok = fd >= 0 && ::write(fd, rec, sizeof rec) == ssize_t(sizeof rec);
    if (fd >= 0) ::close(fd);
    std::fill(std::begin(rec), std::end(rec), 0);
    if (!ok) throw Error(who + ": cannot write its provisioning record " + provision);
  }

  if (!o.flash_path.empty()) {
    fs::create_directories(fs::path(o.flash_path).parent_path(), ec);
    prepare_flash_file(o.flash_path, who, provision_offset, machine_ram_bytes(machine));
  }

  // A port picked here may be taken before QEMU binds it: try a few.
  for (int attempt = 0;; ++attempt) {
    const uint16_t port = free_port();
    std::string app = "serve --id " + std::to_string(o.id) + " --ram " + std::to_string(o.ram_bytes) +
                      " --clock-mhz " + std::to_string(int64_t(o.clock_mhz)) + " --window " + std::to_string(o.window);
    if (icount) app += " --icount";
    if (!o.extra_args.empty()) app += " " + o.extra_args;
    std::vector<std::string> args = {qemu, "-M", machine, "-nographic", "-monitor", "none", "-serial", "null",
                                     "-semihosting"};
    if (!o.flash_path.empty()) {
      // The machine's RAM (mps2-an500: the PSRAM at 0x60000000) is the board's flash.
      args[2] = machine + ",memory-backend=tsflash";
      args.push_back("-object");
      args.push_back("memory-backend-file,id=tsflash,size=" + std::to_string(machine_ram_bytes(machine)) +
                     ",share=on,mem-path=" + o.flash_path);
    }
    if (icount) {
      args.push_back("-icount");
      args.push_back("shift=0");
    }
    if (!provision.empty()) {
      args.push_back("-device");
      args.push_back("loader,file=" + provision + ",addr=" + provision_addr + ",force-raw=on");
    }
    args.insert(args.end(), {"-nic",
                             "user,model=lan9118,hostfwd=tcp:127.0.0.1:" + std::to_string(port) + "-10.0.2.15:7000",
                             "-kernel", elf, "-append", app});
    const int log_fd = ::open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) throw Error(who + ": cannot create its log " + o.log_path);
    SpawnFds fds;
    fds.out = fds.err = log_fd;
    fds.null_stdin = true;
    pid_t pid = -1;
    try {
      // Not on $PATH: the child's exec fails and it exits 127 (below).
      const std::string path = find_program(qemu);
      pid = spawn_process(path.empty() ? qemu : path, args, fds, who);
    } catch (...) {
      ::close(log_fd);
      throw;
    }
    ::close(log_fd);
    // Ready when the firmware says it listens; the log is a file, so the
    // board's later output never blocks on a pipe nobody reads.
    const auto deadline = std::chrono::steady_clock::now() + o.ready_timeout;
    for (;;) {
      const std::string log = read_file(o.log_path);
      if (log.find(" listening on ") != std::string::npos) {
        if (!provision.empty()) fs::remove(provision, ec);  // loaded: the key stays only in the board
        if (!provision.empty() && !o.flash_path.empty()) prepare_flash_file(o.flash_path, who, provision_offset, machine_ram_bytes(machine));  // read at boot
        return QemuBoard{pid, "127.0.0.1:" + std::to_string(port), o.log_path};
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        const bool port_taken = log.find("hostfwd") != std::string::npos || log.find("host forwarding") != std::string::npos;
        if (port_taken && attempt < 3) break;  // retry with another port
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
          throw Error(who + ": cannot run " + qemu + " (install qemu-system-arm; scripts/build_firmware.sh does)");
        throw Error(who + " exited before it was ready: " + last_line(log));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        throw Error(who + " did not start in time: " + last_line(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace ts::coord
