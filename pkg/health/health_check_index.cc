#include "pkg/health/health_check_index.h"

#include <glog/logging.h>

#include <optional>

#include "pkg/net/ip.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/family.h"
#include "pkg/services/proxied.h"

namespace kpn::health {
namespace {

std::string portDestination(int32_t port) { return "healthcheck " + std::to_string(port); }

// Upstream's rule for the health check: a load balancer sends traffic only to nodes with a ready
// endpoint here, so terminating ones do not count, serving or not.
bool countsForHealthCheck(const api::Endpoint& ep, const std::string& nodeName) {
  return ep.nodeName == nodeName && ep.conditions.isReady();
}

// The service's health-check entry, or nullopt when it has none.
std::optional<HealthCheckService> entryOf(const state::ClusterState& st, const services::NodeConfig& cfg, const std::string& key,
                                          const api::Service& svc) {
  if (svc.type != "LoadBalancer" || svc.externalTrafficPolicy != "Local" || svc.healthCheckNodePort <= 0)
    return std::nullopt;
  if (!services::serviceIsProxied(svc, cfg)) return std::nullopt;
  // Count each pod once: the endpoints of the service's primary family, of any of its ports.
  auto fam = net::familyOf(svc.clusterIPs.front());
  const char* addressType = services::familyWord(fam.value_or(net::Family::V4));
  std::set<std::string> local;
  if (!cfg.nodeName.empty()) {
    const std::vector<const api::EndpointSlice*> slices = services::slicesOf(st, key);
    for (const auto& sp : svc.ports)
      services::forEachEndpointOfPort(sp, slices, addressType, [&](const api::Endpoint& ep, int32_t) {
        if (countsForHealthCheck(ep, cfg.nodeName)) local.insert(ep.address);
      });
  }
  return HealthCheckService{svc.meta.ns, svc.meta.name, static_cast<int>(local.size())};
}

}  // namespace

void HealthCheckIndex::refresh(const state::ClusterState& st, const services::NodeConfig& cfg, const std::string& key,
                               std::set<int32_t>& touched) {
  auto it = st.services.find(key);
  std::optional<HealthCheckService> entry;
  if (it != st.services.end()) entry = entryOf(st, cfg, key, *it->second);
  auto old = byService_.find(key);
  if (old != byService_.end()) {
    touched.insert(old->second.port);
    byService_.erase(old);
  }
  if (!entry) {
    claims_.update(key, std::string(), {}, nullptr);
    return;
  }
  const api::Service& svc = *it->second;
  int32_t port = svc.healthCheckNodePort;
  touched.insert(port);
  byService_.emplace(key, Entry{port, std::move(*entry)});
  claims_.update(key, services::claimRank(svc), {portDestination(port)}, nullptr);
  std::string owner = claims_.owner(portDestination(port));
  if (owner != key) LOG(WARNING) << "healthCheckNodePort " << port << ": Service " << key << " loses it to the older " << owner;
}

bool HealthCheckIndex::update(const state::ClusterState& st, const services::NodeConfig& cfg, const std::set<std::string>* changed) {
  std::set<int32_t> touched;
  if (!changed) {
    for (const auto& [port, hc] : ports_) touched.insert(port);
    byService_.clear();
    claims_.clear();
    for (const auto& [key, svc] : st.services) refresh(st, cfg, key, touched);
  } else {
    for (const std::string& key : *changed) refresh(st, cfg, key, touched);
  }
  bool differs = false;
  for (int32_t port : touched) {
    std::string owner = claims_.owner(portDestination(port));
    auto want = byService_.find(owner);
    auto have = ports_.find(port);
    if (want == byService_.end()) {
      if (have != ports_.end()) {
        ports_.erase(have);
        differs = true;
      }
    } else if (have == ports_.end() || !(have->second == want->second.service)) {
      ports_[port] = want->second.service;
      differs = true;
    }
  }
  return differs;
}

std::map<int32_t, HealthCheckService> healthCheckNodePorts(const state::ClusterState& st, const services::NodeConfig& cfg) {
  HealthCheckIndex index;
  index.update(st, cfg, nullptr);
  return index.ports();
}

}  // namespace kpn::health
