// One Service and its EndpointSlices -> that Service's Part of one family's table: only elements
// (shared dispatch, pick_chains.h; loadBalancerSourceRanges too, service_firewall.cc), plus chains
// of its own only where a pick needs one (session affinity, the round-robin scheduler).
//
// renderServicePart is pure except for one argument it mutates: `orders`, the sticky slot orders
// of the service's endpoint sets (it places the sets this render uses; the caller retains them).
// Each traffic path has its own file: service_cluster_ip.cc, service_external.cc,
// service_firewall.cc; service_dispatch.cc writes a destination's slots and, for a pick that is
// not counted by its slots alone, its dispatch element.
#pragma once

#include <string>
#include <vector>

#include "nft/model.h"
#include "pkg/render/backend_order.h"
#include "pkg/render/least_conn.h"
#include "pkg/render/pick_chains.h"
#include "pkg/services/claims.h"
#include "pkg/services/environment.h"
#include "pkg/services/node_config.h"

namespace kpn::render {

// ClientIP affinity's timeout (the API bounds it to 1..86400 s, default 10800 s); 0 for none.
uint32_t affinitySeconds(const api::Service& svc);

struct ServicePart {
  nft::PartPtr part;                     // null: nothing in this family
  std::vector<Pick> picks;               // the shared picks its destinations use (pick_chains.h)
  std::vector<std::string> orderOwners;  // the endpoint orders it placed (BackendOrders owners)
  std::vector<services::LeastConnPort> leastConn;  // its least-connection ports (least_conn.h)
  // Sets that had no choice and took the slots start-up listed as theirs: owner -> values.
  std::vector<std::pair<std::string, std::vector<std::string>>> adoptedChoices;
};

// `env`: this family's environment (node IPs for source ranges); `claims`: who holds contested
// destinations (null: this service holds all); `choices`: the least-connection choices (null: none
// yet, every least-connection destination names its first endpoints).
ServicePart renderServicePart(const api::Service& svc, const std::vector<const api::EndpointSlice*>& slices,
                              const services::NodeConfig& cfg, nft::Family family, BackendOrders& orders,
                              const services::FamilyEnvironment& env = {},
                              const services::DestinationClaims* claims = nullptr,
                              const LeastConnChoices* choices = nullptr);

// "<family> all/<proto>/<port>" or "<family> local/<proto>/<port>": a service's endpoint set.
std::string orderOwner(nft::Family f, bool local, const std::string& proto, const std::string& portKey);

}  // namespace kpn::render
