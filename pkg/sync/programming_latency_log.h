// Logs network programming latency at -v=2: from the change that triggered an endpoint update
// (the EndpointSlice's last-change-trigger-time) to its rules being committed.
#pragma once

#include <glog/logging.h>

#include <algorithm>

#include "pkg/sync/loop.h"

namespace kpn::sync {

class ProgrammingLatencyLog : public SyncObserver {
 public:
  void synced(const SyncReport& r) override {
    if (r.triggerTimes.empty() || !VLOG_IS_ON(2)) return;
    double maxMs = 0;
    for (const auto& [svc, t] : r.triggerTimes)
      maxMs = std::max(maxMs, std::chrono::duration<double, std::milli>(r.finished - t).count());
    VLOG(2) << "network programming: " << r.triggerTimes.size() << " services, max latency " << maxMs
            << " ms since trigger";
  }
};

}  // namespace kpn::sync
