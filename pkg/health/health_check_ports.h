// Keeps the health-check node port servers in step with the ruleset just committed: which
// services have a port and how many local ready endpoints each has (healthCheckNodePorts, health_check_index.h),
// and which addresses the ports listen on (the NodePort addresses of the render environment:
// `primary` -> the node's primary IPs; a /0 in --nodeport-addresses, or no node address known
// yet -> every address of both families). A change of addresses re-opens every port on the new
// ones; a change of services or counts touches only those ports.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "pkg/health/health_check_index.h"
#include "pkg/health/service_health.h"
#include "pkg/services/environment.h"

namespace kpn::health {

// The addresses health-check ports listen on for this environment; empty = every address.
std::vector<std::string> healthCheckBindAddresses(const services::Environment& env);

class HealthCheckPorts {
 public:
  explicit HealthCheckPorts(http::Loop& loop, BindFailureHook onBindFailure = nullptr)
      : loop_(loop), onBindFailure_(std::move(onBindFailure)) {}

  // After a successful sync: `changed` are the service keys it synced (Syncer::lastChanges(),
  // nullptr: look at every service). Touches the servers only when ports, services, counts or
  // addresses changed.
  void update(const state::ClusterState& st, const services::NodeConfig& cfg, const std::set<std::string>* changed,
              const services::Environment& env);
  void setProxyHealth(ProxyVerdict v);

 private:
  http::Loop& loop_;
  BindFailureHook onBindFailure_;
  health::HealthCheckIndex index_;
  std::vector<std::string> addresses_;
  ProxyVerdict proxy_;
  std::unique_ptr<ServiceHealthServers> servers_;  // null until a service needs a port
};

}  // namespace kpn::health
