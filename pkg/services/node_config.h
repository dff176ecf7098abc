// What the renderer needs to know about this node and its flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pkg/net/ip.h"
#include "pkg/services/scheduler.h"

namespace kpn::services {

// --detect-local-mode: how "traffic from a pod on this node" is recognised (upstream's modes).
enum class LocalDetectMode { ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix };

struct NodeConfig {
  std::string nodeName;                    // endpoints with this nodeName are local
  std::optional<net::Cidr> clusterCidrV4;  // traffic from outside it to a ClusterIP is masqueraded
  std::optional<net::Cidr> clusterCidrV6;
  bool masqueradeAll = false;
  uint32_t masqueradeMark = 0x4000;        // upstream's default bit 14; not a public API

  // --nodeport-addresses: `primary` (the default, as upstream's nftables mode), CIDRs, or both
  // (upstream 1.37: `primary` beside other entries; `localhost` and `all` are CIDRs here).
  bool nodePortPrimary = true;
  std::vector<net::Cidr> nodePortCidrs;
  // NodePorts on loopback (upstream 1.37, KEP-6032): a TCP listener on 127.0.0.1 / ::1 per
  // NodePort, per family whose --nodeport-addresses has an entry naming its loopback address.
  bool localhostNodePortsV4 = false, localhostNodePortsV6 = false;
  bool localhostNodePorts(net::Family f) const { return f == net::Family::V4 ? localhostNodePortsV4 : localhostNodePortsV6; }

  LocalDetectMode detectLocal = LocalDetectMode::ClusterCIDR;
  std::string podBridgeInterface;          // BridgeInterface
  std::string podInterfaceNamePrefix;      // InterfaceNamePrefix

  // --scheduler / ipvs.scheduler: the default of services without the scheduler annotation.
  Scheduler scheduler = Scheduler::Random;
};

// "--cluster-cidr" value: at most one CIDR per family, comma separated. Returns an error text.
std::optional<std::string> parseClusterCidrs(const std::string& flag, NodeConfig& cfg);

// One --nodeport-addresses / nodePortAddresses entry: a CIDR or one of upstream's keywords,
// `primary` (the Node's primary IPs), `localhost` (127.0.0.0/8 and ::1/128), `all` (0.0.0.0/0 and
// ::/0). Validation refuses anything else before a NodeConfig is made (exit 2 naming it).
bool isNodePortAddressEntry(const std::string& entry);
constexpr const char* kNodePortAddressEntryRule = "must be a valid CIDR, 'primary', 'localhost' or 'all'";

// The entries (validated: isNodePortAddressEntry) into cfg. No entry at all: primary. A family's
// NodePorts answer on loopback when an entry other than a /0 holds its loopback address (127.0.0.1,
// ::1): `localhost`, `127.0.0.0/8`, `::1/128`, but not `all` (upstream's "explicit loopback").
void applyNodePortAddresses(const std::vector<std::string>& entries, NodeConfig& cfg);

// "--detect-local-mode" and its interface flags. Returns an error text.
std::optional<std::string> parseDetectLocal(const std::string& mode, const std::string& bridge,
                                            const std::string& prefix, NodeConfig& cfg);

}  // namespace kpn::services
