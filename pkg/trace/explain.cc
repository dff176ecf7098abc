#include "pkg/trace/explain.h"

#include "pkg/render/layout.h"

namespace kpn::trace {

namespace {

using nft::eval::Candidate;
using nft::eval::Lookup;
using nft::eval::Step;

const Lookup* lookupIn(const Candidate& c, std::initializer_list<const char*> sets) {
  for (const auto& s : c.path)
    for (const auto& l : s.lookups)
      for (const char* name : sets)
        if (l.set == name) return &l;
  return nullptr;
}

const Step* lastRule(const Candidate& c) {
  const Step* last = nullptr;
  for (const auto& s : c.path)
    if (!s.chain.empty()) last = &s;
  return last;
}

// " (172.30.0.0/16)": the prefix a rule matched, from its text.
std::string prefixIn(const std::string& rule) {
  size_t slash = rule.find('/');
  if (slash == std::string::npos) return "";
  size_t start = rule.rfind(' ', slash), end = rule.find(' ', slash);
  start = start == std::string::npos ? 0 : start + 1;
  return " (" + rule.substr(start, end == std::string::npos ? std::string::npos : end - start) + ")";
}

std::string svc(const Lookup& l) { return l.comment.empty() ? "the service of " + l.key : l.comment; }

}  // namespace

void explainForOurLayout(nft::eval::Report& r) {
  const auto& t = r.trace;
  if (t.candidates.empty()) return;
  const Candidate& c = t.candidates.front();
  const auto& p = t.packet;
  std::string dst = (t.family == nft::Family::IPv6 ? "[" + p.daddr + "]" : p.daddr) + ":" + std::to_string(p.dport);
  if (r.verdict == "reject" || r.verdict == "drop") {
    const Step* last = lastRule(c);
    if (const Lookup* l = lookupIn(c, {render::kNoEndpointServices, render::kNoEndpointNodePorts})) {
      if (r.verdict == "reject") {
        r.reason = "no endpoints: " + svc(*l) + " has no ready or serving endpoint, so " + dst + " refuses new connections";
      } else {
        r.reason = "traffic policy Local: " + svc(*l) + " has endpoints, but none on this node for this traffic, so " + dst +
                   " drops it";
      }
    } else if (last && last->chain == "cluster-ips-check") {
      if (r.verdict == "reject")
        r.reason = "unknown port: " + p.daddr + " is a ClusterIP, but no service has " + p.protocol + " port " +
                   std::to_string(p.dport) + " on it";
      else
        r.reason = "unallocated ServiceCIDR address: " + p.daddr + " is inside a ServiceCIDR" + prefixIn(last->rule) +
                   " but no service has it";
    } else if (last && last->chain == "firewall-check") {
      const Lookup* l = lookupIn(c, {render::kFirewallIPs});
      r.reason = "source range: " + p.saddr + " is not in loadBalancerSourceRanges of " +
                 (l ? svc(*l) : std::string("its service")) + ", so " + dst + " drops it";
    }
    return;
  }
  if (r.verdict != "dnat") return;
  // Outside traffic dispatched by an eTP=Local map (not the node's own, which only marks there).
  for (const auto& s : c.path)
    for (const auto& l : s.lookups)
      if ((l.set == render::kLocalServiceIPs || l.set == render::kLocalServiceNodePorts) &&
          s.action.find("vmap") != std::string::npos && (l.value.rfind("goto", 0) == 0 || l.value == "continue")) {
        r.reason += "; externalTrafficPolicy Local: only this node's endpoints, the client's address kept";
        return;
      }
}

}  // namespace kpn::trace
