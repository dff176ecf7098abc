// How this daemon's NftRunner is set up: nft/ knows no table of ours, so the names come from here.
#pragma once

#include "nft/kernel/nft_runner.h"

namespace kpn::cmd {

// Our table in both families (pkg/render/layout.h) as the helper's cache scope, and the name
// probeFamily checks an `add table` with.
nft::NftRunnerOptions nftRunnerOptions();

}  // namespace kpn::cmd
