// Joining a Service port with the endpoints of all its EndpointSlices, as upstream does: a
// service port matches the slice port with the same name and protocol; the endpoint's port number
// comes from the slice. One join for everyone below cmd (the rules, the health-check node ports,
// conntrack clean-up, the metrics): each applies its own readiness rule, a named predicate, to
// what the join visits. The rules' choice: ready endpoints are used, and only when there are none,
// the serving-and-terminating ones.
#pragma once

#include <string>
#include <vector>

#include "pkg/api/types.h"
#include "pkg/state/cluster_state.h"

namespace kpn::services {

// The slice port that serves `sp` (same name and protocol, with a port number), or null.
const api::EndpointPort* slicePortFor(const api::EndpointSlice& slice, const api::ServicePort& sp);

// The join: calls visit(endpoint, port number) for every endpoint with an address in the slices
// of `addressType` (familyWord) whose port serves `sp`. Slices: anything that
// dereferences to an api::EndpointSlice (raw or shared pointers). Readiness is the caller's.
template <class Slices, class Visit>
void forEachEndpointOfPort(const api::ServicePort& sp, const Slices& slices, const std::string& addressType,
                           Visit&& visit) {
  for (const auto& slice : slices) {
    if (slice->addressType != addressType) continue;
    const api::EndpointPort* port = slicePortFor(*slice, sp);
    if (!port) continue;
    for (const api::Endpoint& ep : slice->endpoints)
      if (!ep.address.empty()) visit(ep, *port->port);
  }
}

// The slices of a service (by key) in the state, in name order; empty without any.
std::vector<const api::EndpointSlice*> slicesOf(const state::ClusterState& st, const std::string& serviceKey);

// The rules' readiness (upstream's endpoint selection): a ready endpoint takes new connections;
// when a set has none, its serving-and-terminating endpoints take them instead.
inline bool takesNewConnections(const api::EndpointConditions& c) { return c.isReady(); }
inline bool takesConnectionsWhileTerminating(const api::EndpointConditions& c) {
  return c.isServing() && c.isTerminating();
}

struct EndpointChoice {
  std::string ip;  // canonical
  int32_t port = 0;
  bool local = false;
  // Its traffic passes this node, so it can reach itself through a service here (hairpin): on
  // this node, or without a nodeName (or we do not know our own name).
  bool hairpinHere = false;
  bool operator<(const EndpointChoice& o) const { return ip != o.ip ? ip < o.ip : port < o.port; }
  bool operator==(const EndpointChoice& o) const {
    return ip == o.ip && port == o.port && local == o.local && hairpinHere == o.hairpinHere;
  }
};

// All slices of one service; addressType (familyWord) picks the family. Sorted, deduplicated.
std::vector<EndpointChoice> usableEndpoints(const api::ServicePort& port,
                                            const std::vector<const api::EndpointSlice*>& slices,
                                            const std::string& addressType, const std::string& nodeName);

// Upstream's split of a service port's endpoints by traffic policy: `cluster` as above; `local`
// the endpoints on this node, chosen the same way among them alone (ready local ones, else the
// serving-and-terminating local ones), so a node whose local pods are all terminating keeps
// serving Local-policy traffic with them while cluster traffic goes to ready pods elsewhere.
//
// Topology (upstream's pkg/proxy/topology.go), for `cluster` only (a Local policy takes
// precedence): when every ready endpoint has node hints (`hints.forNodes`) and one is hinted for
// this node, only those; otherwise when every ready endpoint has zone hints and one is hinted for
// `zone` (this Node's topology.kubernetes.io/zone), only those; otherwise all. The hints are what
// the EndpointSlice controller writes for trafficDistribution PreferClose / PreferSameZone /
// PreferSameNode (and topology-mode Auto), so as upstream the Service field itself is not read.
// The terminating fallback (no ready endpoint at all) ignores topology.
struct EndpointSets {
  std::vector<EndpointChoice> cluster, local;
  std::string topology;  // "", "PreferSameNode" or "PreferSameZone": what chose `cluster`
};
EndpointSets categorizeEndpoints(const api::ServicePort& port, const std::vector<const api::EndpointSlice*>& slices,
                                 const std::string& addressType, const std::string& nodeName,
                                 const std::string& zone = "");

}  // namespace kpn::services
