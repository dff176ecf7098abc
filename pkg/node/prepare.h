// Start-up, before the first sync: the kernel probe (nft/kernel/probe.h), then oomScoreAdj and the
// conntrack sysctls, as upstream applies them; each logged.
#pragma once

#include <functional>
#include <future>
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

// Starts the runner's commit helper, then runs prepareNode and (when it passed) `then` on a thread
// of its own: the daemon reads its state meanwhile (a manifest folder at 10k services: ~250 ms),
// and the first sync no longer waits for the probe, the helper's start and what `then` does. The
// runner, and whatever `then` touches, are the thread's until the future is ready: get() it
// before anything else uses them.
std::future<std::optional<std::string>> prepareNodeInBackground(const config::Loaded& conf, nft::NftRunner& runner,
                                                                std::function<void()> then);

}  // namespace kpn::node
