// What upstream kube-proxy's iptables mode (and IPVS mode, which writes the same chains) leaves in
// the tables iptables-nft made (`ip|ip6 nat|filter|mangle`): its KUBE-* chains and the jump rules
// to them. Removing them once our table serves makes sure exactly one proxy answers; upstream
// does the same when it changes mode. Everything else in those tables stays, including the
// kubelet's chains (KUBE-KUBELET-CANARY, KUBE-FIREWALL, and KUBE-MARK-DROP of older kubelets).
// iptables-legacy (x_tables) is invisible to nftables: it is only detected and reported.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <string_view>
#include <vector>

namespace kpn::nft {

// Upstream's iptables proxier chains (pkg/proxy/iptables/proxier.go): the fixed ones and the
// per-service / per-endpoint prefixes (isServiceChainName, plus the KUBE-XLB- of older releases).
bool isUpstreamIptablesChain(std::string_view name);

struct IptablesChain {
  std::string family, table, name;
  bool operator<(const IptablesChain& o) const {
    return std::tie(family, table, name) < std::tie(o.family, o.table, o.name);
  }
};

struct IptablesCleanupPlan {
  // libnftables JSON commands, run in this order in one transaction: delete the jump rules by
  // handle, flush upstream's chains (they jump to each other), delete them.
  std::vector<std::string> ruleDeletes, chainFlushes, chainDeletes;
  std::vector<IptablesChain> upstreamChains;
  // Chains of those tables that are not upstream's but may jump to it (the built-in chains, the
  // kubelet's, a user's): list each one and add its listing too.
  std::vector<IptablesChain> otherChains;
  size_t jumpRules = 0;
  std::set<IptablesChain> seen;     // chains already sorted into the two lists
  std::set<std::string> seenRules;  // rule deletes already planned
};

// Adds what a JSON listing holds, for the iptables-nft tables `ip|ip6 nat|filter|mangle` only
// (anything else, our own tables included, is ignored): chains (upstream's to remove, the others
// to look into) and rules outside upstream's chains that jump or go to one of upstream's. Meant
// for `list chains <family>` (names only: listing upstream's rules costs ~15 s at 11k chains, all
// in translating their xt matches) and then `list chain` of each of otherChains; a whole `list
// table` works too. Returns false (and sets *error) on a listing it cannot read, *plan unchanged.
bool addIptablesListing(const std::string& listingJson, IptablesCleanupPlan* plan, std::string* error);

// The commands as one transaction: {"nftables":[...]}.
std::string cleanupTransactionJson(const IptablesCleanupPlan& plan);

// The listings to feed addIptablesListing: every chain's name of a family, one chain's rules.
std::string listChainsCommand(const std::string& family);
std::string listChainCommand(const IptablesChain& chain);

// iptables-legacy in this network namespace: the x_tables tables the kernel lists in
// /proc/net/ip_tables_names and ip6_tables_names (`readFile` returns nullopt for an absent file).
// nullopt when there are none; otherwise one log line naming them and the commands to run.
std::optional<std::string> legacyIptablesReport(const std::function<std::optional<std::string>(const char*)>& readFile);

}  // namespace kpn::nft
