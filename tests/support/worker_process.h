// Test support: a standalone `tinysplit worker --listen` process, started
// by a test and stopped (SIGTERM) when it goes out of scope.
#pragma once

#include <csignal>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace ts::testing {

// A standalone `tinysplit worker` process; its address from its first line.
struct WorkerProcess {
  pid_t pid = -1;
  std::string address;
  WorkerProcess(const std::string& listen, const std::string& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c",
            (std::string("exec ") + TS_TINYSPLIT + " worker --listen " + listen + " " + args).c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 10000) > 0 && read(fds[0], &c, 1) == 1) line += c;
    close(fds[0]);
    const auto at = line.find(" on ");
    if (at != std::string::npos) address = line.substr(at + 4, line.find(' ', at + 4) - at - 4);
  }
  ~WorkerProcess() { stop(); }
  void stop() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      int st = 0;
      waitpid(pid, &st, 0);
      pid = -1;
    }
  }
  // Waits for the process to end by itself (an injected kill); false after 120 s.
  bool wait_exit() {
    for (int i = 0; i < 1200 && pid > 0; ++i) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return true;
      }
      usleep(100 * 1000);
    }
    return false;
  }
};

}  // namespace ts::testing
