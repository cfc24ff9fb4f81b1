// Test support: run a shell command, capture stdout, stderr and exit code.
#pragma once

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace ts::testing {

struct Shell {
  int code = -1;        // exit status; 128 if killed by a signal
  std::string out, err;
  double seconds = 0;   // wall time of the command
};

inline Shell shell(const std::string& cmd) {
  static int counter = 0;
  const std::filesystem::path err = std::filesystem::temp_directory_path() /
                                    ("ts_test_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  Shell r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>" + err.string()).c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  std::ifstream f(err);
  r.err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  std::filesystem::remove(err);
  // A sanitizer report of the command or of a board it started (gcc's
  // UBSan writes to stderr whatever log_path says) would die here with the
  // captured text when the test passes: echo it into the test's own output,
  // where scripts/sanitize.sh looks for it.
  if (r.err.find(": runtime error: ") != std::string::npos || r.err.find("Sanitizer") != std::string::npos)
    std::fprintf(stderr, "[shell] sanitizer output of '%s':\n%s\n", cmd.c_str(), r.err.c_str());
  return r;
}

// SIGTERM to a process that is not this test's child (a board started in the
// background by a shell that has exited, now a child of init): its pid may
// have been reused by another process if it already ended, so the signal
// goes only if the process's command line still contains `needle`.
inline bool terminate_if_still(pid_t pid, const std::string& needle) {
  if (pid <= 1) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : cmd)
    if (c == '\0') c = ' ';
  if (cmd.find(needle) == std::string::npos) return false;
  return ::kill(pid, SIGTERM) == 0;
}

// The bundled MobileNetV2 runs at 224 by default. Tests of distribution,
// protocol, faults and options run it at the paper's 112 (a quarter of the
// MACs, and one 512 KiB board holds it): at_paper_size adds --size 112 to a
// model command (run, plan, simulate, eval, inspect, dump, quantize) that
// names no size, model or data set. The tests of the defaults use
// tinysplit_as_given.
inline std::string at_paper_size(const std::string& args) {
  static const char* const kModelCommands[] = {"run", "plan", "simulate", "eval", "inspect", "dump", "quantize"};
  const std::string first = args.substr(0, args.find(' '));
  bool model_command = false;
  for (const char* c : kModelCommands) model_command = model_command || first == c;
  const std::string padded = " " + args + " ";
  for (const char* opt : {" --size", " -s ", " --model", " -m ", " --dataset"})
    if (padded.find(opt) != std::string::npos) return args;
  return model_command ? first + " --size 112" + args.substr(first.size()) : args;
}

// The tinysplit binary under test, at the paper's size (at_paper_size).
inline Shell tinysplit(const std::string& args) {
  return shell(std::string(TS_TINYSPLIT) + " " + at_paper_size(args));
}
// The same, exactly as written.
inline Shell tinysplit_as_given(const std::string& args) { return shell(std::string(TS_TINYSPLIT) + " " + args); }

}  // namespace ts::testing
