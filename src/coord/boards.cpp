#include "coord/boards.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <poll.h>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "coord/qemu.h"
#include "plan/board_kind.h"
#include "util/endpoint.h"
#include "coord/spawn.h"
#include "util/error.h"

namespace ts::coord {

namespace fs = std::filesystem;

// Interrupted runs clean up: SIGINT, SIGTERM and SIGHUP stop every live
// BoardSet (its board processes, its temporary /tmp/tinysplit-boards-*
// folder) before the process dies of the signal. The handler only writes the
// signal number to a pipe; a thread does the work outside signal context.
namespace {
std::mutex g_sets_mu;
std::vector<BoardSet*> g_sets;
int g_sig_pipe[2] = {-1, -1};
std::once_flag g_sig_once;
std::atomic<bool> g_stopping{false};

// What the handler passes to the cleanup thread: the signal and, when another
// process sent it, that process (one write of less than PIPE_BUF bytes is
// atomic, so the thread reads it whole).
struct StopNote {
  int sig;
  pid_t from;  // 0 when not sent by a process (e.g. the terminal's Ctrl-C)
};

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  StopNote n{sig, 0};
  if (info && info->si_code == SI_USER) n.from = info->si_pid;
  const ssize_t r = write(g_sig_pipe[1], &n, sizeof n);
  (void)r;
}

// /proc/PID/NAME, at most 511 bytes; "" if the process is gone.
std::string read_proc(pid_t pid, const char* name) {
  char buf[512];
  const int fd = open(("/proc/" + std::to_string(pid) + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t k = read(fd, buf, sizeof buf - 1);
  close(fd);
  return k > 0 ? std::string(buf, size_t(k)) : "";
}

// "SIGTERM from pid 1234 (ctest), whose parent is pid 1200": in the one line
// an interrupted run prints, so a run stopped by some other process says by
// whom (its parent makes a process that signals the wrong pid easier to find).
std::string describe_stop(const StopNote& n) {
  const char* name = n.sig == SIGINT ? "SIGINT" : n.sig == SIGTERM ? "SIGTERM" : n.sig == SIGHUP ? "SIGHUP" : "a signal";
  std::string s = name;
  if (n.from <= 0) return s;
  if (n.from == getpid()) return s + " from this process";
  s += " from pid " + std::to_string(n.from);
  std::string comm = read_proc(n.from, "comm");
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) comm.pop_back();
  if (!comm.empty()) s += " (" + comm + ")";
  const std::string stat = read_proc(n.from, "stat");  // "pid (comm) S ppid ..."
  const size_t close_paren = stat.rfind(')');
  int ppid = 0;
  if (close_paren != std::string::npos && std::sscanf(stat.c_str() + close_paren + 1, " %*c %d", &ppid) == 1 && ppid > 0)
    s += ", whose parent is pid " + std::to_string(ppid);
  return s;
}

void install_signal_cleanup() {
  std::call_once(g_sig_once, [] {
    if (pipe2(g_sig_pipe, O_CLOEXEC) != 0) return;
    std::thread([] {
      StopNote n{};
      while (read(g_sig_pipe[0], &n, sizeof n) != ssize_t(sizeof n)) {
        if (errno != EINTR) return;
      }
      const int b = n.sig;
      // From here the run is over: the main thread, seeing its boards go,
      // must not print a misleading error nor exit with its own status. One
      // line says why it ends.
      g_stopping = true;
      const std::string line = "tinysplit: run interrupted by " + describe_stop(n) + "\n";
      {
        const ssize_t w = write(2, line.data(), line.size());
        (void)w;
      }
      const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null_fd >= 0) {
        dup2(null_fd, 1);
        dup2(null_fd, 2);
      }
      {
        std::lock_guard<std::mutex> lock(g_sets_mu);
        for (BoardSet* s : g_sets) s->stop();
      }
      // Die of the signal, as without the handler.
      std::signal(b, SIG_DFL);
      std::raise(b);
      _exit(128 + b);
    }).detach();
    std::atexit([] {
      while (g_stopping.load()) pause();  // the signal thread ends the process
    });
    struct sigaction sa {};
    sa.sa_sigaction = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
  });
}
}  // namespace

static std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error("cannot locate the tinysplit executable");
  buf[n] = 0;
  return buf;
}

