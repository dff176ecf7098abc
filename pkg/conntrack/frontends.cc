#include "pkg/conntrack/frontends.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "pkg/services/claims.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/family.h"

namespace kpn::conntrack {

namespace {

// Upstream's IsServing: the serving condition (a missing one counts as true); a ready endpoint
// counts too, whatever it says, since the rules send traffic to it. A flow answered by anything
// else is stale.
bool isConntrackTarget(const api::EndpointConditions& c) { return c.isServing() || c.isReady(); }

}  // namespace

EndpointIps servingEndpoints(const api::ServicePort& sp, const std::vector<state::SlicePtr>& slices, uint8_t family) {
  EndpointIps out;
  services::forEachEndpointOfPort(sp, slices, services::familyWordOfAf(family), [&](const api::Endpoint& ep, int32_t) {
    if (!isConntrackTarget(ep.conditions)) return;
    uint8_t f = 0;
    auto ip = parseIp(ep.address, &f);
    if (ip && f == family) out.push_back(*ip);
  });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<Ip> frontendIps(const api::Service& svc, uint8_t family) {
  std::vector<Ip> addrs;
  bool hasClusterIP = false;
  auto add = [&](const std::string& text, bool cluster) {
    uint8_t f = 0;
    auto ip = parseIp(text, &f);
    if (!ip || f != family) return;
    addrs.push_back(*ip);
    hasClusterIP |= cluster;
  };
  for (const auto& ip : svc.clusterIPs) add(ip, true);
  if (!hasClusterIP) return {};
  for (const auto& ip : services::loadBalancerVIPs(svc)) add(ip, false);
  for (const auto& ip : svc.externalIPs) add(ip, false);
  return addrs;
}

Frontends Frontends::build(const UdpServices& services, uint8_t family) {
  Frontends fe;
  auto claim = [](auto& map, const auto& key, const std::string& rank, const EndpointIps* eps) {
    auto [it, fresh] = map.try_emplace(key, Claim{rank, eps});
    if (!fresh && rank < it->second.rank) it->second = Claim{rank, eps};
  };
  for (const auto& [key, entry] : services) {
    const api::Service& svc = *entry.service;
    const std::vector<Ip> addrs = frontendIps(svc, family);
    if (addrs.empty()) continue;
    const std::string rank = services::claimRank(svc);
    for (const auto& sp : svc.ports) {
      if (sp.protocol != api::Protocol::UDP || sp.port <= 0 || sp.port > 65535) continue;
      EndpointIps eps = servingEndpoints(sp, entry.slices, family);
      if (eps.empty()) continue;
      fe.storage_.push_back(std::make_unique<EndpointIps>(std::move(eps)));
      const EndpointIps* held = fe.storage_.back().get();
      for (const Ip& ip : addrs) claim(fe.byIpPort_, IpPort{ip, static_cast<uint16_t>(sp.port)}, rank, held);
      if (sp.nodePort > 0 && sp.nodePort <= 65535) claim(fe.byNodePort_, static_cast<uint16_t>(sp.nodePort), rank, held);
    }
  }
  return fe;
}

bool Frontends::isStale(const Flow& f) const {
  if (f.proto != IPPROTO_UDP) return false;
  auto serves = [&](const EndpointIps& eps) { return std::binary_search(eps.begin(), eps.end(), f.replySrc); };
  if (auto it = byIpPort_.find(IpPort{f.origDst, f.origDport}); it != byIpPort_.end() && !serves(*it->second.endpoints))
    return true;
  // Upstream matches a NodePort on any destination address (*:NodePort).
  if (auto it = byNodePort_.find(f.origDport); it != byNodePort_.end() && !serves(*it->second.endpoints)) return true;
  return false;
}

}  // namespace kpn::conntrack
