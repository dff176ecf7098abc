// ClientIP session affinity in the shared-dispatch layout: still no chain per service.
//
// A destination with affinity dispatches to `pick-<proto>-<N>-affinity-<T>s` (N endpoints,
// timeout T) instead of `pick-<proto>-<N>`. That chain first asks the shared dynamic set
// `affinity-<proto>` of its key space whether this client already holds one of the N slots of
// this destination, and otherwise draws a slot at random; either way it goes to the shared slot
// chain `slot-<proto>-<i>-affinity-<T>s`, which records (or refreshes) the client's slot and
// DNATs through the usual backends map:
//
//   set affinity-tcp { typeof ip saddr . ip daddr . tcp dport . numgen random mod 1 ; flags dynamic,timeout ; }
//   chain pick-tcp-3-affinity-10800s {
//     ip saddr . ip daddr . tcp dport . numgen random mod 1 offset 0 @affinity-tcp goto slot-tcp-0-affinity-10800s
//     ... (one rule per slot)
//     numgen random mod 3 vmap { 0 : goto slot-tcp-0-affinity-10800s, 1 : ..., 2 : ... }
//   }
//   chain slot-tcp-1-affinity-10800s {
//     update @affinity-tcp { ip saddr . ip daddr . tcp dport . numgen random mod 1 offset 1 timeout 10800s }
//     dnat ip to ip daddr . tcp dport . numgen random mod 1 offset 1 map @backends-tcp
//   }
//
// (`numgen random mod 1 offset i` is the constant i typed as the maps' slot field.) An entry names
// a slot, not an endpoint, so it can never outlive its endpoint: when an endpoint goes, its slot
// is taken by a live endpoint (backend_order.h) or stops being looked up (the count shrank), and
// the client moves on its next connection with no element to delete. Only new connections pass
// the nat chains, so the timeout is refreshed per new connection, as upstream. The sets are
// dynamic (nft::SetDecl::dynamic): a restart or a resync never flushes them.
// Everything here is JSON except the sets' declarations (typeof, native at start-up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/render/pick_chains.h"

namespace kpn::render {

// "affinity-tcp", "local-affinity-tcp", "nodeport-affinity-tcp", "nodeport-local-affinity-tcp"
std::string affinitySetName(KeySpace space, api::Protocol proto);
// "slot-tcp-1-affinity-10800s" (with the key space's prefix, as the pick chains)
std::string affinitySlotChainName(KeySpace space, api::Protocol proto, uint32_t slot, uint32_t seconds);

// The dynamic set declarations of one family (4 key spaces x 3 protocols).
std::vector<nft::SetDecl> affinitySetDeclarations(nft::Family f);
// The pick chain of an affinity pick (pick.affinitySeconds > 0).
nft::Chain affinityPickChain(nft::Family f, const Pick& pick);
// The slot chains an affinity pick's chain goes to: slots 0..N-1.
std::vector<nft::Chain> affinitySlotChains(nft::Family f, const Pick& pick);

}  // namespace kpn::render
