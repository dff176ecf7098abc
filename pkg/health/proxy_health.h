// The proxy's own health, as upstream's ProxyHealthServer keeps it (pkg/proxy/healthcheck/
// proxy_health.go): per IP family the last successful sync and the oldest change still waiting
// for one; unhealthy while a change has waited longer than healthTimeout (2 x syncPeriod).
// /healthz also says whether the Node is eligible (not being deleted, not tainted
// ToBeDeletedByClusterAutoscaler); /livez does not look at the Node.
// Written by the sync loop's thread, read by the HTTP loop's: every member locks.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pkg/api/types.h"
#include "pkg/http/server.h"
#include "pkg/sync/clock.h"
#include "pkg/sync/loop.h"

namespace kpn::health {

inline constexpr const char* kToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler";

// Not being deleted, not tainted for deletion. No Node object (a manifest folder without one):
// eligible, as upstream was before it first saw its Node.
bool nodeEligible(const api::Node* node);

struct FamilyHealth {
  sync::WallTime lastUpdated{};  // zero until the first successful sync
  bool healthy = true;
};

struct ProxyHealthStatus {
  sync::WallTime lastUpdated{};  // the latest of the families'
  sync::WallTime currentTime{};
  bool healthy = true;
  std::map<std::string, FamilyHealth> status;  // "IPv4", "IPv6"
};

class ProxyHealth : public sync::SyncObserver {
 public:
  // families: upstream's names ("IPv4", "IPv6") of the tables each sync commits.
  ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout, std::vector<std::string> families);

  void queued(sync::WallTime t) override;
  void synced(const sync::SyncReport& r) override;

  void setNodeEligible(bool eligible);
  ProxyHealthStatus status() const;
  bool nodeEligible() const;

 private:
  const sync::Clock& clock_;
  std::chrono::nanoseconds timeout_;
  std::vector<std::string> families_;
  mutable std::mutex mu_;
  std::map<std::string, sync::WallTime> lastUpdated_;
  std::map<std::string, sync::WallTime> oldestQueued_;
  bool nodeEligible_ = true;
};

// Go's time.Time JSON form (RFC 3339 with nanoseconds, trailing zeros dropped), UTC.
std::string goTimeJson(sync::WallTime t);

// The /healthz and /livez replies: upstream's JSON bodies, status codes (200 / 503) and headers.
http::Response healthzResponse(const ProxyHealth& h, const sync::Clock& clock);
http::Response livezResponse(const ProxyHealth& h, const sync::Clock& clock);

}  // namespace kpn::health
