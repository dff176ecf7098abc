// ClientIP session affinity: one scope per service port, whichever of its addresses a client uses.
//
// Upstream keeps one affinity set per endpoint, checked from the service's chain, which the
// ClusterIP, the external and LoadBalancer IPs and the NodePort all reach: a client stuck to an
// endpoint stays on it for the service port whatever address it dialled. The shared pick chains
// cannot do that (their keys are the packet's `daddr . dport`, and nft 1.0.6 cannot map a
// destination to its service port inside a key), so a service port with affinity gets a chain of
// its own per endpoint set, which every destination of the port dispatches to:
//
//   set sticky-tcp { typeof ip saddr . numgen random mod 1 . numgen random mod 1 ; flags dynamic,timeout ; }
//     (IPv6: sticky6-tcp, ip6 saddr and three numbers: the ClusterIP's hash takes two)
//   chain affinity-default/web/tcp/http {
//     meta l4proto tcp ip saddr . <scope> . <port:0> @sticky-tcp update @sticky-tcp { ip saddr . <scope> . <port:0> timeout 3h } dnat ip to 10.244.1.2:8080
//     ... (one rule per slot: a client holding an entry goes back to that slot's endpoint)
//     meta l4proto tcp numgen random mod 3 0 update @sticky-tcp { ip saddr . <scope> . <port:0> timeout 3h } dnat ip to 10.244.1.2:8080
//     meta l4proto tcp numgen random mod 2 0 update @sticky-tcp { ip saddr . <scope> . <port:1> timeout 3h } dnat ip to 10.244.1.3:8080
//     meta l4proto tcp update @sticky-tcp { ip saddr . <scope> . <port:2> timeout 3h } dnat ip to 10.244.1.4:8080
//     meta l4proto tcp dnat ip to numgen random mod 3 map { 0 : 10.244.1.2 . 8080, ... } (the set is full)
//   }
//
// <scope> stands for the ClusterIP of this family: the address itself for IPv4, one 32-bit number;
// for IPv6, whose sets are `sticky6-*`, two numbers, the 64-bit FNV-1a hash of all 128 bits (nft
// 1.0.6 keeps the typeof of a key of at most four parts: a fifth loses it, a sixth crashes its
// listing). <port:i> is the service port in the high 16 bits and the slot in the low ones. Each
// number is written `numgen random mod 1 offset X` (the constant X typed as an integer: nft 1.0.6
// refuses a literal address or port inside a lookup key). An IPv6 scope of the low 32 bits alone
// was shared by services whose addresses differ above them (two ServiceCIDRs); two services now
// share one only if their 64-bit hashes collide (about 3e-12 at 10k such services), and even then
// each service's chain DNATs to its own endpoints: sharing entries biases which slot a client
// gets, it never sends traffic to another service. The draw is sequential: rule i fires
// with probability 1/(N-i) once the ones before it did not, so each endpoint has 1/N.
//
// An entry names a slot, not an endpoint, so it never outlives its endpoint: when an endpoint
// goes, its slot is taken by a live endpoint (backend_order.h) or stops being looked up (the
// count shrank). Only new connections pass the nat chains, so the timeout is refreshed per new
// connection, as upstream. The sets are dynamic (nft::SetDecl::dynamic): a restart or a resync
// never flushes them, and slot orders are adopted at start-up, so entries keep their endpoints.
// The chain DNATs to literal endpoints: no rule of it binds a backends map, so a change of the
// service rewrites a chain of 2N+1 rules without the kernel walking a 100k-element map.
// Everything here is JSON except the sets' declarations (typeof, native at start-up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/api/types.h"
#include "pkg/services/endpoints.h"

namespace kpn::render {

// "sticky-tcp" (all endpoints), "local-sticky-tcp" (this node's: iTP=Local ClusterIPs and the
// outside traffic of eTP=Local destinations); "sticky6-tcp", "local-sticky6-tcp" in IPv6 (a key
// of another shape than the first layout's "sticky-tcp" there, which a restart then deletes).
std::string stickySetName(nft::Family f, bool local, api::Protocol proto);
// "affinity-<ns>/<name>/<proto>/<port>", "local-affinity-..." for the local endpoint set.
std::string affinityChainName(const std::string& chainKey, bool local);
// The scope of a service port's entries in this family: its ClusterIP as one 32-bit word (IPv4),
// or the two words of its 64-bit hash (IPv6); none for what is not an address.
std::vector<uint32_t> affinityScope(const std::string& clusterIP);

// The dynamic set declarations of one family (2 endpoint sets x 3 protocols).
std::vector<nft::SetDecl> affinitySetDeclarations(nft::Family f);

struct AffinityChain {
  std::string name;
  api::Protocol proto = api::Protocol::TCP;
  bool local = false;
  std::vector<uint32_t> scope;  // affinityScope
  int32_t port = 0;  // the service port
  uint32_t seconds = 0;
  std::vector<services::EndpointChoice> endpoints;  // in slot order
};
nft::Chain affinityChain(nft::Family f, const AffinityChain& a);

}  // namespace kpn::render
