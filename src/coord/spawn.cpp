#include "coord/spawn.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util/error.h"

namespace ts::coord {

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string full = dir + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
    start = end + 1;
  }
  return "";
}

pid_t spawn_process(const std::string& path, const std::vector<std::string>& args, const SpawnFds& fds,
                    const std::string& who) {
  // Everything the child needs, made before the fork.
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  argv.reserve(copy.size() + 1);
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int devnull = fds.null_stdin ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
  const pid_t parent = getpid();

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only.
    // The coordinator's handlers (exec would reset them; until then they
    // are live). Ignored signals stay ignored, as across exec.
    for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent is already gone
    if (fds.out >= 0) dup2(fds.out, 1);
    if (fds.err >= 0) dup2(fds.err, 2);
    if (devnull >= 0) dup2(devnull, 0);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    errno = fork_errno;
    throw Error(who + ": fork failed");
  }
  return pid;
}

}  // namespace ts::coord
