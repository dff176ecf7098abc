#include "pkg/render/localhost_nodeports.h"

#include "pkg/render/layout.h"
#include "pkg/render/service_part.h"
#include "pkg/services/claims.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/family.h"
#include "pkg/services/proxied.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

net::Family netFamily(Family f) { return f == Family::IPv4 ? net::Family::V4 : net::Family::V6; }
bool enabled(Family f, const services::NodeConfig& cfg) { return cfg.localhostNodePorts(netFamily(f)); }

}  // namespace

const char* loopbackAddress(net::Family f) { return f == net::Family::V4 ? "127.0.0.1" : "::1"; }

std::vector<SetDecl> localhostDeclarations(Family f, const services::NodeConfig& cfg) {
  if (!enabled(f, cfg)) return {};
  return {{kLocalhostNodePorts, {"inet_proto", "inet_service"}, "", ""}};
}

std::vector<std::string> localhostCounters(Family f, const services::NodeConfig& cfg) {
  std::vector<std::string> out;
  if (enabled(f, cfg))
    for (api::Protocol p : services::localhostRejectedProtocols()) out.push_back(services::localhostRejectCounter(p));
  return out;
}

std::optional<Rule> localhostRejectJump(Family f, const services::NodeConfig& cfg) {
  if (!enabled(f, cfg)) return std::nullopt;
  Expr daddr = ex::payload(familyName(f), "daddr");
  Stmt loopback = f == Family::IPv4 ? st::match(daddr, "==", ex::prefix("127.0.0.0", 8))
                                    : st::match(daddr, "==", ex::addr("::1"));
  return makeRule({loopback, st::matchSet(ex::concat({ex::meta("l4proto"), ex::payload("th", "dport")}), kLocalhostNodePorts),
                   st::jump(kLocalhostRejectChain)});
}

std::optional<Chain> localhostRejectChain(Family f, const services::NodeConfig& cfg) {
  if (!enabled(f, cfg)) return std::nullopt;
  Chain c{kLocalhostRejectChain, std::nullopt, {}};
  for (api::Protocol p : services::localhostRejectedProtocols())
    c.rules.push_back(makeRule({st::match(ex::meta("l4proto"), "==", ex::symbol(api::protocolName(p))),
                                st::namedCounter(services::localhostRejectCounter(p)), st::reject(f)},
                               "localhost NodePorts are TCP only"));
  return c;
}

std::optional<Element> localhostRejectElement(Family f, const services::NodeConfig& cfg, api::Protocol proto,
                                              int32_t nodePort, const std::string& comment) {
  if (proto == api::Protocol::TCP || !enabled(f, cfg)) return std::nullopt;
  return setElement(kLocalhostNodePorts, ex::concat({ex::symbol(api::protocolName(proto)), ex::number(nodePort)}),
                    comment);
}

std::map<int32_t, LocalhostNodePort> localhostNodePorts(const state::ClusterState& st, const services::NodeConfig& cfg,
                                                        net::Family f, const std::string& zone) {
  std::map<int32_t, LocalhostNodePort> out;
  if (!cfg.localhostNodePorts(f)) return out;
  const char* addressType = services::familyWord(f);
  std::map<int32_t, std::string> rankOf;  // of the service holding each port so far
  for (const auto& [key, svc] : st.services) {
    if (!services::serviceIsProxied(*svc, cfg)) continue;
    bool inFamily = false;  // as upstream's per-family proxier: a service of this family
    for (const auto& ip : svc->clusterIPs) inFamily = inFamily || net::familyOf(ip) == f;
    if (!inFamily) continue;
    const std::vector<const api::EndpointSlice*> slices = services::slicesOf(st, key);
    const std::string rank = services::claimRank(*svc);
    for (const api::ServicePort& sp : svc->ports) {
      if (sp.protocol != api::Protocol::TCP || sp.nodePort <= 0) continue;
      auto held = rankOf.find(sp.nodePort);
      if (held != rankOf.end() && held->second <= rank) continue;  // the older one keeps it
      rankOf[sp.nodePort] = rank;
      services::EndpointSets eps = services::categorizeEndpoints(sp, slices, addressType, cfg.nodeName, zone);
      const auto& chosen = svc->externalTrafficPolicy == "Local" ? eps.local : eps.cluster;
      if (chosen.empty()) {
        out.erase(sp.nodePort);
        continue;
      }
      LocalhostNodePort l{key, {}, affinitySeconds(*svc)};
      for (const services::EndpointChoice& ep : chosen) l.endpoints.emplace_back(ep.ip, ep.port);
      out[sp.nodePort] = std::move(l);
    }
  }
  return out;
}

}  // namespace kpn::render
