// Which UDP flows are stale, as upstream's reconciler (pkg/proxy/conntrack/cleanup.go) decides:
// a flow whose original destination is a service frontend (ClusterIP, LoadBalancer IP or external
// IP, with the service port; or any address with a NodePort) and whose reply source is not a
// serving endpoint of that service port. That covers flows DNATed to an endpoint that went away,
// and flows to a service that had no endpoints and now has some: an entry whose packets went out
// un-DNATed has the service IP itself as reply source. Frontends without serving endpoints are
// left out: nothing there can be DNATed right, and new flows are rejected anyway.
// Traffic policies, topology and terminating state are ignored on purpose, as upstream does: a
// policy change must not cut UDP flows that TCP would keep.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pkg/conntrack/flow.h"
#include "pkg/conntrack/udp_services.h"

namespace kpn::conntrack {

// The serving endpoint addresses of one service port in one family, sorted.
using EndpointIps = std::vector<Ip>;

class Frontends {
 public:
  // From a snapshot, for AF_INET or AF_INET6. A destination two Services claim goes to the older
  // one (as the rules give it, services/claims.h).
  static Frontends build(const UdpServices& services, uint8_t family);

  bool empty() const { return byIpPort_.empty() && byNodePort_.empty(); }
  size_t size() const { return byIpPort_.size() + byNodePort_.size(); }
  bool isStale(const Flow& f) const;

 private:
  struct Claim {
    std::string rank;
    const EndpointIps* endpoints;
  };
  std::vector<std::unique_ptr<EndpointIps>> storage_;  // one per service port with endpoints
  std::unordered_map<IpPort, Claim, IpPortHash> byIpPort_;
  std::unordered_map<uint16_t, Claim> byNodePort_;
};

// A service's frontend addresses in one family: its ClusterIP(s), LoadBalancer VIPs and external
// IPs. None when the family has no ClusterIP: as the rules, no service at all in that family.
std::vector<Ip> frontendIps(const api::Service& svc, uint8_t family);

// Upstream's IsServing: the serving condition (a missing one counts as true); a ready endpoint
// counts too, whatever it says, since the rules send traffic to it.
EndpointIps servingEndpoints(const api::ServicePort& port, const std::vector<state::SlicePtr>& slices, uint8_t family);

}  // namespace kpn::conntrack