// Reads the board's first stdout line ("board N listening on HOST:PORT ...").
static std::string read_ready_line(int fd, pid_t pid, std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw Error("local board (pid " + std::to_string(pid) + ") did not start in time");
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, int(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char c[256];
    const ssize_t n = read(fd, c, sizeof c);
    if (n <= 0) throw Error("local board (pid " + std::to_string(pid) + ") exited before it was ready");
    line.append(c, size_t(n));
  }
  return line.substr(0, line.find('\n'));
}

// A board of a QEMU kind: the firmware under QEMU (coord/qemu.h).
void BoardSet::start_qemu(int i, const plan::Board& b, const SpawnOptions& opt, const std::string& root) {
  const net::BoardFault fault = opt.fault_of(i);
  if (size_t(i) < opt.board_args.size() && !opt.board_args[size_t(i)].empty())
    throw Error("board " + std::to_string(b.id) + ": test hooks need a local board, not a QEMU one");
  QemuBoardOptions q;
  q.kind = &plan::kind_of(b);
  q.id = i;
  q.ram_bytes = b.ram_bytes;
  q.clock_mhz = b.clock_mhz;
  q.window = opt.window;
  if (auth_) q.key = key_;
  q.auth = auth_;
  q.log_path = (fs::path(root) / ("board-" + std::to_string(b.id)) / "qemu.log").string();
  // With --store the board's flash is kept there, so a later run with
  // the same plan finds its fragment committed (deploy cache).
  if (!opt.store_root.empty()) q.flash_path = (fs::path(root) / ("board-" + std::to_string(b.id)) / "flash.img").string();
  if (fault.on()) q.extra_args = "--inject-fault " + net::board_fault_arg(fault);
  const QemuBoard qb = spawn_qemu_board(q);
  children_.push_back({qb.pid, -1});
  addr_.push_back(qb.address);
}

// A running board at host:port: nothing to start.
void BoardSet::reach(int i, const plan::Board& b, const SpawnOptions& opt) {
  const net::FaultKind kind = opt.fault_of(i).kind;
  if ((kind != net::FaultKind::None && kind != net::FaultKind::Flip) ||
      (size_t(i) < opt.board_args.size() && !opt.board_args[size_t(i)].empty()))
    throw Error("board " + std::to_string(b.id) + ": injected faults need a local board, not " + b.address);
  if (kind == net::FaultKind::Flip)
    throw Error("board " + std::to_string(b.id) + ": --inject-fault flip needs a local or QEMU board, not " + b.address);
  addr_.push_back(b.address);
}

// A host-process board: a `tinysplit worker` child on loopback, ready when
// it prints the line naming its address.
void BoardSet::start_process(int i, const plan::Board& b, const SpawnOptions& opt, const std::string& root,
                             const std::string& exe) {
  std::vector<std::string> args = {exe, "worker", "--listen", "127.0.0.1:0", "--id", std::to_string(i),
                                   "--ram", std::to_string(b.ram_bytes), "--flash", std::to_string(b.flash_bytes),
                                   "--clock-mhz", std::to_string(int(b.clock_mhz)), "--window",
                                   std::to_string(opt.window), "--store",
                                   (fs::path(root) / ("board-" + std::to_string(b.id))).string(),
                                   "--exit-with-parent"};
  if (auth_) {
    args.push_back("--key-file");
    args.push_back(opt.key_file);
  }
  if (opt.cycles_per_mac > 0) {
    args.push_back("--cycles-per-mac");
    args.push_back(std::to_string(opt.cycles_per_mac));
  }
  if (!opt.emulate_costs.empty()) {
    const std::vector<std::string> emu = {"--costs", opt.emulate_costs, "--link-kbps", plan::format_number(b.bandwidth_kbps),
                                          "--link-delay-s-per-kb", plan::format_number(b.delay_s_per_kb),
                                          "--frame-latency-us", plan::format_number(opt.frame_latency_s * 1e6)};
    args.insert(args.end(), emu.begin(), emu.end());
    if (opt.emulate_protocol) {
      args.push_back("--protocol-cpu");
      args.push_back("on");
    }
  }
  if (opt.delay_ms > 0) {
    args.push_back("--delay-ms");
    args.push_back(std::to_string(opt.delay_ms));
  }
  if (opt.fault_of(i).on()) {
    args.push_back("--inject-fault");
    args.push_back(net::board_fault_arg(opt.fault_of(i)));
  }
  if (size_t(i) < opt.board_args.size())
    args.insert(args.end(), opt.board_args[size_t(i)].begin(), opt.board_args[size_t(i)].end());
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) throw Error("cannot create a pipe for a local board");
  SpawnFds fds;
  fds.out = pipefd[1];
  pid_t pid = -1;
  try {
    pid = spawn_process(exe, args, fds, "cannot start a local board");
  } catch (...) {
    close(pipefd[0]);
    close(pipefd[1]);
    throw;
  }
  close(pipefd[1]);
  children_.push_back({pid, pipefd[0]});
  const std::string line = read_ready_line(pipefd[0], pid, std::chrono::milliseconds(10000));
  const auto at = line.find(" on ");
  if (at == std::string::npos) throw Error("local board printed an unexpected first line: " + line);
  std::string a = line.substr(at + 4);
  addr_.push_back(a.substr(0, a.find(' ')));
}

