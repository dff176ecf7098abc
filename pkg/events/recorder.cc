#include "pkg/events/recorder.h"

#include <glog/logging.h>

#include <algorithm>
#include <tuple>

namespace kpn::events {

bool Recorder::Key::operator<(const Key& o) const {
  return std::tie(type, reason, action, regarding) < std::tie(o.type, o.reason, o.action, o.regarding);
}

Recorder::Recorder(kube::Transport& transport, Reporter by, RecorderOptions options, DropHook onDrop)
    : transport_(transport),
      by_(std::move(by)),
      opts_(options),
      onDrop_(std::move(onDrop)),
      limiter_(options.qps, options.burst) {
  worker_ = std::thread([this] { run(); });
}

Recorder::~Recorder() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  limiter_.stop();
  bool inFlight;
  {
    std::lock_guard<std::mutex> lk(mu_);
    inFlight = busy_;
  }
  // A request to an API server that does not answer would hold the exit for its whole timeout.
  if (inFlight) transport_.cancel();
  worker_.join();
}

void Recorder::record(const Event& e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (queue_.size() >= opts_.queueCapacity) {
      drop(kDropQueueFull);
      return;
    }
    queue_.push_back({e, std::chrono::system_clock::now()});
  }
  cv_.notify_all();
}

bool Recorder::flush(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, limit, [this] { return queue_.empty() && !busy_; });
}

Recorder::Counts Recorder::counts() const { return {created_.load(), patched_.load(), dropped_.load()}; }

void Recorder::drop(const char* reason) {
  ++dropped_;
  if (onDrop_) onDrop_(reason);
}

bool Recorder::sleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lk(mu_);
  return !cv_.wait_for(lk, d, [this] { return stopping(); });
}

void Recorder::run() {
  for (;;) {
    Queued q;
    {
      std::unique_lock<std::mutex> lk(mu_);
      busy_ = false;
      cv_.notify_all();  // flush() waits for an idle worker
      // Wake for the next event, or when a series may have ended.
      cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stopping() || !queue_.empty(); });
      if (stopping()) return;
      busy_ = true;
      if (queue_.empty()) {
        lk.unlock();
        housekeeping(Clock::now());
        continue;
      }
      q = std::move(queue_.front());
      queue_.pop_front();
    }
    handle(q);
    housekeeping(Clock::now());
  }
}

// Upstream's legacy spam filter, per object: a bucket of perObjectBurst tokens refilled one per
// perObjectRefill. Repeats of one event do not reach it (they are counted in their series).
bool Recorder::allowedFor(const ObjectRef& r, Clock::time_point now) {
  auto it = buckets_.find(r);
  if (it == buckets_.end()) it = buckets_.emplace(r, Bucket{double(opts_.perObjectBurst), now}).first;
  Bucket& b = it->second;
  double refill = std::chrono::duration<double>(now - b.last) / std::chrono::duration<double>(opts_.perObjectRefill);
  b.tokens = std::min<double>(opts_.perObjectBurst, b.tokens + refill);
  b.last = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void Recorder::handle(const Queued& q) {
  Clock::time_point now = Clock::now();
  Key key{q.event.type, q.event.reason, q.event.action, q.event.regarding};
  auto it = series_.find(key);
  if (it != series_.end() && now - it->second.lastSeen < opts_.seriesFinish) {
    Series& s = it->second;
    ++s.count;
    s.lastObserved = q.at;
    s.lastSeen = now;
    s.dirty = true;
    if (s.count == 2) patch(s);  // as client-go: the series begins at once, later counts wait
    return;
  }
  if (it != series_.end()) {
    if (it->second.dirty) patch(it->second);
    series_.erase(it);
  }
  if (!allowedFor(q.event.regarding, now)) {
    drop(kDropRateLimited);
    return;
  }
  Series s;
  s.event = q.event;
  s.ns = eventNamespace(q.event.regarding);
  s.name = eventName(q.event.regarding, q.at);
  s.firstTime = s.lastObserved = q.at;
  s.lastSeen = s.lastWritten = now;
  if (create(s)) series_.emplace(key, std::move(s));
}

void Recorder::housekeeping(Clock::time_point now) {
  for (auto it = series_.begin(); it != series_.end();) {
    Series& s = it->second;
    if (now - s.lastSeen >= opts_.seriesFinish) {
      if (s.dirty) patch(s);  // the series' final count
      it = series_.erase(it);
      continue;
    }
    if (s.dirty && now - s.lastWritten >= opts_.seriesRefresh) patch(s);
    ++it;
  }
  // Buckets that are full again say nothing: forget them.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    double refill = std::chrono::duration<double>(now - it->second.last) /
                    std::chrono::duration<double>(opts_.perObjectRefill);
    if (it->second.tokens + refill >= opts_.perObjectBurst) it = buckets_.erase(it);
    else ++it;
  }
}

