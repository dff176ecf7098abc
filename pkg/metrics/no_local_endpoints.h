// kubeproxy_sync_proxy_rules_no_local_endpoints_total, as upstream counts it per IP family: service
// ports whose traffic policy is Local (internal: internalTrafficPolicy; external: an externally
// reachable service with externalTrafficPolicy Local) that have endpoints, none of them on this
// node, so that traffic under that policy is dropped here. Kept per service and updated from the
// services each sync changed, so a sync pays for its own changes.
#pragma once

#include <map>
#include <set>
#include <string>

#include "pkg/metrics/proxy_metrics.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::metrics {

// One service's contribution (also the definition the index sums).
NoLocalEndpoints noLocalEndpointsOf(const state::ClusterState& st, const services::NodeConfig& cfg,
                                    const std::string& key);

class NoLocalEndpointsIndex {
 public:
  // changed: service keys to look at again; nullptr: every service.
  void update(const state::ClusterState& st, const services::NodeConfig& cfg, const std::set<std::string>* changed);
  const NoLocalEndpoints& totals() const { return totals_; }

 private:
  void add(const NoLocalEndpoints& n, int sign);
  std::map<std::string, NoLocalEndpoints> byService_;  // non-zero entries only
  NoLocalEndpoints totals_;
};

}  // namespace kpn::metrics
