// loadBalancerSourceRanges, checked before DNAT (after it the LB IP is gone; upstream #122614).
// No chain per service: every firewalled destination (LB IP . proto . port) is an element of
// @firewall-ips, and each of its allowed sources an element of the interval set @firewall-allow
// (destination . source range). firewall-check drops a new connection to a firewalled destination
// whose source has no element there. A change of ranges is element operations only, and the table
// keeps one chain however many services have ranges (libnftables lists every chain per commit).
#include <algorithm>

#include "pkg/render/layout.h"
#include "pkg/render/service_paths.h"

namespace kpn::render {

using namespace kpn::nft;

namespace {

int hostPrefixLen(net::Family f) { return f == net::Family::V4 ? 32 : 128; }

// A source as @firewall-allow holds it, and as nft lists it back: a full-length prefix is an address.
Expr sourceExpr(const net::Cidr& c) {
  return c.prefixLen == hostPrefixLen(c.family) ? ex::addr(c.address) : ex::prefix(c.address, c.prefixLen);
}

bool within(const net::Cidr& inner, const net::Cidr& outer) {
  return outer.prefixLen <= inner.prefixLen && net::contains(outer, inner.address);
}

}  // namespace

std::vector<net::Cidr> firewallAllowedSources(const ServiceContext& s) {
  std::vector<net::Cidr> sources = s.sourceRanges;
  // The node reaching its own LB IP may use the VIP as source (upstream does the same).
  bool nodeInRange = false;
  for (const auto& r : s.sourceRanges)
    for (const auto& n : s.env.nodeIPs) nodeInRange = nodeInRange || net::contains(r, n);
  if (nodeInRange)
    for (const auto& [ip, isVIP] : s.externalAddrs)
      if (isVIP) {
        const net::Family f = s.family == Family::IPv4 ? net::Family::V4 : net::Family::V6;
        sources.push_back(net::Cidr{f, ip, hostPrefixLen(f)});
      }
  // The kernel refuses an element that overlaps another of the same destination, and two CIDRs
  // overlap only when one holds the other: keep the widest. (Widest first, then by address, so the
  // order, and with it the transaction, does not depend on how the owner listed them.)
  std::sort(sources.begin(), sources.end(), [](const net::Cidr& a, const net::Cidr& b) {
    return a.prefixLen != b.prefixLen ? a.prefixLen < b.prefixLen : a.address < b.address;
  });
  std::vector<net::Cidr> kept;
  for (const auto& c : sources)
    if (std::none_of(kept.begin(), kept.end(), [&](const net::Cidr& k) { return within(c, k); })) kept.push_back(c);
  return kept;
}

void addFirewallElements(PartBuilder& b, const ServiceContext& s, const PortPlan& p) {
  if (!s.firewalled) return;
  const std::string proto = api::protocolName(p.sp.protocol);
  for (const auto& [ip, isVIP] : p.externalAddrs) {
    if (!isVIP) continue;
    b.part.elements.push_back(setElement(kFirewallIPs, addressKey(ip, p.sp.protocol, p.sp.port), p.comment));
    // No allowed source (an unreadable range): the destination is closed to every source.
    for (const auto& c : s.firewallAllowed)
      b.part.elements.push_back(
          setElement(kFirewallAllow, ex::concat({ex::addr(ip), ex::symbol(proto), ex::number(p.sp.port), sourceExpr(c)}),
                     p.comment));
  }
}

}  // namespace kpn::render
