// Every chain of every table in this network namespace, ours and other agents' (a CNI's, a
// firewall's, iptables-nft's), read over a plain netlink socket: names, and for base chains their
// hooks, priorities and policies; no rules. For `status`: a base chain with a drop policy on the
// forward hook drops forwarded service traffic whatever our table does, and upstream's KUBE-*
// chains in iptables-nft's tables are another proxy's leftovers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kpn::nft {

struct ListedChainInfo {
  std::string family;  // "ip", "ip6", "inet", "bridge", "netdev", "arp"
  std::string table, chain;
  bool base = false;  // hooked; the fields below are for base chains
  std::string type;  // "filter", "nat", "route"
  std::string hook;  // "prerouting", "input", "forward", "output", "postrouting", "ingress", ...
  int32_t priority = 0;
  std::string policy;  // "accept" | "drop"
};

// nullopt and *error when the kernel cannot be asked (no nftables, no permission).
std::optional<std::vector<ListedChainInfo>> listChains(std::string* error);

}  // namespace kpn::nft
