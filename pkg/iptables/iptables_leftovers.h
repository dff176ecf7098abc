// What upstream kube-proxy's iptables mode (and IPVS mode, which writes the same chains) leaves in
// the tables iptables-nft made (`ip|ip6 nat|filter|mangle`): its KUBE-* chains and the jump rules
// it added to the built-in chains. Removing them once our table serves makes sure exactly one
// proxy answers; upstream's own `CleanupLeftovers` is the reference for what is upstream's.
// Everything else in those tables stays: the kubelet's chains (KUBE-KUBELET-CANARY, KUBE-FIREWALL,
// and KUBE-MARK-DROP of older kubelets), and any other agent's rule, including one that jumps to
// one of upstream's chains (a CNI's `-j KUBE-MARK-MASQ`): the chain it names stays too.
// iptables-legacy (x_tables) is invisible to nftables: it is only detected and reported.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <string_view>
#include <vector>

namespace kpn::iptables {

// Upstream's iptables proxier chains (pkg/proxy/iptables/proxier.go): the fixed ones and the
// per-service / per-endpoint prefixes (isServiceChainName, plus the KUBE-XLB- of older releases).
bool isUpstreamIptablesChain(std::string_view name);

struct IptablesChain {
  std::string family, table, name;
  bool operator<(const IptablesChain& o) const {
    return std::tie(family, table, name) < std::tie(o.family, o.table, o.name);
  }
};

// Whether a rule in (table, chain) that jumps to `target` is one upstream's proxier adds to a
// built-in chain (its iptablesJumpChains, and the cleanup-only ones of older releases). iptables-nft
// lists the rule's comment match without its text, so the comment is only known to be there.
bool isUpstreamJumpRule(std::string_view table, std::string_view chain, std::string_view target);

struct IptablesCleanupPlan {
  // libnftables JSON commands deleting upstream's jump rules by handle.
  std::vector<std::string> ruleDeletes;
  std::vector<IptablesChain> upstreamChains;
  // Chains of those tables that are not upstream's but may jump to it (the built-in chains, the
  // kubelet's, a user's): list each one and add its listing too.
  std::vector<IptablesChain> otherChains;
  // Upstream's chains that a rule which stays still jumps to: they stay as well (a chain in use
  // cannot be deleted, and the whole transaction would fail).
  std::set<IptablesChain> referenced;
  size_t jumpRules = 0;
  std::set<IptablesChain> seen;     // chains already sorted into the two lists
  std::set<std::string> seenRules;  // rule deletes already planned
};

// The transaction's commands, in its order: delete upstream's jump rules, flush upstream's chains
// (they jump to each other), delete them. A referenced chain is kept: KUBE-MARK-MASQ whole (the
// agent that jumps there wants its mark, which our own masquerade honours), any other one flushed
// of upstream's rules but left in place for the rule that names it.
struct IptablesCleanupCommands {
  std::vector<std::string> ruleDeletes, chainFlushes, chainDeletes;
  std::vector<IptablesChain> kept;  // referenced: not deleted
};
IptablesCleanupCommands cleanupCommands(const IptablesCleanupPlan& plan);

// Adds what a JSON listing holds, for the iptables-nft tables `ip|ip6 nat|filter|mangle` only
// (anything else, our own tables included, is ignored): chains (upstream's to remove, the others
// to look into), upstream's jump rules in the built-in chains, and the other rules that jump or go
// to one of upstream's chains (which therefore stays). Meant
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

}  // namespace kpn::iptables
