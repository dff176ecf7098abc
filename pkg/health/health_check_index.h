// What the health-check node port servers (pkg/health) serve: for every LoadBalancer Service
// with externalTrafficPolicy Local and a healthCheckNodePort, the port, the service, and how many
// of its endpoints on this node are ready. A load balancer sends traffic only to nodes that
// answer 200 (localEndpoints > 0), so terminating pods are not counted (upstream's rule).
// Kept up to date after each sync from the services that sync changed, so a sync pays for its
// own changes, not for every Service of the cluster.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "pkg/services/claims.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::health {

struct HealthCheckService {
  std::string ns, name;
  int localEndpoints = 0;  // distinct ready endpoints on this node serving a port of the service
  bool operator==(const HealthCheckService& o) const {
    return ns == o.ns && name == o.name && localEndpoints == o.localEndpoints;
  }
};

// By healthCheckNodePort. Two services with one port: the older keeps it, as for nodePorts (the
// same DestinationClaims decide).
class HealthCheckIndex {
 public:
  // Looks again at the services in `changed` (service keys; nullptr: at every service). Returns
  // whether ports() changed. cfg: nodeName (local endpoints).
  bool update(const state::ClusterState& st, const services::NodeConfig& cfg, const std::set<std::string>* changed);
  const std::map<int32_t, HealthCheckService>& ports() const { return ports_; }

 private:
  // Re-reads one service; returns the ports whose owner or count may have changed.
  void refresh(const state::ClusterState& st, const services::NodeConfig& cfg, const std::string& key, std::set<int32_t>& touched);

  struct Entry {
    int32_t port;
    HealthCheckService service;
  };
  std::map<std::string, Entry> byService_;  // services that have a health-check port
  services::DestinationClaims claims_;
  std::map<int32_t, HealthCheckService> ports_;
};

// From scratch (tests, and the definition the index must agree with).
std::map<int32_t, HealthCheckService> healthCheckNodePorts(const state::ClusterState& st, const services::NodeConfig& cfg);

}  // namespace kpn::health
