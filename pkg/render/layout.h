// Our table layout: the names operators see in `nft list table ip kube-proxy`, and the base part
// (hooks, dispatch chains, declarations) that does not depend on any Service.
//
//   nat-prerouting / nat-output (dstnat)  -> services: vmap @service-ips on daddr . l4proto . dport
//        -> goto service-<ns>/<name>/<proto>/<port>: dnat to numgen random mod N offset BASE
//                                                     map @backends-<proto>-<shard>
//   nat-postrouting (srcnat) -> masquerading: marked packets, and hairpin pairs in @hairpin
//   filter-input/forward/output (filter, new conns) -> reject via @no-endpoint-services,
//        and unknown ports of live ClusterIPs via @cluster-ips
//
// No anonymous sets and no per-endpoint chains: both make nft's load cost grow quadratically.
#pragma once

#include <string>

#include "nft/model.h"
#include "pkg/api/types.h"
#include "pkg/render/node_config.h"

namespace kpn::render {

inline const char* kTableName = "kube-proxy";
inline const char* kClusterIPs = "cluster-ips";
inline const char* kServiceIPs = "service-ips";
inline const char* kNoEndpointServices = "no-endpoint-services";
inline const char* kHairpin = "hairpin";
inline const char* kServicesChain = "services";
inline const char* kRejectChain = "reject-chain";

// "service-<ns>/<name>/<proto>/<port name, or number when unnamed>"
std::string serviceChainName(const api::Service& svc, const api::ServicePort& port);
// "<ns>/<name>:<port name or number>", the comment on a service's rules and elements
std::string servicePortComment(const api::Service& svc, const api::ServicePort& port);
// The backends map a service chain uses: stable per chain name, spread over cfg.backendShards.
std::string backendsMapName(api::Protocol proto, const std::string& chainName, int shards);

nft::Family toNftFamily(net::Family f);

// Declarations of one family's table (typeof maps included).
std::vector<nft::SetDecl> tableDeclarations(nft::Family f, const NodeConfig& cfg);
// Base chains and their rules.
nft::PartPtr renderBasePart(nft::Family f, const NodeConfig& cfg);

}  // namespace kpn::render
