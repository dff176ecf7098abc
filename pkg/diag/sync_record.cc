#include "pkg/diag/sync_record.h"

namespace kpn::diag {

void SyncRecord::synced(const sync::SyncReport& r) {
  ++syncs_;
  SyncOutcome o{r.finished, r.stats.plan, r.stats.ops,
                std::chrono::duration<double, std::milli>(r.duration).count(), std::string()};
  if (r.stats.ok) {
    // A sync planned against a listing after the first one: outside changes were repaired.
    if (lastSuccess_ && r.stats.plan == sync::SyncStats::Plan::Reconcile) {
      ++repairs_;
      lastRepair_ = r.finished;
    }
    lastSuccess_ = o;
    consecutiveFailures_ = 0;
  } else {
    o.error = pendingError_.empty() ? "the sync failed (see the daemon's log)" : pendingError_;
    lastFailure_ = o;
    consecutiveFailures_ = r.consecutiveFailures;
  }
  pendingError_.clear();
}

void SyncRecord::serviceRefused(const std::string& service, const std::string& error) {
  auto it = refusals_.find(service);
  if (it == refusals_.end()) refusals_[service] = {error, std::chrono::system_clock::now()};
  else it->second.error = error;  // since: the first refusal of this run of refusals
}

void SyncRecord::serviceProgrammedAgain(const std::string& service) { refusals_.erase(service); }

void SyncRecord::syncFailed(const std::string& error) { pendingError_ = error; }

}  // namespace kpn::diag
