// NodePort, external IPs and LoadBalancer IPs, by external traffic policy.
//  - no endpoints: reject on every destination;
//  - eTP=Cluster: all endpoints, marked for masquerade through @masquerade-ips / -nodeports;
//  - eTP=Local: pods and the node itself take all endpoints (@service-ips / -nodeports; the base
//    rules mark the node's traffic), outside traffic only this node's (@local-service-ips /
//    -nodeports); without local endpoints that element is `return`, so outside traffic stays
//    undnatted and is dropped after DNAT by the `drop` element in @no-endpoint-*.
#include "pkg/render/layout.h"
#include "pkg/render/localhost_nodeports.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

using namespace kpn::nft;

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
    dispatchTo(b, p, all, d.slots, d.dispatchKey, dispatch, *p.all);
    if (!s.externalLocal) {
      b.part.elements.push_back(
          setElement(d.isNodePort ? kMasqueradeNodePorts : kMasqueradeIPs, d.dispatchKey, p.comment));
    } else if (p.local) {
      dispatchTo(b, p, local, d.slots, d.dispatchKey, localDispatch, *p.local);
    } else {
      verdictFor(b, p, localDispatch, d.dispatchKey, nft::returnVerdict());
      verdictFor(b, p, noEndpoint, d.dispatchKey, nft::dropVerdict());
    }
  }
}

}  // namespace kpn::render
