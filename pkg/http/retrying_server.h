// A server that keeps trying to bind: upstream's metrics and healthz servers retry every 5 s when
// their port is taken (bindAddressHardFail false), with one clear line naming the address.
// With hardFail the first failure is returned to the caller instead (which exits).
#pragma once

#include <atomic>
#include <memory>
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

}  // namespace kpn::http
