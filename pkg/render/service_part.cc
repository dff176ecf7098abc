// The service renderer's frame: which destinations this service holds in this family, which
// endpoint sets its paths use (and their sticky slot orders); the paths do the rest.
#include "pkg/render/service_part.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "pkg/render/affinity.h"
#include "pkg/render/comments.h"
#include "pkg/render/layout.h"
#include "pkg/render/service_paths.h"
#include "pkg/services/family.h"
#include "pkg/state/cluster_state.h"

namespace kpn::render {

using namespace kpn::nft;

std::string orderOwner(Family f, bool local, const std::string& proto, const std::string& portKey) {
  return std::string(familyName(f)) + (local ? " local/" : " all/") + proto + "/" + portKey;
}

uint32_t affinitySeconds(const api::Service& svc) {
  if (svc.sessionAffinity != "ClientIP") return 0;
  const int32_t t = svc.sessionAffinityTimeoutSeconds;
  return t <= 0 ? 10800u : static_cast<uint32_t>(std::min(t, 86400));
}

namespace {

bool inFamily(const std::string& ip, Family family) {
  auto f = net::familyOf(ip);
  return f && toNftFamily(*f) == family;
}

std::vector<std::string> valuesOf(const std::vector<services::EndpointChoice>& eps) {
  std::vector<std::string> out;
  out.reserve(eps.size());
  for (const auto& ep : eps) out.push_back(ex::concat({ex::addr(ep.ip), ex::number(ep.port)}).json);
  return out;
}

}  // namespace

ServicePart renderServicePart(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                              const services::NodeConfig& cfg, Family family, BackendOrders& orders,
                              const services::FamilyEnvironment& env, const services::DestinationClaims* claims,
                              const LeastConnChoices* choices) {
  ServicePart out;
  ServiceContext s{svc, cfg, family, env, state::serviceKey(svc.meta.ns, svc.meta.name), "", false, false, {}, {}, false, {}};
  for (const auto& ip : svc.clusterIPs)
    if (inFamily(ip, family)) {
      s.clusterIP = ip;
      break;
    }
  if (s.clusterIP.empty()) return out;  // as upstream: a family without a ClusterIP has no service
  s.externalLocal = svc.externalTrafficPolicy == "Local";
  s.internalLocal = svc.internalTrafficPolicy == "Local";
  for (const auto& ip : services::loadBalancerVIPs(svc))
    if (inFamily(ip, family)) s.externalAddrs.emplace_back(ip, true);
  for (const auto& ip : svc.externalIPs)
    if (inFamily(ip, family)) s.externalAddrs.emplace_back(ip, false);
  for (const auto& text : svc.loadBalancerSourceRanges) {
    auto c = net::parseCidr(text);
    if (c && toNftFamily(c->family) == family) s.sourceRanges.push_back(*c);
  }
  // An unreadable range closes the firewall to every source (no return rule at all), rather
  // than leaving the service open to all, or to more than its owner listed.
  if (svc.sourceRangeUnreadable) s.sourceRanges.clear();
  s.firewalled = !s.sourceRanges.empty() || svc.sourceRangeUnreadable;
  if (s.firewalled) s.firewallAllowed = firewallAllowedSources(s);

  auto owns = [&](const std::string& dest) { return !claims || claims->owns(s.key, dest); };
  auto lost = [&](const std::string& what, const std::string& dest) {
    LOG(WARNING) << "Service " << s.key << ": " << what << " is already used by Service " << claims->owner(dest)
                 << " (the older one keeps it); not programmed for this service";
  };
  // A nodePort is one claim for both families: say so once, in the service's first family.
  const bool firstFamily = inFamily(svc.clusterIPs.front(), family);

  PartBuilder b;
  b.family = family;
  std::string schedulerWarning;
  const services::Scheduler scheduler = services::serviceScheduler(svc, cfg.scheduler, &schedulerWarning);
  if (!schedulerWarning.empty() && firstFamily) LOG(WARNING) << "Service " << s.key << ": " << schedulerWarning;
  b.part.elements.push_back(setElement(kClusterIPs, ex::addr(s.clusterIP), serviceComment(svc)));
  std::set<std::string> seen;
  for (const api::ServicePort& sp : svc.ports) {
    const char* proto = api::protocolName(sp.protocol);
    const std::string clusterDest = services::ipDestination(s.clusterIP, sp.protocol, sp.port);
    if (!seen.insert(clusterDest).second) continue;  // a duplicate port: the API would have refused it
    PortPlan p{sp, servicePortComment(svc, sp),
               services::categorizeEndpoints(sp, slices, services::familyWord(family), cfg.nodeName, env.zone)};
    p.affinitySeconds = affinitySeconds(svc);
    p.scheduler = scheduler;
    p.chainKey = s.key + "/" + proto + "/" + portKey(sp);
    p.affinityScope = affinityScope(s.clusterIP);
    p.ownsClusterIP = owns(clusterDest);
    if (!p.ownsClusterIP) lost("ClusterIP port " + std::string(proto) + "/" + std::to_string(sp.port), clusterDest);
    for (const auto& [ip, isVIP] : s.externalAddrs) {
      std::string dest = services::ipDestination(ip, sp.protocol, sp.port);
      if (!seen.insert(dest).second) continue;
      if (owns(dest)) p.externalAddrs.emplace_back(ip, isVIP);
      else
        lost(std::string(isVIP ? "LoadBalancer IP " : "external IP ") + ip + " port " + proto + "/" +
                 std::to_string(sp.port),
             dest);
    }
    if (sp.nodePort > 0 && seen.insert(services::nodePortDestination(sp.protocol, sp.nodePort)).second) {
      std::string dest = services::nodePortDestination(sp.protocol, sp.nodePort);
      if (owns(dest)) p.nodePort = sp.nodePort;
      else if (firstFamily) lost(std::string("nodePort ") + proto + "/" + std::to_string(sp.nodePort), dest);
    }

    // Which endpoint sets some path uses, and where a restart may find their listed slots.
    const bool usesAll = !p.eps.cluster.empty() && ((!s.internalLocal && p.ownsClusterIP) || p.external());
    const bool usesLocal = !p.eps.local.empty() && ((s.internalLocal && p.ownsClusterIP) || (s.externalLocal && p.external()));
    std::vector<std::string> allFrom, localFrom;
    const auto clusterSlots = addressSlotPrefix(s.clusterIP, sp.port);
    (s.internalLocal ? localFrom : allFrom).push_back(destinationId(family, KeySpace::Address, sp.protocol, clusterSlots));
    for (const auto& [ip, isVIP] : p.externalAddrs) {
      allFrom.push_back(destinationId(family, KeySpace::Address, sp.protocol, addressSlotPrefix(ip, sp.port)));
      localFrom.push_back(destinationId(family, KeySpace::LocalAddress, sp.protocol, addressSlotPrefix(ip, sp.port)));
    }
    if (p.nodePort) {
      allFrom.push_back(destinationId(family, KeySpace::NodePort, sp.protocol, nodePortSlotPrefix(*p.nodePort)));
      localFrom.push_back(destinationId(family, KeySpace::LocalNodePort, sp.protocol, nodePortSlotPrefix(*p.nodePort)));
    }
    // Source hash keeps a lookup table per endpoint set, beside its order (source_hash_table.h).
    const bool hashed = scheduler == services::Scheduler::SourceHash && !p.affinitySeconds;
    auto placeTable = [&](const std::string& owner, const std::vector<services::EndpointChoice>& eps,
                          const std::vector<std::string>& from) -> const HashTable* {
      if (!hashed || eps.size() < 2) return nullptr;
      out.orderOwners.push_back(BackendOrders::tableOwner(owner));
      return &orders.placeTable(s.key, owner, valuesOf(eps), from);
    };
    // Least connection: the sets' choices, and what the counter needs to know of the port.
    p.leastConn = scheduler == services::Scheduler::LeastConnection && !p.affinitySeconds;
    services::LeastConnPort lc;
    // Before the first choice after a restart, the slots the kernel holds are the choice.
    auto chooses = [&](const std::string& owner, const EndpointOrder& order,
                       const std::vector<std::string>& from) -> const std::vector<std::string>* {
      if (!p.leastConn || order.size() < 2) return nullptr;
      lc.sets.push_back({owner, order});
      const std::vector<std::string>* chosen = choices ? choices->find(s.key, owner) : nullptr;
      if (chosen) return chosen;
      chosen = orders.adoptedSlots(from);
      if (chosen) out.adoptedChoices.emplace_back(owner, *chosen);
      return chosen;
    };
    if (usesAll) {
      std::string owner = orderOwner(family, false, proto, portKey(sp));
      p.all = orders.place(s.key, owner, valuesOf(p.eps.cluster), allFrom);
      p.allTable = placeTable(owner, p.eps.cluster, allFrom);
      p.allChosen = chooses(owner, *p.all, allFrom);
      out.orderOwners.push_back(owner);
      addHairpins(b, p.eps.cluster);
    }
    if (usesLocal) {
      std::string owner = orderOwner(family, true, proto, portKey(sp));
      p.local = orders.place(s.key, owner, valuesOf(p.eps.local), localFrom);
      p.localTable = placeTable(owner, p.eps.local, localFrom);
      p.localChosen = chooses(owner, *p.local, localFrom);
      out.orderOwners.push_back(owner);
      addHairpins(b, p.eps.local);
    }
    if (!lc.sets.empty()) {
      lc.serviceKey = s.key, lc.portName = portKey(sp), lc.family = family, lc.protocol = sp.protocol;
      lc.port = sp.port, lc.nodePort = p.nodePort;
      if (p.ownsClusterIP) lc.frontendIps.push_back(s.clusterIP);
      for (const auto& [ip, isVIP] : p.externalAddrs) lc.frontendIps.push_back(ip);
      std::set<std::string> known;
      for (const auto* eps : {&p.eps.cluster, &p.eps.local})
        for (const services::EndpointChoice& ep : *eps) {
          std::string value = ex::concat({ex::addr(ep.ip), ex::number(ep.port)}).json;
          if (known.insert(value).second) lc.endpoints.push_back({ep.ip, ep.port, value});
        }
      out.leastConn.push_back(std::move(lc));
    }

    addClusterIPPath(b, s, p);
    addExternalPaths(b, s, p);
    addFirewallElements(b, s, p);
  }
  nft::shrinkToFit(b.part);
  out.part = std::make_shared<Part>(std::move(b.part));
  out.picks.assign(b.picks.begin(), b.picks.end());
  return out;
}

}  // namespace kpn::render
