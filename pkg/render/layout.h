// Our table layout: the names operators see in `nft list table ip kube-proxy`, and the base part
// (hooks, dispatch chains, declarations) that does not depend on any Service. Nothing on the common
// path exists per Service: a Service is only elements (shared dispatch, pick_chains.h).
//
//   filter-prerouting-pre-dnat / filter-output-pre-dnat (dstnat-10, new conns) -> firewall-check:
//        daddr . l4proto . dport in @firewall-ips (LB IPs with source ranges) and
//        daddr . l4proto . dport . saddr not in @firewall-allow (interval set of allowed ranges): drop
//   nat-prerouting / nat-output (dstnat) -> services:
//        masquerade marks (@cluster-ips from outside the pods, @masquerade-ips/-nodeports for
//        eTP=Cluster external destinations with slots of their own, the node's own traffic to
//        eTP=Local ones), then
//        outside traffic to eTP=Local destinations: vmap @local-service-ips / @local-service-nodeports
//        (return: none local, dropped in filter; continue) then jump pick-local (this node's endpoints),
//        then everything else: vmap @service-ips on daddr . l4proto . dport (ClusterIPs, external
//        IPs, LB IPs) and, on the NodePort addresses (goto nodeports), vmap @service-nodeports on l4proto . dport, for
//        the destinations with a chain of their kind, then jump pick / nodeport-pick: the pick chains
//        search the slots for the count N and dnat to daddr . dport . numgen random mod N map
//        @backends-<proto> (pick_chains.h). An external IP, LB IP or TCP/UDP NodePort whose
//        endpoints are its ClusterIP's (same endpoint set, plain random pick) has no slots of its
//        own: `daddr set ... map @external-cluster-ips` (for a NodePort @nodeport-cluster-ips, and
//        `dport set ... map @nodeport-cluster-ports`) rewrites the first packet to the
//        ClusterIP:port, marks it for masquerade (eTP=Cluster; eTP=Local ones are in the local-
//        maps, unmarked), then goto pick finds the ClusterIP's slots. The rewrite comes after the
//        other masquerade marks and the eTP=Local maps, which read the packet as it came, and conntrack
//        keeps the tuple as it came, so replies leave from the address and port the client asked for.
//   nat-postrouting (srcnat) -> masquerading: marked packets, and hairpin pairs in @hairpin
//   filter-input/forward/output (filter, new conns) -> reject or drop via @no-endpoint-services
//        and (input) @no-endpoint-nodeports, unknown ports of live ClusterIPs via @cluster-ips,
//        unallocated addresses of the ServiceCIDRs
//
// No anonymous sets and no per-endpoint chains: both make nft's load cost grow quadratically.
#pragma once

#include <string>

#include "nft/model.h"
#include "pkg/api/types.h"
#include "pkg/services/environment.h"
#include "pkg/services/node_config.h"

namespace kpn::render {

inline const char* kTableName = "kube-proxy";
inline const char* kClusterIPs = "cluster-ips";
inline const char* kServiceIPs = "service-ips";
inline const char* kNoEndpointServices = "no-endpoint-services";
inline const char* kHairpin = "hairpin";
inline const char* kServicesChain = "services";
inline const char* kNodePortsChain = "nodeports";  // `services` for traffic to a NodePort address
// `services` for traffic to a ClusterIP, first: its own masquerade rule and dispatch, then back.
inline const char* kClusterIPServicesChain = "cluster-ip-services";
inline const char* kRejectChain = "reject-chain";
inline const char* kServiceNodePorts = "service-nodeports";
inline const char* kNoEndpointNodePorts = "no-endpoint-nodeports";
// loadBalancerSourceRanges: the firewalled destinations (LB IP . proto . port), and for each the
// sources it admits (destination . source range; an interval set). service_firewall.cc.
inline const char* kFirewallIPs = "firewall-ips";
inline const char* kFirewallAllow = "firewall-allow";
inline const char* kNodePortIPs = "nodeport-ips";
// External destinations of externalTrafficPolicy=Cluster services: their traffic is masqueraded
// by two base rules, so such a service needs no external-<...> chain of its own.
inline const char* kMasqueradeIPs = "masquerade-ips";
inline const char* kMasqueradeNodePorts = "masquerade-nodeports";
// Outside traffic to externalTrafficPolicy=Local destinations: this node's endpoints only.
inline const char* kLocalServiceIPs = "local-service-ips";
inline const char* kLocalServiceNodePorts = "local-service-nodeports";
// External destinations that take their ClusterIP's slots: the ClusterIP (and port) to rewrite
// the first packet to, by daddr . l4proto . dport (external IPs, LB IPs) or l4proto . dport
// (NodePorts). SCTP NodePorts keep slots of their own: after a stateless port rewrite nothing
// fixes an SCTP checksum (NAT recomputes it; a payload statement does not).
// The rule of the eTP=Cluster maps also marks the packet for masquerade (such a destination is in
// no @masquerade-ips / -nodeports); the local- maps hold eTP=Local destinations, which only pods
// and the node reach this way (outside traffic took @local-service-ips before), keeping sources.
inline const char* kExternalClusterIPs = "external-cluster-ips";
inline const char* kLocalExternalClusterIPs = "local-external-cluster-ips";
inline const char* kNodePortClusterIPs = "nodeport-cluster-ips";
inline const char* kLocalNodePortClusterIPs = "local-nodeport-cluster-ips";
inline const char* kNodePortClusterPorts = "nodeport-cluster-ports";

// "<port name, or number when unnamed>"
std::string portKey(const api::ServicePort& port);

nft::Family toNftFamily(net::Family f);

// Declarations of one family's table (typeof maps included).
std::vector<nft::SetDecl> tableDeclarations(nft::Family f, const services::NodeConfig& cfg);
// Base chains and their rules, and the nodeport-ips elements.
nft::PartPtr renderBasePart(nft::Family f, const services::NodeConfig& cfg, const services::FamilyEnvironment& env);

// The detector as a match statement: "from a local pod" (negate=false) or "not from one".
// Only valid when env.localKind is not empty.
nft::Stmt localTrafficMatch(nft::Family f, const services::FamilyEnvironment& env, bool negate);

}  // namespace kpn::render
