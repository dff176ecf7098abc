// Follows the sync loop for the health side: after each successful sync the health-check node
// ports answer as of the ruleset just committed; on every step they and /healthz learn whether
// the proxy is healthy and whether the Node is still eligible (the Node arrives through the
// source, on the loop's thread, so it is read here and not by the HTTP thread).
#pragma once

#include "pkg/health/health_check_ports.h"
#include "pkg/health/proxy_health.h"
#include "pkg/services/environment.h"
#include "pkg/state/cluster_state.h"
#include "pkg/sync/loop.h"

namespace kpn::health {

class SyncFollower : public sync::SyncObserver {
 public:
  SyncFollower(const state::ClusterState& state, const services::NodeConfig& cfg,
               const services::Environment& environment, HealthCheckPorts& ports, ProxyHealth& proxy)
      : state_(state), cfg_(cfg), environment_(environment), ports_(ports), proxy_(proxy) {}

  void synced(const sync::SyncReport& r) override {
    if (r.stats.ok) ports_.update(state_, cfg_, r.changed, environment_);
  }
  void tick(sync::SteadyTime) override {
    ProxyHealthStatus s = proxy_.status();
    ports_.setProxyHealth({s.healthy, std::move(s.reason)});
    proxy_.setNodeEligible(nodeEligible(state_.node.get()));
  }

 private:
  const state::ClusterState& state_;
  const services::NodeConfig& cfg_;
  const services::Environment& environment_;  // the renderer's, as of its last render
  HealthCheckPorts& ports_;
  ProxyHealth& proxy_;
};

}  // namespace kpn::health
