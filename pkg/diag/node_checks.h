// The checks of this node an operator would otherwise run by hand when Service traffic fails:
// forwarding on, br_netfilter, conntrack room, another proxy's leftovers (iptables-legacy tables,
// IPVS, upstream's KUBE-* chains in iptables-nft's tables) and other agents' base chains that drop
// forwarded traffic. Pure over the facts it is given (files under /proc, the chain listing, the
// interfaces), so the verdicts are unit-tested; `status` reads the node's.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nft/chain_list.h"

namespace kpn::diag {

struct NodeCheck {
  std::string name;     // "ip_forward", "ipv6_forwarding", "br_netfilter", "conntrack", "iptables-legacy",
                        // "ipvs", "iptables-nft", "forward-drop"
  std::string level;    // "ok" | "warning" | "info" | "unknown"
  std::string message;  // one line
};

struct NodeFacts {
  std::function<std::optional<std::string>(const char* path)> readFile;  // nullopt: no such file
  std::function<std::optional<std::vector<nft::ListedChainInfo>>(std::string* error)> chains;
  std::function<bool(const char* ifname)> interfaceExists;
};

std::vector<NodeCheck> runNodeChecks(const NodeFacts& facts);
// This namespace's facts: /proc, netlink, the interfaces.
NodeFacts localNodeFacts();

std::string nodeChecksJson(const std::vector<NodeCheck>& checks);
std::string nodeChecksText(const std::vector<NodeCheck>& checks);

}  // namespace kpn::diag
