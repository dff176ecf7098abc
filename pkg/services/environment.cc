#include "pkg/services/environment.h"

#include <algorithm>

#include "pkg/services/family.h"

namespace kpn::services {

namespace {

int idx(net::Family f) { return f == net::Family::V4 ? 0 : 1; }

// The Node's primary address per family: its first InternalIP, else its first ExternalIP
// (upstream's order for node IPs).
std::vector<std::string> nodePrimaryIPs(const api::Node& node, net::Family f) {
  for (const char* type : {"InternalIP", "ExternalIP"})
    for (const auto& [t, addr] : node.addresses)
      if (t == type && net::familyOf(addr) == f) return {addr};
  return {};
}

std::vector<std::string> defaultRouteAddresses(const net::HostAddresses& host, net::Family f) {
  std::vector<std::string> out;
  const std::string& iface = host.defaultRouteInterface[idx(f)];
  if (iface.empty()) return out;
  for (const auto& a : host.addresses)
    if (a.interface == iface && a.family == f && !net::isLoopback(a.ip)) out.push_back(a.ip);
  return out;
}

}  // namespace

Environment deriveEnvironment(const NodeConfig& cfg, const api::Node* node,
                              const std::map<std::string, state::ServiceCIDRPtr>& serviceCIDRs,
                              const net::HostAddresses& host) {
  Environment env;
  for (net::Family f : {net::Family::V4, net::Family::V6}) {
    FamilyEnvironment& fe = env.family[idx(f)];

    // Primary node IPs: from the Node object; without one, the default route's interface.
    if (node) {
      fe.nodeIPs = nodePrimaryIPs(*node, f);
      auto zone = node->meta.labels.find("topology.kubernetes.io/zone");
      if (zone != node->meta.labels.end()) fe.zone = zone->second;
    } else {
      fe.nodeIPs = defaultRouteAddresses(host, f);
      if (!fe.nodeIPs.empty())
        env.warnings.push_back(std::string("no Node object for ") + cfg.nodeName + ": using the " + familyWord(f) +
                               " addresses of " + host.defaultRouteInterface[idx(f)] +
                               " (default route) as the node's addresses");
    }

    // NodePort addresses: the primary IPs and/or the host's addresses inside the CIDRs. Loopback
    // is never one (the kernel would not route the DNATed packet back out): a family with
    // localhost NodePorts answers there through its listeners (pkg/localhost).
    if (cfg.nodePortPrimary)
      for (const auto& ip : fe.nodeIPs)
        if (!net::isLoopback(ip)) fe.nodePortIPs.push_back(ip);
    for (const auto& c : cfg.nodePortCidrs)
      if (c.family == f && c.prefixLen == 0) fe.nodePortMatchAll = true;
    if (fe.nodePortMatchAll) fe.nodePortIPs.clear();
    for (const auto& a : host.addresses) {
      if (fe.nodePortMatchAll || a.family != f) continue;
      bool in = false;
      for (const auto& c : cfg.nodePortCidrs) in = in || net::contains(c, a.ip);
      if (!in) continue;
      if (net::isLoopback(a.ip)) {
        if (!cfg.localhostNodePorts(f))
          env.warnings.push_back("--nodeport-addresses selects loopback address " + a.ip +
                                 " but not " + (f == net::Family::V4 ? "127.0.0.1" : "::1") +
                                 ": NodePorts answer on loopback only with 'localhost' (or a CIDR holding that address)");
        continue;
      }
      if (std::find(fe.nodePortIPs.begin(), fe.nodePortIPs.end(), a.ip) == fe.nodePortIPs.end())
        fe.nodePortIPs.push_back(a.ip);
    }

    // Local-traffic detector.
    switch (cfg.detectLocal) {
      case LocalDetectMode::ClusterCIDR: {
        const auto& cidr = f == net::Family::V4 ? cfg.clusterCidrV4 : cfg.clusterCidrV6;
        if (cidr) fe.localKind = "saddr", fe.localValue = cidr->str();
        break;
      }
      case LocalDetectMode::NodeCIDR:
        if (node) {
          for (const auto& text : node->podCIDRs) {
            auto c = net::parseCidr(text);
            if (c && c->family == f) {
              fe.localKind = "saddr", fe.localValue = c->str();
              break;
            }
          }
          if (fe.localKind.empty())
            env.warnings.push_back(std::string("--detect-local-mode=NodeCIDR: Node ") + cfg.nodeName + " has no " +
                                   familyWord(f) + " podCIDR; no local-traffic detection for " + familyWord(f));
        } else {
          env.warnings.push_back(std::string("--detect-local-mode=NodeCIDR: no Node object for ") + cfg.nodeName +
                                 " yet; no local-traffic detection for " + familyWord(f));
        }
        break;
      case LocalDetectMode::BridgeInterface:
        fe.localKind = "iifname", fe.localValue = cfg.podBridgeInterface;
        break;
      case LocalDetectMode::InterfaceNamePrefix:
        fe.localKind = "iifname", fe.localValue = cfg.podInterfaceNamePrefix + "*";
        break;
    }
  }

  for (const auto& [name, sc] : serviceCIDRs)
    for (const auto& text : sc->cidrs) {
      auto c = net::parseCidr(text);
      if (!c) continue;
      auto& list = env.family[idx(c->family)].serviceCIDRs;
      if (std::find(list.begin(), list.end(), c->str()) == list.end()) list.push_back(c->str());
    }
  for (auto& fe : env.family) std::sort(fe.serviceCIDRs.begin(), fe.serviceCIDRs.end());
  return env;
}

}  // namespace kpn::services
