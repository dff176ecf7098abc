#include "pkg/health/proxy_health.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace kpn::health {

bool nodeEligible(const api::Node* node) {
  if (!node) return true;
  if (!node->deletionTimestamp.empty()) return false;
  return std::find(node->taintKeys.begin(), node->taintKeys.end(), kToBeDeletedTaint) == node->taintKeys.end();
}

ProxyHealth::ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout,
                         std::vector<std::string> families)
    : clock_(clock), timeout_(healthTimeout), families_(std::move(families)) {}

void ProxyHealth::queued(sync::WallTime t) {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& f : families_) oldestQueued_.emplace(f, t);  // keeps the oldest
}

void ProxyHealth::synced(const sync::SyncReport& r) {
  if (!r.stats.ok) return;
  std::lock_guard<std::mutex> g(mu_);
  // One transaction commits every family's table: they are updated together.
  for (const auto& f : families_) {
    oldestQueued_.erase(f);
    lastUpdated_[f] = r.finished;
  }
}

void ProxyHealth::setNodeEligible(bool eligible) {
  std::lock_guard<std::mutex> g(mu_);
  nodeEligible_ = eligible;
}

bool ProxyHealth::nodeEligible() const {
  std::lock_guard<std::mutex> g(mu_);
  return nodeEligible_;
}

ProxyHealthStatus ProxyHealth::status() const {
  std::lock_guard<std::mutex> g(mu_);
  ProxyHealthStatus s;
  s.currentTime = clock_.wallNow();
  // As upstream: only families that have synced once count; before that the proxy is starting
  // up, and healthy.
  for (const auto& [family, last] : lastUpdated_) {
    s.lastUpdated = std::max(s.lastUpdated, last);
    FamilyHealth fh{last, true};
    auto q = oldestQueued_.find(family);
    if (q != oldestQueued_.end() && s.currentTime - q->second >= timeout_) {
      fh.healthy = false;
      s.healthy = false;
    }
    s.status[family] = fh;
  }
  return s;
}

std::string goTimeJson(sync::WallTime t) {
  if (t == sync::WallTime{}) return "0001-01-01T00:00:00Z";  // Go's zero time.Time
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  long frac = static_cast<long>(ns % 1000000000);
  if (frac < 0) {
    frac += 1000000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (frac) {
    char f[16];
    std::snprintf(f, sizeof f, ".%09ld", frac);
    std::string fs = f;
    while (fs.back() == '0') fs.pop_back();
    out += fs;
  }
  return out + "Z";
}

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void timeField(Writer& w, const char* key, sync::WallTime t) {
  w.Key(key);
  std::string s = goTimeJson(t);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
}

// Field order and omissions as Go's json.Marshal of upstream's ProxyHealth.
http::Response reply(ProxyHealthStatus s, std::optional<bool> eligible, sync::WallTime now) {
  bool healthy = s.healthy && eligible.value_or(true);
  // Upstream reports "now" as lastUpdated while healthy (older releases did, and clients compare).
  if (healthy) s.lastUpdated = now;
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  timeField(w, "lastUpdated", s.lastUpdated);
  timeField(w, "currentTime", s.currentTime);
  if (eligible) {
    w.Key("nodeEligible");
    w.Bool(*eligible);
  }
  w.Key("healthy");
  w.Bool(s.healthy);
  if (!s.status.empty()) {
    w.Key("status");
    w.StartObject();
    for (const auto& [family, fh] : s.status) {
      w.Key(family.c_str());
      w.StartObject();
      timeField(w, "lastUpdated", fh.lastUpdated);
      w.Key("healthy");
      w.Bool(fh.healthy);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndObject();
  http::Response r;
  r.status = healthy ? 200 : 503;
  r.headers = {{"Content-Type", "application/json"}, {"X-Content-Type-Options", "nosniff"}};
  r.body.assign(buf.GetString(), buf.GetSize());
  return r;
}

}  // namespace

http::Response healthzResponse(const ProxyHealth& h, const sync::Clock& clock) {
  return reply(h.status(), h.nodeEligible(), clock.wallNow());
}

http::Response livezResponse(const ProxyHealth& h, const sync::Clock& clock) {
  return reply(h.status(), std::nullopt, clock.wallNow());
}

}  // namespace kpn::health
