// A server that keeps trying to bind: upstream's metrics and healthz servers retry every 5 s when
// their port is taken (bindAddressHardFail false), with one clear line naming the address.
// With hardFail the first failure is returned to the caller instead (which exits).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "pkg/http/server.h"

namespace kpn::http {

class RetryingServer {
 public:
  // what: "metrics", "healthz" (for the log line). nullptr only with hardFail and a failed bind.
  // A failed first bind sets *error either way (without hardFail the server retries).
  static std::unique_ptr<RetryingServer> start(Loop& loop, std::string what, std::string address, int port,
                                               Handler handler, bool hardFail, std::string* error,
                                               std::chrono::milliseconds retry = std::chrono::seconds(5));
  ~RetryingServer();
  bool listening() const { return port_.load() != 0; }
  int port() const { return port_.load(); }  // 0 until bound

 private:
  RetryingServer(Loop& loop, std::string what, std::string address, int port, Handler handler);
  bool tryListen(std::string* error);  // on the loop thread
  Loop& loop_;
  std::string what_, address_;
  int wantPort_;
  Handler handler_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Ticker> retry_;
  std::atomic<int> port_{0};
  int failures_ = 0;
};

// Told which server ("healthz", "metrics") could not bind, and why: with hardFail before the
// start returns the error, else while it retries.
using BindFailureHook = std::function<void(const std::string& what, const std::string& error)>;

// One of the daemon's own servers on a bind address from the configuration, named `field` in
// errors ("healthzBindAddress"). An empty address disables it, and so does port 0 with
// portZeroDisables. nullopt when started, retrying or disabled; else the one line to exit with.
std::optional<std::string> startConfigured(Loop& loop, const std::string& what, const std::string& field,
                                           const std::string& bindAddress, bool portZeroDisables, Handler handler,
                                           bool hardFail, const BindFailureHook& onBindFailure,
                                           std::unique_ptr<RetryingServer>& server);

}  // namespace kpn::http
