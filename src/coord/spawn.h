// Starting a board process (a local `tinysplit worker` or QEMU) from the
// coordinator, which has threads and signal handlers of its own.
//
// Between fork() and exec() the child is a copy of the coordinator: its
// handlers for SIGINT/SIGTERM/SIGHUP (coord/boards.cpp) write to the
// coordinator's own signal pipe, and any lock another thread held at the
// fork (the allocator's, the sanitizers') stays held for ever. So the child
// does only async-signal-safe work: everything is prepared before the fork,
// signals stay blocked across it, and the child puts the handlers back to
// their defaults before it unblocks them. A child stopped in that window
// (say by the coordinator's own clean-up) dies of the signal and cannot make
// the coordinator believe that it was interrupted itself.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace ts::coord {

struct SpawnFds {
  int out = -1;          // the child's stdout (dup2'ed), -1 = inherited
  int err = -1;          // the child's stderr, -1 = inherited
  bool null_stdin = false;
};

// execv(path, args) in a child that gets SIGTERM when the calling thread
// ends (PR_SET_PDEATHSIG) and exits 127 if exec fails. `path` is a file
// path; find_program resolves a bare name. Throws ts::Error (prefixed by
// `who`) if the fork fails.
pid_t spawn_process(const std::string& path, const std::vector<std::string>& args, const SpawnFds& fds,
                    const std::string& who);

// `name` as execvp would find it: itself if it has a '/', else the first
// executable file of that name on $PATH; "" if none.
std::string find_program(const std::string& name);

}  // namespace ts::coord
