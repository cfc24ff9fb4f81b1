#include "util/input_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

namespace ts {

namespace {

const char* kind_of_mode(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Opens and checks; the caller owns the descriptor.
int open_checked(const std::string& path, const std::string& what, uint64_t max_bytes, uint64_t* size) {
  auto fail = [&](const std::string& why) { return Error(what + " '" + path + "': " + why); };
  // O_NONBLOCK: opening a FIFO with no writer must not wait for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    throw fail(std::string("cannot open: ") + (e == ENOENT ? "does not exist" : std::strerror(e)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw fail(std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* k = kind_of_mode(st.st_mode);
    throw fail(std::strcmp(k, "not a regular file") == 0 ? k : std::string("not a regular file (") + k + ")");
  }
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    throw fail("is " + size_text(uint64_t(st.st_size)) + "; at most " + size_text(max_bytes) + " is accepted for a " +
               what);
  }
  *size = uint64_t(st.st_size);
  return fd;
}

}  // namespace

std::string size_text(uint64_t b) {
  if (b >= (uint64_t(1) << 30) && b % (uint64_t(1) << 30) == 0) return std::to_string(b >> 30) + " GiB";
  if (b >= (uint64_t(1) << 20) && b % (uint64_t(1) << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (uint64_t(1) << 10) && b % (uint64_t(1) << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " bytes";
}

uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  uint64_t size = 0;
  ::close(open_checked(path, what, max_bytes, &size));
  return size;
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  uint64_t size = 0;
  const int fd = open_checked(path, what, max_bytes, &size);
  std::string out;
  out.resize(size_t(size));
  size_t got = 0;
  // Reads what fstat said and no more: a file that grows meanwhile is read
  // to its size at the open.
  while (got < out.size()) {
    const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) {
      const int e = errno;
      ::close(fd);
      throw Error(what + " '" + path + "': read error (" + std::strerror(e) + ")");
    }
    if (r == 0) break;  // shrank meanwhile: what is there
    got += size_t(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace ts
