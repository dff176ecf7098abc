// Shared dispatch: how a destination reaches one of its endpoints without a chain of its own, and
// without any element that says how many endpoints it has.
//
// A destination with N endpoints (N up to kPooledCounts, the random scheduler) is nothing but its
// N elements in its key space's backends map, at slots 0..N-1 (slots are dense: backend_order.h):
//
//   map backends-tcp { typeof ip daddr . tcp dport . numgen random mod 1 : ip daddr . tcp dport;
//                      elements = { 10.96.0.10 . 80 . 0 : 10.244.1.2 . 8080, ... . 1 : ..., ... . 2 : ... } }
//   chain pick { ip daddr . tcp dport . meta length & 0 @backends-tcp goto pick-tcp }
//   chain pick-tcp {
//     ip daddr . th dport . meta length & 1 | 1 != @backends-tcp dnat ip to ip daddr . tcp dport . numgen random mod 1 map @backends-tcp
//     ip daddr . th dport . meta length & 2 | 2 != @backends-tcp dnat ... mod 2 ...
//     ip daddr . th dport . meta length & 4 | 4 != @backends-tcp goto pick-tcp-3-4
//     ip daddr . th dport . meta length & 8 | 8 != @backends-tcp goto pick-tcp-5-8
//     ip daddr . th dport . meta length & 12 | 12 != @backends-tcp goto pick-tcp-9-12
//     ip daddr . th dport . meta length & 14 | 14 != @backends-tcp goto pick-tcp-13-14
//     ip daddr . th dport . meta length & 15 | 15 != @backends-tcp dnat ... mod 15 ...
//     dnat ... mod 16 ... }
//   chain pick-tcp-5-8 {
//     ... & 6 | 6 != @backends-tcp goto pick-tcp-5-6
//     ... & 7 | 7 != @backends-tcp dnat ... mod 7 ...
//     dnat ... mod 8 ... }
//   (and pick-tcp-3-4, pick-tcp-5-6, pick-tcp-9-12, pick-tcp-9-10, pick-tcp-13-14 alike)
//
// (`meta length & i | i` is the constant i with the type of the maps' slot field, `meta length &
// 0` the constant 0: nft 1.0.6 takes no literal on the left of a lookup; nft/expr.h.) The
// `services` chain jumps to `pick` (and its siblings for the other key spaces) after the dispatch
// verdict maps; `pick` lets through destinations that have slot 0, so other traffic pays one
// lookup. The count N of a destination is its first missing slot, and the pick chains search for
// it: a chain covers the counts lo..hi, each rule asks whether one slot m is missing (then the
// count is in lo..m: dnat when that is one count, else goto the chain of lo..m) and the chain's
// next rules go on with m+1..hi. Which slot each step asks (searchSlot): 1, then 2, then galloping
// (4, 8) until halving the rest is smaller, so the common counts stay as cheap as a linear walk.
// Where every count left is over half of the chain's top hi, the chain first tries a dnat among
// hi slots (`numgen random mod hi`): it lands with a chance of N / hi, uniform over the N, and a
// miss (no slot r) ends the rule and the search goes on, so the pick stays exactly uniform and a
// power of two needs no probe after its gallop. Lookups in the pick chains (probes, tries, dnat
// map; first packet of a connection only; add one for `pick`'s slot 0), mean over the draws:
//   count        1  2  3    4  5    6    7    8  9    12   16  17+
//   with tries   2  3  4.5  4  5.9  5.5  5.4  5  6.1  5.5  5   (its own chain: 0)
//   search only  2  3  5    5  7    7    7    7  8    8    8
// A balanced search after slot 1 would take 5-6 for every count from 2 to 16: up to three more
// for the 2-4 endpoints most services have.
// The tree's rules depend on the count alone and exist for every count of the pool, used or not,
// so they never change with the services. Why count by slots and not by a verdict
// `goto pick-tcp-N` per destination: adding or changing a goto/jump element
// makes the kernel validate the jump graph at commit, walking every element of every verdict map
// reachable from the base chains, a cost that grows with the number of services (1.8 ms at 1k,
// 14 ms at 30k services per commit). Here an endpoint added or removed is its slot element, a
// service added or removed is its slots: no element anywhere else, the same cost at any size.
// The last rule of pick-tcp dnats among 16 slots without looking further: a destination with more
// endpoints has its own chain through the dispatch map (below) and never comes this way.
//
// The dispatch verdict maps (@service-ips, @service-nodeports, @local-service-ips,
// @local-service-nodeports) keep the destinations that need a chain of their own kind: session
// affinity (a chain per service port: affinity.h), source hash and round-robin (scheduler.h), counts above the pool (a
// `pick-tcp-17` chain while in use), and, for the local maps, `return` (no local endpoint) and
// `continue` (counted: every eTP=Local destination is in its local map, which the masquerade rule
// for the node's own traffic reads as a set).
//
// The pick chains exist for every key space and protocol with a destination at all; the
// backends maps are declared once at start-up (nft 1.0.6 JSON cannot declare a typeof map). Each
// backends map is bound by the rules of its pick chains and one entry rule, all created while the
// map is still empty (below), so element loads stay linear (scale-floor.md §6).
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
// "pick-tcp-17", "pick-local-tcp-17", "nodeport-pick-tcp-17", "nodeport-pick-local-tcp-17": the
// chain of a count above the pool.
std::string pickChainName(KeySpace space, api::Protocol proto, uint32_t endpoints);
// "pick-tcp", "pick-local-tcp", "nodeport-pick-tcp", "nodeport-pick-local-tcp": where the search
// for a destination's count starts (counts 1..kPooledCounts).
std::string protocolPickChainName(KeySpace space, api::Protocol proto);
// "pick-tcp-5-8", "nodeport-pick-local-udp-9-12": the search chain of the counts lo..hi.
std::string searchChainName(KeySpace space, api::Protocol proto, uint32_t lo, uint32_t hi);
// The slot the search asks about among the counts lo..hi (lo < hi): missing, the count is in
// lo..slot; present, in slot+1..hi.
uint32_t searchSlot(uint32_t lo, uint32_t hi);
// "pick", "pick-local", "nodeport-pick", "nodeport-pick-local": where `services` sends a key space's
// traffic after its dispatch map; one rule per protocol with counted destinations.
std::string entryChainName(KeySpace space);

