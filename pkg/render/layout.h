// Our table layout: the names operators see in `nft list table ip kube-proxy`, and the base part
// (hooks, dispatch chains, declarations) that does not depend on any Service.
//
//   filter-prerouting-pre-dnat / filter-output-pre-dnat (dstnat-10, new conns) -> firewall-check:
//        vmap @firewall-ips on daddr . l4proto . dport -> goto firewall-<ns>/<name> (source ranges)
//   nat-prerouting / nat-output (dstnat)  -> services: vmap @service-ips on daddr . l4proto . dport
//        (ClusterIPs, external IPs, LoadBalancer IPs), then NodePorts: daddr @nodeport-ips and vmap
//        @service-nodeports on l4proto . dport
//        -> goto service-<ns>/<name>/<proto>/<port>: dnat to numgen random mod N offset BASE
//                                                     map @backends-<proto>-<shard>
//        (external destinations of eTP=Cluster services are in @masquerade-ips/-nodeports: marked
//        for masquerade by two base rules, then straight to service-<...>)
//        -> goto local-<...>: the same over this node's endpoints (traffic policy Local)
//        -> goto external-<...> (eTP=Local only): pods and the node short-circuit to service-,
//           outside traffic to local-
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
#include "pkg/render/environment.h"
#include "pkg/render/node_config.h"

namespace kpn::render {

inline const char* kTableName = "kube-proxy";
inline const char* kClusterIPs = "cluster-ips";
inline const char* kServiceIPs = "service-ips";
inline const char* kNoEndpointServices = "no-endpoint-services";
inline const char* kHairpin = "hairpin";
inline const char* kServicesChain = "services";
inline const char* kRejectChain = "reject-chain";
inline const char* kServiceNodePorts = "service-nodeports";
inline const char* kNoEndpointNodePorts = "no-endpoint-nodeports";
inline const char* kFirewallIPs = "firewall-ips";
inline const char* kNodePortIPs = "nodeport-ips";
// External destinations of externalTrafficPolicy=Cluster services: their traffic is masqueraded
// by two base rules, so such a service needs no external-<...> chain of its own.
inline const char* kMasqueradeIPs = "masquerade-ips";
inline const char* kMasqueradeNodePorts = "masquerade-nodeports";

// "service-<ns>/<name>/<proto>/<port name, or number when unnamed>"
std::string serviceChainName(const api::Service& svc, const api::ServicePort& port);
// "local-…" (this node's endpoints) and "external-…" (entry for NodePort / external / LB traffic)
std::string localChainName(const api::Service& svc, const api::ServicePort& port);
std::string externalChainName(const api::Service& svc, const api::ServicePort& port);
// "firewall-<ns>/<name>": the source-range check of a service's LoadBalancer IPs
std::string firewallChainName(const api::Service& svc);
// "<ns>/<name>:<port name or number>", the comment on a service's rules and elements (bounded:
// render/comment.h)
std::string servicePortComment(const api::Service& svc, const api::ServicePort& port);
// The backends map a service chain uses: stable per chain name, spread over cfg.backendShards.
std::string backendsMapName(api::Protocol proto, const std::string& chainName, int shards);

nft::Family toNftFamily(net::Family f);

// Declarations of one family's table (typeof maps included).
std::vector<nft::SetDecl> tableDeclarations(nft::Family f, const NodeConfig& cfg);
// Base chains and their rules, and the nodeport-ips elements.
nft::PartPtr renderBasePart(nft::Family f, const NodeConfig& cfg, const FamilyEnvironment& env);

}  // namespace kpn::render
