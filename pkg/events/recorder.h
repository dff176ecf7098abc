// Sends Kubernetes Events to the API server the way client-go's tools/events broadcaster does,
// without ever holding up its caller: record() only queues (a full queue drops the event), a
// worker thread sends. An event like one sent less than six minutes ago (same type, reason,
// action, object, reporter: upstream's "isomorphic" event) is not sent again but counted in the
// first one's series: its second occurrence PATCHes `series`, later ones are written when the
// series ends (six minutes without a repeat) or every 30 minutes. Two rate limits: one per object
// (upstream's spam filter: 25 events, then one per 5 minutes) and one for all event requests
// (burst 25, then 1 a second) on top of the transport's own QPS limit, so events never crowd out
// the watches. An API server that does not answer (or answers 429/5xx) is tried a few times
// more; then the event is dropped and counted, as is every other dropped event.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "pkg/events/event.h"
#include "pkg/kube/rate_limiter.h"
#include "pkg/kube/transport.h"

namespace kpn::events {

struct RecorderOptions {
  size_t queueCapacity = 1000;                 // upstream's maxQueuedEvents
  int maxTries = 3;                            // per request, when the API server does not answer
  std::chrono::milliseconds retryDelay{2000};  // doubling between tries
  std::chrono::milliseconds seriesFinish{std::chrono::minutes(6)};    // upstream's finishTime
  std::chrono::milliseconds seriesRefresh{std::chrono::minutes(30)};  // upstream's refreshTime
  double qps = 1;
  int burst = 25;
  int perObjectBurst = 25;                                         // upstream's spam filter
  std::chrono::milliseconds perObjectRefill{std::chrono::minutes(5)};  // one more token this often
};

// Why an event was not sent: the metric's `reason` label.
inline constexpr const char* kDropQueueFull = "queue_full";
inline constexpr const char* kDropRateLimited = "rate_limited";
inline constexpr const char* kDropApiUnavailable = "api_unavailable";
inline constexpr const char* kDropRejected = "rejected";

class Recorder {
 public:
  using DropHook = std::function<void(const char* reason)>;
  Recorder(kube::Transport& transport, Reporter by, RecorderOptions options = {}, DropHook onDrop = nullptr);
  ~Recorder();  // stops the worker; a request in flight is cancelled (the transport is shutting down)
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Any thread; never blocks on the API server.
  void record(const Event& e);
  // Waits until every queued event was sent or dropped (before an exit); false after `limit`.
  bool flush(std::chrono::milliseconds limit);

  struct Counts {
    uint64_t created = 0, patched = 0, dropped = 0;
  };
  Counts counts() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    Event event;
    WallTime at;
  };
  // One event sent (or being sent), and its series.
  struct Series {
    Event event;
    std::string name, ns;
    WallTime firstTime, lastObserved;
    Clock::time_point lastSeen, lastWritten;
    int count = 1;
    bool dirty = false;  // a count not yet written
  };
  struct Key {
    std::string type, reason, action;
    ObjectRef regarding;
    bool operator<(const Key& o) const;
  };
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  enum class Answer { Done, NotFound, Unavailable, Rejected, Stopped };

  void run();
  void handle(const Queued& q);
  void housekeeping(Clock::time_point now);
  bool allowedFor(const ObjectRef& r, Clock::time_point now);
  Answer call(const char* method, const std::string& target, const std::string& body, const char* contentType);
  bool create(Series& s);
  void patch(Series& s);
  void drop(const char* reason);
  bool stopping() const { return stop_.load(); }
  bool sleepFor(std::chrono::milliseconds d);

  kube::Transport& transport_;
  const Reporter by_;
  const RecorderOptions opts_;
  DropHook onDrop_;
  kube::RateLimiter limiter_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool busy_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> created_{0}, patched_{0}, dropped_{0};

  // Worker-only.
  std::map<Key, Series> series_;
  std::map<ObjectRef, Bucket> buckets_;
  std::thread worker_;
};

}  // namespace kpn::events
