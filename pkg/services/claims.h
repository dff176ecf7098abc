// Who owns a destination when Services collide: two Services with the same nodePort, or an
// external IP (or LoadBalancer IP) and port that another Service already uses. The older Service
// (creationTimestamp, then namespace/name) keeps it; the other one is rendered without it and
// logged. Without this the two would contribute one map key with two verdicts.
//
// Destinations are family-independent strings ("ip 10.96.0.10 tcp 80", "nodeport tcp 30001"), so
// the winner is the same in both tables. Kept incrementally: a change of one Service reports the
// other Services whose set of won destinations may have changed, and only those are re-rendered.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pkg/api/types.h"

namespace kpn::services {

std::string ipDestination(const std::string& ip, api::Protocol proto, int32_t port);
std::string nodePortDestination(api::Protocol proto, int32_t nodePort);

// The LoadBalancer ingress IPs a proxy programs: those with an IP whose ipMode is not Proxy.
std::vector<std::string> loadBalancerVIPs(const api::Service& svc);
// Every destination a Service asks for: ClusterIPs, external IPs and LoadBalancer IPs times its
// ports, and its nodePorts. Sorted, unique.
std::vector<std::string> destinationsOf(const api::Service& svc);
// Orders claimants: older first; no creationTimestamp counts as newest; then namespace/name.
std::string claimRank(const api::Service& svc);

class DestinationClaims {
 public:
  DestinationClaims() = default;
  DestinationClaims(const DestinationClaims& o) { *this = o; }
  DestinationClaims& operator=(const DestinationClaims& o);
  // A move takes the other's map nodes as they are, so the pointers between them (Held, Claimant)
  // stay valid; the other is left empty.
  DestinationClaims(DestinationClaims&& o) noexcept { *this = std::move(o); }
  DestinationClaims& operator=(DestinationClaims&& o) noexcept;

  // `svc` (null: gone, or not proxied) now claims destinationsOf(*svc). Services (keys) other
  // than `serviceKey` that won or lost a destination by it are added to *affected.
  void update(const std::string& serviceKey, const api::Service* svc, std::set<std::string>* affected);
  // The same for destinations that are not destinationsOf(svc) (health-check node ports): the
  // service of rank `rank` now claims `dests` (empty: nothing).
  void update(const std::string& serviceKey, const std::string& rank, std::vector<std::string> dests,
              std::set<std::string>* affected);
  void clear() { claims_.clear(), byService_.clear(); }

  // Whether serviceKey holds dest (true when nobody claimed it: a renderer without claims).
  bool owns(const std::string& serviceKey, const std::string& dest) const;
  // The service that holds dest, or "".
  std::string owner(const std::string& dest) const;
  bool operator==(const DestinationClaims& o) const;

 private:
  // Each service's rank and destinations are stored once, in byService_; a destination's
  // claimants point at those entries and its Held points back at the destination's key (map
  // nodes do not move). At 10k services the copies of keys and ranks in both maps were megabytes.
  struct Held {
    std::string rank;
    std::vector<const std::string*> dests;  // keys of claims_, sorted by value
  };
  using Claimant = const std::pair<const std::string, Held>*;  // an entry of byService_
  std::map<std::string, std::vector<Claimant>> claims_;  // dest -> claimants, by rank (the first holds it)
  std::map<std::string, Held> byService_;
};

}  // namespace kpn::services
