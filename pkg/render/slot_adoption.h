// Start-up: the endpoint orders our table already holds, read from its typed listing (nft/listing.h),
// so the first sync after a restart (or an upgrade from the chain-per-service layout) keeps every
// endpoint at its slot and changes nothing that is already right.
#pragma once

#include "nft/listing.h"
#include "pkg/render/backend_order.h"

namespace kpn::render {

// Shared dispatch: each destination's dense slots 0..N-1 in a backends map, by destination.
// Chain per service (the layout before): each service-/local-/external- chain's
// `numgen random mod N offset B map @M` range, by the service port the chain is named after.
void adoptOrders(nft::Family f, const nft::ListedTable& table, BackendOrders& orders);

}  // namespace kpn::render
