#include "pkg/config/file_watch.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kpn::config {

ConfigFileWatch::ConfigFileWatch(const std::string& path, std::function<void(const std::string&)> onChange)
    : path_(path), onChange_(std::move(onChange)) {
  if (path.empty()) return;
  inotifyFd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  stopFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // fsnotify's Write and Rename on a watched file: IN_MODIFY, IN_MOVE_SELF.
  if (inotifyFd_ < 0 || stopFd_ < 0 || inotify_add_watch(inotifyFd_, path.c_str(), IN_MODIFY | IN_MOVE_SELF) < 0) {
    LOG(WARNING) << "--config=" << path << ": cannot watch for changes (" << std::strerror(errno)
                 << "); a changed file takes effect at the next start";
    return;
  }
  thread_ = std::thread([this] { run(); });
}

ConfigFileWatch::~ConfigFileWatch() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (write(stopFd_, &one, sizeof one) < 0) PLOG(WARNING) << "config watch: eventfd";
    thread_.join();
  }
  if (inotifyFd_ >= 0) close(inotifyFd_);
  if (stopFd_ >= 0) close(stopFd_);
}

void ConfigFileWatch::run() {
  for (;;) {
    pollfd fds[2] = {{inotifyFd_, POLLIN, 0}, {stopFd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) return;
    if (!(fds[0].revents & POLLIN)) continue;
    alignas(inotify_event) char buf[4096];
    ssize_t n = read(inotifyFd_, buf, sizeof buf);
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & (IN_MODIFY | IN_MOVE_SELF)) {
        onChange_(ev->mask & IN_MODIFY ? "written" : "renamed");
        return;
      }
    }
  }
}

void ConfigFileWatch::exitOnChange(const std::string& what) {
  LOG(ERROR) << "content of the configuration file was updated (" << what
             << "); exiting so that the supervisor starts kube-proxy-nft with it (the ruleset stays)";
  google::FlushLogFiles(google::GLOG_INFO);
  _exit(1);
}

}  // namespace kpn::config