BoardSet::BoardSet(const plan::Testbed& tb, const SpawnOptions& opt)
    : window_(opt.window), auth_(!opt.key_file.empty()), key_(opt.key) {
  install_signal_cleanup();
  {
    std::lock_guard<std::mutex> lock(g_sets_mu);
    g_sets.push_back(this);
  }
  try {
    plan::check_spawn_limit(tb, "testbed");
    const std::string exe = opt.exe.empty() ? self_exe() : opt.exe;
    std::string root = opt.store_root;
    if (root.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "tinysplit-boards-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) throw Error("cannot create a temporary folder for board flash");
      temp_root_ = root = tmpl;
    }
    for (size_t i = 0; i < tb.boards.size(); ++i) {
      const plan::Board& b = tb.boards[i];
      const plan::BoardKind& kind = plan::kind_of(b);
      transport_.push_back(kind.transport);
      if (!plan::started_here(b)) {
        reach(int(i), b, opt);
        continue;
      }
      switch (kind.start) {
        case plan::BoardStart::Qemu: start_qemu(int(i), b, opt, root); break;
        case plan::BoardStart::Process: start_process(int(i), b, opt, root, exe); break;
        case plan::BoardStart::None:  // validate_testbed refuses it
          throw Error("board " + std::to_string(b.id) + ": a " + kind.name + " board cannot be started here");
      }
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(g_sets_mu);
      g_sets.erase(std::remove(g_sets.begin(), g_sets.end(), this), g_sets.end());
    }
    stop();
    throw;
  }
}

std::vector<std::unique_ptr<net::Transport>> BoardSet::connect(std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<net::Transport>> out;
  for (size_t i = 0; i < addr_.size(); ++i) {
    const Endpoint e = endpoint_or_throw(addr_[i], "board address");
    out.push_back(net::network(transport_[i]).connect(e, timeout, net::Millis(100)));
  }
  return out;
}

std::vector<std::unique_ptr<BoardLink>> BoardSet::links(std::chrono::milliseconds timeout) {
  auto transports = connect(timeout);
  // One fresh session nonce per run: frames recorded in an earlier run
  // cannot be replayed in this one (core/auth.h).
  uint8_t nonce[auth::kNonceBytes];
  if (auth_) net::random_bytes(nonce, sizeof nonce);
  std::vector<std::unique_ptr<BoardLink>> out;
  for (size_t i = 0; i < transports.size(); ++i) {
    out.push_back(std::make_unique<BoardLink>(std::move(transports[i]), int(i), window_, timeout));
    if (auth_) out.back()->set_auth(key_.data(), nonce);
  }
  return out;
}

void BoardSet::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);  // the main thread or the signal thread
  for (auto& c : children_) {
    if (c.pid > 0) {
      kill(c.pid, SIGTERM);
      int st = 0;
      waitpid(c.pid, &st, 0);
      c.pid = -1;
    }
    if (c.out_fd >= 0) {
      close(c.out_fd);
      c.out_fd = -1;
    }
  }
  if (!temp_root_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_root_, ec);
    temp_root_.clear();
  }
}

BoardSet::~BoardSet() {
  {
    std::lock_guard<std::mutex> lock(g_sets_mu);
    g_sets.erase(std::remove(g_sets.begin(), g_sets.end(), this), g_sets.end());
  }
  stop();
}

}  // namespace ts::coord
