#include "pkg/trace/causes.h"

#include <algorithm>
#include <set>

#include "pkg/net/ip.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/family.h"
#include "pkg/services/proxied.h"

namespace kpn::trace {

namespace {

using nft::eval::Cause;
using nft::eval::Report;

std::string hostPort(const std::string& ip, uint16_t port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

std::string keyOf(const api::Service& s) { return s.meta.ns + "/" + s.meta.name; }

std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string portsText(const api::Service& s) {
  std::string out;
  for (const auto& p : s.ports) {
    std::string proto = api::protocolName(p.protocol);
    for (char& ch : proto) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    out += (out.empty() ? "" : ", ") + (p.name.empty() ? std::string() : p.name + " ") + std::to_string(p.port) + "/" +
           proto;
  }
  return out.empty() ? "none" : out;
}

// Control characters out of text from the API (an ExternalName, a label value) before it reaches a
// terminal.
std::string printable(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

// The service port a packet uses: the frontend's, else the one with the packet's port (or nodePort).
const api::ServicePort* servicePort(const api::Service& svc, const CauseContext& c, const nft::eval::Packet& p) {
  for (const auto& sp : svc.ports) {
    std::string label = sp.name.empty() ? std::to_string(sp.port) : sp.name;
    if (c.frontend && c.frontend->portName == label && c.frontend->protocol == api::protocolName(sp.protocol)) return &sp;
  }
  for (const auto& sp : svc.ports)
    if ((sp.port == p.dport || sp.nodePort == p.dport) && p.protocol == api::protocolName(sp.protocol)) return &sp;
  return nullptr;
}

struct EndpointCounts {
  int64_t slices = 0, slicesOfFamily = 0, portMatches = 0;
  int64_t total = 0, ready = 0, servingTerminating = 0, terminating = 0, notReady = 0;
  int64_t readyLocal = 0;
  std::set<std::string> readyNodes;
  std::vector<std::string> slicePorts;  // what the slices offer instead
};

EndpointCounts countEndpoints(const api::ServicePort& sp, const std::vector<const api::EndpointSlice*>& slices,
                              const std::string& addressType, const std::string& nodeName) {
  EndpointCounts n;
  std::set<std::string> offered;
  for (const auto* s : slices) {
    ++n.slices;
    if (s->addressType != addressType) continue;
    ++n.slicesOfFamily;
    for (const auto& p : s->ports) {
      std::string proto = api::protocolName(p.protocol);
      offered.insert((p.name.empty() ? "(unnamed)" : p.name) + " " + (p.port ? std::to_string(*p.port) : "-") + "/" + proto);
    }
    if (!services::slicePortFor(*s, sp)) continue;
    ++n.portMatches;
    for (const auto& ep : s->endpoints) {
      if (ep.address.empty()) continue;
      ++n.total;
      if (services::takesNewConnections(ep.conditions)) {
        ++n.ready;
        n.readyNodes.insert(ep.nodeName.empty() ? std::string("(no node)") : ep.nodeName.str());
        if (!nodeName.empty() && ep.nodeName == nodeName) ++n.readyLocal;
      } else if (services::takesConnectionsWhileTerminating(ep.conditions)) {
        ++n.servingTerminating;
      } else {
        ++(ep.conditions.isTerminating() ? n.terminating : n.notReady);
      }
    }
  }
  n.slicePorts.assign(offered.begin(), offered.end());
  return n;
}

std::optional<Cause> daemonCause(const CauseContext& c, const Report& r) {
  if (!c.known || !c.known->daemon) return std::nullopt;
  const diag::DaemonStatus& d = *c.known->daemon;
  if (!d.source.synced)
    return Cause{"not-synced",
                 "the daemon has not synced yet: its source (" + d.source.describe + ") has not listed " +
                     (d.source.pending.empty() ? std::string("everything") : d.source.pending) +
                     ", and until it has, the table stays as it was" +
                     (c.tableExists ? std::string() : " (here: there is none)") +
                     "; what the state says below may still change",
                 {{"syncs", static_cast<int64_t>(d.syncs)}}, {}};
  if (!d.lastSuccess)
    return Cause{"not-synced",
                 "the daemon has not programmed anything yet: " + plural(static_cast<int64_t>(d.syncs), "sync", "syncs") +
                     " failed" + (d.lastFailure ? " (the last one: " + d.lastFailure->error + ")" : std::string()),
                 {{"syncs", static_cast<int64_t>(d.syncs)}}, {}};
  if (c.service) {
    std::string key = keyOf(*c.service);
    for (const auto& ref : d.refused)
      if (ref.service == key)
        return Cause{"refused",
                     "the kernel refuses the rules of " + key + " (since " + ref.since + "): " + ref.error +
                         "; they are left out and retried with backoff while every other Service is programmed (a "
                         "Warning event FailedToProgramService is on the Service)",
                     {}, {}};
  }
  (void)r;
  return std::nullopt;
}

std::optional<Cause> driftCause(const CauseContext& c) {
  if (!c.drift || !c.drift->any() || !c.service) return std::nullopt;
  std::string why;
  if (c.known && c.known->daemon) {
    const diag::DaemonStatus& d = *c.known->daemon;
    if (d.consecutiveFailures > 0 && d.lastFailure)
      why = "the daemon's last " + plural(d.consecutiveFailures, "sync", "syncs") + " failed (" + d.lastFailure->error +
            "), so the kernel keeps the table of its last successful sync";
    else
      why = "changed outside the daemon, or by a change it has not synced yet (it repairs outside changes within "
            "seconds)";
  } else {
    why = "the table is not what this state renders (is the daemon running, with this source?)";
  }
  Cause out{"drift",
            "drift: the kernel's table differs from what the state renders for " + keyOf(*c.service) + " (" +
                std::to_string(c.drift->missing.size()) + " missing, " + std::to_string(c.drift->unexpected.size()) +
                " unexpected): " + why + "; the verdict above is the kernel's",
            {{"missing", static_cast<int64_t>(c.drift->missing.size())},
             {"unexpected", static_cast<int64_t>(c.drift->unexpected.size())}},
            {}};
  for (const auto& m : c.drift->missing) out.objects.push_back("missing in the kernel: " + m);
  for (const auto& u : c.drift->unexpected) out.objects.push_back("unexpected in the kernel: " + u);
  return out;
}

std::optional<Cause> notOursCause(const api::Service& svc, bool excluded) {
  std::string key = keyOf(svc);
  if (excluded) {
    auto label = svc.meta.labels.find(services::kServiceProxyNameLabel);
    if (label != svc.meta.labels.end())
      return Cause{"excluded",
                   "another proxy's: " + key + " is labelled " + services::kServiceProxyNameLabel + "=" +
                       printable(label->second) +
                       ", so kube-proxy-nft (as upstream kube-proxy) leaves it to that proxy and has no rules for it",
                   {}, {}};
    return Cause{"excluded",
                 "not proxied: " + key + " is labelled " + services::kHeadlessLabel +
                     ", which upstream kube-proxy's label selector (and ours) leaves out: no rules for it",
                 {}, {}};
  }
  if (svc.type == "ExternalName")
    return Cause{"external-name",
                 "ExternalName: " + key + " is a DNS alias (CNAME) of " + printable(svc.externalName) +
                     ": it has no virtual address and no rules on any node; clients resolve and reach " +
                     printable(svc.externalName) + " directly",
                 {}, {}};
  if (svc.headless)
    return Cause{"headless",
                 "headless: " + key + " has clusterIP None: no virtual address and no rules; its DNS name returns "
                                      "the ready endpoints' addresses, which clients reach directly",
                 {}, {}};
  return std::nullopt;
}

std::optional<Cause> noEndpointsCause(const api::Service& svc, const api::ServicePort& sp, const CauseContext& c,
                                      const std::string& addressType) {
  std::string key = keyOf(svc), port = key + ":" + (sp.name.empty() ? std::to_string(sp.port) : sp.name);
  auto slices = c.known->slicesOf(key);
  EndpointCounts n = countEndpoints(sp, slices, addressType, c.known->cfg.nodeName);
  std::vector<std::pair<std::string, int64_t>> counts = {
      {"slices", n.slices}, {"endpoints", n.total}, {"ready", n.ready}, {"servingTerminating", n.servingTerminating},
      {"terminating", n.terminating}, {"notReady", n.notReady}};
  if (n.slices == 0)
    return Cause{"no-endpoint-slice",
                 "no EndpointSlice: none is labelled kubernetes.io/service-name=" + svc.meta.name + " in namespace " +
                     svc.meta.ns + " (a Service without a selector needs one written by hand; with a selector, no "
                                   "pod matches it yet), so " + port + " has no endpoint and the node refuses connections",
                 counts, {}};
  if (n.slicesOfFamily == 0)
    return Cause{"no-endpoint-slice",
                 "no " + addressType + " EndpointSlice: " + key + " has " + plural(n.slices, "slice", "slices") +
                     ", none of address type " + addressType + ", so its " + addressType +
                     " addresses have no endpoint",
                 counts, {}};
  if (n.portMatches == 0) {
    std::string proto = api::protocolName(sp.protocol);
    Cause out{"port-mismatch",
              "port mismatch: the EndpointSlices of " + key + " have no port named \"" + sp.name + "\" with protocol " +
                  proto + " (the Service port's name and protocol must match a slice port's), so " + port +
                  " has no endpoint; the slices' ports:",
              counts, n.slicePorts};
    return out;
  }
  if (n.ready == 0 && n.servingTerminating == 0)
    return Cause{"no-ready-endpoints",
                 "no ready endpoint: " + port + " has " + plural(n.total, "endpoint", "endpoints") + " (" +
                     addressType + "), none ready: " + std::to_string(n.notReady) + " not ready, " +
                     std::to_string(n.terminating) + " terminating and no longer serving; the node refuses connections "
                     "until one is ready (a terminating one that still serves would be used meanwhile)",
                 counts, {}};
  return std::nullopt;
}

std::optional<Cause> localPolicyCause(const api::Service& svc, const api::ServicePort& sp, const CauseContext& c,
                                      const std::string& addressType, const nft::eval::Packet& p) {
  std::string key = keyOf(svc);
  auto n = countEndpoints(sp, c.known->slicesOf(key), addressType, c.known->cfg.nodeName);
  std::string nodes;
  for (const auto& node : n.readyNodes) nodes += (nodes.empty() ? "" : ", ") + node;
  // internalTrafficPolicy governs the ClusterIPs, externalTrafficPolicy every other address.
  bool external = std::find(svc.clusterIPs.begin(), svc.clusterIPs.end(), p.daddr) == svc.clusterIPs.end();
  std::string policy = external ? "externalTrafficPolicy" : "internalTrafficPolicy";
  std::string msg = policy + " Local: " + key + " has " + plural(n.ready, "ready endpoint", "ready endpoints") +
                    (nodes.empty() ? "" : ", on " + nodes) + ", none on this node (" + c.known->cfg.nodeName +
                    "), so this node drops " + (external ? "outside" : "pods'") + " traffic to " + hostPort(p.daddr, p.dport);
  if (external && svc.healthCheckNodePort)
    msg += " (its health check node port " + std::to_string(svc.healthCheckNodePort) +
           " answers 503 here, so a load balancer sends clients to a node that has one)";
  return Cause{"no-local-endpoint", msg, {{"ready", n.ready}, {"readyHere", n.readyLocal}}, {}};
}

std::optional<Cause> topologyCause(const api::Service& svc, const api::ServicePort& sp, const CauseContext& c,
                                   const std::string& addressType) {
  auto slices = c.known->slicesOf(keyOf(svc));
  const std::string& node = c.known->cfg.nodeName;
  services::EndpointSets sets = services::categorizeEndpoints(sp, slices, addressType, node, c.zone);
  auto n = countEndpoints(sp, slices, addressType, node);
  if (!sets.topology.empty())
    return Cause{"topology",
                 "topology (" + sets.topology + "): only the " + plural(static_cast<int64_t>(sets.cluster.size()), "endpoint", "endpoints") +
                     " hinted for " + (sets.topology == "PreferSameNode" ? "this node (" + node + ")"
                                                                          : "this node's zone (" + c.zone + ")") +
                     " of " + std::to_string(n.ready) + " ready ones take its traffic",
                 {{"used", static_cast<int64_t>(sets.cluster.size())}, {"ready", n.ready}}, {}};
  // Hints that leave nothing for this zone: upstream falls back to every endpoint.
  std::set<std::string> zones;
  bool allHinted = n.ready > 0;
  for (const auto* s : slices)
    if (s->addressType == addressType)
      for (const auto& ep : s->endpoints)
        if (ep.conditions.isReady()) {
          if (ep.hintZones().empty()) allHinted = false;
          zones.insert(ep.hintZones().begin(), ep.hintZones().end());
        }
  if (allHinted && !zones.empty()) {
    std::string list;
    for (const auto& z : zones) list += (list.empty() ? "" : ", ") + z;
    return Cause{"topology",
                 "topology: the endpoints' zone hints (" + list + ") name none for this node's zone" +
                     (c.zone.empty() ? std::string(" (this Node has no topology.kubernetes.io/zone label)")
                                     : " (" + c.zone + ")") +
                     ", so, as upstream, all " + std::to_string(n.ready) + " ready endpoints take its traffic",
                 {{"used", n.ready}, {"ready", n.ready}}, {}};
  }
  return std::nullopt;
}

std::optional<Cause> rangeCause(const api::Service& svc, const nft::eval::Packet& p) {
  std::string ranges;
  for (const auto& r : svc.loadBalancerSourceRanges) ranges += (ranges.empty() ? "" : ", ") + r;
  return Cause{"source-range",
               "source range: " + p.saddr + " is not in loadBalancerSourceRanges of " + keyOf(svc) + " (" +
                   (ranges.empty() ? std::string("none readable: no source is admitted") : ranges) +
                   "), so the node drops it before DNAT",
               {}, svc.loadBalancerSourceRanges};
}

std::string cidrNameOf(const KnownState& k, const std::string& ip) {
  for (const auto& [name, cidr] : k.state.serviceCIDRs)
    for (const auto& text : cidr->cidrs)
      if (auto parsed = net::parseCidr(text); parsed && net::contains(*parsed, ip)) return name + " (" + text + ")";
  return "";
}

}  // namespace

std::optional<Cause> causeOf(const Report& r, const CauseContext& c) {
  const nft::eval::Packet& p = r.trace.packet;
  const std::string addressType = services::familyWord(r.trace.family);
  if (auto d = daemonCause(c, r)) return d;
  if (!c.known) {
    if (!c.tableExists)
      return Cause{"no-table",
                   "no table " + std::string(nft::familyName(r.trace.family)) +
                       " kube-proxy on this node: nothing here proxies Services (is the daemon running?)",
                   {}, {}};
    return std::nullopt;
  }
  if (auto d = driftCause(c)) return d;
  if (c.service)
    if (auto n = notOursCause(*c.service, c.excluded)) return n;
  const std::string known = std::to_string(c.known->servicesKnown);
  const std::string who = c.known->origin == "daemon" ? "the daemon knows" : "the source holds";
  if (r.verdict == "reject") {
    if (c.service && c.addressOnly)
      return Cause{"unknown-port",
                   "unknown port: " + p.daddr + " is an address of " + keyOf(*c.service) + ", whose ports are " +
                       portsText(*c.service) + "; nothing answers " + p.protocol + " " + std::to_string(p.dport) +
                       " there, so the node refuses it (as upstream)",
                   {}, {}};
    if (c.service)
      if (const auto* sp = servicePort(*c.service, c, p)) return noEndpointsCause(*c.service, *sp, c, addressType);
    return std::nullopt;
  }
  if (r.verdict == "drop") {
    if (r.reason.rfind("source range", 0) == 0 && c.service) return rangeCause(*c.service, p);
    if (r.reason.rfind("traffic policy Local", 0) == 0 && c.service)
      if (const auto* sp = servicePort(*c.service, c, p)) return localPolicyCause(*c.service, *sp, c, addressType, p);
    if (r.reason.rfind("unallocated ServiceCIDR", 0) == 0)
      return Cause{"unallocated-service-cidr",
                   "unallocated ServiceCIDR address: " + p.daddr + " is inside ServiceCIDR " + cidrNameOf(*c.known, p.daddr) +
                       " but no Service of the " + known + " " + who +
                       " has it: the node drops it (as upstream) rather than let it leave the node undnatted",
                   {{"servicesKnown", static_cast<int64_t>(c.known->servicesKnown)}}, {}};
    return std::nullopt;
  }
  if (r.verdict == "accept") {
    if (!c.service)
      return Cause{"no-service",
                   "no Service has " + hostPort(p.daddr, p.dport) + " (" + p.protocol + "): none of the " + known +
                       " Services " + who + " uses it, so the packet passes the table untouched (a Service of another "
                       "proxy, labelled " + services::kServiceProxyNameLabel + ", is not among them: trace it by name)",
                   {{"servicesKnown", static_cast<int64_t>(c.known->servicesKnown)}}, {}};
    if (c.addressOnly)
      return Cause{"unknown-port",
                   p.daddr + " is an address of " + keyOf(*c.service) + ", whose ports are " + portsText(*c.service) +
                       "; " + p.protocol + " " + std::to_string(p.dport) + " is none of them and passes untouched",
                   {}, {}};
    return std::nullopt;
  }
  if (r.verdict == "dnat" && c.service)
    if (const auto* sp = servicePort(*c.service, c, p)) return topologyCause(*c.service, *sp, c, addressType);
  return std::nullopt;
}

Cause nothingToTrace(const ServiceTarget& t, const KnownState* known, const api::Service* svc, bool excluded) {
  std::string key = t.ns + "/" + t.name;
  if (!known)
    return {"no-state", "no cluster state to resolve " + key + ": the daemon did not answer and no source flag was given", {}, {}};
  if (known->daemon && !known->daemon->source.synced && !svc)
    return {"not-synced",
            "the daemon has not synced yet: its source (" + known->daemon->source.describe + ") has not listed " +
                known->daemon->source.pending + ", and " + key + " is not among what it has",
            {}, {}};
  if (!svc)
    return {"no-such-service",
            "no Service " + key + ": none of the " + std::to_string(known->servicesKnown) + " Services " +
                (known->origin == "daemon" ? "the daemon knows" : "the source holds") +
                " is called that, and the source has none by that name labelled for another proxy",
            {{"servicesKnown", static_cast<int64_t>(known->servicesKnown)}}, {}};
  if (auto n = notOursCause(*svc, excluded)) {
    if (svc->headless) n->message += "; none of its endpoints is ready, so its DNS name returns no address";
    return *n;
  }
  std::string ports = portsText(*svc);
  return {"no-such-port",
          key + " has no port " + (t.port.empty() ? std::string("at all") : "\"" + t.port + "\"") + " (its ports: " + ports + ")",
          {}, {}};
}

}  // namespace kpn::trace
