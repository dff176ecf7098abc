// The side-effect edge of pkg/iptables/iptables_leftovers.h: list the iptables-nft tables through
// libnftables, remove upstream kube-proxy's chains and jumps in one transaction, report
// iptables-legacy. Used after our first commit (default on, --cleanup-iptables) and by --cleanup.
#pragma once

#include <functional>

#include "nft/kernel/nft_runner.h"

namespace kpn::iptables {

struct IptablesCleanupResult {
  bool ok = true;
  std::string error;
  size_t chains = 0, jumpRules = 0;
};

// One transaction over `ip|ip6 nat|filter|mangle` (absent tables are skipped); logs what it
// removed, and the iptables-legacy report if there is one.
IptablesCleanupResult removeIptablesLeftovers(nft::NftRunner& runner);

// For Syncer::afterCommit: runs removeIptablesLeftovers after a successful commit until it
// succeeds (a rule changing under it fails the transaction) or `attempts` ran; then true.
std::function<bool()> iptablesLeftoverCleaner(nft::NftRunner& runner, int attempts = 5);

}  // namespace kpn::iptables
