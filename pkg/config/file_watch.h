// upstream's --config watch (cmd/kube-proxy/app/options.go, runLoop): the daemon ends when the
// configuration file is written to or renamed, so that its supervisor (kubelet, systemd) starts it
// again with the new content. As upstream (fsnotify on the path), other events are ignored: a
// ConfigMap update, which swaps the symlinked directory and removes the old file, does not end it.
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace kpn::config {

class ConfigFileWatch {
 public:
  // `onChange` runs once, on the watch thread, at the first write or rename. An empty path
  // watches nothing. A watch that cannot be set up is logged and skipped (never fatal).
  ConfigFileWatch(const std::string& path, std::function<void(const std::string& what)> onChange);
  ~ConfigFileWatch();
  ConfigFileWatch(const ConfigFileWatch&) = delete;
  ConfigFileWatch& operator=(const ConfigFileWatch&) = delete;

  // The default reaction: upstream's error ("content of the proxy server's configuration file was
  // updated") and exit 1, leaving the ruleset in place as any exit does.
  static void exitOnChange(const std::string& what);

 private:
  void run();
  int inotifyFd_ = -1;
  int stopFd_ = -1;  // eventfd: ends the thread
  std::string path_;
  std::function<void(const std::string&)> onChange_;
  std::thread thread_;
};

}  // namespace kpn::config
