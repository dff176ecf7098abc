#include "pkg/kube/reflector.h"

#include <glog/logging.h>

#include "pkg/api/skip_report.h"
#include "pkg/kube/line_splitter.h"

namespace kpn::kube {
namespace {

using Clock = std::chrono::steady_clock;

std::string excerpt(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

}  // namespace

std::string queryEscape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

Reflector::Reflector(Transport& transport, ResourceSpec spec, Sink sink, ReflectorOptions opts)
    : transport_(transport),
      spec_(std::move(spec)),
      sink_(std::move(sink)),
      opts_(opts),
      backoff_(opts.initialBackoff, opts.maxBackoff) {}

std::string Reflector::listTarget(bool consistent, const std::string& cont) const {
  std::string t = spec_.path + "?limit=" + std::to_string(opts_.pageSize);
  if (!spec_.labelSelector.empty()) t += "&labelSelector=" + queryEscape(spec_.labelSelector);
  if (!spec_.fieldSelector.empty()) t += "&fieldSelector=" + queryEscape(spec_.fieldSelector);
  if (!cont.empty()) t += "&continue=" + queryEscape(cont);
  else if (!consistent) t += "&resourceVersion=0";  // from the watch cache: cheap for the API server
  return t;
}

std::string Reflector::watchTarget() {
  auto min = opts_.minWatchTimeout.count();
  auto timeout = min + std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(min - 1, 0))(rng_);
  std::string t = spec_.path + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + queryEscape(rv_) +
                  "&timeoutSeconds=" + std::to_string(timeout);
  if (!spec_.labelSelector.empty()) t += "&labelSelector=" + queryEscape(spec_.labelSelector);
  if (!spec_.fieldSelector.empty()) t += "&fieldSelector=" + queryEscape(spec_.fieldSelector);
  return t;
}

Reflector::Outcome Reflector::classify(const HttpResult& r, const char* what) {
  Outcome o = classifyAndLog(r, what);
  if (o == Outcome::Stopped) return o;
  std::string error;
  if (o == Outcome::Failed || o == Outcome::Unauthorized)
    error = std::string(what) + ": " + (r.status == 0 ? r.error : r.status == 200 ? "connection lost: " + r.error
                                                                                  : "HTTP " + std::to_string(r.status));
  std::lock_guard<std::mutex> lk(errorMu_);
  lastError_ = std::move(error);
  return o;
}

std::string Reflector::lastError() const {
  std::lock_guard<std::mutex> lk(errorMu_);
  return lastError_;
}

Reflector::Outcome Reflector::classifyAndLog(const HttpResult& r, const char* what) {
  if (r.cancelled || stopping()) return Outcome::Stopped;
  retryAfter_ = r.retryAfterSeconds;
  if (r.status == 0) {
    stats_.errors++;
    LOG(WARNING) << spec_.kind << " " << what << " failed: " << r.error;  // the error names the URL
    return Outcome::Failed;
  }
  if (r.status == 200) {
    if (r.error.empty()) return Outcome::Ok;
    stats_.errors++;
    LOG(WARNING) << spec_.kind << " " << what << ": connection lost: " << r.error;
    return Outcome::Failed;
  }
  if (r.status == 410) return Outcome::Gone;
  stats_.errors++;
  if (r.status == 401) {
    LOG(WARNING) << spec_.kind << " " << what << ": 401 Unauthorized from " << transport_.server()
                 << "; reading the credentials again before the next attempt";
    transport_.credentialsRejected();
    return Outcome::Unauthorized;
  }
  if (r.status == 403)
    LOG(ERROR) << spec_.kind << " " << what << ": 403 Forbidden: the daemon's identity needs list and watch on "
               << spec_.path << " (" << excerpt(r.body) << ")";
  else
    LOG(WARNING) << spec_.kind << " " << what << ": HTTP " << r.status << " from " << transport_.server() << ": "
                 << excerpt(r.body);
  return Outcome::Failed;
}

Reflector::Outcome Reflector::list() {
  bool consistent = needConsistentList_;
  std::unordered_map<std::string, std::string> fresh;
  fresh.reserve(known_.size());
  std::vector<Delta> deltas;
  std::string cont, listRv;
  int restarts = 0;
  double requestMs = 0, decodeMs = 0;
  auto ms = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  };
  for (;;) {
    if (stopping()) return Outcome::Stopped;
    auto t0 = Clock::now();
    HttpResult r = transport_.get(listTarget(consistent, cont));
    requestMs += ms(t0);
    auto t1 = Clock::now();
    if (r.status == 410 && !cont.empty() && restarts++ < 3) {
      // The continue token outlived its snapshot: start again from a fresh, consistent one.
      LOG(INFO) << spec_.kind << " list: continue token expired; listing again";
      consistent = true;
      cont.clear();
      listRv.clear();
      fresh.clear();
      deltas.clear();
      continue;
    }
    if (spec_.optional && r.status == 404 && !r.cancelled) return notServed();
    Outcome o = classify(r, "list");
    if (o != Outcome::Ok) return o;
    ListPage page;
    if (auto err = decodeListPage(r.body, spec_.kind, page)) {
      stats_.errors++;
      LOG(ERROR) << spec_.kind << " list from " << transport_.server() << " is unusable: " << *err;
      return Outcome::Failed;
    }
    std::string().swap(r.body);
    if (listRv.empty()) listRv = page.resourceVersion;  // every page is the first page's snapshot
    for (auto& item : page.items) {
      if (item.key.empty()) {
        stats_.skippedObjects++;
        api::reportSkipped(spec_.kind, "unnamed");
        LOG(WARNING) << "skipping a " << spec_.kind << " without a name: " << item.error;
        continue;
      }
      auto old = known_.find(item.key);
      bool unchanged = old != known_.end() && !item.resourceVersion.empty() && old->second == item.resourceVersion;
      fresh[item.key] = item.resourceVersion;
      if (unchanged) continue;
      if (!item.error.empty()) {
        stats_.skippedObjects++;
        api::reportSkippedError(item.error);
        LOG(WARNING) << "skipping invalid object (its last good version, if any, stays): " << item.error;
        continue;
      }
      deltas.push_back({false, item.key, std::move(item.object)});
    }
    decodeMs += ms(t1);
    if (page.continueToken.empty()) break;
    cont = page.continueToken;
  }
  size_t deletes = 0;
  for (const auto& [key, rv] : known_)
    if (!fresh.count(key)) {
      deltas.push_back({true, key, {}});
      deletes++;
    }
  known_ = std::move(fresh);
  rv_ = listRv;
  needConsistentList_ = false;
  needList_ = false;
  stats_.lists++;
  VLOG(1) << spec_.kind << " listed: " << known_.size() << " objects at resourceVersion " << rv_ << ", "
          << deltas.size() - deletes << " changed, " << deletes << " gone (request " << requestMs << " ms, decode "
          << decodeMs << " ms)";
  sink_(std::move(deltas), true);
  listedOnce_ = true;
  return Outcome::Ok;
}

