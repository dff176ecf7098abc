// The proxy's own health, as upstream's ProxyHealthServer keeps it (pkg/proxy/healthcheck/
// proxy_health.go): per IP family the last successful sync and the oldest change still waiting
// for one; unhealthy while a change has waited longer than healthTimeout (2 x syncPeriod).
// As upstream's proxier: the start counts as an update of each family ("in case Sync() never
// succeeds": a change that waits too long without any successful sync is unhealthy too), and
// changes count as queued only once the first sync was attempted (upstream queues updates only
// after its informers have synced; before that a slow API server is not the proxy's fault).
// The families are those this node serves (the Syncer learns them in its first sync: an
// IPv4-only kernel reports no IPv6).
// /healthz also says whether the Node is eligible (not being deleted, not tainted
// ToBeDeletedByClusterAutoscaler); /livez does not look at the Node.
// Written by the sync loop's thread, read by the HTTP loop's: every member locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <set>
#include <vector>

#include "nft/expr.h"
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
  sync::WallTime lastUpdated{};  // the last successful sync; the start until there is one
  bool healthy = true;
};

struct ProxyHealthStatus {
  sync::WallTime lastUpdated{};  // the latest of the families'
  sync::WallTime currentTime{};
  bool healthy = true;
  // Upstream's names (services::familyWord) of the families this node serves; empty before the first
  // sync attempt (starting up).
  std::map<std::string, FamilyHealth> status;
  std::string reason;  // why not healthy, in words (not in upstream's bodies; health-check ports say it)
};

// Upstream's names of the families a Syncer programs.
std::vector<std::string> familyNames(const std::set<nft::Family>& families);

class ProxyHealth : public sync::SyncObserver {
 public:
  // Asked after every sync, on the sync loop's thread: the families this node serves.
  using FamiliesFn = std::function<std::vector<std::string>()>;
  ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout, FamiliesFn families);
  // Fixed families (tests; a caller that knows them up front).
  ProxyHealth(const sync::Clock& clock, std::chrono::nanoseconds healthTimeout, std::vector<std::string> families);

  void queued(sync::WallTime t) override;
  void synced(const sync::SyncReport& r) override;

  void setNodeEligible(bool eligible);
  ProxyHealthStatus status() const;
  bool nodeEligible() const;

 private:
  struct Family {
    sync::WallTime lastUpdated;                  // the start until the first successful sync
    bool everSynced = false;
    std::optional<sync::SteadyTime> oldestQueued;  // monotonic: a wall clock step is no delay
  };
  const sync::Clock& clock_;
  std::chrono::nanoseconds timeout_;
  FamiliesFn familiesFn_;
  const sync::WallTime started_;
  mutable std::mutex mu_;
  bool syncAttempted_ = false;
  std::map<std::string, Family> families_;
  bool nodeEligible_ = true;
};

// Go's time.Time JSON form (RFC 3339 with nanoseconds, trailing zeros dropped), UTC.
std::string goTimeJson(sync::WallTime t);

// The /healthz and /livez replies: upstream's JSON bodies, status codes (200 / 503) and headers.
http::Response healthzResponse(const ProxyHealth& h, const sync::Clock& clock);
http::Response livezResponse(const ProxyHealth& h, const sync::Clock& clock);

}  // namespace kpn::health
