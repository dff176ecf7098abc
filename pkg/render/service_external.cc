// NodePort, external IPs and LoadBalancer IPs, by external traffic policy.
//  - no endpoints: reject on every destination;
//  - eTP=Cluster: all endpoints, marked for masquerade through @masquerade-ips / -nodeports, or on
//    the ClusterIP's slots by the rewrite's own rule;
//  - eTP=Local: pods and the node itself take all endpoints (@service-ips / -nodeports; the base
//    rules mark the node's traffic), outside traffic only this node's (@local-service-ips /
//    -nodeports); without local endpoints that element is `return`, so outside traffic stays
//    undnatted and is dropped after DNAT by the `drop` element in @no-endpoint-*.
// A destination whose endpoints are its ClusterIP's, picked the plain random way, takes the
// ClusterIP's slots (@external-cluster-ips, @nodeport-cluster-ips/-ports: layout.h): one or two
// elements in place of a slot per endpoint, and an endpoint change is the ClusterIP's alone.
#include "pkg/render/layout.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

// Whether the port's ClusterIP path holds slots that its external destinations can take: its
// endpoints are the cluster-wide set (not iTP=Local's), and its pick is the counted random one
// (no chain of its own: session affinity, round-robin, source hash and least connection keep
// their slots per destination, as their chains read the destination the packet names).
bool clusterIPSlotsShared(const ServiceContext& s, const PortPlan& p) {
  if (!p.ownsClusterIP || s.clusterIP.empty() || s.internalLocal || !p.all || p.all->empty()) return false;
  if (p.affinitySeconds || p.allTable || p.leastConn) return false;
  if (p.scheduler != services::Scheduler::Random) return false;
  return Pick{KeySpace::Address, p.sp.protocol, static_cast<uint32_t>(p.all->size())}.counted();
}

}  // namespace

void addExternalPaths(PartBuilder& b, const ServiceContext& s, const PortPlan& p) {
  if (!p.external()) return;
  const api::Protocol proto = p.sp.protocol;
  struct Destination {
    Expr dispatchKey;
    std::vector<Expr> slots;
    bool isNodePort;
  };
  std::vector<Destination> dests;
  for (const auto& [ip, isVIP] : p.externalAddrs)
    dests.push_back({addressKey(ip, proto, p.sp.port), addressSlotPrefix(ip, p.sp.port), false});
  if (p.nodePort) dests.push_back({nodePortKey(proto, *p.nodePort), nodePortSlotPrefix(*p.nodePort), true});
  // On loopback a UDP or SCTP NodePort is refused (the listeners there are TCP only), endpoints or not.
  if (p.nodePort)
    if (auto e = localhostRejectElement(b.family, s.cfg, proto, *p.nodePort, p.comment)) b.part.elements.push_back(*e);

  const bool shared = clusterIPSlotsShared(s, p);
  for (const Destination& d : dests) {
    const char* dispatch = d.isNodePort ? kServiceNodePorts : kServiceIPs;
    const char* localDispatch = d.isNodePort ? kLocalServiceNodePorts : kLocalServiceIPs;
    const char* noEndpoint = d.isNodePort ? kNoEndpointNodePorts : kNoEndpointServices;
    const KeySpace all = d.isNodePort ? KeySpace::NodePort : KeySpace::Address;
    const KeySpace local = d.isNodePort ? KeySpace::LocalNodePort : KeySpace::LocalAddress;
    if (!p.hasEndpoints() || !p.all) {
      verdictFor(b, p, noEndpoint, d.dispatchKey, gotoVerdict(kRejectChain));
      continue;
    }
    // On the ClusterIP's slots: the rewrite's rule also marks eTP=Cluster traffic for masquerade.
    const bool onClusterIPSlots = shared && (!d.isNodePort || proto != api::Protocol::SCTP);
    if (onClusterIPSlots && !d.isNodePort) {
      b.part.elements.push_back(mapElement(s.externalLocal ? kLocalExternalClusterIPs : kExternalClusterIPs,
                                           d.dispatchKey, ex::addr(s.clusterIP), p.comment));
    } else if (onClusterIPSlots) {
      b.part.elements.push_back(mapElement(s.externalLocal ? kLocalNodePortClusterIPs : kNodePortClusterIPs,
                                           d.dispatchKey, ex::addr(s.clusterIP), p.comment));
      b.part.elements.push_back(mapElement(kNodePortClusterPorts, d.dispatchKey, ex::number(p.sp.port)));
    } else {
      dispatchTo(b, p, all, d.slots, d.dispatchKey, dispatch, *p.all);
    }
    if (s.externalLocal && p.local) {
      dispatchTo(b, p, local, d.slots, d.dispatchKey, localDispatch, *p.local);
    } else if (s.externalLocal) {
      verdictFor(b, p, localDispatch, d.dispatchKey, nft::returnVerdict());
      verdictFor(b, p, noEndpoint, d.dispatchKey, nft::dropVerdict());
    } else if (!onClusterIPSlots) {  // on them, the rewrite's rule marks it
      b.part.elements.push_back(
          setElement(d.isNodePort ? kMasqueradeNodePorts : kMasqueradeIPs, d.dispatchKey, p.comment));
    }
  }
}

}  // namespace kpn::render
