#include "pkg/trace/known_state.h"

#include <memory>

#include "pkg/config/decode.h"
#include "pkg/config/node_config.h"
#include "pkg/services/endpoints.h"

namespace kpn::trace {

std::vector<const api::EndpointSlice*> KnownState::slicesOf(const std::string& key) const {
  return services::slicesOf(state, key);
}

const api::Service* KnownState::service(const std::string& key) const {
  auto it = state.services.find(key);
  return it == state.services.end() ? nullptr : it->second.get();
}

void fillState(state::ClusterState& st, api::DecodedObjects objects) {
  for (auto& s : objects.services) st.upsertService(std::make_shared<const api::Service>(std::move(s)));
  for (auto& s : objects.slices)
    if (!s.serviceName.empty()) st.upsertSlice(std::make_shared<const api::EndpointSlice>(std::move(s)));
  for (auto& n : objects.nodes) st.setNode(std::make_shared<const api::Node>(std::move(n)));
  for (auto& c : objects.serviceCIDRs) st.upsertServiceCIDR(std::make_shared<const api::ServiceCIDR>(std::move(c)));
}

std::optional<KnownState> knownFromDaemon(diag::StateAnswer answer, std::string* error) {
  KnownState k;
  k.origin = "daemon";
  config::ProxyConfig pc;
  if (auto err = config::decodeProxyConfig(answer.configYaml, pc)) {
    *error = "the daemon's configuration does not decode: " + *err;
    return std::nullopt;
  }
  std::vector<std::string> warnings;
  if (auto err = config::toNodeConfig(pc, k.cfg, &warnings)) {
    *error = "the daemon's configuration: " + *err;
    return std::nullopt;
  }
  k.cfg.nodeName = answer.nodeName;
  fillState(k.state, std::move(answer.objects));
  k.servicesKnown = answer.status.servicesKnown;
  k.daemon = std::move(answer.status);
  k.excluded = std::move(answer.excluded);
  return k;
}

const api::Service* serviceAt(const KnownState& k, const std::string& ip, uint16_t port, const std::string& proto,
                              bool nodePortAddress, bool* ipOnly) {
  *ipOnly = false;
  const api::Service* byIp = nullptr;
  for (const auto& [key, svc] : k.state.services) {
    bool hasIp = false;
    for (const auto& a : svc->clusterIPs) hasIp = hasIp || a == ip;
    for (const auto& a : svc->externalIPs) hasIp = hasIp || a == ip;
    for (const auto& in : svc->loadBalancerIngress) hasIp = hasIp || in.ip == ip;
    if (!hasIp) continue;
    for (const auto& p : svc->ports)
      if (p.port == port && proto == api::protocolName(p.protocol)) return svc.get();
    if (!byIp) byIp = svc.get();
  }
  if (byIp) {
    *ipOnly = true;
    return byIp;
  }
  if (!nodePortAddress) return nullptr;
  for (const auto& [key, svc] : k.state.services)
    for (const auto& p : svc->ports)
      if (p.nodePort == port && proto == api::protocolName(p.protocol)) return svc.get();
  return nullptr;
}

}  // namespace kpn::trace
