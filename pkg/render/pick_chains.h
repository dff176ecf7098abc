// Shared dispatch: how a destination reaches one of its endpoints without a chain of its own.
//
// A dispatch verdict map (@service-ips, @service-nodeports, and for the outside traffic of
// externalTrafficPolicy=Local destinations @local-service-ips, @local-service-nodeports) sends a
// destination with N endpoints to the one shared chain `pick-<proto>-<N>` of its key space:
//
//   chain pick-tcp-3 { dnat ip to ip daddr . tcp dport . numgen random mod 3 map @backends-tcp }
//
// and that destination's N elements in the key space's backends map name its endpoints:
// `10.96.0.10 . 80 . 0 : 10.244.1.2 . 8080`, `... . 1 : ...`, `... . 2 : ...`. The chains exist
// for counts 1..kPooledCounts in every key space and protocol with a destination (below) and for
// larger counts while in use, the maps are declared once at start-up (nft 1.0.6 JSON cannot
// declare a typeof map), and each map is bound by one rule per declared count, so element loads
// stay linear (scale-floor.md §6).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/api/types.h"

namespace kpn::render {

// Which packet fields key a destination, and which endpoints its elements hold.
enum class KeySpace {
  Address,       // daddr . dport: ClusterIPs, external IPs, LB IPs (all endpoints; iTP=Local: this node's)
  LocalAddress,  // daddr . dport: outside traffic to eTP=Local external IPs / LB IPs (this node's)
  NodePort,      // dport: NodePorts (the NodePort address test is done before the lookup)
  LocalNodePort  // dport: outside traffic to eTP=Local NodePorts (this node's)
};

// "backends-tcp", "local-backends-tcp", "nodeport-backends-tcp", "nodeport-local-backends-tcp"
std::string backendsMapName(KeySpace space, api::Protocol proto);
// "pick-tcp-3", "pick-local-tcp-3", "nodeport-pick-tcp-3", "nodeport-pick-local-tcp-3"
std::string pickChainName(KeySpace space, api::Protocol proto, uint32_t endpoints);

struct Pick {
  KeySpace space;
  api::Protocol proto;
  uint32_t endpoints;
  // ClientIP session affinity with this timeout (0: none): the chain looks up the client's slot
  // first (affinity.h).
  uint32_t affinitySeconds = 0;
  // Source hash (scheduler.h): `endpoints` is then the size of the lookup table (maglev.h).
  bool sourceHash = false;
  std::string chainName() const;
  bool operator<(const Pick& o) const {
    if (space != o.space) return space < o.space;
    if (proto != o.proto) return proto < o.proto;
    if (affinitySeconds != o.affinitySeconds) return affinitySeconds < o.affinitySeconds;
    if (sourceHash != o.sourceHash) return sourceHash < o.sourceHash;
    return endpoints < o.endpoints;
  }
  bool operator==(const Pick& o) const {
    return space == o.space && proto == o.proto && endpoints == o.endpoints && affinitySeconds == o.affinitySeconds &&
           sourceHash == o.sourceHash;
  }
};

// The chain itself: one dnat rule over the map of its key space (with affinity: affinity.h).
nft::Chain pickChain(nft::Family f, const Pick& pick);
// The packet fields of a destination as nft names them: "ip daddr . tcp dport" or "tcp dport".
std::vector<nft::Expr> destinationFields(nft::Family f, KeySpace s, api::Protocol proto);
bool keyedByAddress(KeySpace s);
extern const std::vector<KeySpace> kSpaces;
extern const std::vector<api::Protocol> kProtocols;
bool localSubset(KeySpace s);

// Counts 1..kPooledCounts have their pick chain in every key space and protocol that has a
// destination at all, used or not. Why: the kernel walks every element of a map when a rule in a
// new chain binds it (nf_tables_bind_set), ~15 ms for a 100k-element backends map and 85% of an
// endpoint-added commit at 10k x 10; with the chain already there a count change is an element
// re-point. The pool is created while its map is still empty (the first destination of a key
// space and protocol brings it: the walk finds nothing), and each extra binding costs an element
// add only a register check. Counts above the pool get their chain when first used, as before.
constexpr uint32_t kPooledCounts = 16;
// The pick chains to declare for these users (count of destinations per pick).
std::set<Pick> declaredPicks(const std::map<Pick, int>& users);

// Every backends map name (4 key spaces x 3 protocols).
std::vector<std::string> backendsMapNames();
// The typeof declarations of every backends map of one family (4 key spaces x 3 protocols).
std::vector<nft::SetDecl> backendsMapDeclarations(nft::Family f);

// The key of a destination's slot: `dest... . slot`; dest is the address and port, or the port.
nft::Expr slotKey(const std::vector<nft::Expr>& dest, uint32_t slot);

}  // namespace kpn::render
