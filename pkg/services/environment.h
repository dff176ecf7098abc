// What a render needs to know beyond the flags and the Services: this node's addresses and pod
// CIDRs (from its Node object, or from the host when there is none) and the cluster's
// ServiceCIDRs, reduced per family to exactly what ends up in the rules. Derived at every render
// (cheap) and compared with the previous one, so that a Node heartbeat that changes nothing
// rendered costs nothing, and a change that only the base chains see does not re-render 10k
// services.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nft/expr.h"
#include "pkg/api/types.h"
#include "pkg/net/ip.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::services {

struct FamilyEnvironment {
  // "Traffic from a pod on this node": kind "saddr" (value a CIDR), "iifname" (an interface name,
  // or a prefix ending in '*'), or "" when there is no detector for this family.
  std::string localKind, localValue;
  std::vector<std::string> nodeIPs;      // primary node address(es) of this family
  bool nodePortMatchAll = false;          // a /0 in --nodeport-addresses: every local address
  std::vector<std::string> nodePortIPs;  // otherwise: the addresses NodePorts answer on
  std::vector<std::string> serviceCIDRs;  // unallocated addresses inside are dropped
  // This node's topology.kubernetes.io/zone label ("" without one or without a Node): topology
  // hints choose endpoints by it, so a label change re-renders every service, as upstream.
  std::string zone;

  // What per-service Parts depend on (the node IPs a source range is tested against, the zone); the rest,
  // the local-traffic detector included, only shapes the base part.
  bool sameForServices(const FamilyEnvironment& o) const { return nodeIPs == o.nodeIPs && zone == o.zone; }
  bool operator==(const FamilyEnvironment& o) const {
    return sameForServices(o) && localKind == o.localKind && localValue == o.localValue && nodePortMatchAll == o.nodePortMatchAll && nodePortIPs == o.nodePortIPs &&
           serviceCIDRs == o.serviceCIDRs;
  }
};

struct Environment {
  FamilyEnvironment family[2];  // IPv4, IPv6
  std::vector<std::string> warnings;  // worth a log line when the environment changes; not compared

  const FamilyEnvironment& of(nft::Family f) const { return family[f == nft::Family::IPv4 ? 0 : 1]; }
  bool sameForServices(const Environment& o) const {
    return family[0].sameForServices(o.family[0]) && family[1].sameForServices(o.family[1]);
  }
  bool operator==(const Environment& o) const { return family[0] == o.family[0] && family[1] == o.family[1]; }
};

// node: this node's Node object, or null. host: the addresses of this network namespace.
Environment deriveEnvironment(const NodeConfig& cfg, const api::Node* node,
                              const std::map<std::string, state::ServiceCIDRPtr>& serviceCIDRs,
                              const net::HostAddresses& host);

}  // namespace kpn::services