struct Pick {
  KeySpace space;
  api::Protocol proto;
  uint32_t endpoints;
  // Source hash (scheduler.h): `endpoints` is then the size of the lookup table (source_hash_table.h).
  bool sourceHash = false;
  std::string chainName() const;
  // The plain random pick of up to kPooledCounts endpoints: counted by its slots, no chain.
  bool counted() const;
  bool operator<(const Pick& o) const {
    if (space != o.space) return space < o.space;
    if (proto != o.proto) return proto < o.proto;
    if (sourceHash != o.sourceHash) return sourceHash < o.sourceHash;
    return endpoints < o.endpoints;
  }
  bool operator==(const Pick& o) const {
    return space == o.space && proto == o.proto && endpoints == o.endpoints && sourceHash == o.sourceHash;
  }
};

// The chain of a pick that is not counted: one dnat rule over the map of its key space.
nft::Chain pickChain(nft::Family f, const Pick& pick);
// The packet fields of a destination as nft names them: "ip daddr . tcp dport" or "tcp dport".
std::vector<nft::Expr> destinationFields(nft::Family f, KeySpace s, api::Protocol proto);
bool keyedByAddress(KeySpace s);
extern const std::vector<KeySpace> kSpaces;
extern const std::vector<api::Protocol> kProtocols;
bool localSubset(KeySpace s);

// Counts 1..kPooledCounts are the rules of the pick chains of every key space and protocol
// that has a destination at all, used or not. Why: the kernel walks every element of a map when a
// new rule binds it (nf_tables_bind_set), ~15 ms for a 100k-element backends map; with the rules
// already there a count change is a slot element. The pool is created while its map is still
// empty (the first destination of a key space and protocol brings it: the walk finds nothing),
// and each extra binding costs an element add only a register check.
constexpr uint32_t kPooledCounts = 16;
using Pool = std::pair<KeySpace, api::Protocol>;
// What the picks Part declares for these users (count of destinations per pick): the pools, and
// the chains of the picks that are not counted.
struct PickLayout {
  std::set<Pool> pools;
  std::set<Pick> chains;
  bool operator==(const PickLayout& o) const { return pools == o.pools && chains == o.chains; }
};
PickLayout declaredPicks(const std::map<Pick, int>& users);
// A pool's pick chains, its protocol pick chain first: the search for the first missing slot N,
// whose leaves dnat among N slots.
std::vector<nft::Chain> protocolPickChains(nft::Family f, const Pool& pool);
// A key space's entry chain: one rule per pooled protocol, for destinations with slot 0.
nft::Chain entryChain(nft::Family f, KeySpace space, const std::set<Pool>& pools);

// Every backends map name (4 key spaces x 3 protocols).
std::vector<std::string> backendsMapNames();
// The typeof declarations of every backends map of one family (4 key spaces x 3 protocols).
std::vector<nft::SetDecl> backendsMapDeclarations(nft::Family f);

// The key of a destination's slot: `dest... . slot`; dest is the address and port, or the port.
nft::Expr slotKey(const std::vector<nft::Expr>& dest, uint32_t slot);

}  // namespace kpn::render
