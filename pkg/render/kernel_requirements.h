// What the rendered ruleset needs from the kernel, for the start-up probe (nft/kernel/probe.h):
// one requirement per kind of object or expression module the renderer uses, each as the few
// objects that use it, built with the same builders (nft/expr.h) the renderer's rules are made of.
// A kernel without one (say nft_fib) would otherwise reject every sync with an error that names
// no module (siderolabs/pkgs#951).
#pragma once

#include <vector>

#include "nft/kernel/probe.h"

namespace kpn::render {

// nf_tables, ct, nat, masquerade, numgen, concatenated verdict maps, concatenated interval sets,
// fib, reject, dynamic sets with timeouts.
const std::vector<nft::Requirement>& rulesetRequirements();

}  // namespace kpn::render
