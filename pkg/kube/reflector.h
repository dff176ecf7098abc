// One resource kept in sync with the API server, the way client-go's reflector does it:
//   list (resourceVersion=0: served from the API server's watch cache; follow `continue` if it
//   pages anyway) -> hand the differences from what we knew to the sink -> watch from the list's
//   resourceVersion (bookmarks on, jittered timeoutSeconds) -> on a clean end, watch again from the
//   last resourceVersion seen -> on 410 Gone, relist (a consistent, paged read) and synthesise the
//   deletes of objects that vanished meanwhile -> on errors, back off with jitter.
// A malformed or unknown event ends the watch and forces a relist: skipping it could leave a
// change unseen, and a relist always converges. An object that fails validation is skipped with a
// log line (the sink keeps its last good version); a deleted object is always deleted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <random>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pkg/kube/backoff.h"
#include "pkg/kube/transport.h"
#include "pkg/kube/wire.h"

namespace kpn::kube {

struct ResourceSpec {
  std::string kind;  // "Service", "EndpointSlice", "Node"
  std::string path;  // collection path: "/api/v1/services"
  std::string labelSelector;
  std::string fieldSelector;
  // An API the server may not serve (ServiceCIDRs before Kubernetes 1.33): a 404 on the list
  // counts as an empty, complete list, looked at again every ReflectorOptions::notServedRetry.
  bool optional = false;
};

struct Delta {
  bool deleted = false;
  std::string key;  // "ns/name", or "name" for cluster-scoped kinds
  Object object;    // set when !deleted
};

struct ReflectorOptions {
  int pageSize = 500;
  std::chrono::seconds minWatchTimeout{300};  // each watch asks for [min, 2*min) seconds
  size_t maxEventBytes = 16u << 20;           // a longer watch line is dropped (and forces a relist)
  std::chrono::milliseconds initialBackoff{500}, maxBackoff{30000};
  // A watch that ends cleanly sooner than this without any event counts as a failure, so that a
  // server closing every watch at once is retried with backoff, not in a busy loop.
  std::chrono::milliseconds minHealthyWatch{1000};
  std::chrono::milliseconds notServedRetry{std::chrono::minutes(5)};
};

struct ReflectorStats {
  std::atomic<uint64_t> lists{0}, relistsAfterGone{0}, watches{0}, events{0}, errors{0}, skippedObjects{0},
      malformedEvents{0};
};

class Reflector {
 public:
  // `sink(deltas, listed)`: called from the reflector's thread. `listed` is true for the batch
  // that completes a (re)list: after the first such batch the resource has synced.
  using Sink = std::function<void(std::vector<Delta>&& deltas, bool listed)>;

  Reflector(Transport& transport, ResourceSpec spec, Sink sink, ReflectorOptions opts = {});

  // Lists and watches until stop() is called.
  void run();
  // Wakes a backoff sleep and makes run() return; the caller also cancels the transport.
  void stop();

  // The steps of run(), for tests.
  // NotServed: an optional resource's list answered 404 (the sink got it as empty).
  enum class Outcome { Ok, Gone, Failed, Unauthorized, Stopped, NotServed };
  Outcome list();   // a full (re)list; on Ok the sink has the differences
  Outcome watch();  // one watch request, until it ends

  const std::string& resourceVersion() const { return rv_; }
  const ResourceSpec& spec() const { return spec_; }
  const ReflectorStats& stats() const { return stats_; }
  bool listedOnce() const { return listedOnce_; }
  // What the last list or watch request ended with, for `status` (any thread): "" when it
  // succeeded (or none ended yet), else the request and its error.
  std::string lastError() const;

 private:
  std::string listTarget(bool consistent, const std::string& cont) const;
  std::string watchTarget();
  Outcome classify(const HttpResult& r, const char* what);  // and remembers the error
  Outcome classifyAndLog(const HttpResult& r, const char* what);
  Outcome notServed();
  // Whether run() should go on after sleeping for the backoff.
  bool sleepBackoff(int retryAfterSeconds);
  bool sleepFor(std::chrono::milliseconds d);
  bool stopping() const { return stop_.load(); }

  Transport& transport_;
  const ResourceSpec spec_;
  const Sink sink_;
  const ReflectorOptions opts_;
  Backoff backoff_;
  std::string rv_;  // resourceVersion to watch from
  // What the sink was told about: key -> resourceVersion. A relist compares against it.
  std::unordered_map<std::string, std::string> known_;
  bool listedOnce_ = false;
  bool needConsistentList_ = false;  // after 410: the watch cache may be behind, read from etcd
  bool needList_ = false;            // a watch saw something it could not decode (or a 404): relist
  bool notServedLogged_ = false;
  int retryAfter_ = 0;               // the last answer's Retry-After, seconds
  std::atomic<bool> stop_{false};
  std::mutex sleepMu_;
  std::condition_variable sleepCv_;
  ReflectorStats stats_;
  mutable std::mutex errorMu_;
  std::string lastError_;
  std::mt19937_64 rng_{std::random_device{}()};
};

// Percent-encodes a query parameter value.
std::string queryEscape(const std::string& s);

}  // namespace kpn::kube