Recorder::Answer Recorder::call(const char* method, const std::string& target, const std::string& body,
                                const char* contentType) {
  auto delay = opts_.retryDelay;
  for (int attempt = 1;; ++attempt) {
    if (stopping() || !limiter_.acquire()) return Answer::Stopped;
    kube::HttpResult r = transport_.send(method, target, body, contentType);
    if (r.cancelled || stopping()) return Answer::Stopped;
    if (r.status >= 200 && r.status < 300) return Answer::Done;
    if (r.status == 404) return Answer::NotFound;
    if (r.status == 409) return Answer::Done;  // AlreadyExists: the same event sent twice
    if (r.status == 401) transport_.credentialsRejected();
    bool transient = r.status == 0 || r.status == 429 || r.status >= 500;
    if (!transient && r.status != 401) {
      LOG(WARNING) << "event " << method << " " << target << ": HTTP " << r.status << " from " << transport_.server()
                   << ": " << r.body.substr(0, 200) << "; dropped";
      return Answer::Rejected;
    }
    if (attempt >= opts_.maxTries) {
      LOG(WARNING) << "event " << method << " " << target << " to " << transport_.server() << " failed "
                   << attempt << " times (" << (r.status ? "HTTP " + std::to_string(r.status) : r.error) << "); dropped";
      return Answer::Unavailable;
    }
    if (!sleepFor(delay)) return Answer::Stopped;
    delay *= 2;
  }
}

bool Recorder::create(Series& s) {
  std::string body = createBody(s.event, by_, s.name, s.firstTime, s.count, s.lastObserved);
  switch (call("POST", eventsPath(s.ns), body, "application/json")) {
    case Answer::Done:
      ++created_;
      s.dirty = false;
      s.lastWritten = Clock::now();
      VLOG(2) << "event " << s.event.type << " " << s.event.reason << " about " << s.event.regarding.kind << " "
              << (s.event.regarding.ns.empty() ? "" : s.event.regarding.ns + "/") << s.event.regarding.name << " sent";
      return true;
    case Answer::Unavailable:
    case Answer::NotFound:
      drop(kDropApiUnavailable);
      return false;
    case Answer::Rejected:
      drop(kDropRejected);
      return false;
    case Answer::Stopped:
      return false;
  }
  return false;
}

void Recorder::patch(Series& s) {
  switch (call("PATCH", eventsPath(s.ns) + "/" + s.name, seriesPatch(s.count, s.lastObserved), kStrategicMergePatch)) {
    case Answer::Done:
      ++patched_;
      s.dirty = false;
      s.lastWritten = Clock::now();
      return;
    case Answer::NotFound:
      // The event is gone (its TTL, someone deleted it): create it again with its series, as
      // client-go does.
      create(s);
      return;
    case Answer::Unavailable:
      drop(kDropApiUnavailable);
      s.dirty = false;
      return;
    case Answer::Rejected:
      drop(kDropRejected);
      s.dirty = false;
      return;
    case Answer::Stopped:
      return;
  }
}

}  // namespace kpn::events
