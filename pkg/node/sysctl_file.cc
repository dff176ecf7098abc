#include "pkg/node/sysctl_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kpn::node {

std::optional<int64_t> readIntFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[64] = {};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(buf, &end, 10);
  if (end == buf || errno == ERANGE) return std::nullopt;
  return v;
}

std::optional<std::string> writeIntFile(const std::string& path, int64_t value) {
  // O_TRUNC so that a test's plain file holds exactly the value, as a sysctl would.
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return std::string(std::strerror(errno));
  std::string text = std::to_string(value) + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return std::string(n < 0 ? std::strerror(err) : "short write");
  return std::nullopt;
}

}  // namespace kpn::node
