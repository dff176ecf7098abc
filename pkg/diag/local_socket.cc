#include "pkg/diag/local_socket.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace kpn::diag {

namespace {

using source::UniqueFd;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxRequest = 4096;
constexpr int kRequestMs = 2000, kAnswerMs = 2000;

// sockaddr_un for "@abstract" or a path; false when the name does not fit.
bool addressOf(const std::string& address, sockaddr_un* sa, socklen_t* len) {
  *sa = {};
  sa->sun_family = AF_UNIX;
  bool abstract = !address.empty() && address[0] == '@';
  std::string name = abstract ? address.substr(1) : address;
  if (name.empty() || name.size() >= sizeof sa->sun_path - 1) return false;
  size_t at = abstract ? 1 : 0;  // abstract: a leading NUL, then the name (no terminator)
  std::memcpy(sa->sun_path + at, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + at + name.size() + (abstract ? 0 : 1));
  return true;
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool writeAll(int fd, const std::string& data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    if (!waitFor(fd, POLLOUT, deadline)) return false;
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (n > 0) done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::unique_ptr<LocalSocketServer> LocalSocketServer::start(const std::string& address, Handler handler,
                                                            std::string* error) {
  sockaddr_un sa;
  socklen_t len;
  if (!addressOf(address, &sa, &len)) {
    *error = "status socket \"" + address + "\": not a socket address (@name or a path)";
    return nullptr;
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    *error = std::string("status socket: ") + std::strerror(errno);
    return nullptr;
  }
  std::string path = address[0] == '@' ? "" : address;
  // A path only this user may open: the file's mode is the first gate, SO_PEERCRED the second.
  mode_t old = path.empty() ? 0 : umask(0177);
  int rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len);
  int bindErrno = errno;
  if (!path.empty()) umask(old);
  if (rc != 0 || listen(fd.get(), 4) != 0) {
    *error = "status socket " + address + ": " + std::strerror(rc != 0 ? bindErrno : errno) +
             (bindErrno == EADDRINUSE ? " (another daemon on this node?)" : "");
    return nullptr;
  }
  return std::unique_ptr<LocalSocketServer>(new LocalSocketServer(std::move(fd), std::move(path), std::move(handler)));
}

LocalSocketServer::LocalSocketServer(UniqueFd listener, std::string path, Handler handler)
    : listener_(std::move(listener)),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      path_(std::move(path)),
      handler_(std::move(handler)) {
  thread_ = std::thread([this] { run(); });
}

LocalSocketServer::~LocalSocketServer() {
  stop_ = true;
  uint64_t one = 1;
  ssize_t n = write(wake_.get(), &one, sizeof one);
  (void)n;
  thread_.join();
  if (!path_.empty()) unlink(path_.c_str());
}

void LocalSocketServer::run() {
  while (!stop_) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      PLOG(ERROR) << "status socket: poll";
      return;
    }
    if (stop_) return;
    if (!(fds[0].revents & POLLIN)) continue;
    UniqueFd c(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c) continue;
    ucred cred{};
    socklen_t credLen = sizeof cred;
    if (getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &credLen) != 0 ||
        (cred.uid != 0 && cred.uid != geteuid())) {
      ++refused_;
      VLOG(1) << "status socket: refused a client of uid " << cred.uid;
      continue;
    }
    serve(c.get());
  }
}

void LocalSocketServer::serve(int fd) {
  auto deadline = Clock::now() + std::chrono::milliseconds(kRequestMs);
  std::string line;
  char buf[1024];
  while (line.find('\n') == std::string::npos) {
    if (line.size() > kMaxRequest || !waitFor(fd, POLLIN, deadline)) return;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) break;  // the request ends with the client's half-close too
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    line.append(buf, static_cast<size_t>(n));
  }
  line = line.substr(0, line.find('\n'));
  if (line.size() > kMaxRequest) return;
  std::string answer = handler_(line);
  if (answer.empty() || answer.back() != '\n') answer += '\n';
  writeAll(fd, answer, Clock::now() + std::chrono::milliseconds(kAnswerMs));
}

std::optional<std::string> askLocalSocket(const std::string& address, const std::string& requestLine, int timeoutMs,
                                          std::string* error) {
  sockaddr_un sa;
  socklen_t len;
  if (!addressOf(address, &sa, &len)) {
    *error = "\"" + address + "\" is not a socket address (@name or a path)";
    return std::nullopt;
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  if (!fd) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 && errno != EINPROGRESS) {
    *error = std::string("no daemon answers on ") + address + " (" + std::strerror(errno) + ")";
    return std::nullopt;
  }
  if (!writeAll(fd.get(), requestLine + "\n", deadline)) {
    *error = "the daemon on " + address + " did not take the request";
    return std::nullopt;
  }
  std::string out;
  char buf[65536];
  for (;;) {
    if (!waitFor(fd.get(), POLLIN, deadline)) {
      *error = "the daemon on " + address + " did not answer within " + std::to_string(timeoutMs / 1000) + " s";
      return std::nullopt;
    }
    ssize_t n = recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      *error = std::string("reading the daemon's answer: ") + std::strerror(errno);
      return std::nullopt;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  if (out.empty()) {
    *error = "the daemon on " + address + " closed the connection without an answer (not root?)";
    return std::nullopt;
  }
  return out;
}

}  // namespace kpn::diag
