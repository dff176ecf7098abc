// How big the first commit into nearly empty tables will be, told to the runner before render
// starts (nft::Runner::expectTransaction), so that the memory for it can be made ready while the
// daemon renders. Only a hint: an estimate too low costs what it always cost, one too high
// touches memory the commit does not need, so it counts low.
#pragma once

#include <cstddef>
#include <vector>

#include "nft/listing.h"
#include "pkg/state/cluster_state.h"

namespace kpn::sync {

// One operation per ready endpoint and port (its slot) and one per service port (its dispatch
// element) of every proxied service (not headless, not ExternalName), less the elements the
// listed tables hold already; 0 when they hold as many. External destinations, hairpins and the
// second family are not counted (that is the "low").
size_t operationsToFill(const state::ClusterState& st, const std::vector<nft::ListedTable>& listed);

}  // namespace kpn::sync
