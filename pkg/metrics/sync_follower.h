// Follows the sync loop for the metrics that come from the cluster state (read on the loop's
// thread, where the state lives): change counts on every step, no-local-endpoints after each
// successful sync, from the services it changed.
#pragma once

#include "pkg/metrics/no_local_endpoints.h"
#include "pkg/metrics/proxy_metrics.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"

namespace kpn::metrics {

class StateMetricsFollower : public sync::SyncObserver {
 public:
  StateMetricsFollower(const state::ClusterState& state, const services::NodeConfig& cfg, ProxyMetrics& metrics)
      : state_(state), cfg_(cfg), metrics_(metrics) {}

  void synced(const sync::SyncReport& r) override {
    if (!r.stats.ok) return;
    noLocal_.update(state_, cfg_, r.changed);
    metrics_.setNoLocalEndpoints(noLocal_.totals());
  }
  void tick(sync::SteadyTime) override {
    const auto& c = state_.changeCounts;
    metrics_.setChangeCounts({c.pendingEndpoints.size(), c.pendingServices.size(), c.endpointChanges, c.serviceChanges});
  }

 private:
  const state::ClusterState& state_;
  const services::NodeConfig& cfg_;
  ProxyMetrics& metrics_;
  NoLocalEndpointsIndex noLocal_;
};

}  // namespace kpn::metrics
