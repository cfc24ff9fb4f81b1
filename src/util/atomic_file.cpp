#include "util/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

namespace ts {

std::string atomic_temp_path(const std::string& path) { return path + ".tmp" + std::to_string(getpid()); }

int try_write_file_atomic(const std::string& path, const void* data, size_t size) {
  const std::string tmp = atomic_temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  auto fail = [&](int err, bool open) {
    if (open) ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  };
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : EIO, true);
    p += n;
    left -= size_t(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return fail(errno, true);
  if (::close(fd) != 0) return fail(errno, false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(errno, false);
  // The rename itself reaches the disk with the folder's entry.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return 0;
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  const int err = try_write_file_atomic(path, data, size);
  if (err != 0) throw Error("cannot write '" + path + "': " + std::strerror(err));
}

void commit_file_atomic(const std::string& temp, const std::string& path) {
  struct stat st {};
  if (::stat(temp.c_str(), &st) != 0 || st.st_size == 0) {
    ::unlink(temp.c_str());
    throw Error("cannot write '" + path + "': nothing was written (disk full?)");
  }
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err != EINVAL && err != EROFS) {
      ::unlink(temp.c_str());
      throw Error("cannot write '" + path + "': " + std::strerror(err));
    }
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  }
}

}  // namespace ts
