// ClusterIP traffic and its internal traffic policy: all usable endpoints, or with iTP=Local this
// node's; nothing usable at all: reject; Local and nothing here: drop.
#include "pkg/render/layout.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

void addClusterIPPath(PartBuilder& b, const ServiceContext& s, const PortPlan& p) {
  if (!p.ownsClusterIP) return;
  const nft::Expr key = addressKey(s.clusterIP, p.sp.protocol, p.sp.port);
  const std::optional<EndpointOrder>& order = s.internalLocal ? p.local : p.all;
  if (order) {
    dispatchTo(b, p, KeySpace::Address, addressSlotPrefix(s.clusterIP, p.sp.port), key, kServiceIPs, *order);
  } else if (p.hasEndpoints()) {
    verdictFor(b, p, kNoEndpointServices, key, nft::dropVerdict());
  } else {
    verdictFor(b, p, kNoEndpointServices, key, nft::gotoVerdict(kRejectChain));
  }
}

}  // namespace kpn::render
