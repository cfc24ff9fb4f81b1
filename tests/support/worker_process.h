// Test support: a standalone `tinysplit worker --listen` process, started
// by a test and stopped (SIGTERM) when it goes out of scope.
#pragma once

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <string>
#include <vector>
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

// Three standalone boards (ids 0..2, each started with `args`) and a
// testbed naming them (board i at boards[i]), in a folder of the test's own
// (`tag` and the test's pid) removed with it.
struct Swarm3 {
  std::filesystem::path dir;
  std::vector<std::unique_ptr<WorkerProcess>> boards;
  std::string testbed;
  explicit Swarm3(const std::string& tag, const std::string& args = "")
      : dir(std::filesystem::temp_directory_path() / ("ts_" + tag + "_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir);
    nlohmann::json tb;
    for (int i = 0; i < 3; ++i) {
      boards.push_back(std::make_unique<WorkerProcess>("127.0.0.1:0", "--id " + std::to_string(i) + " " + args));
      tb["boards"].push_back({{"id", i}, {"address", boards.back()->address}});
    }
    testbed = (dir / "testbed.json").string();
    std::ofstream(testbed) << tb.dump();
  }
  ~Swarm3() { std::filesystem::remove_all(dir); }
  bool up() const {
    for (auto& b : boards)
      if (b->address.empty()) return false;
    return true;
  }
};

}  // namespace ts::testing