Reflector::Outcome Reflector::notServed() {
  if (!notServedLogged_)
    LOG(INFO) << transport_.server() << " does not serve " << spec_.path << " (404): no " << spec_.kind
              << "s for now; asking again every " << opts_.notServedRetry.count() / 1000 << " s";
  notServedLogged_ = true;
  std::vector<Delta> deltas;
  for (const auto& [key, rv] : known_) deltas.push_back({true, key, {}});
  known_.clear();
  rv_.clear();
  needList_ = false;
  stats_.lists++;
  sink_(std::move(deltas), true);
  listedOnce_ = true;
  return Outcome::NotServed;
}

Reflector::Outcome Reflector::watch() {
  stats_.watches++;
  auto started = Clock::now();
  bool sawEvent = false;
  Outcome ended = Outcome::Ok;
  std::vector<Delta> batch;
  LineSplitter lines(opts_.maxEventBytes);

  auto onLine = [&](std::string_view line) -> bool {
    WatchEvent ev;
    if (auto err = decodeWatchEvent(line, spec_.kind, ev)) {
      stats_.malformedEvents++;
      LOG(ERROR) << spec_.kind << " watch: " << *err << "; relisting so that no change goes unseen";
      ended = Outcome::Failed;
      needList_ = true;
      return false;
    }
    sawEvent = true;
    stats_.events++;
    switch (ev.type) {
      case WatchEvent::Type::Bookmark:
        rv_ = ev.item.resourceVersion;
        return true;
      case WatchEvent::Type::Error:
        if (ev.errorCode == 410) {
          LOG(INFO) << spec_.kind << " watch: resourceVersion " << rv_ << " is too old (" << ev.errorText << "); relisting";
          ended = Outcome::Gone;
        } else {
          stats_.errors++;
          LOG(WARNING) << spec_.kind << " watch: ERROR event " << ev.errorCode << " " << ev.errorText;
          ended = Outcome::Failed;
        }
        return false;
      case WatchEvent::Type::Deleted:
        rv_ = ev.item.resourceVersion;
        known_.erase(ev.item.key);
        batch.push_back({true, ev.item.key, {}});
        return true;
      default:
        rv_ = ev.item.resourceVersion;
        known_[ev.item.key] = ev.item.resourceVersion;
        if (!ev.item.error.empty()) {
          stats_.skippedObjects++;
          api::reportSkippedError(ev.item.error);
          LOG(WARNING) << "skipping invalid object (its last good version, if any, stays): " << ev.item.error;
          return true;
        }
        batch.push_back({false, ev.item.key, std::move(ev.item.object)});
        return true;
    }
  };
  auto onOversize = [&](size_t bytes) {
    stats_.malformedEvents++;
    LOG(ERROR) << spec_.kind << " watch: dropped an event of " << bytes << " bytes (limit " << opts_.maxEventBytes
               << "); relisting";
    ended = Outcome::Failed;
    needList_ = true;
  };

  HttpResult r = transport_.stream(watchTarget(), [&](std::string_view data) {
    bool go = lines.feed(data, onLine, onOversize);
    // Hand over what this read completed: one wake-up of the main loop per read, not per event.
    if (!batch.empty()) sink_(std::move(batch), false);
    batch.clear();
    return go && ended == Outcome::Ok && !stopping();
  });
  if (ended != Outcome::Ok) return stopping() ? Outcome::Stopped : ended;
  if (spec_.optional && r.status == 404 && !r.cancelled) {
    needList_ = true;  // the API went away: the list will say so
    return Outcome::Failed;
  }
  Outcome o = classify(r, "watch");
  if (o != Outcome::Ok) return o;
  if (!sawEvent && Clock::now() - started < opts_.minHealthyWatch) {
    stats_.errors++;
    LOG(WARNING) << spec_.kind << " watch closed at once by " << transport_.server() << "; backing off";
    return Outcome::Failed;
  }
  return Outcome::Ok;
}

