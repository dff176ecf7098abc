// Start-up, before the first sync: the kernel probe (nft/kernel/probe.h), then oomScoreAdj and the
// conntrack sysctls, as upstream applies them; each logged.
#pragma once

#include <optional>
#include <string>

#include "nft/kernel/nft_runner.h"
#include "pkg/config/command_line.h"

namespace kpn::node {

// Returns the probe's one error line when the kernel lacks something (the caller exits 1);
// everything else that fails is a warning. A family the kernel runs no nftables for is a warning
// too: the syncer leaves it out. The probe's transactions go through the runner's commitScratch
// (libnftables in a helper process).
std::optional<std::string> prepareNode(const config::Loaded& conf, nft::NftRunner& runner);

}  // namespace kpn::node
