#include "nft/kernel/helper_process.h"

#include <glog/logging.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

extern char** environ;

namespace kpn::nft {
namespace {

constexpr int kChildFd = 3;

bool writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (status " + std::to_string(status) + ")";
}

// Waits up to `wait` for the answer's first bytes; false on timeout.
bool readable(int fd, std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60000)));
    if (n > 0) return true;  // data, EOF or an error: the read tells which
    if (n < 0 && errno != EINTR) return true;
  }
}

}  // namespace

bool writeFramePiece(int fd, const std::string& piece, bool more) {
  if (piece.size() > kFrameLengthMask) return false;
  uint32_t len = static_cast<uint32_t>(piece.size()) | (more ? kMorePiecesBit : 0);
  return writeAll(fd, reinterpret_cast<const char*>(&len), sizeof len) && writeAll(fd, piece.data(), piece.size());
}

bool writeFrame(int fd, const std::string& payload) { return writeFramePiece(fd, payload, false); }

bool readFrame(int fd, std::string* payload, size_t maxBytes) {
  payload->clear();
  for (;;) {
    uint32_t word;
    if (!readAll(fd, reinterpret_cast<char*>(&word), sizeof word)) return false;
    const size_t len = word & kFrameLengthMask, at = payload->size();
    if (len > maxBytes - at) return false;
    payload->resize(at + len);
    if (!readAll(fd, payload->data() + at, len)) return false;
    if (!(word & kMorePiecesBit)) return true;
  }
}

SupervisedHelper::SupervisedHelper(std::vector<std::string> argv, std::chrono::milliseconds callTimeout)
    : argv_(std::move(argv)), timeout_(callTimeout) {
  holdReserve();
}

SupervisedHelper::~SupervisedHelper() {
  stop(false);
  for (int& fd : reserve_)
    if (fd >= 0) ::close(fd);
}

void SupervisedHelper::holdReserve() {
  for (int& fd : reserve_)
    if (fd < 0) fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

bool SupervisedHelper::start(std::string* error) {
  for (int& fd : reserve_)
    if (fd >= 0) ::close(fd), fd = -1;
  int sv[2];
  int pairRc = ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
  holdReserve();  // whatever was freed since: next time's reserve
  if (pairRc != 0) {
    *error = std::string("cannot start the helper: socketpair: ") + strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // dup2 clears close-on-exec on the copy; sv[1] is never 3 itself (sv[0] took a lower number).
  posix_spawn_file_actions_adddup2(&fa, sv[1], kChildFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the daemon blocks SIGTERM/SIGINT for its signalfd
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    *error = "cannot start the helper " + argv_[0] + ": " + strerror(rc);
    return false;
  }
  pid_ = pid;
  fd_ = sv[0];
  ++starts_;
  return true;
}

std::string SupervisedHelper::stop(bool kill) {
  if (pid_ == 0) return "not running";
  if (kill) ::kill(pid_, SIGKILL);
  if (fd_ >= 0) ::close(fd_);  // the child reads EOF and leaves
  fd_ = -1;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = 0;
  return describeStatus(status);
}

void SupervisedHelper::recycle() { stop(false); }

void SupervisedHelper::renew() {
  stop(false);
  std::string error;
  if (!start(&error)) LOG(WARNING) << error << "; the next call tries again";
}

void SupervisedHelper::startIfNone() {
  if (pid_ != 0) return;
  std::string error;
  if (!start(&error)) LOG(WARNING) << error << "; the next call tries again";
}

std::optional<std::string> SupervisedHelper::call(const std::string& request, std::string* error) {
  return callInPieces([&](const PieceWriter& write) { return write(request, false); }, error);
}

std::optional<std::string> SupervisedHelper::callInPieces(const std::function<bool(const PieceWriter&)>& produce,
                                                          std::string* error) {
  if (pid_ == 0 && !start(error)) return std::nullopt;
  std::string answer;
  bool sent = produce([&](const std::string& piece, bool more) { return writeFramePiece(fd_, piece, more); });
  if (sent && !readable(fd_, timeout_)) {
    *error = "did not answer within " + std::to_string(timeout_.count()) + " ms; " + stop(true);
    return std::nullopt;
  }
  if (sent && readFrame(fd_, &answer, SIZE_MAX)) return answer;
  *error = stop(false);  // EOF or a broken frame: it died (or was about to)
  return std::nullopt;
}

}  // namespace kpn::nft