bool Reflector::sleepBackoff(int retryAfterSeconds) {
  auto d = backoff_.next();
  if (retryAfterSeconds > 0) d = std::max<Backoff::Duration>(d, std::chrono::seconds(std::min(retryAfterSeconds, 60)));
  VLOG(1) << spec_.kind << ": retrying in " << d.count() << " ms";
  return sleepFor(d);
}

bool Reflector::sleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lk(sleepMu_);
  return !sleepCv_.wait_for(lk, d, [this] { return stopping(); });
}

void Reflector::run() {
  bool mustList = true;
  while (!stopping()) {
    if (mustList || needList_) {
      Outcome o = list();
      if (o == Outcome::Stopped) return;
      if (o == Outcome::Ok) {
        backoff_.reset();
        mustList = false;
        continue;
      }
      if (o == Outcome::NotServed) {
        backoff_.reset();
        if (!sleepFor(opts_.notServedRetry)) return;
        continue;
      }
      if (o == Outcome::Gone) needConsistentList_ = true;
      if (!sleepBackoff(retryAfter_)) return;
      continue;
    }
    switch (watch()) {
      case Outcome::Ok:
        backoff_.reset();
        break;
      case Outcome::Gone:
        stats_.relistsAfterGone++;
        needConsistentList_ = true;
        mustList = true;
        break;
      case Outcome::Stopped:
        return;
      default:
        if (!sleepBackoff(retryAfter_)) return;
    }
  }
}

void Reflector::stop() {
  std::lock_guard<std::mutex> lk(sleepMu_);
  stop_ = true;
  sleepCv_.notify_all();
}

}  // namespace kpn::kube
