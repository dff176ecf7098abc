// Internal to the service renderer (service_part.h): what every traffic path of one service port
// needs to know, and the builder they all add to.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/net/ip.h"
#include "pkg/render/backend_order.h"
#include "pkg/render/least_conn.h"
#include "pkg/render/pick_chains.h"
#include "pkg/services/claims.h"
#include "pkg/services/endpoints.h"
#include "pkg/services/environment.h"
#include "pkg/services/node_config.h"

namespace kpn::render {

struct ServiceContext {
  const api::Service& svc;
  const services::NodeConfig& cfg;
  nft::Family family;
  const services::FamilyEnvironment& env;
  std::string key;        // ns/name
  std::string clusterIP;  // this family's
  bool externalLocal = false, internalLocal = false;
  // The LB IPs first: an address that is both an LB IP and an external IP gets the firewall.
  std::vector<std::pair<std::string, bool>> externalAddrs;  // (address, is an LB IP)
  std::vector<net::Cidr> sourceRanges;                      // this family's
  bool firewalled = false;  // ranges of this family, or an unreadable one (closes the LB IPs)
  std::vector<net::Cidr> firewallAllowed;  // what @firewall-allow admits (firewallAllowedSources)
};

struct PortPlan {
  const api::ServicePort& sp;
  std::string comment;
  services::EndpointSets eps;
  bool ownsClusterIP = false;
  std::vector<std::pair<std::string, bool>> externalAddrs;  // the ones this service holds
  std::optional<int32_t> nodePort;                           // held by this service
  // The slot orders of the endpoint sets in use (none: that set is not used by any path), unpacked
  // from BackendOrders for this render.
  std::optional<EndpointOrder> all, local;
  // Whether `order` is this port's local order (paths are handed one of the two).
  bool isLocal(const EndpointOrder& order) const { return local && &order == &*local; }
  // Source hash: the lookup tables of those sets (null: not hashed).
  const HashTable* allTable = nullptr;
  const HashTable* localTable = nullptr;
  // Least connection (least_conn.h): the sets' slots are their chosen endpoints.
  bool leastConn = false;
  const std::vector<std::string>* allChosen = nullptr;
  const std::vector<std::string>* localChosen = nullptr;
  uint32_t affinitySeconds = 0;  // ClientIP session affinity (0: none), for every path of the port
  std::vector<uint32_t> affinityScope;  // its entries' scope: the ClusterIP of this family (affinity.h)
  services::Scheduler scheduler = services::Scheduler::Random;  // the first pick (affinity keeps it random: affinity.h)
  std::string chainKey;  // "ns/name/proto/port": names this port's round-robin chains
  bool hasEndpoints() const { return !eps.cluster.empty() || !eps.local.empty(); }
  bool external() const { return !externalAddrs.empty() || nodePort.has_value(); }
};

struct PartBuilder {
  nft::Family family = nft::Family::IPv4;
  nft::Part part;
  std::set<Pick> picks;
  std::set<std::string> hairpins;
  std::set<std::string> affinityChains;  // one per service port and endpoint set
};

// Destination keys as the dispatch maps and the backends maps spell them.
nft::Expr addressKey(const std::string& ip, api::Protocol proto, int32_t port);  // ip . proto . port
nft::Expr nodePortKey(api::Protocol proto, int32_t nodePort);                     // proto . port
std::vector<nft::Expr> addressSlotPrefix(const std::string& ip, int32_t port);  // ip . port (. slot)
std::vector<nft::Expr> nodePortSlotPrefix(int32_t nodePort);                    // port (. slot)
// "<family> <map>|<destination parts JSON>": how BackendOrders names a listed destination (the
// family too: a NodePort's key is its port alone in both families' maps).
std::string destinationId(nft::Family f, KeySpace space, api::Protocol proto, const std::vector<nft::Expr>& dest);

// The destination's slots in its key space's backends map, which are all a plain random pick of up
// to 16 endpoints needs, or (affinity, schedulers, large counts) also its element in `dispatchMap`
// that sends it to a chain of its kind (pick_chains.h).
void dispatchTo(PartBuilder& b, const PortPlan& p, KeySpace space, const std::vector<nft::Expr>& dest,
                const nft::Expr& dispatchKey, const std::string& dispatchMap, const EndpointOrder& order);
// A verdict (nft::dropVerdict(), returnVerdict(), gotoVerdict(reject-chain)) for a key of a map.
void verdictFor(PartBuilder& b, const PortPlan& p, const std::string& map, const nft::Expr& key,
                const nft::Expr& verdict);
// Hairpin pairs for the endpoints of `eps` that can reach themselves through this node.
void addHairpins(PartBuilder& b, const std::vector<services::EndpointChoice>& eps);

// The traffic paths.
void addClusterIPPath(PartBuilder& b, const ServiceContext& s, const PortPlan& p);
void addExternalPaths(PartBuilder& b, const ServiceContext& s, const PortPlan& p);
// The sources a firewalled service's LB IPs admit: its ranges of this family, plus the LB IPs
// themselves when a range holds a node IP; none nested in another (the kernel refuses overlaps).
std::vector<net::Cidr> firewallAllowedSources(const ServiceContext& s);
// The firewall elements of one port's LB IPs (@firewall-ips, @firewall-allow), when it has ranges.
void addFirewallElements(PartBuilder& b, const ServiceContext& s, const PortPlan& p);

}  // namespace kpn::render
