// What upstream kube-proxy's iptables mode (and IPVS mode, which writes the same chains) leaves in
// the tables iptables-nft made (`ip|ip6 nat|filter|mangle`): its KUBE-* chains and the jump rules
// to them. Removing them once our table serves makes sure exactly one proxy answers; upstream
// does the same when it changes mode. Everything else in those tables stays, including the
// kubelet's chains (KUBE-KUBELET-CANARY, KUBE-FIREWALL, and KUBE-MARK-DROP of older kubelets).
// iptables-legacy (x_tables) is invisible to nftables: it is only detected and reported.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpn::nft {

// Upstream's iptables proxier chains (pkg/proxy/iptables/proxier.go): the fixed ones and the
// per-service / per-endpoint prefixes (isServiceChainName, plus the KUBE-XLB- of older releases).
bool isUpstreamIptablesChain(std::string_view name);

struct IptablesCleanupPlan {
  // libnftables JSON commands (no {"nftables":...} wrapper): delete the jump rules by handle,
  // flush upstream's chains (they jump to each other), then delete them.
  std::vector<std::string> commands;
  std::vector<std::string> chains;  // "ip nat KUBE-SERVICES", for the log
  size_t jumpRules = 0;
};

// Adds to *plan what one table's JSON listing (`list table ip nat`) holds of upstream's. Returns
// false (and sets *error) on a listing it cannot read; *plan is then unchanged.
bool planIptablesCleanup(const std::string& listingJson, IptablesCleanupPlan* plan, std::string* error);

// The commands as one transaction: {"nftables":[...]}.
std::string cleanupTransactionJson(const IptablesCleanupPlan& plan);

// iptables-legacy in this network namespace: the x_tables tables the kernel lists in
// /proc/net/ip_tables_names and ip6_tables_names (`readFile` returns nullopt for an absent file).
// nullopt when there are none; otherwise one log line naming them and the commands to run.
std::optional<std::string> legacyIptablesReport(const std::function<std::optional<std::string>(const char*)>& readFile);

}  // namespace kpn::nft
