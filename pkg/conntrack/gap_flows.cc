#include "pkg/conntrack/gap_flows.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include "pkg/conntrack/frontends.h"
#include "pkg/services/proxied.h"

namespace kpn::conntrack {

namespace {

// The IP protocol of a service port the sweep looks at; 0 for UDP (the reconciler's).
uint8_t sweptProto(api::Protocol p) {
  switch (p) {
    case api::Protocol::TCP:
      return IPPROTO_TCP;
    case api::Protocol::SCTP:
      return IPPROTO_SCTP;
    default:
      return 0;
  }
}

}  // namespace

GapFrontends GapFrontends::build(const state::ClusterState& st, const services::NodeConfig& cfg, uint8_t family) {
  GapFrontends fe;
  for (const auto& [key, svcPtr] : st.services) {
    const api::Service& svc = *svcPtr;
    if (!services::serviceIsProxied(svc, cfg)) continue;
    const std::vector<Ip> addrs = frontendIps(svc, family);
    if (addrs.empty()) continue;
    for (const auto& sp : svc.ports) {
      const uint8_t proto = sweptProto(sp.protocol);
      if (!proto || sp.port <= 0 || sp.port > 65535) continue;
      fe.protos_.insert(proto);
      for (const Ip& ip : addrs) fe.byIpPort_.insert(Key{proto, ip, static_cast<uint16_t>(sp.port)});
      if (sp.nodePort > 0 && sp.nodePort <= 65535) fe.nodePorts_.insert(nodePortKey(proto, static_cast<uint16_t>(sp.nodePort)));
    }
  }
  return fe;
}

bool GapFrontends::hasProto(uint8_t proto) const { return protos_.count(proto) > 0; }

bool GapFrontends::isGapFlow(const Flow& f) const {
  if (f.replied || f.replySrc != f.origDst || f.replySport != f.origDport) return false;
  return byIpPort_.count(Key{f.proto, f.origDst, f.origDport}) > 0 || nodePorts_.count(nodePortKey(f.proto, f.origDport)) > 0;
}

GapSnapshot makeGapSweep(const state::ClusterState& st, const services::NodeConfig& cfg) {
  auto sweep = std::make_shared<GapSweep>();
  sweep->v4 = GapFrontends::build(st, cfg, AF_INET);
  sweep->v6 = GapFrontends::build(st, cfg, AF_INET6);
  return sweep;
}

}  // namespace kpn::conntrack
