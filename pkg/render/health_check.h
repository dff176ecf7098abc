// What the health-check node port servers (pkg/health) serve: for every LoadBalancer Service
// with externalTrafficPolicy Local and a healthCheckNodePort, the port, the service, and how many
// of its endpoints on this node are ready. A load balancer sends traffic only to nodes that
// answer 200 (localEndpoints > 0), so terminating pods are not counted (upstream's rule).
// Pure: computed from the cluster state after each sync and handed to the servers.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pkg/render/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::render {

struct HealthCheckService {
  std::string ns, name;
  int localEndpoints = 0;  // distinct ready endpoints on this node serving a port of the service
  bool operator==(const HealthCheckService& o) const {
    return ns == o.ns && name == o.name && localEndpoints == o.localEndpoints;
  }
};

// By healthCheckNodePort. Two services with one port: the older keeps it (as for nodePorts).
// cfg: nodeName (local endpoints) and serviceProxyName (which services are ours).
std::map<int32_t, HealthCheckService> healthCheckNodePorts(const state::ClusterState& st, const NodeConfig& cfg);

}  // namespace kpn::render
