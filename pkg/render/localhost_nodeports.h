// NodePorts on loopback (upstream 1.37's nftables mode, KEP-6032), the rendering side.
//
// The kernel path cannot serve 127.0.0.1:<nodePort>: a DNATed packet from 127.0.0.1 may leave
// the node only with net.ipv4.conf.*.route_localnet=1 (what upstream's iptables mode sets, and
// what the kubelet's martian-drop rule then has to fence), and IPv6 has no such switch at all.
// Upstream's nftables mode answers there in userspace instead: a TCP listener on 127.0.0.1 / ::1
// per NodePort, forwarding each connection to an endpoint (pkg/localhost). This file says which
// listeners a family wants (a pure function of the state), and renders what the table adds: UDP
// and SCTP NodePorts on loopback are rejected, and counted in named counters that the metrics read
// (kubeproxy_nftables_localhost_nodeport_rejected_packets_total).
//
// Enabled per family by an explicit loopback entry in --nodeport-addresses (NodeConfig); with
// it off, nothing here adds anything to the table, and NodePorts never answer on loopback.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/api/types.h"
#include "pkg/net/ip.h"
#include "pkg/services/localhost_reject_counters.h"
#include "pkg/services/node_config.h"
#include "pkg/state/cluster_state.h"

namespace kpn::render {

// { proto . nodePort } of the UDP and SCTP NodePorts, in a family with localhost NodePorts.
inline const char* kLocalhostNodePorts = "localhost-nodeports";
inline const char* kLocalhostRejectChain = "localhost-nodeport-reject";

// The family's loopback address the listeners bind, and the destinations the reject rule matches
// (the whole 127.0.0.0/8, as `localhost`; ::1).
const char* loopbackAddress(net::Family f);

// What a family's table declares for it: the set and the counters (none when it is off).
std::vector<nft::SetDecl> localhostDeclarations(nft::Family f, const services::NodeConfig& cfg);
std::vector<std::string> localhostCounters(nft::Family f, const services::NodeConfig& cfg);
// The filter-input rule that sends loopback packets to a UDP/SCTP NodePort to the reject chain,
// and that chain; nullopt when the family has no localhost NodePorts.
std::optional<nft::Rule> localhostRejectJump(nft::Family f, const services::NodeConfig& cfg);
std::optional<nft::Chain> localhostRejectChain(nft::Family f, const services::NodeConfig& cfg);
// The element of one UDP or SCTP nodePort (nullopt for TCP, or when the family has it off).
std::optional<nft::Element> localhostRejectElement(nft::Family f, const services::NodeConfig& cfg, api::Protocol proto,
                                                   int32_t nodePort, const std::string& comment);

// One TCP NodePort's listener: the endpoints it forwards to (canonical address, port).
struct LocalhostNodePort {
  std::string service;  // ns/name, for the log
  std::vector<std::pair<std::string, int32_t>> endpoints;
  uint32_t affinitySeconds = 0;  // ClientIP: one endpoint for all loopback clients, sliding
  bool operator==(const LocalhostNodePort& o) const {
    return service == o.service && endpoints == o.endpoints && affinitySeconds == o.affinitySeconds;
  }
};

// By nodePort: every TCP nodePort of a proxied Service that has usable endpoints of family f, with
// upstream's choice: eTP=Cluster all usable endpoints (topology applies), eTP=Local this node's
// only, and no listener without any (connections are refused, no fallback to other nodes). Two
// services with one nodePort: the older keeps it, as in the table (DestinationClaims' rank).
// Empty when f has no localhost NodePorts.
std::map<int32_t, LocalhostNodePort> localhostNodePorts(const state::ClusterState& st, const services::NodeConfig& cfg,
                                                        net::Family f, const std::string& zone = "");

}  // namespace kpn::render
