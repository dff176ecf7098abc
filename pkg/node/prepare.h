// Start-up, before the first sync: the kernel probe (nft/probe.h), then oomScoreAdj and the
// conntrack sysctls, as upstream applies them; each logged.
#pragma once

#include <optional>
#include <string>

#include "pkg/config/command_line.h"

namespace kpn::node {

// Returns the probe's one error line when the kernel lacks something (the caller exits 1);
// everything else that fails is a warning.
std::optional<std::string> prepareNode(const config::Loaded& conf);

}  // namespace kpn::node
