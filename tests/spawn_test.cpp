// coord/spawn.h: how the coordinator starts board processes.
#include "coord/spawn.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <pthread.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "util/error.h"

namespace {

using ts::coord::find_program;
using ts::coord::spawn_process;
using ts::coord::SpawnFds;

// Runs a program through spawn_process with stdout on a pipe and stdin on
// /dev/null; returns what it printed and its exit status.
std::string run(const std::string& name, const std::vector<std::string>& args, int* status) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  SpawnFds fds;
  fds.out = p[1];
  fds.null_stdin = true;
  const pid_t pid = spawn_process(find_program(name), args, fds, "test");
  close(p[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(p[0]);
  EXPECT_EQ(waitpid(pid, status, 0), pid);
  return out;
}

TEST(Spawn, FindsProgramsOnThePath) {
  const std::string sh = find_program("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_EQ(sh.back(), 'h');
  EXPECT_EQ(access(sh.c_str(), X_OK), 0);
  EXPECT_EQ(find_program("/bin/x-not-searched"), "/bin/x-not-searched");  // a path is taken as given
  EXPECT_EQ(find_program("tinysplit-no-such-program"), "");
}

// Signals are blocked across the fork; the child must not keep that mask
// (a board that blocks SIGTERM could not be stopped), nor the parent.
TEST(Spawn, TheChildStartsWithTheParentsSignalMaskAndItsOwnStdout) {
  sigset_t before, after;
  pthread_sigmask(SIG_SETMASK, nullptr, &before);
  int st = 0;
  // The program itself (not a shell, which blocks signals around its own forks).
  const std::string out = run("grep", {"grep", "^SigBlk", "/proc/self/status"}, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::ifstream self("/proc/self/status");
  std::string line, mine;
  while (std::getline(self, line))
    if (line.rfind("SigBlk:", 0) == 0) mine = line + "\n";
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(out, mine);  // the test's own mask, not every signal blocked
  const std::string in = run("wc", {"wc", "-c"}, &st);  // stdin is /dev/null
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(in, "0\n");
  pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int s = 1; s < 32; ++s) EXPECT_EQ(sigismember(&before, s), sigismember(&after, s)) << s;
}

// A SIGTERM the parent handles: the child is stopped by SIGTERM like any
// process (exec resets handlers; before exec the child resets them itself).
TEST(Spawn, TheChildDiesOfSigtermWhileTheParentHandlesIt) {
  struct sigaction sa {}, old {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGTERM, &sa, &old), 0);
  const pid_t pid = spawn_process(find_program("sleep"), {"sleep", "30"}, SpawnFds{}, "test");
  kill(pid, SIGTERM);
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM) << st;
  sigaction(SIGTERM, &old, nullptr);
}

TEST(Spawn, AProgramThatCannotRunExits127) {
  const pid_t pid = spawn_process("/nonexistent/tinysplit", {"tinysplit"}, SpawnFds{}, "test");
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 127) << st;
}

}  // namespace
