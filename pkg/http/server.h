// A small HTTP/1.1 server for the daemon's own endpoints (health-check node ports, /healthz and
// /livez, /metrics). Every server runs on one shared Loop thread. Boost.Beast stays inside
// server.cc, so this header is cheap to include (Beast costs seconds per translation unit).
//
// These ports face whatever can reach the node (any pod can reach 0.0.0.0:10256), so they are
// built to be held open by hostile clients without refusing anyone else: connections are
// admitted per source (pkg/http/admission.h: per-source caps, idle ones evicted first near the
// budget, this host always served), a request is its header only (GET endpoints: a request that
// announces a body gets 413), and a connection waiting for a request holds no buffer.
//
// Why not cpprestsdk's http_listener: it cannot bind an IPv6 literal or report an ephemeral port
// (../shared/reference/cpprestsdk-and-stack.md §4).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kpn::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // as sent: "GET", "HEAD", ...
  std::string target;  // path and query, as sent
  Headers headers;
  std::string body;  // always empty: no request body is read (one announced gets 413)
};

struct Response {
  int status = 200;
  Headers headers;  // the server adds Content-Length and, when it closes, Connection: close
  std::string body;
};

// Runs on the loop thread and blocks every server while it runs: keep it quick. An exception
// becomes a 500. It must not destroy its own Server.
using Handler = std::function<Response(const Request&)>;

struct Limits {
  // Request line and headers; more -> 431, then close. Small: load balancers, the kubelet and
  // Prometheus send a few hundred bytes (a bearer token fits), and a connection that trickles its
  // header holds at most this much of the daemon's memory.
  size_t maxHeaderBytes = 4 * 1024;
  // Time to receive one whole request, the keep-alive wait for its first byte included: a client
  // that trickles bytes (slowloris) or idles is cut off after it.
  std::chrono::milliseconds readTimeout{10000};
  std::chrono::milliseconds writeTimeout{10000};
};

// Outside connections of all servers on one Loop together, so that clients of many ports cannot
// take every file descriptor of the daemon (each connection is one).
constexpr size_t kDefaultTotalConnections = 512;

struct LoopStats {
  size_t openOutside = 0, openLocal = 0;  // connections now, from outside and from this host
  size_t sources = 0;                     // outside sources holding them
  uint64_t refused = 0, evicted = 0;      // connections refused, and closed to make room, so far
};

// The one thread that all servers (and tickers) run on. Create it before them, destroy it after.
class Loop {
 public:
  // maxConnections: connections from outside this host to all its servers together; how they
  // are shared is AdmissionLimits::forBudget(maxConnections) (pkg/http/admission.h).
  explicit Loop(size_t maxConnections = kDefaultTotalConnections);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Runs fn on the loop thread and returns when it is done; inline when called on that thread.
  // fn's exceptions propagate to the caller.
  void call(const std::function<void()>& fn);
  bool onLoopThread() const;
  // Returns once asio's socket records are made, on a thread of their own that the constructor
  // starts (server.cc says why) and that then ends; the destructor waits for it too.
  void waitForSocketRecords();
  size_t openConnections();  // of all its servers, now (from outside and from this host)
  LoopStats stats();

 private:
  friend class Server;
  friend class Ticker;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Calls fn on the loop thread every `interval` until destroyed. fn must not destroy its Ticker.
class Ticker {
 public:
  Ticker(Loop& loop, std::chrono::milliseconds interval, std::function<void()> fn);
  ~Ticker();  // on return fn is not running and is never called again
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  struct Impl;
  Loop& loop_;
  std::shared_ptr<Impl> impl_;
};

class Server {
 public:
  // Binds address:port and serves until destroyed. `address`: an IPv4 literal, an IPv6 literal
  // (which listens on IPv6 only), or "" for every address of both families (one dual-stack
  // socket; IPv4 only where the kernel has no IPv6). Port 0 takes a free port: see port().
  // On failure returns null and sets *error, e.g. "listen [::1]:8080: Address already in use".
  static std::unique_ptr<Server> listen(Loop& loop, const std::string& address, int port, Handler handler,
                                        std::string* error, const Limits& limits = {});
  // Closes the listening socket and every open connection; on return the handler is not running
  // and is never called again.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }  // the bound port (the chosen one when asked for 0)
  const std::string& address() const { return address_; }  // as given to listen()

 private:
  struct Impl;
  Server(Loop& loop, std::unique_ptr<Impl> impl, std::string address, int port);
  Loop& loop_;
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_;
};

}  // namespace kpn::http
