// Runs the UDP conntrack reconcile off the sync thread. The sync loop hands it a snapshot after
// each successful sync; a newer snapshot replaces one that has not started (so a burst of syncs
// costs one pass, and a slow pass never queues work), and a sync never waits for a pass
// (kubernetes issue 135323: upstream's reconciler ran inside the sync and blocked it under high
// DNS QPS). After a pass it rests as long as the pass took, so however often syncs come it uses
// at most half of a core. Both families, IPv4 then IPv6, each with its own frontends. Destroying
// it cancels a running pass at its next entry. It also runs the sweep of entries a rules rebuild
// left without DNAT (gap_flows.h), before the UDP pass when both wait.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "pkg/conntrack/gap_flows.h"
#include "pkg/conntrack/reconcile.h"
#include "pkg/conntrack/udp_services.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"

namespace kpn::conntrack {

class CleanupWorker {
 public:
  using TableFactory = std::function<std::unique_ptr<FlowTable>(std::string* error)>;
  // After each family's pass that ran a dump: its family word (services::familyWord) and what it did (metrics, tests).
  using Reporter = std::function<void(const char* family, const FamilyResult&)>;

  CleanupWorker(TableFactory open, Reporter report);
  ~CleanupWorker();
  CleanupWorker(const CleanupWorker&) = delete;
  CleanupWorker& operator=(const CleanupWorker&) = delete;

  // Replaces a snapshot that has not started.
  void submit(UdpSnapshot snapshot);
  // The same for the sweep after a rules rebuild.
  void submitGapSweep(GapSnapshot sweep);
  // Tests: blocks until nothing is pending or running.
  void waitIdle();
  size_t passes() const;  // passes run, both families each

 private:
  void loop();
  void runPass(const UdpServices& services);
  void runGapSweep(const GapSweep& sweep);
  bool ensureTable();

  TableFactory open_;
  Reporter report_;
  std::unique_ptr<FlowTable> table_;  // worker thread only; reopened after a failure
  std::string lastOpenError_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  UdpSnapshot pending_;
  GapSnapshot pendingGap_;
  bool running_ = false, stopping_ = false;
  std::atomic<bool> cancel_{false};
  std::chrono::steady_clock::time_point restUntil_{};
  size_t passes_ = 0;
  std::thread thread_;  // last: starts after the members it uses exist
};

// The sync loop's side: after each successful sync, bring the UDP service index up to date from
// the services the sync covered and hand the worker its snapshot; after a sync that rebuilt rules
// (not the incremental path, and the kernel lacked something), the gap sweep too.
class CleanupFollower : public sync::SyncObserver {
 public:
  CleanupFollower(const state::ClusterState& state, const services::NodeConfig& cfg, CleanupWorker& worker)
      : state_(state), cfg_(cfg), worker_(worker) {}
  void synced(const sync::SyncReport& r) override {
    if (!r.stats.ok) return;
    if (r.stats.plan != sync::SyncStats::Plan::Incremental && r.stats.ops > 0)
      worker_.submitGapSweep(makeGapSweep(state_, cfg_));
    index_.update(state_, cfg_, r.changed);
    worker_.submit(index_.snapshot());
  }

 private:
  const state::ClusterState& state_;
  const services::NodeConfig& cfg_;
  CleanupWorker& worker_;
  UdpServiceIndex index_;
};

}  // namespace kpn::conntrack
