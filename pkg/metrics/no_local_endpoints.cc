#include "pkg/metrics/no_local_endpoints.h"

#include "pkg/net/ip.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/family.h"
#include "pkg/services/proxied.h"

namespace kpn::metrics {

namespace {
bool externallyReachable(const api::Service& svc) {
  if (!svc.externalIPs.empty()) return true;
  for (const auto& ing : svc.loadBalancerIngress)
    if (!ing.ip.empty()) return true;
  for (const auto& p : svc.ports)
    if (p.nodePort > 0 && (svc.type == "NodePort" || svc.type == "LoadBalancer")) return true;
  return false;
}
bool isZero(const NoLocalEndpoints& n) { return !n.internalV4 && !n.internalV6 && !n.externalV4 && !n.externalV6; }
}  // namespace

NoLocalEndpoints noLocalEndpointsOf(const state::ClusterState& st, const services::NodeConfig& cfg,
                                    const std::string& key) {
  NoLocalEndpoints n;
  auto it = st.services.find(key);
  if (it == st.services.end()) return n;
  const api::Service& svc = *it->second;
  if (svc.type == "ExternalName" || svc.headless || svc.clusterIPs.empty() || !services::serviceIsProxied(svc, cfg))
    return n;
  const bool internalLocal = svc.internalTrafficPolicy == "Local";
  const bool externalLocal = svc.externalTrafficPolicy == "Local" && externallyReachable(svc);
  if (!internalLocal && !externalLocal) return n;
  const std::vector<const api::EndpointSlice*> slices = services::slicesOf(st, key);
  for (const std::string& ip : svc.clusterIPs) {
    auto fam = net::familyOf(ip);
    if (!fam) continue;
    const bool v6 = *fam == net::Family::V6;
    for (const auto& port : svc.ports) {
      auto sets = services::categorizeEndpoints(port, slices, services::familyWord(*fam), cfg.nodeName);
      if (sets.cluster.empty() || !sets.local.empty()) continue;
      if (internalLocal) ++(v6 ? n.internalV6 : n.internalV4);
      if (externalLocal) ++(v6 ? n.externalV6 : n.externalV4);
    }
  }
  return n;
}

void NoLocalEndpointsIndex::add(const NoLocalEndpoints& n, int sign) {
  totals_.internalV4 += sign * static_cast<long>(n.internalV4);
  totals_.internalV6 += sign * static_cast<long>(n.internalV6);
  totals_.externalV4 += sign * static_cast<long>(n.externalV4);
  totals_.externalV6 += sign * static_cast<long>(n.externalV6);
}

void NoLocalEndpointsIndex::update(const state::ClusterState& st, const services::NodeConfig& cfg,
                                   const std::set<std::string>* changed) {
  auto refresh = [&](const std::string& key) {
    if (auto old = byService_.find(key); old != byService_.end()) {
      add(old->second, -1);
      byService_.erase(old);
    }
    NoLocalEndpoints n = noLocalEndpointsOf(st, cfg, key);
    if (isZero(n)) return;
    add(n, +1);
    byService_.emplace(key, n);
  };
  if (changed) {
    for (const auto& key : *changed) refresh(key);
    return;
  }
  byService_.clear();
  totals_ = {};
  for (const auto& [key, svc] : st.services) refresh(key);
}

}  // namespace kpn::metrics
