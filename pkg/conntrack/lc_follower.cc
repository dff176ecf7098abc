#include "pkg/conntrack/lc_follower.h"

#include <glog/logging.h>

namespace kpn::conntrack {

void LeastConnFollower::synced(const sync::SyncReport& r) {
  if (!r.stats.ok || (handed_ && renderer_.leastConnVersion() == version_)) return;
  version_ = renderer_.leastConnVersion();
  handed_ = true;
  tracker_.setPorts(renderer_.leastConnPorts());
}

void LeastConnFollower::tick(sync::SteadyTime now) {
  if (!counts_ || now - countsAt_ < std::chrono::seconds(1)) return;
  countsAt_ = now;
  counts_(tracker_.endpointConnections());
}

bool LeastConnFollower::take() {
  LeastConnTracker::Choices c = tracker_.takeChoices();
  size_t changed = 0;
  for (LeastConnChoice& choice : c.choices)
    changed += renderer_.choose(choice.serviceKey, choice.owner, std::move(choice.values));
  if (changed == 0) return false;
  if (waiting_ == 0) since_ = c.since;
  waiting_ += changed;
  return true;
}

void LeastConnFollower::landed(const sync::SyncStats& s) {
  if (!s.ok || waiting_ == 0) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
  VLOG(2) << "least connection: " << waiting_ << " choices in the kernel " << seconds * 1000 << " ms after the "
          << "conntrack events that made them (ops=" << s.ops << " commit_ms=" << s.commitMs << ")";
  if (landed_) landed_(waiting_, seconds);
  waiting_ = 0;
}

}  // namespace kpn::conntrack
