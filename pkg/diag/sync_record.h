// The sync loop's history as `status` tells it: the last successful and the last failed sync (and
// why it failed, from the syncer), repairs of outside changes, and why each refused service is
// refused. Fed on the sync loop's thread (a SyncObserver and the syncer's listener) and read there.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "pkg/sync/loop.h"
#include "pkg/sync/syncer.h"

namespace kpn::diag {

struct SyncOutcome {
  sync::WallTime at;
  sync::SyncStats::Plan plan = sync::SyncStats::Plan::None;
  size_t ops = 0;
  double durationMs = 0;
  std::string error;  // failures only
};

class SyncRecord : public sync::SyncObserver, public sync::SyncerListener {
 public:
  void synced(const sync::SyncReport& r) override;
  void serviceRefused(const std::string& service, const std::string& error) override;
  void serviceProgrammedAgain(const std::string& service) override;
  void syncFailed(const std::string& error) override;

  const std::optional<SyncOutcome>& lastSuccess() const { return lastSuccess_; }
  const std::optional<SyncOutcome>& lastFailure() const { return lastFailure_; }
  int consecutiveFailures() const { return consecutiveFailures_; }
  uint64_t syncs() const { return syncs_; }
  uint64_t repairs() const { return repairs_; }
  const std::optional<sync::WallTime>& lastRepair() const { return lastRepair_; }
  struct Refusal {
    std::string error;
    sync::WallTime since;
  };
  // The kernel's word on each service it refused (the syncer knows which are still left out).
  const std::map<std::string, Refusal>& refusals() const { return refusals_; }

 private:
  std::optional<SyncOutcome> lastSuccess_, lastFailure_;
  std::string pendingError_;  // told by the syncer during the sync, reported with its outcome
  int consecutiveFailures_ = 0;
  uint64_t syncs_ = 0, repairs_ = 0;
  std::optional<sync::WallTime> lastRepair_;
  std::map<std::string, Refusal> refusals_;
};

}  // namespace kpn::diag
