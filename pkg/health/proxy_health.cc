#include "pkg/health/proxy_health.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "pkg/services/family.h"

namespace kpn::health {

bool nodeEligible(const api::Node* node) {
  if (!node) return true;
  if (!node->deletionTimestamp.empty()) return false;
  return std::find(node->taintKeys.begin(), node->taintKeys.end(), kToBeDeletedTaint) == node->taintKeys.end();
}

std::vector<std::string> familyNames(const std::set<nft::Family>& families) {
  std::vector<std::string> out;
  for (nft::Family f : families) out.push_back(services::familyWord(f));
  return out;
}

ProxyHealth::ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout, FamiliesFn families)
    : clock_(clock), timeout_(healthTimeout), familiesFn_(std::move(families)), started_(clock.wallNow()) {}

ProxyHealth::ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout,
                         std::vector<std::string> families)
    : ProxyHealth(clock, healthTimeout, [f = std::move(families)] { return f; }) {}

void ProxyHealth::queued(sync::WallTime) {
  sync::SteadyTime now = clock_.now();
  std::lock_guard<std::mutex> g(mu_);
  if (!syncAttempted_) return;  // the first sync takes it, as upstream's first syncProxyRules
  for (auto& [name, f] : families_)
    if (!f.oldestQueued) f.oldestQueued = now;
}

void ProxyHealth::synced(const sync::SyncReport& r) {
  std::vector<std::string> served = familiesFn_();  // reads the Syncer: on its thread, not under mu_
  std::lock_guard<std::mutex> g(mu_);
  syncAttempted_ = true;
  std::map<std::string, Family> next;
  for (const auto& name : served) {
    auto it = families_.find(name);
    // A family first seen counts as updated at the start, so that a change can be late for it
    // even if no sync ever succeeds.
    next[name] = it != families_.end() ? it->second : Family{started_, false, std::nullopt};
  }
  families_.swap(next);
  if (!r.stats.ok) return;
  // One transaction commits every family's table: they are updated together.
  for (auto& [name, f] : families_) {
    f.oldestQueued.reset();
    f.lastUpdated = r.finished;
    f.everSynced = true;
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

namespace {

std::string seconds(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

ProxyHealthStatus ProxyHealth::status() const {
  sync::SteadyTime now = clock_.now();
  std::lock_guard<std::mutex> g(mu_);
  ProxyHealthStatus s;
  s.currentTime = clock_.wallNow();
  std::string late;  // the unhealthy families, for the reason
  std::chrono::nanoseconds waited{0};
  bool everSynced = false;
  for (const auto& [name, f] : families_) {
    s.lastUpdated = std::max(s.lastUpdated, f.lastUpdated);
    FamilyHealth fh{f.lastUpdated, true};
    if (f.oldestQueued && now - *f.oldestQueued >= timeout_) {
      fh.healthy = false;
      s.healthy = false;
      late += (late.empty() ? "" : ", ") + name;
      waited = std::max(waited, std::chrono::nanoseconds(now - *f.oldestQueued));
      everSynced |= f.everSynced;
    }
    s.status[name] = fh;
  }
  if (!s.healthy)
    s.reason = late + ": a change has waited " + seconds(waited) + " for a successful sync (limit " +
               seconds(timeout_) + "); " +
               (everSynced ? "the last one was at " + goTimeJson(s.lastUpdated)
                           : "none since the start at " + goTimeJson(started_));
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
