#include "pkg/render/health_check.h"

#include <glog/logging.h>

#include <set>

#include "pkg/net/ip.h"
#include "pkg/render/claims.h"
#include "pkg/render/render.h"

namespace kpn::render {

std::map<int32_t, HealthCheckService> healthCheckNodePorts(const state::ClusterState& st, const NodeConfig& cfg) {
  std::map<int32_t, std::pair<std::string, HealthCheckService>> byPort;  // port -> (rank, service)
  for (const auto& [key, svc] : st.services) {
    if (svc->type != "LoadBalancer" || svc->externalTrafficPolicy != "Local" || svc->healthCheckNodePort <= 0) continue;
    if (!serviceIsProxied(*svc, cfg)) continue;
    // Count each pod once: the endpoints of the service's primary family.
    auto fam = net::familyOf(svc->clusterIPs.front());
    const char* addressType = fam == net::Family::V6 ? "IPv6" : "IPv4";
    std::set<std::string> local;
    auto slices = st.slicesByService.find(key);
    if (slices != st.slicesByService.end() && !cfg.nodeName.empty()) {
      for (const auto& [name, slice] : slices->second) {
        if (slice->addressType != addressType) continue;
        bool servesAPort = false;
        for (const auto& sp : svc->ports)
          for (const auto& p : slice->ports) servesAPort = servesAPort || (p.name == sp.name && p.protocol == sp.protocol && p.port);
        if (!servesAPort) continue;
        for (const auto& ep : slice->endpoints)
          if (!ep.addresses.empty() && ep.nodeName == cfg.nodeName && ep.conditions.isReady())
            local.insert(ep.addresses.front());
      }
    }
    HealthCheckService hc{svc->meta.ns, svc->meta.name, static_cast<int>(local.size())};
    std::string rank = claimRank(*svc);
    auto [it, inserted] = byPort.emplace(svc->healthCheckNodePort, std::make_pair(rank, hc));
    if (!inserted) {
      bool older = rank < it->second.first;
      const auto& loser = older ? it->second.second : hc;
      LOG_EVERY_N(WARNING, 100) << "healthCheckNodePort " << svc->healthCheckNodePort << ": Service " << loser.ns << "/"
                                << loser.name << " loses it to an older service";
      if (older) it->second = {rank, hc};
    }
  }
  std::map<int32_t, HealthCheckService> out;
  for (auto& [port, v] : byPort) out.emplace(port, std::move(v.second));
  return out;
}

}  // namespace kpn::render
