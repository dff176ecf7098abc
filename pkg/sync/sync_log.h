// What an operator sees of the syncs at the default verbosity (-v=0): the first sync that
// programmed the node (services, operations, time), and the first success after failures. Each
// failure is logged where it happens: the syncer names its cause, the loop counts it and says when
// it retries. Every sync's numbers are the -v=2 `sync done` line.
#pragma once

#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"

namespace kpn::sync {

class SyncLog : public SyncObserver {
 public:
  explicit SyncLog(const state::ClusterState& state) : state_(state) {}

  void synced(const SyncReport& r) override {
    if (!r.stats.ok) {
      failedBefore_ = r.consecutiveFailures;
      return;
    }
    const std::string ms = millis(std::chrono::duration<double, std::milli>(r.duration).count());
    if (!programmed_)
      LOG(INFO) << "first sync done: " << state_.services.size() << " services, " << r.stats.ops << " operations in "
                << ms << " ms (render " << millis(r.stats.renderMs) << ", diff " << millis(r.stats.diffMs)
                << ", commit " << millis(r.stats.commitMs) << ")";
    else if (failedBefore_)
      LOG(INFO) << "sync succeeded after " << failedBefore_ << " failed attempts: " << r.stats.ops << " operations in "
                << ms << " ms";
    programmed_ = true;
    failedBefore_ = 0;
  }

 private:
  static std::string millis(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", ms);
    return buf;
  }

  const state::ClusterState& state_;
  bool programmed_ = false;
  int failedBefore_ = 0;  // failures in a row before this report, as the loop counts them
};

}  // namespace kpn::sync
