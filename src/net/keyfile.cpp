#include "net/keyfile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

namespace ts::net {

void random_bytes(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw Error(std::string("cannot read random bytes: ") + std::strerror(errno));
    got += size_t(r);
  }
}

Key load_key_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw Error("key file " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw Error("key file " + path + ": not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    throw Error("key file " + path + " is accessible to other users (mode " + mode + "); run: chmod 600 " + path);
  }
  char buf[256];
  size_t len = 0;
  for (;;) {
    const ssize_t r = read(fd, buf + len, sizeof buf - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += size_t(r);
    if (len == sizeof buf) break;
  }
  close(fd);
  Key k{};
  if (len == sizeof buf || !auth::parse_key_hex(buf, len, k.data()))
    throw Error("key file " + path + ": expected one line of 64 hexadecimal digits (tinysplit keygen -o FILE)");
  std::memset(buf, 0, sizeof buf);
  return k;
}

void write_key_file(const std::string& path) {
  Key k{};
  random_bytes(k.data(), k.size());
  static const char* d = "0123456789abcdef";
  std::string text;
  for (uint8_t b : k) {
    text += d[b >> 4];
    text += d[b & 15];
  }
  text += '\n';
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("key file " + path + ": " + std::strerror(errno) + (errno == EEXIST ? " (not overwritten)" : ""));
  const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
  const bool closed = close(fd) == 0;
  std::fill(text.begin(), text.end(), '\0');
  if (!ok || !closed) {
    unlink(path.c_str());
    throw Error("key file " + path + ": write failed");
  }
}

}  // namespace ts::net
