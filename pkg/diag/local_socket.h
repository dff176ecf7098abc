// The daemon's diagnosis socket: a local stream socket where `kube-proxy-nft status` and `trace`
// ask the running daemon what it knows. One request line in, one JSON answer out, then the
// connection closes.
//
// Who may ask: only processes of this host's root (or the daemon's own user), checked with
// SO_PEERCRED on every connection; anything else is closed unanswered. By default the socket is
// in the abstract namespace ("@kube-proxy-nft/status"): it needs no writable file system (the
// DaemonSet's root is read-only) and is reachable only from the node's network namespace, where
// `kubectl exec` into the daemon's pod and a shell on the node both are. Nothing is served over
// TCP: the metrics port is 0.0.0.0 in our DaemonSet (for Prometheus), and the status names
// services, errors and the node's state.
//
// Bounded: one request at a time (the answer may need the sync loop's thread), a request line of
// at most 4 KiB within 2 s, 2 s to take the answer; a slow or silent client is cut off.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "pkg/source/unique_fd.h"

namespace kpn::diag {

inline constexpr const char* kDefaultSocket = "@kube-proxy-nft/status";  // = config::DaemonOptions

class LocalSocketServer {
 public:
  using Handler = std::function<std::string(const std::string& requestLine)>;
  // Binds `address` ("@name": abstract; else a path, created mode 0600). nullptr and *error when
  // it cannot (another daemon holds it).
  static std::unique_ptr<LocalSocketServer> start(const std::string& address, Handler handler, std::string* error);
  ~LocalSocketServer();  // stops the thread; a path is removed
  LocalSocketServer(const LocalSocketServer&) = delete;
  LocalSocketServer& operator=(const LocalSocketServer&) = delete;

  uint64_t refused() const { return refused_.load(); }  // connections of other users

 private:
  LocalSocketServer(source::UniqueFd listener, std::string path, Handler handler);
  void run();
  void serve(int fd);
  source::UniqueFd listener_, wake_;
  std::string path_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

// One request to the socket at `address`; the answer, or nullopt with *error (no daemon there,
// no answer within `timeoutMs`).
std::optional<std::string> askLocalSocket(const std::string& address, const std::string& requestLine, int timeoutMs,
                                          std::string* error);

}  // namespace kpn::diag
