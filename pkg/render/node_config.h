// What the renderer needs to know about this node and its flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pkg/net/ip.h"
#include "pkg/render/scheduler.h"

namespace kpn::render {

// --detect-local-mode: how "traffic from a pod on this node" is recognised (upstream's modes).
enum class LocalDetectMode { ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix };

struct NodeConfig {
  std::string nodeName;                    // endpoints with this nodeName are local
  std::optional<net::Cidr> clusterCidrV4;  // traffic from outside it to a ClusterIP is masqueraded
  std::optional<net::Cidr> clusterCidrV6;
  bool masqueradeAll = false;
  uint32_t masqueradeMark = 0x4000;        // upstream's default bit 14; not a public API

  // --nodeport-addresses: `primary` (the default, as upstream's nftables mode) or CIDRs.
  bool nodePortPrimary = true;
  std::vector<net::Cidr> nodePortCidrs;

  LocalDetectMode detectLocal = LocalDetectMode::ClusterCIDR;
  std::string podBridgeInterface;          // BridgeInterface
  std::string podInterfaceNamePrefix;      // InterfaceNamePrefix

  // --scheduler / ipvs.scheduler: the default of services without the scheduler annotation.
  Scheduler scheduler = Scheduler::Random;
};

// "--cluster-cidr" value: at most one CIDR per family, comma separated. Returns an error text.
std::optional<std::string> parseClusterCidrs(const std::string& flag, NodeConfig& cfg);

// "--nodeport-addresses" value: "" or "primary", or comma-separated CIDRs. A bad CIDR is skipped;
// when none is left the default (primary) applies. Returns one warning per problem.
std::vector<std::string> parseNodePortAddresses(const std::string& flag, NodeConfig& cfg);

// "--detect-local-mode" and its interface flags. Returns an error text.
std::optional<std::string> parseDetectLocal(const std::string& mode, const std::string& bridge,
                                            const std::string& prefix, NodeConfig& cfg);

}  // namespace kpn::render
