// loadBalancerSourceRanges, checked before DNAT (after it the LB IP is gone; upstream #122614).
// The one per-service chain left: a rule per allowed range, then drop. (A shared check would need a
// concatenated interval set, daddr . proto . dport . saddr; see docs/architecture.md.)
#include "pkg/render/layout.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

using namespace kpn::nft;

void addFirewallKeys(PartBuilder& b, const ServiceContext& s, const PortPlan& p) {
  if (!s.firewalled) return;
  for (const auto& [ip, isVIP] : p.externalAddrs)
    if (isVIP) {
      b.part.elements.push_back(verdictElement(kFirewallIPs, addressKey(ip, p.sp.protocol, p.sp.port),
                                               firewallChainName(s.svc), p.comment));
      b.firewallUsed = true;
    }
}

void addFirewallChain(PartBuilder& b, const ServiceContext& s) {
  if (!b.firewallUsed) return;
  // Allowed sources return to the pre-DNAT base chain; everything else is dropped.
  Expr src = ex::payload(familyName(s.family), "saddr");
  std::vector<Rule> rules;
  bool nodeInRange = false;
  for (const auto& r : s.sourceRanges) {
    rules.push_back(makeRule({st::match(src, "==", ex::prefix(r.address, r.prefixLen)), st::ret()}));
    for (const auto& n : s.env.nodeIPs) nodeInRange = nodeInRange || net::contains(r, n);
  }
  // The node reaching its own LB IP may use the VIP as source (upstream does the same).
  if (nodeInRange)
    for (const auto& [ip, isVIP] : s.externalAddrs)
      if (isVIP) rules.push_back(makeRule({st::match(src, "==", ex::addr(ip)), st::ret()}));
  rules.push_back(makeRule({st::drop()}, "source not in loadBalancerSourceRanges"));
  b.part.chains.push_back(Chain{firewallChainName(s.svc), std::nullopt, std::move(rules)});
}

}  // namespace kpn::render
